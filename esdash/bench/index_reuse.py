"""Index reuse by fingerprint: keep an ingested index only when it is the planned one.

Ingesting a large corpus takes longer than the benchmark, so ``esdash run`` keeps an index
from an earlier run.  Checking the name and the document count alone let a session with
another corpus seed or another shard count silently measure the old index.  So every index
esdash creates carries its fingerprint, ``_meta.esdash`` (:mod:`esdash.plugin.index_stamp`),
and an index is reused only when that object equals the planned one and the index holds the
whole corpus.  The plan (:func:`~esdash.plugin.index_stamp.stamp_index_body`, called by
``make_plan``) computes the object once; rank 0 only compares (:func:`prepare_index`).

What to do about a difference is the user's choice (``esdash run --reuse-index``): ``auto``
re-creates the index and says why, ``require`` refuses to run.  An index without
``_meta.esdash`` was not made by esdash: it may hold someone's data, so it is never deleted,
only refused by name with the fix.

A track with several indices (``BenchPlan.more_indices``) has one stamp per index, and
each index is decided on its own.  A data stream carries no stamp (its backing indices come
from the track's index template): like Rally, esdash deletes a stream of that name and
ingests it anew, but never an index that is not a data stream.

The decision (:func:`decide`) is a pure function of what the plan says and what the cluster
has, so every case is tested without a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from esdash.errors import EsdashError
from esdash.plugin.control import ControlClient, ControlError
from esdash.plugin.index_stamp import FORMAT, META_KEY, REUSE_MODES, planned_stamp
from esdash.rundir.records import BenchPlan, JsonMapping, JsonObject, PlannedIndex

Action = Literal["create", "reuse", "recreate", "refuse"]


class IndexRefused(EsdashError):
    """The existing index cannot be used and must not be replaced; the message says why."""


# ----------------------------------------------------------------------- the decision


@dataclass(frozen=True)
class Existing:
    """What the cluster has under the index name.

    ``stamp`` is its ``_meta.esdash`` (None: esdash did not create it); ``count`` its
    documents (only read for an index esdash created).
    """

    stamp: JsonObject | None
    count: int = 0


@dataclass(frozen=True)
class Decision:
    """What to do with the index, the differences found and the sentence that says so."""

    action: Action
    reason: str
    differences: tuple[str, ...] = ()

    @property
    def ingest(self) -> bool:
        return self.action in ("create", "recreate")


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _corpus_detail(found: Any, planned: Mapping[str, Any]) -> str:
    """The corpus difference in the terms that tell them apart (origin first, then bytes)."""
    found = found if isinstance(found, Mapping) else {}
    before, after = found.get("origin"), planned.get("origin")
    before = before if isinstance(before, Mapping) else {}
    after = after if isinstance(after, Mapping) else {}
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if keys:
        return ", ".join(
            f"{k} {_short(before.get(k))}, planned {_short(after.get(k))}" for k in keys
        )
    for key, unit in (("documents", " documents"), ("size", " bytes")):
        if found.get(key) != planned.get(key):
            return f"{found.get(key)}{unit}, planned {planned.get(key)}{unit}"
    return "same size and document count, other content"


def _settings_detail(found: Any, planned: Mapping[str, str]) -> str:
    found = found if isinstance(found, Mapping) else {}
    keys = sorted(k for k in set(found) | set(planned) if found.get(k) != planned.get(k))
    shown = [
        f"{k} {_short(found.get(k, 'unset'), 30)}, planned {_short(planned.get(k, 'unset'), 30)}"
        for k in keys[:3]
    ]
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return "; ".join(shown) + more


def layout_name(found: Any, planned: Any) -> str:
    """The name a layout difference goes by: the codec's mode ("ABE layout") from either
    side's record, else "encryption layout"."""
    for record in (planned, found):
        if isinstance(record, Mapping) and isinstance(record.get("encryption"), str):
            return f"{record['encryption'].upper()} layout"
    return "encryption layout"


