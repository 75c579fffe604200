"""Checking and converting option values declared with :class:`esdash.plugin_api.Option`.

The same machinery validates esdash's own session keys and every plugin's options, so a
plugin author gets the same quality of error messages for free: each problem names the key
path, what was expected and what was found, and unknown keys get a "did you mean" hint.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.plugin.values import REQUIRED, Option, OptionValue, _Required
from esdash.rundir.records import JsonMapping

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)b?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a value: where it is, what was expected, what was found."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


def describe(value: object) -> str:
    """A short, type-revealing rendering of a found value for error messages."""
    kinds: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
    kinds.update({list: "array", dict: "table"})
    kind = kinds.get(type(value), type(value).__name__)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"an array of {len(value)} item(s)"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def subtable(data: JsonMapping, key: str, problems: list[Problem]) -> JsonMapping:
    """The table ``[key]`` of a TOML document (empty when absent); anything else there is
    a problem, and the parse goes on with an empty table to find the others too."""
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        problems.append(Problem(key, f"expected a table [{key}], found {describe(value)}"))
        return {}
    return value


def parse_duration(value: object) -> float:
    """Seconds from a number or a string such as ``"250ms"``, ``"30s"``, ``"5m"``, ``"1h"``."""
    if isinstance(value, bool):
        raise ValueError
    seconds = math.nan
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any float: not a duration
            raise ValueError from None
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if not math.isfinite(seconds):
        raise ValueError
    return seconds


def parse_size(value: object) -> int:
    """Bytes from an integer or a string such as ``"512m"`` or ``"2g"``."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    raise ValueError


_EXPECTED = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "duration": 'a duration such as "30s", "250ms", "5m" or a number of seconds',
    "size": 'a size such as "512m" or "2g"',
    "path": "a path (string)",
    "list[str]": "an array of strings",
}


class _Refused(ValueError):
    """A value of the right type that still cannot be used; the message says why and the fix."""


def _convert(option: Option, value: object, base_dir: Path | None) -> OptionValue:
    """Convert ``value`` to the option's kind, or raise ValueError."""
    kind = option.kind
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        if not math.isfinite(value):
            raise ValueError
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError
        return value
    if kind == "duration":
        return parse_duration(value)
    if kind == "size":
        return parse_size(value)
    if kind == "path":
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise ValueError
        try:
            path = Path(value).expanduser()
        except RuntimeError:  # ~user of a user this system does not know
            user = value.split("/", 1)[0]
            raise _Refused(
                f"{value!r}: no user {user[1:]!r} on this host to expand {user!r}; write "
                f"the path out in full"
            ) from None
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return path
    if kind == "list[str]":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError
        return tuple(value)
    raise AssertionError(f"unhandled option kind {kind}")


def _default(option: Option, base_dir: Path | None) -> OptionValue:
    """The declared default, converted like a value from a file ("1g" becomes bytes)."""
    default = option.default
    if default is None or isinstance(default, _Required):  # REQUIRED: reported as missing
        return None
    try:
        return _convert(option, default, base_dir)
    except ValueError:
        return default  # e.g. a tuple default for list[str]: already in final form


def size_text(size: float) -> str:
    """Bytes as a session writes them: ``"128m"``, ``"1024g"`` (the largest unit that
    divides them), else a number of bytes."""
    for unit in ("g", "m", "k"):
        if size and size % _SIZE_UNITS[unit] == 0:
            return f"{int(size // _SIZE_UNITS[unit])}{unit}"
    return f"{size:g}"


def _range_text(option: Option) -> str:
    """The option's bounds in the units its values are written in (a size in ``m``/``g``:
    a number of bytes such as 1.34218e+08 helps nobody)."""
    bound: Callable[[float], str] = size_text if option.kind == "size" else "{:g}".format
    bytes_note = " (a number without a unit is bytes)" if option.kind == "size" else ""
    if option.minimum is not None and option.maximum is not None:
        return f" between {bound(option.minimum)} and {bound(option.maximum)}{bytes_note}"
    if option.minimum is not None:
        return f" >= {bound(option.minimum)}{bytes_note}"
    if option.maximum is not None:
        return f" <= {bound(option.maximum)}{bytes_note}"
    return ""


def suggest(name: str, candidates: Sequence[str]) -> str:
    """A ' (did you mean "x"?)' hint, or an empty string."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def validate(
    options: Sequence[Option],
    table: JsonMapping,
    prefix: str,
    base_dir: Path | None = None,
    ignore: Sequence[str] = (),
) -> tuple[dict[str, Any], list[Problem]]:
    """Check ``table`` against ``options``; return converted values (defaults filled in).

    ``prefix`` is the key path of the table (``"encryption"``), used in every problem.
    Keys in ``ignore`` belong to the caller (e.g. ``mode`` in ``[encryption]``).
    """
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    known = {option.name: option for option in options}

    def path(key: str) -> str:
        return f"{prefix}.{key}" if prefix else key

    for key in table:
        if key not in known and key not in ignore:
            accepted = sorted(known) + list(ignore)
            problems.append(
                Problem(
                    path(key),
                    f"unknown key{suggest(key, accepted)}; accepted keys here: "
                    f"{', '.join(accepted) or 'none'}",
                )
            )
    for option in options:
        if option.name not in table:
            if option.required:
                problems.append(
                    Problem(path(option.name), f"missing; expected {_EXPECTED[option.kind]}")
                )
            else:
                values[option.name] = _default(option, base_dir)
            continue
        raw = table[option.name]
        expected = _EXPECTED[option.kind]
        try:
            value = _convert(option, raw, base_dir)
        except _Refused as exc:
            problems.append(Problem(path(option.name), str(exc)))
            continue
        except ValueError:
            problems.append(
                Problem(path(option.name), f"expected {expected}, found {describe(raw)}")
            )
            continue
        if option.choices and value not in option.choices:
            choices = ", ".join(repr(c) for c in option.choices)
            hint = (
                suggest(value, [str(c) for c in option.choices]) if isinstance(value, str) else ""
            )
            problems.append(
                Problem(
                    path(option.name), f"expected one of {choices}, found {describe(raw)}{hint}"
                )
            )
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            too_low = option.minimum is not None and value < option.minimum
            too_high = option.maximum is not None and value > option.maximum
            if too_low or too_high:
                problems.append(
                    Problem(
                        path(option.name),
                        f"expected {expected}{_range_text(option)}, found {describe(raw)}",
                    )
                )
                continue
        values[option.name] = value
    return values, problems


__all__ = ["REQUIRED", "Problem", "describe", "parse_duration", "parse_size", "suggest", "validate"]
