"""Index reuse by fingerprint, without a cluster: the plan's ``_meta.esdash`` and the decision.

The real-cluster side (a run twice, another seed, another shard count, ``require``, a foreign
index) is in ``test_index_reuse_cluster.py``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.bench.index_reuse import Existing, IndexRefused, decide, prepare_index
from esdash.errors import BadInput, EsdashError
from esdash.plugin.corpus_slices import corpus_digest
from esdash.plugin.index_stamp import (
    FORMAT,
    META_KEY,
    corpus_identity,
    flat_settings,
    planned_stamp,
    stamp_index_body,
)
from esdash.plugin.values import Corpus
from esdash.rundir.records import BenchPlan

BODY = {
    "settings": {"number_of_shards": 2, "number_of_replicas": 0},
    "mappings": {"properties": {"age": {"type": "long"}, "part": {"type": "keyword"}}},
}
CORPUS = {
    "size": 1000,
    "documents": 10,
    "offsets": "ab" * 16,
    "origin": {"generator": "g", "seed": 5},
}
ABE = {"encryption": "abe", "scheme": "s1", "layout": "0123456789abcdef"}


def stamp(body: Mapping[str, Any] = BODY, corpus: Mapping[str, Any] = CORPUS) -> dict:
    found = planned_stamp(stamp_index_body(body, corpus))
    assert found is not None
    return found


def with_abe(body: Mapping[str, Any], layout: Mapping[str, Any] = ABE) -> dict:
    """``body`` as the ABE codec leaves it: its layout in ``_meta.esdash``."""
    encoded = copy.deepcopy(dict(body))
    encoded["mappings"]["_meta"] = {"esdash": dict(layout)}
    return encoded


# ------------------------------------------------------------------------- the stamp


def test_the_stamp_holds_format_fingerprint_and_layout() -> None:
    encoded = with_abe(BODY)
    encoded["mappings"]["_meta"]["track"] = "kept"
    body = stamp_index_body(encoded, CORPUS)
    meta = body["mappings"]["_meta"]
    assert meta["track"] == "kept"  # a track's own _meta stays
    found = meta[META_KEY]
    assert found["format"] == FORMAT
    assert found["layout"] == ABE  # what the codec recorded moved under "layout"
    assert found["fingerprint"]["corpus"] == CORPUS
    assert found["fingerprint"]["settings"] == {
        "index.number_of_replicas": "0",
        "index.number_of_shards": "2",
    }
    assert len(found["fingerprint"]["mapping"]) == 32
    assert body["settings"] == BODY["settings"]  # the body sent is otherwise unchanged
    # the mapping hash sees the track's _meta, not esdash's own object
    assert stamp(encoded)["fingerprint"]["mapping"] == found["fingerprint"]["mapping"]
    assert stamp(with_abe(BODY))["fingerprint"]["mapping"] == stamp()["fingerprint"]["mapping"]
    assert stamp(BODY)["fingerprint"]["mapping"] != found["fingerprint"]["mapping"]
    assert stamp(BODY)["layout"] is None


def test_settings_are_one_setting_however_a_track_writes_them() -> None:
    forms = [
        {"number_of_shards": 3, "refresh_interval": "1s", "sort": {"field": ["a", "b"]}},
        {"index": {"number_of_shards": "3", "refresh_interval": "1s", "sort.field": ["a", "b"]}},
        {
            "index.number_of_shards": 3,
            "index.refresh_interval": "1s",
            "index.sort.field": ["a", "b"],
        },
    ]
    flat = [flat_settings(form) for form in forms]
    assert flat[0] == flat[1] == flat[2]
    assert flat[0]["index.sort.field"] == '["a","b"]'
    assert flat_settings({"codec": True}) == {"index.codec": "true"}


def test_a_corpus_is_its_bytes_and_shape_not_its_path(tmp_path: Path) -> None:
    lines = b"".join(b'{"n": %d}\n' % n for n in range(50))
    first, copy_ = tmp_path / "a" / "c.ndjson", tmp_path / "b" / "other.ndjson"
    for path in (first, copy_):
        path.parent.mkdir()
        path.write_bytes(lines)
    os.utime(copy_, (1, 1))
    a = corpus_digest(Corpus(first))
    assert a == corpus_digest(Corpus(copy_)) == corpus_digest(Corpus(first))  # cached
    assert a["documents"] == 50 and a["size"] == len(lines)
    changed = tmp_path / "changed.ndjson"
    changed.write_bytes(lines.replace(b'{"n": 7}', b'{"n": 777}'))
    assert corpus_digest(Corpus(changed))["size"] != a["size"]
    # a value changed in place keeps every offset; the sampled bytes still tell
    in_place = tmp_path / "in-place.ndjson"
    in_place.write_bytes(lines.replace(b'{"n": 7}', b'{"n": 8}'))
    edited = corpus_digest(Corpus(in_place))
    assert edited["offsets"] == a["offsets"] and edited["sample"] != a["sample"]
    large = tmp_path / "large.ndjson"
    large.write_bytes(
        b"".join(b'{"n": "%07d"}\n' % n for n in range(20000))
    )  # > 64 KiB, 3 checkpoints
    big = corpus_digest(Corpus(large))
    large.write_bytes(large.read_bytes().replace(b'{"n": "0019999"}', b'{"n": "0019998"}'))
    moved = corpus_digest(Corpus(large))
    assert moved["offsets"] == big["offsets"] and moved["sample"] != big["sample"]  # last block
    origin = corpus_identity(Corpus(first, origin={"generator": "g", "seed": 5}))
    assert origin == {**a, "origin": {"generator": "g", "seed": 5}}


# ---------------------------------------------------------------------- the decision


def test_no_index_is_created() -> None:
    decision = decide("mri", stamp(), None)
    assert (decision.action, decision.reason) == ("create", "index mri created")


def test_the_planned_index_with_every_document_is_reused() -> None:
    decision = decide("mri", stamp(), Existing(stamp(), count=10), "require")
    assert decision.action == "reuse" and not decision.ingest
    assert decision.reason == "index mri reused with 10 documents"


@pytest.mark.parametrize(
    ("existing", "name", "detail"),
    [
        (
            stamp(corpus={**CORPUS, "origin": {"generator": "g", "seed": 6}}),
            "corpus",
            "seed 6, planned 5",
        ),
        (stamp(corpus={**CORPUS, "origin": None, "size": 7}), "corpus", "generator null, planned"),
        (stamp(corpus={**CORPUS, "size": 7}), "corpus", "7 bytes, planned 1000 bytes"),
        (
            stamp({**BODY, "settings": {"number_of_shards": 1, "number_of_replicas": 0}}),
            "settings",
            "index.number_of_shards 1, planned 2",
        ),
        (
            stamp({**BODY, "mappings": {"properties": {"age": {"type": "integer"}}}}),
            "mapping",
            "another field mapping",
        ),
        (stamp(with_abe(BODY)), "ABE layout", "the index is encrypted, this session is plaintext"),
    ],
)
def test_each_difference_is_named(existing: dict, name: str, detail: str) -> None:
    decision = decide("mri", stamp(), Existing(existing, count=10))
    assert decision.action == "recreate" and decision.ingest
    assert decision.differences == (name,)
    assert decision.reason.startswith(
        f"index mri created anew: the existing one differed in {name} ("
    )
    assert detail in decision.reason


def test_the_abe_layout_refuses_plaintext_and_another_key() -> None:
    planned = stamp(with_abe(BODY))
    plaintext = decide("mri", planned, Existing(stamp(), count=10))
    assert plaintext.differences == ("ABE layout",) and "the index is plaintext" in plaintext.reason
    other_key = stamp(with_abe(BODY, {**ABE, "layout": "fedcba9876543210"}))
    decision = decide("mri", planned, Existing(other_key, count=10))
    assert decision.differences == ("ABE layout",)
    assert "another key, schema or ciphertext format" in decision.reason


def test_an_abe_index_of_an_older_ciphertext_format_is_recreated_naming_the_version() -> None:
    # issue 16: the ABE codec's object carries its format version; the first format had none
    planned = stamp(with_abe(BODY, {**ABE, "format": 2}))
    first = {k: v for k, v in ABE.items() if k != "format"}
    decision = decide("mri", planned, Existing(stamp(with_abe(BODY, first)), count=10))
    assert decision.action == "recreate" and decision.differences == ("ABE layout",)
    assert "ciphertext format version: the index has 1, this esdash writes 2" in decision.reason
    refused = decide("mri", planned, Existing(stamp(with_abe(BODY, first)), count=10), "require")
    assert refused.action == "refuse" and "format version" in refused.reason


def test_an_incomplete_index_is_named_by_its_count_and_another_corpus_by_the_corpus() -> None:
    decision = decide("mri", stamp(), Existing(stamp(), count=4))
    assert decision.differences == ("document count",)
    assert "the index holds 4 of 10" in decision.reason
    other = stamp(corpus={**CORPUS, "documents": 20, "size": 2000})
    assert decide("mri", stamp(), Existing(other, count=20)).differences == ("corpus",)


def test_another_format_version_is_the_one_difference_named() -> None:
    older = {"encryption": "abe", "scheme": "s0", "layout": "x"}  # the ABE codec's old object
    decision = decide("mri", stamp(), Existing(older, count=10))
    assert decision.differences == ("format version",)
    assert decision.reason.startswith("index mri created anew")
    assert "the index has none, this esdash writes 1" in decision.reason
    future = {**stamp(), "format": FORMAT + 1}
    assert decide("mri", stamp(), Existing(future, count=10)).differences == ("format version",)


def test_require_refuses_naming_index_and_difference() -> None:
    existing = stamp({**BODY, "settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    decision = decide("mri", stamp(), Existing(existing, count=10), "require")
    assert decision.action == "refuse" and not decision.ingest
    assert decision.reason.startswith("index mri differs from this session's in settings (")
    assert "--reuse-index=require" in decision.reason and "\n" not in decision.reason


@pytest.mark.parametrize("mode", ["auto", "require"])
@pytest.mark.parametrize("reingest", [False, True])
def test_an_index_esdash_did_not_create_is_refused_by_name_in_every_mode(
    mode: str, reingest: bool
) -> None:
    decision = decide("logs", stamp(), Existing(None), mode, reingest)
    assert decision.action == "refuse"
    assert decision.reason.startswith("index logs exists but esdash did not create it")
    assert "delete it yourself" in decision.reason and "another index name" in decision.reason


def test_reingest_recreates_an_esdash_index_whatever_it_holds() -> None:
    for mode in ("auto", "require"):
        decision = decide("mri", stamp(), Existing(stamp(), count=10), mode, reingest=True)
        assert (decision.action, decision.reason) == (
            "recreate",
            "index mri created anew (--reingest)",
        )


def test_an_unknown_mode_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="reuse mode"):
        decide("mri", stamp(), None, "sometimes")


# The whole space: a random plan, and an existing index that differs in a random subset of
# the parts.  Exactly those parts are named; auto re-creates, require refuses; nothing else.
PARTS = ("corpus", "settings", "mapping", "ABE layout", "document count")


@settings(max_examples=200, deadline=None)
@given(
    shards=st.integers(1, 9),
    seed=st.integers(0, 2**31),
    documents=st.integers(0, 10**9),
    encrypted=st.booleans(),
    changed=st.sets(st.sampled_from(PARTS)),
    mode=st.sampled_from(["auto", "require"]),
)
def test_exactly_the_parts_that_differ_are_named(
    shards: int, seed: int, documents: int, encrypted: bool, changed: set[str], mode: str
) -> None:
    corpus = {**CORPUS, "documents": documents, "origin": {"generator": "g", "seed": seed}}
    body = {**BODY, "settings": {"number_of_shards": shards}}
    planned = stamp(with_abe(body) if encrypted else body, corpus)
    old_corpus = {**corpus, "origin": {"generator": "g", "seed": seed + 1}}
    old_body = {
        "settings": {"number_of_shards": shards + 1 if "settings" in changed else shards},
        "mappings": BODY["mappings"] if "mapping" not in changed else {"properties": {}},
    }
    old_layout = encrypted != ("ABE layout" in changed)
    existing = stamp(
        with_abe(old_body) if old_layout else old_body,
        old_corpus if "corpus" in changed else corpus,
    )
    count = documents + 1 if "document count" in changed else documents
    decision = decide("i", planned, Existing(existing, count), mode)
    expected = set(changed)
    if "corpus" in changed:
        expected.discard("document count")  # another corpus explains another count
    assert set(decision.differences) == expected
    if not expected:
        assert decision.action == "reuse"
    else:
        assert decision.action == ("recreate" if mode == "auto" else "refuse")
        assert "\n" not in decision.reason and "index i " in decision.reason


# ------------------------------------------------------------------- against a client


class FakeControl:
    """The control operations index preparation uses, recorded; one index or none."""

    def __init__(self, meta: dict | None = None, count: int = 0, exists: bool = True) -> None:
        self.meta, self.documents, self.exists = meta, count, exists
        self.calls: list[str] = []

    def index_exists(self, index: str) -> bool:
        return self.exists

    def index_meta(self, index: str) -> dict | None:
        return self.meta

    def count(self, index: str) -> int:
        self.calls.append("count")
        return self.documents

    def delete_index(self, index: str) -> None:
        self.calls.append("delete")

    def create_index(self, index: str, body: Mapping[str, object]) -> None:
        self.calls.append("create")


def bench_plan(mode: str = "auto", reingest: bool = False) -> BenchPlan:
    return BenchPlan(
        index="mri",
        index_body=stamp_index_body(BODY, CORPUS),
        corpus_path="c",
        corpus_documents=10,
        corpus_has_actions=False,
        bulk_size=1,
        steps=(),
        interval=1.0,
        seed=1,
        ranks=1,
        reingest=reingest,
        reuse_index=mode,
    )


def test_prepare_index_creates_reuses_and_recreates() -> None:
    fresh = FakeControl(exists=False)
    assert prepare_index(bench_plan(), fresh) == {  # type: ignore[arg-type]
        "ingest": True,
        "reason": "index mri created",
        "indices": ["mri"],
    }
    assert fresh.calls == ["create"]
    same = FakeControl({"esdash": stamp()}, count=10)
    assert prepare_index(bench_plan(), same)["ingest"] is False  # type: ignore[arg-type]
    assert same.calls == ["count"]
    other = FakeControl({"esdash": stamp(corpus={**CORPUS, "size": 1})}, count=10)
    result = prepare_index(bench_plan(), other)  # type: ignore[arg-type]
    assert result["ingest"] is True and "differed in corpus" in result["reason"]
    assert other.calls == ["count", "delete", "create"]


@pytest.mark.parametrize(
    ("meta", "plan"),
    [
        (None, bench_plan()),  # no _meta at all
        ({"owner": "someone"}, bench_plan(reingest=True)),  # _meta, but not esdash's
        ({"esdash": "not an object"}, bench_plan()),
        ({"esdash": stamp(corpus={**CORPUS, "size": 1})}, bench_plan("require")),
    ],
)
def test_a_refusal_touches_nothing(meta: dict | None, plan: BenchPlan) -> None:
    control = FakeControl(meta, count=10)
    with pytest.raises(IndexRefused) as info:
        prepare_index(plan, control)  # type: ignore[arg-type]
    assert isinstance(info.value, EsdashError) and "index mri " in str(info.value)
    assert "delete" not in control.calls and "create" not in control.calls


def test_make_plan_stamps_the_index_and_records_the_mode(tmp_path: Path) -> None:
    from esdash_plugins.tracks.mri import MriTrack

    from esdash.plugin.values import Distribution
    from esdash.prepare.plan import make_plan
    from esdash.session import parse_session

    session = parse_session(
        {"name": "t", "track": {"name": "mri", "documents": 20, "seed": 3, "shards": 2}},
        tmp_path / "s.toml",
    )
    track = MriTrack()
    corpus = track.corpus(session.track.options, tmp_path)
    dist = Distribution(tmp_path, "8.19.21", "integ-test-zip", (), scripting=False)
    plan = make_plan(session, track, corpus, (), dist, 1, 1, reuse_index="require")
    assert plan.reuse_index == "require"
    found = planned_stamp(plan.index_body)
    assert found is not None and found["layout"] is None
    assert found["fingerprint"]["corpus"]["origin"] == {"generator": "mri", "seed": 3}
    assert found["fingerprint"]["corpus"]["documents"] == 20
    assert found["fingerprint"]["settings"]["index.number_of_shards"] == "2"
    with pytest.raises(BadInput, match="--reuse-index must be one of auto, require"):
        make_plan(session, track, corpus, (), dist, 1, 1, reuse_index="maybe")