def _layout_detail(found: Any, planned: Any) -> str:
    """What differs between two layout records: plaintext/encrypted, the codec's format
    version (a record without one is version 1), or the rest (key, schema, ciphertexts)."""
    if found is None:
        return "the index is plaintext"
    if planned is None:
        return "the index is encrypted, this session is plaintext"
    if isinstance(found, Mapping) and isinstance(planned, Mapping):
        had, writes = found.get("format", 1), planned.get("format", 1)
        if had != writes:
            return f"ciphertext format version: the index has {had}, this esdash writes {writes}"
    return "another key, schema or ciphertext format"


def differences(planned: JsonMapping, existing: Existing) -> list[tuple[str, str]]:
    """Each difference of an esdash index from the plan: (its name, what differs).

    Another format version is the only difference named then: the rest of an older object
    may not mean the same.  The document count is named only when the corpus is the same
    (another corpus explains another count).
    """
    found = existing.stamp or {}
    if found.get("format") != planned.get("format"):
        version = found.get("format") or "none"
        return [("format version", f"the index has {version}, this esdash writes {FORMAT}")]
    result: list[tuple[str, str]] = []
    recorded = found.get("fingerprint")
    have: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    want = planned["fingerprint"]
    if have.get("corpus") != want["corpus"]:
        result.append(("corpus", _corpus_detail(have.get("corpus"), want["corpus"])))
    if have.get("mapping") != want["mapping"]:
        result.append(("mapping", "another field mapping"))
    if have.get("settings") != want["settings"]:
        result.append(("settings", _settings_detail(have.get("settings"), want["settings"])))
    if found.get("layout") != planned.get("layout"):
        name = layout_name(found.get("layout"), planned.get("layout"))
        result.append((name, _layout_detail(found.get("layout"), planned.get("layout"))))
    documents = want["corpus"].get("documents")
    if not any(name == "corpus" for name, _ in result) and existing.count != documents:
        result.append(("document count", f"the index holds {existing.count} of {documents}"))
    return result


def foreign_reason(index: str) -> str:
    """Why an index esdash did not create is refused, with the fix (one line)."""
    return (
        f"index {index} exists but esdash did not create it (its mapping has no "
        f"_meta.esdash), and esdash never deletes an index it did not create: delete it "
        f"yourself (curl -X DELETE <node>/{index}), or use another index name (the track "
        f"sets it; a Rally track takes track.index) or a cluster without it (cluster.data_dir)"
    )


def decide(
    index: str,
    planned: JsonMapping,
    existing: Existing | None,
    mode: str = "auto",
    reingest: bool = False,
) -> Decision:
    """Create, reuse, re-create or refuse the index, and the sentence that says why.

    ``existing`` is None when there is no index of that name.  ``reingest``
    (``--reingest``) re-creates an index esdash made whatever its fingerprint; ``mode``
    (``--reuse-index``) says what a difference leads to: ``auto`` re-creates, ``require``
    refuses.  An index esdash did not make is refused in every mode.
    """
    if mode not in REUSE_MODES:
        raise ValueError(f"reuse mode must be one of {REUSE_MODES}, not {mode!r}")
    if existing is None:
        return Decision("create", f"index {index} created")
    if existing.stamp is None:
        return Decision("refuse", foreign_reason(index))
    if reingest:
        return Decision("recreate", f"index {index} created anew (--reingest)")
    found = differences(planned, existing)
    names = tuple(name for name, _ in found)
    if not found:
        return Decision("reuse", f"index {index} reused with {existing.count} documents")
    what = "; ".join(f"{name} ({detail})" for name, detail in found)
    if mode == "require":
        return Decision(
            "refuse",
            f"index {index} differs from this session's in {what}, and --reuse-index=require "
            f"does not re-ingest it: run with --reuse-index=auto or --reingest to re-create it",
            names,
        )
    return Decision(
        "recreate", f"index {index} created anew: the existing one differed in {what}", names
    )


