"""A Rally track with several indices, corpora and bulk tasks, planned without a cluster.

Rally creates every index of a track and its bulk tasks fill them, in schedule order; a
search may name another index, a comma list or a wildcard (``name-*``), which the engine
resolves.  esdash does the same: the main index first, the others after it, each with its
own corpus and fingerprint.  The real-cluster run is ``tests/bench/test_rally_indices.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from esdash_plugins.tracks import rally

from esdash.plugin.values import Distribution
from esdash.prepare.plan import make_plan
from esdash.rundir.records import BenchPlan
from esdash.session import parse_session


def write_docs(path: Path, count: int, kind: str) -> None:
    path.write_text("".join(json.dumps({"kind": kind, "n": n}) + "\n" for n in range(count)))


def two_index_track(directory: Path, schedule: list[dict[str, Any]] | None = None) -> Path:
    """Indices ``name-a`` (5 documents) and ``name-b`` (7), one corpus and one bulk task
    each, searches of one index, of both (``name-*``) and of an index the track lacks."""
    directory.mkdir(parents=True, exist_ok=True)
    body = {"mappings": {"properties": {"kind": {"type": "keyword"}, "n": {"type": "integer"}}}}
    (directory / "index.json").write_text(json.dumps(body))
    write_docs(directory / "a.json", 5, "a")
    write_docs(directory / "b.json", 7, "b")
    search = {"operation-type": "search", "body": {"query": {"match_all": {}}}}
    track = {
        "version": 2,
        "indices": [
            {"name": "name-a", "body": "index.json"},
            {"name": "name-b", "body": "index.json"},
        ],
        "corpora": [
            {
                "name": "corpus-a",
                "documents": [
                    {"source-file": "a.json", "document-count": 5, "target-index": "name-a"}
                ],
            },
            {
                "name": "corpus-b",
                "documents": [
                    {"source-file": "b.json", "document-count": 7, "target-index": "name-b"}
                ],
            },
        ],
        "schedule": schedule
        or [
            {"operation": {"operation-type": "create-index", "settings": {"number_of_shards": 1}}},
            {"name": "bulk-b", "operation": {"operation-type": "bulk", "corpora": "corpus-b"}},
            {"name": "bulk-a", "operation": {"operation-type": "bulk", "corpora": ["corpus-a"]}},
            {"operation": {"name": "only-a", "index": "name-a", **search}, "time-period": 1},
            {"operation": {"name": "both", "index": "name-*", **search}, "time-period": 1},
            {"operation": {"name": "listed", "index": "name-a,name-b", **search}},
            {"operation": {"name": "elsewhere", "index": "other-*", **search}},
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_every_index_gets_its_corpus_in_the_order_of_the_bulk_tasks(tmp_path: Path) -> None:
    path = two_index_track(tmp_path / "track")
    track = rally.RallyTrack()
    options = {"path": path}
    # the first index a bulk task sends to is the main one
    assert track.index_name(options) == "name-b"
    corpus = track.corpus(options, tmp_path / "cache")
    assert (Path(corpus.path).name, corpus.documents) == ("b.json", 7)
    (other,) = track.more_indices(options, tmp_path / "cache")
    assert other.name == "name-a" and other.corpus is not None
    assert (Path(other.corpus.path).name, other.corpus.documents) == ("a.json", 5)
    # the create-index task's settings reach both bodies
    assert other.body["settings"] == {"number_of_shards": 1}
    assert track.index_body(options)["settings"] == {"number_of_shards": 1}
    status = track.corpus_check(options, tmp_path / "cache")
    assert status.problems == ()
    assert {p.name for p, _ in status.files} == {"a.json", "b.json"}


def test_track_index_chooses_the_main_index_and_the_other_still_runs(tmp_path: Path) -> None:
    path = two_index_track(tmp_path / "track")
    track = rally.RallyTrack()
    options = {"path": path, "index": "name-a"}
    assert Path(track.corpus(options, tmp_path).path).name == "a.json"
    assert [i.name for i in track.more_indices(options, tmp_path)] == ["name-b"]


def test_the_plan_runs_both_bulk_tasks_and_resolves_the_wildcard(tmp_path: Path) -> None:
    path = two_index_track(tmp_path / "track")
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": path}, None)}
    assert tasks["bulk-b"].ingest and tasks["bulk-a"].ingest
    assert tasks["bulk-b"].status == tasks["bulk-a"].status == "run"
    assert "bulk task 1" in tasks["bulk-b"].esdash and "into name-b" in tasks["bulk-b"].esdash
    assert "bulk task 2" in tasks["bulk-a"].esdash and "into name-a" in tasks["bulk-a"].esdash
    assert tasks["only-a"].status == "run" and "among" not in tasks["only-a"].esdash
    assert "searches 'name-*': name-a, name-b among the track's indices" in tasks["both"].esdash
    assert "'name-a,name-b': name-a, name-b" in tasks["listed"].esdash
    elsewhere = tasks["elsewhere"]
    assert elsewhere.status == "refused"
    assert "names none of the track's indices (name-a, name-b)" in (elsewhere.reason or "")
    steps = rally.RallyTrack().query_steps({"path": path})
    assert [(s.name, s.queries[0].index) for s in steps] == [
        ("only-a", "name-a"),
        ("both", "name-*"),
        ("listed", "name-a,name-b"),
    ]


def test_a_bulk_task_beside_searches_sending_to_two_indices_is_refused(tmp_path: Path) -> None:
    """A bulk task indexes during its block's searches into one index; one sending to both
    indices of the track is refused, saying so."""
    search = {"operation-type": "search", "index": "name-a", "body": {"query": {"match_all": {}}}}
    schedule = [
        {"name": "bulk-all", "operation": {"operation-type": "bulk"}},
        {
            "parallel": {
                "tasks": [
                    {"name": "more-bulk", "operation": {"operation-type": "bulk"}},
                    {"name": "during", "operation": {"name": "during", **search}},
                ]
            }
        },
    ]
    path = two_index_track(tmp_path / "track", schedule)
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": path}, None)}
    assert tasks["bulk-all"].status == "run" and "name-a, name-b" in tasks["bulk-all"].esdash
    refused = tasks["more-bulk"]
    assert refused.status == "refused" and refused.reason_kind == "unsupported_operation"
    assert "sending to several indices (name-a, name-b)" in (refused.reason or "")
    assert tasks["during"].status == "run"
    assert tasks["during"].status == "run"


def test_make_plan_holds_every_index_with_its_own_fingerprint(tmp_path: Path) -> None:
    path = two_index_track(tmp_path / "track")
    session = parse_session(
        {"name": "t", "track": {"name": "rally", "path": str(path)}}, tmp_path / "s.toml"
    )
    track = rally.RallyTrack()
    options = session.track.options
    corpus = track.corpus(options, tmp_path / "cache")
    distribution = Distribution(tmp_path, "8.19.21", "integ-test-zip", (), scripting=False)
    plan = make_plan(
        session,
        track,
        corpus,
        track.query_steps(options),
        distribution,
        ranks=2,
        seed=1,
        offsets_dir=tmp_path / "offsets",
    )
    assert [(i.name, i.corpus_documents, i.op_type) for i in plan.all_indices] == [
        ("name-b", 7, "index"),
        ("name-a", 5, "index"),
    ]
    assert plan.index_names == "name-b,name-a" and plan.documents_total == 12
    stamps = [i.body["mappings"]["_meta"]["esdash"] for i in plan.all_indices]
    corpora = [s["fingerprint"]["corpus"]["documents"] for s in stamps]
    assert corpora == [7, 5]
    # bench.json round trip; a plan written before several indices still reads
    again = msgspec.json.decode(msgspec.json.encode(plan), type=BenchPlan)
    assert again.more_indices == plan.more_indices
    old = msgspec.json.decode(msgspec.json.encode(plan))
    del old["more_indices"]
    older = msgspec.json.decode(msgspec.json.encode(old), type=BenchPlan)
    assert older.more_indices == () and [i.name for i in older.all_indices] == ["name-b"]


@pytest.mark.parametrize("missing", ["a.json", "b.json"])
def test_a_missing_corpus_of_either_index_is_refused_up_front(tmp_path: Path, missing: str) -> None:
    path = two_index_track(tmp_path / "track")
    (path / missing).unlink()
    status = rally.RallyTrack().corpus_check({"path": path}, tmp_path / "cache")
    assert len(status.problems) == 1 and missing in status.problems[0][1]


def data_stream_track(directory: Path, with_index: bool) -> Path:
    """A data stream ``ds-x`` (corpus ``target-data-stream``), beside index ``name-a`` or
    alone, and a search of ``ds-*``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "index.json").write_text("{}")
    write_docs(directory / "a.json", 5, "a")
    write_docs(directory / "s.json", 9, "s")
    corpora = [
        {
            "name": "stream",
            "target-data-stream": "ds-x",
            "documents": [{"source-file": "s.json", "document-count": 9}],
        }
    ]
    track: dict[str, Any] = {"version": 2, "data-streams": [{"name": "ds-x"}]}
    if with_index:
        track["indices"] = [{"name": "name-a", "body": "index.json"}]
        corpora.append(
            {
                "name": "plain",
                "target-index": "name-a",
                "documents": [{"source-file": "a.json", "document-count": 5}],
            }
        )
    search = {"operation-type": "search", "index": "ds-*", "body": {"query": {"match_all": {}}}}
    track["corpora"] = corpora
    track["schedule"] = [
        {"name": "bulk", "operation": {"operation-type": "bulk"}},
        {"operation": {"name": "streams", **search}, "time-period": 1},
    ]
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def plan_of(tmp_path: Path, path: Path) -> BenchPlan:
    session = parse_session(
        {"name": "t", "track": {"name": "rally", "path": str(path)}}, tmp_path / "s.toml"
    )
    track = rally.RallyTrack()
    options = session.track.options
    return make_plan(
        session,
        track,
        track.corpus(options, tmp_path / "cache"),
        track.query_steps(options),
        Distribution(tmp_path, "3.4.0", "integ-test-zip", (), scripting=False),
        ranks=1,
        seed=1,
        offsets_dir=tmp_path / "offsets",
    )


