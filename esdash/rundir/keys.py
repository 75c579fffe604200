"""How values become names in run and campaign directories: short digests and value keys.

A campaign point's id, its data root's label and the ``[per_value."<axis>"]`` keys are built
from axis values; readers (reports, comparisons) match them against the stored names, so the
rule lives here, with the rest of the on-disk contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from esdash.rundir.records import JsonValue


def digest(value: JsonValue, length: int = 6) -> str:
    """A short, stable fingerprint of JSON-like data (labels, ids, equality keys)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def value_key(value: JsonValue) -> str:
    """How an axis value is written as a key of ``[per_value."<axis>"]`` (and in labels)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        name = value.get("mode") or value.get("name")
        return f"{name}-{digest(value)}" if isinstance(name, str) else f"table-{digest(value)}"
    return json.dumps(value, sort_keys=True)
