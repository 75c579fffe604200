"""Reading one rendered Rally track with errors that say where: :class:`_Reader`.

Both the loader and the schedule mapping read elements through it (and :func:`_operation`,
which reads one operation), so it lives below both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from esdash.plugin_api import (
    BadInput,
    JsonMapping,
    JsonObject,
    JsonValue,
)

from . import template as tpl
from .model import (
    _describe,
)

#: Where to look for an element: ("name", "index-append", None) or, for a task without a
#: name, ("operation", "index-append", "<its challenge>").
Spot = str | tuple[str, str, str | None]


class _Reader:
    """Reads one rendered track; errors name the file an element was most likely defined in."""

    def __init__(self, track_file: Path, source: tpl.Source) -> None:
        self.track_file = track_file
        self.source = source

    def defined_at(self, name: Spot | None) -> str:
        """``file:line`` where an element is most likely defined, else the track file.

        ``name`` is an element's ``"name"`` value, or a :data:`Spot` for elements found by
        another key (a task by its ``"operation"``) below their challenge's name.
        """
        if not name:
            return str(self.track_file)
        key, value, after = ("name", name, None) if isinstance(name, str) else name
        lines = self.source.text.split("\n")
        start = 0
        if after is not None:
            heading = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(after)))
            start = next((i for i, line in enumerate(lines) if heading.search(line)), 0)
        pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:\s*" + re.escape(json.dumps(value)))
        for index in range(start, len(lines)):
            if pattern.search(lines[index]):
                path, number = self.source.origins[index]
                return f"{path}:{number}"
        return str(self.track_file)

    def fail(self, context: str, message: str, name: Spot | None = None) -> BadInput:
        return BadInput(f"{self.defined_at(name)}: {context}: {message}")

    def get(
        self,
        obj: JsonMapping,
        key: str,
        kinds: type | tuple[type, ...],
        context: str,
        name: Spot | None = None,
        required: bool = False,
        default: Any = None,
    ) -> Any:
        """``obj[key]`` checked against ``kinds`` (``bool`` is never a number here)."""
        if key not in obj:
            if required:
                raise self.fail(context, f"'{key}' is missing", name)
            return default
        value = obj[key]
        kinds_tuple = kinds if isinstance(kinds, tuple) else (kinds,)
        if isinstance(value, bool) and bool not in kinds_tuple:
            ok = False
        else:
            ok = isinstance(value, kinds_tuple)
        if not ok:
            expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds_tuple)
            raise self.fail(context, f"'{key}' must be {expected}, found {_describe(value)}", name)
        return value

    def number(
        self,
        obj: JsonMapping,
        key: str,
        context: str,
        name: Spot | None,
        minimum: float = 0,
        integer: bool = False,
    ) -> Any:
        value = self.get(obj, key, int if integer else (int, float), context, name)
        if value is not None and value < minimum:
            raise self.fail(context, f"'{key}' must be >= {minimum:g}, found {value}", name)
        return value


_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "an array",
    dict: "an object",
}


def _operation(reader: _Reader, op: JsonValue, context: str) -> JsonObject:
    """An operation as a dict with ``name`` and ``operation-type`` (a bare string is both)."""
    if isinstance(op, str):
        return {"name": op, "operation-type": op}
    if not isinstance(op, dict):
        raise reader.fail(context, f"an operation must be an object, found {_describe(op)}")
    name = reader.get(op, "name", str, context)
    op_type = reader.get(
        op, "operation-type", str, f"operation {name or context!r}", name, required=True
    )
    return {**op, "name": name or op_type}
