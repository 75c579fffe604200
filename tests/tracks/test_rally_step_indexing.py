"""A Rally bulk task in a ``parallel`` block with searches indexes during their query step.

Planned without a cluster on small tracks written here: the block is one query step of its
searches that carries the bulk task as an indexing load (its corpus, clients, bulk size,
rate, pipeline, ``looped`` and ``ingest-percentage``), the bulk's plan row says "run" and
what happens (``completed-by`` included), and its documents are not part of any index's
ingest.  How a load's documents are split over its clients is checked here too; the run
itself is ``tests/bench/test_rally_step_indexing_run.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.tracks import rally

from esdash.bench.slices import Batch
from esdash.bench.step_indexing import bulk_path, client_numbers, documents_to_send, trimmed
from esdash.bench.worker import rank_share
from esdash.plugin.corpus_slices import Slice
from esdash.plugin.values import StepIndexing

SEARCH = {"operation-type": "search", "body": {"query": {"match_all": {}}}}


def write_docs(path: Path, count: int, kind: str) -> None:
    path.write_text("".join(json.dumps({"kind": kind, "n": n}) + "\n" for n in range(count)))


def track(directory: Path, block: dict[str, Any], search: dict[str, Any] | None = None) -> Path:
    """Index ``items`` filled from corpus ``base`` (30 documents) by bulk task ``initial``,
    then ``block``: a parallel block of a bulk task ``during`` (corpus ``extra``, 20
    documents, plus ``block``'s properties) and search ``q`` (``search`` for its task)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_docs(directory / "base.json", 30, "base")
    write_docs(directory / "extra.json", 20, "extra")
    bulk = {"operation-type": "bulk", "corpora": "extra", **block.pop("operation", {})}
    task = {"name": "during", "operation": bulk, **block.pop("task", {})}
    query = search or {"operation": {"name": "q", **SEARCH}, "time-period": 3}
    spec = {
        "version": 2,
        "indices": [{"name": "items"}],
        "corpora": [
            {
                "name": name,
                "documents": [
                    {
                        "source-file": f"{name}.json",
                        "document-count": count,
                        "target-index": "items",
                    }
                ],
            }
            for name, count in (("base", 30), ("extra", 20))
        ],
        "schedule": [
            {"name": "initial", "operation": {"operation-type": "bulk", "corpora": "base"}},
            {"parallel": {**block, "tasks": [task, query]}},
        ],
    }
    (directory / "track.json").write_text(json.dumps(spec))
    return directory


def planned(path: Path) -> dict[str, Any]:
    return {t.name: t for t in rally.RallyTrack().plan({"path": path}, None)}


def test_the_bulk_task_indexes_during_the_step_of_the_searches(tmp_path: Path) -> None:
    path = track(
        tmp_path,
        {
            "completed-by": "q",
            "operation": {"bulk-size": 5, "pipeline": "stamp", "ingest-percentage": 50},
            "task": {"clients": 2, "target-throughput": 4},
        },
    )
    tasks = planned(path)
    assert {t.status for t in tasks.values()} == {"run"}
    during = tasks["during"]
    assert during.step is not None and during.step.name == "q" and not during.ingest
    text = during.esdash
    assert "indexes extra into items during the searches of query step 'q'" in text
    assert "2 client(s)" in text and "bulk-size 5" in text and "pipeline stamp" in text
    assert "target-throughput 4 bulk requests/s" in text and "50 % of each client's part" in text
    assert "the step ends with its searches (completed-by q)" in text
    assert "bulk task(s) during index during the step" in tasks["q"].esdash

    (step,) = rally.RallyTrack().query_steps({"path": path})
    assert step.name == "q" and [q.name for q in step.queries] == ["q"] and step.duration == 3
    assert step.indexing == (
        StepIndexing(
            "during",
            "items",
            clients=2,
            bulk_size=5,
            target_throughput=4.0,
            pipeline="stamp",
            ingest_percentage=50.0,
        ),
    )
    # the ingest sends the base corpus only; the step sends the extra one
    corpus = rally.RallyTrack().corpus({"path": path}, tmp_path / "cache")
    assert corpus.documents == 30 and corpus.path == path / "base.json"
    corpora = rally.RallyTrack().step_corpora({"path": path}, tmp_path / "cache")
    assert {n: (c.path, c.documents) for n, c in corpora.items()} == {
        "during": (path / "extra.json", 20)
    }


def test_completed_by_the_bulk_task_measures_its_time_period(tmp_path: Path) -> None:
    """Rally ends the block with the bulk task: a bulk with a time-period sets the step's
    measured time; one without cannot be honoured exactly, and the plan says so."""
    timed = track(
        tmp_path / "timed",
        {"completed-by": "during", "task": {"time-period": 7, "warmup-time-period": 1}},
    )
    (step,) = rally.RallyTrack().query_steps({"path": timed})
    assert step.duration == 7
    assert "the step measures its time-period 7 s" in planned(timed)["during"].esdash

    untimed = track(tmp_path / "untimed", {"completed-by": "during"})
    (step,) = rally.RallyTrack().query_steps({"path": untimed})
    assert step.duration == 3  # the search's own time
    text = planned(untimed)["during"].esdash
    assert "completed-by this task, which esdash cannot honour exactly" in text
    assert "the step ends with its searches" in text


def test_a_looped_bulk_task_starts_its_part_again(tmp_path: Path) -> None:
    path = track(tmp_path, {"operation": {"looped": True}, "task": {"target-interval": 2}})
    tasks = planned(path)
    assert tasks["during"].status == "run"
    assert "looped (a client starts its part again when it is sent)" in tasks["during"].esdash
    assert "target-throughput 0.5 bulk requests/s" in tasks["during"].esdash
    (step,) = rally.RallyTrack().query_steps({"path": path})
    (load,) = step.indexing
    assert load.looped and load.bulk_size is None and load.ingest_percentage == 100


def test_a_bulk_task_beside_a_search_esdash_cannot_send_is_refused_for_its_reason(
    tmp_path: Path,
) -> None:
    """The search's queries come from a parameter source the track directory lacks: the
    bulk task has no step to index during, and is refused for the search's reason."""
    search = {
        "operation": {"name": "q", "operation-type": "search", "param-source": "knn-source"},
        "time-period": 3,
    }
    tasks = planned(track(tmp_path, {}, search))
    assert tasks["q"].reason_kind == tasks["during"].reason_kind == "track_py"
    reason = tasks["during"].reason or ""
    assert "it would index during the searches of its parallel block" in reason
    assert "esdash does not run q: its queries come from the parameter source" in reason


def test_a_bad_ingest_percentage_names_the_task(tmp_path: Path) -> None:
    path = track(tmp_path, {"operation": {"ingest-percentage": 150}})
    with pytest.raises(rally.BadInput, match=r"'ingest-percentage' must be in \(0, 100\]"):
        rally.RallyTrack().query_steps({"path": path})


@pytest.mark.parametrize(("clients", "workers"), [(1, 3), (3, 2), (5, 2), (4, 4), (7, 3)])
def test_every_client_of_a_load_runs_in_exactly_one_rank(clients: int, workers: int) -> None:
    numbers = [list(client_numbers(clients, workers, rank)) for rank in range(workers)]
    assert [len(n) for n in numbers] == [rank_share(clients, workers, r) for r in range(workers)]
    assert sorted(sum(numbers, [])) == list(range(clients))


def test_a_client_sends_its_share_of_its_part_rounded_up() -> None:
    part = Slice(0, 100, 1, 10, 10)
    assert documents_to_send(part, 100) == 10
    assert documents_to_send(part, 5) == 1
    assert documents_to_send(part, 25) == 3
    assert documents_to_send(Slice(0, 0, 1, 0, 0), 50) == 0


def test_a_batch_is_cut_to_its_first_documents() -> None:
    body = b"".join(b'{"index":{}}\n{"n":%d}\n' % n for n in range(4))
    cut = trimmed(Batch(body, 4, 7), 2)
    assert cut == Batch(b'{"index":{}}\n{"n":0}\n{"index":{}}\n{"n":1}\n', 2, 7)


def test_the_pipeline_is_sent_as_a_parameter_of_each_bulk_request() -> None:
    from esdash.rundir.records import PlannedIndexing

    load = PlannedIndexing(name="b", index="i", corpus_path="/c", corpus_documents=1)
    assert bulk_path(load) == "/_bulk"
    named = PlannedIndexing(
        name="b", index="i", corpus_path="/c", corpus_documents=1, pipeline="time stamp/1"
    )
    assert bulk_path(named) == "/_bulk?pipeline=time%20stamp%2F1"
