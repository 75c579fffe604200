"""Small corpora generated from a Rally track's own mappings, for running real tracks in tests.

The real tracks' corpora are gigabytes on Elastic's servers, which these machines cannot reach;
their mappings are in the data-only copy of elastic/rally-tracks.  Test mode reads each
document set's ``-1k`` file (at most 1,000 documents), so a test writes those files with
documents whose every field matches its mapped type, and the track runs unchanged against them.
Values come from a seeded generator, so a test's corpus is the same on every run.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Java date-format tokens the real tracks use, with their strftime equivalents.
_JAVA_DATE_TOKENS = (
    ("yyyy", "%Y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
)
_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
)  # fmt: skip
_START = dt.datetime(2015, 1, 1, tzinfo=dt.UTC)


def _date(rng: random.Random, fmt: str | None) -> str | int:
    """A date in 2015 in the mapping's first format (``a||b`` accepts either)."""
    moment = _START + dt.timedelta(seconds=rng.randrange(365 * 24 * 3600))
    first = (fmt or "strict_date_optional_time").split("||")[0]
    if first == "epoch_second":
        return int(moment.timestamp())
    if first == "epoch_millis":
        return int(moment.timestamp() * 1000)
    if "yyyy" in first:
        pattern = first
        for java, strf in _JAVA_DATE_TOKENS:
            pattern = pattern.replace(java, strf)
        return moment.strftime(pattern)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(rng: random.Random, mapping: Mapping[str, Any]) -> Any:
    """A value of the mapped field's type (``None`` for a type this generator leaves out)."""
    kind = mapping.get("type", "object")
    if kind in ("keyword", "constant_keyword", "wildcard"):
        return rng.choice(_WORDS[:8])
    if kind in ("text", "match_only_text", "search_as_you_type"):
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
    if kind in ("integer", "long", "short", "byte", "unsigned_long"):
        return rng.randint(0, 100)
    if kind in ("float", "double", "half_float", "scaled_float"):
        return round(rng.uniform(0, 100), 2)
    if kind in ("date", "date_nanos"):
        return _date(rng, mapping.get("format"))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "ip":
        return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    if kind == "geo_point":
        return {"lat": round(rng.uniform(-60, 60), 5), "lon": round(rng.uniform(-170, 170), 5)}
    if kind in ("integer_range", "long_range", "float_range", "double_range"):
        low = rng.uniform(0, 50)
        return {"gte": round(low, 2), "lte": round(low + rng.uniform(0, 50), 2)}
    if kind in ("object", "nested") and "properties" in mapping:
        return document(rng, mapping["properties"])
    return None


def document(rng: random.Random, properties: Mapping[str, Any]) -> dict[str, Any]:
    """One document with a value for every mapped field this generator knows."""
    doc = {}
    for name, mapping in properties.items():
        value = _value(rng, mapping)
        if value is not None:
            doc[name] = value
    return doc


def mapping_properties(index_body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The top-level ``properties`` of an index body (typeless or with one mapping type)."""
    mappings = index_body.get("mappings", {})
    if "properties" in mappings:
        return mappings["properties"]
    for typed in mappings.values():  # pre-7 bodies: {"mappings": {"type": {"properties"}}}
        if isinstance(typed, dict) and "properties" in typed:
            return typed["properties"]
    return {}


def documents(properties: Mapping[str, Any], count: int, seed: int) -> Iterator[str]:
    """``count`` JSON lines of documents for ``properties``, the same for the same seed."""
    rng = random.Random(seed)
    for _ in range(count):
        yield json.dumps(document(rng, properties), separators=(",", ":"))


def write_corpus(path: Path, properties: Mapping[str, Any], count: int, seed: int) -> Path:
    """Write ``count`` generated documents to ``path`` (one JSON object per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in documents(properties, count, seed)))
    return path


def write_test_mode_corpora(
    track_path: Path, corpus_dir: Path, options: Mapping[str, Any] | None = None, seed: int = 1
) -> dict[str, int]:
    """Write the ``-1k`` file of every document set of a real track, from its own mappings.

    The track is read by esdash's loader in test mode (so index bodies are rendered as Rally
    renders them); each document set of an index, or of a data stream (whose mappings come
    from the track's composable template and component templates, which the loader reads),
    gets ``count`` = its test-mode document count of generated documents.  Returns the
    number of documents written per file name.
    """
    from esdash_plugins.tracks.rally.corpus import present_name
    from esdash_plugins.tracks.rally.loader import load

    loaded = load({"path": str(track_path), "test_mode": True, **(options or {})}, plan=True)
    bodies = {loaded.index: loaded.index_body, **{i.name: i.body for i in loaded.more}}
    sets = [(loaded.index, d) for d in loaded.documents]
    sets += [(i.name, d) for i in loaded.more for d in i.documents]
    templates = _template_mappings(loaded.one_offs)
    written: dict[str, int] = {}
    for number, (target, doc) in enumerate(sets):
        name = present_name(doc)  # the uncompressed file esdash looks for
        if name in written:
            continue
        name_of_target = doc.target_index or target
        properties = mapping_properties(bodies.get(name_of_target, {}))
        if not properties:  # a data stream: the mappings of the templates that make it
            properties = {"@timestamp": {"type": "date"}, **templates(name_of_target)}
        write_corpus(corpus_dir / name, properties, doc.documents, seed + number)
        written[name] = doc.documents
    return written


def _template_mappings(one_offs: Sequence[Any]) -> Callable[[str], dict[str, Any]]:
    """For a data stream's name: the properties its composable template and that template's
    component templates map, as the track's template tasks install them."""
    components: dict[str, Mapping[str, Any]] = {}
    composables: list[Mapping[str, Any]] = []
    for one in one_offs:
        if one.method != "PUT" or not isinstance(one.body, dict):
            continue
        if one.path.startswith("/_component_template/"):
            components[one.path.rsplit("/", 1)[1]] = one.body
        elif one.path.startswith("/_index_template/"):
            composables.append(one.body)

    def properties(stream: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for body in composables:
            patterns = body.get("index_patterns", [])
            patterns = [patterns] if isinstance(patterns, str) else patterns
            if not any(fnmatch.fnmatchcase(stream, p) for p in patterns):
                continue
            for part in [*(components.get(c, {}) for c in body.get("composed_of", [])), body]:
                found |= mapping_properties(part.get("template", {}))
        return found

    return properties