# ------------------------------------------------------------------------ the cluster


def inspect(control: ControlClient, index: str) -> Existing | None:
    """What the cluster has under ``index`` (None: nothing).

    The documents are counted only in an index esdash created: a foreign one is refused
    whatever it holds.  A ``_meta.esdash`` that is not an object was not written by esdash.
    """
    if not control.index_exists(index):
        return None
    meta = control.index_meta(index) or {}
    stamp = meta.get(META_KEY)
    if not isinstance(stamp, dict):
        return Existing(stamp=None)
    return Existing(stamp=stamp, count=control.count(index))


def prepare_index(plan: BenchPlan, control: ControlClient) -> JsonObject:
    """Rank 0's index preparation: decide, then create, keep or re-create every index.

    Each index of the plan (:attr:`BenchPlan.all_indices`) keeps its own fingerprint and
    is decided on its own (:func:`_decide_one`, :func:`_apply`): a run of a track with
    several indices re-ingests only the ones that changed.  Returns ``{"ingest": bool,
    "reason": str, "indices": [names to ingest]}``; the reason becomes the stream's
    ``index`` event and so a line of the run's output.  Raises :class:`IndexRefused` when
    an index must be neither used nor replaced, before any worker sends a request and
    before any index is deleted or created.
    """
    decisions = [(planned, _decide_one(plan, planned, control)) for planned in plan.all_indices]
    refused = [decision.reason for _, decision in decisions if decision.action == "refuse"]
    if refused:
        raise IndexRefused("; ".join(refused))
    ingest: list[str] = []
    for planned, decision in decisions:
        _apply(planned, decision, control)
        if decision.ingest and planned.has_corpus:
            ingest.append(planned.name)
    return {
        "ingest": bool(ingest),
        "reason": "; ".join(decision.reason for _, decision in decisions),
        "indices": ingest,
    }


def not_a_stream(name: str) -> str:
    """Why a plain index where the plan has a data stream is refused, with the fix."""
    return (
        f"{name} exists but is not a data stream; esdash deletes only data streams of that "
        f"name, never an index it did not create: delete the index yourself (curl -X DELETE "
        f"<node>/{name}) or use a cluster without it"
    )


def _decide_one(plan: BenchPlan, index: PlannedIndex, control: ControlClient) -> Decision:
    """What to do with one index of the plan (see :func:`decide`).

    A data stream has no ``_meta.esdash`` of its own (its backing indices come from the
    track's index template): like Rally, esdash deletes an existing stream of that name
    and ingests it anew.
    """
    if index.data_stream:
        exists = control.index_exists(index.name)
        # a data stream's settings are its backing indices'; a plain index has its own name
        if exists and index.name in control.index_settings(index.name):
            return Decision("refuse", not_a_stream(index.name))
        what = "deleted and ingested anew" if exists else "ingested"
        return Decision("recreate" if exists else "create", f"data stream {index.name} {what}")
    planned = planned_stamp(index.body)
    if planned is None:
        raise IndexRefused(
            f"the bench plan's index {index.name} has no _meta.esdash fingerprint; "
            "plans are made by esdash run, which always adds one"
        )
    found = inspect(control, index.name)
    return decide(index.name, planned, found, plan.reuse_index, plan.reingest)


def _apply(index: PlannedIndex, decision: Decision, control: ControlClient) -> None:
    """Carry out ``decision`` for ``index``: delete, then create (a data stream is created
    by its index template on the first document)."""
    if decision.action == "recreate":
        if index.data_stream:
            try:
                control.delete_data_stream(index.name)
            except ControlError as exc:  # an index of that name: never esdash's to delete
                raise IndexRefused(f"{not_a_stream(index.name)} ({exc})") from None
        else:
            control.delete_index(index.name)
    if decision.ingest and not index.data_stream:
        control.create_index(index.name, index.body)