def test_a_data_stream_beside_an_index_is_ingested_with_create_actions(tmp_path: Path) -> None:
    path = data_stream_track(tmp_path / "track", with_index=True)
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": path}, None)}
    assert "data stream ds-x (as create actions)" in tasks["bulk"].esdash
    assert "searches 'ds-*': ds-x among the track's indices" in tasks["streams"].esdash
    plan = plan_of(tmp_path, path)
    assert [(i.name, i.corpus_documents, i.op_type) for i in plan.all_indices] == [
        ("ds-x", 9, "create"),
        ("name-a", 5, "index"),
    ]
    assert plan.data_streams == ("ds-x",) and plan.data_stream


def test_a_track_of_data_streams_only_runs_with_the_stream_as_its_main_target(
    tmp_path: Path,
) -> None:
    path = data_stream_track(tmp_path / "track", with_index=False)
    plan = plan_of(tmp_path, path)
    assert plan.index == "ds-x" and plan.data_stream and plan.more_indices == ()
    assert plan.main_index.op_type == "create" and plan.data_streams == ("ds-x",)
    (step,) = plan.steps
    assert step.queries[0].index == "ds-*" and step.queries[0].unsupported is None


def test_elasticsearch_without_the_data_streams_module_refuses_the_stream(tmp_path: Path) -> None:
    path = data_stream_track(tmp_path / "track", with_index=True)
    es_zip = Distribution(tmp_path, "8.19.21", "integ-test-zip", ("x-pack-core",), scripting=False)
    es_full = Distribution(
        tmp_path, "8.19.21", "default", ("x-pack-core", "data-streams"), scripting=False
    )
    opensearch = Distribution(tmp_path, "3.4.0", "integ-test-zip", (), scripting=False)
    bulk = {t.name: t for t in rally.RallyTrack().plan({"path": path}, es_zip)}["bulk"]
    assert (bulk.status, bulk.reason_kind) == ("refused", "module")
    assert "data stream ds-x needs the data-streams module" in (bulk.reason or "")
    for distribution in (es_full, opensearch):
        tasks = rally.RallyTrack().plan({"path": path}, distribution)
        assert all(t.status == "run" for t in tasks), tasks
