"""The fingerprint an index esdash creates carries: ``_meta.esdash``.

Ingesting a large corpus takes longer than the benchmark, so ``esdash run`` keeps an index
from an earlier run, but only when it is the planned one.  So every index esdash creates
carries one object in its mapping's ``_meta``, ``_meta.esdash`` (``docs/stream.md``, "The
index: ``_meta.esdash``")::

    {"format": 1,
     "fingerprint": {"corpus": {...}, "mapping": "<sha256>", "settings": {...}},
     "layout": null | {what a client-side encryption codec records}}

The plan computes the object once (:func:`stamp_index_body`, called by
:func:`esdash.prepare.plan.make_plan`); rank 0 reads it back from the plan
(:func:`planned_stamp`) and compares it with the cluster's (:mod:`esdash.bench.index_reuse`).
Both sides need the format, so it sits with the corpus format below them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from esdash.plugin.corpus_slices import corpus_digest
from esdash.plugin.values import Corpus
from esdash.rundir.records import JsonMapping, JsonObject

#: Version of the ``_meta.esdash`` object; an index stamped with another is re-ingested.
FORMAT = 1
#: The key of esdash's object in the mapping's ``_meta``.
META_KEY = "esdash"
#: ``esdash run --reuse-index``: re-ingest on a difference, or refuse to run.
REUSE_MODES = ("auto", "require")


def corpus_identity(corpus: Corpus, offsets_dir: Path | None = None) -> JsonObject:
    """What identifies the corpus an index is ingested from.

    The file's size, document count and a hash of its offsets (:func:`corpus_digest`),
    plus, for a generated corpus, the generator and its seed (:attr:`Corpus.origin`): those
    make a difference readable ("seed 5, planned 6"), the bytes catch a generator that
    changed its output.  The path is left out: a moved corpus is the same corpus.
    """
    identity = corpus_digest(corpus, offsets_dir)
    if corpus.origin:
        identity["origin"] = json.loads(json.dumps(dict(corpus.origin), sort_keys=True))
    return identity


def _setting_text(value: Any) -> str:
    """A setting value as the engines echo it: strings, ``true``/``false``, JSON for lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def flat_settings(settings: JsonMapping) -> dict[str, str]:
    """Index settings as flat ``index.*`` names with text values, sorted.

    A track may write ``{"number_of_shards": 3}``, ``{"index": {"number_of_shards": 3}}`` or
    ``{"index.number_of_shards": 3}``; all mean one setting, and a difference is named by it.
    """
    flat: dict[str, str] = {}

    def visit(node: JsonMapping, prefix: str) -> None:
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping):
                visit(value, name)
            else:
                flat[name if name.startswith("index.") else f"index.{name}"] = _setting_text(value)

    visit(settings, "")
    return dict(sorted(flat.items()))


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def stamp_index_body(index_body: JsonMapping, corpus: JsonMapping) -> JsonObject:
    """``index_body`` with its ``_meta.esdash`` object, the index's fingerprint.

    ``index_body`` is the body as it is sent (after a client codec encoded it): what a
    codec put into ``_meta.esdash`` (ABE: its ciphertext layout, so an index written with
    another key or in plaintext is never read with this one) moves to ``layout``.  The
    mapping is kept as a hash (it can be large, and only whether it changed matters); the
    settings are kept whole, so a difference names the setting.
    """
    body = dict(index_body)
    mappings = dict(body.get("mappings") or {})
    meta = dict(mappings.get("_meta") or {})
    layout = meta.pop(META_KEY, None)
    bare = (
        {**mappings, "_meta": meta} if meta else {k: v for k, v in mappings.items() if k != "_meta"}
    )
    meta[META_KEY] = {
        "format": FORMAT,
        "fingerprint": {
            "corpus": dict(corpus),
            "mapping": _digest(bare),
            "settings": flat_settings(body.get("settings") or {}),
        },
        "layout": layout,
    }
    mappings["_meta"] = meta
    body["mappings"] = mappings
    return body


def planned_stamp(index_body: JsonMapping) -> JsonObject | None:
    """The ``_meta.esdash`` object of a planned index body (None: the plan has none)."""
    found = ((index_body.get("mappings") or {}).get("_meta") or {}).get(META_KEY)
    return found if isinstance(found, dict) else None
