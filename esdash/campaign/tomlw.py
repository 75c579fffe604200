"""A small TOML writer for materialised point sessions.

``tomllib`` only reads; esdash needs to *write* the exact session of every campaign point
(``points/<id>/session.toml``) so that it can be run, copied into the run directory and
read back by anyone.  Sessions hold strings, numbers, booleans, arrays and nested tables,
nothing more, so this writer covers exactly that (and refuses anything else rather than
writing a file that means something different).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML cannot hold {value!r} here")
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are valid TOML basic-string escapes (\uXXXX, \n, \", \\).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"TOML cannot hold a {type(value).__name__}")


def dumps(data: Mapping[str, Any]) -> str:
    """``data`` as TOML: scalars and arrays first, then one ``[table]`` per nested table."""
    lines: list[str] = []

    def emit(table: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
        if prefix and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_key(k) for k in prefix) + "]")
        for key, value in scalars:
            lines.append(f"{_key(key)} = {_value(value)}")
        for key, value in tables:
            emit(value, (*prefix, key))

    emit(data, ())
    return "\n".join(lines) + "\n"
