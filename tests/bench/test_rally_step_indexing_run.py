"""A Rally bulk task in a ``parallel`` block with a search indexes during that search's step.

Run for real on the shared 2-node cluster with two bench ranks: bulk task ``initial``
ingests 60 documents, then a parallel block runs search ``q`` for a few seconds while bulk
task ``during`` (2 clients, one per rank, naming an ingest pipeline the track puts; one
without processors, as the test cluster has no processor modules, so a document sent with
a wrong pipeline name would be rejected) sends a second corpus of 40 documents.  The step's
results hold an op for the bulk task with the documents it indexed, from both ranks, each
rank its own documents; rally.json reports it in docs/s without errors; the search ran;
and the index holds exactly the ingest's documents plus those the step says it indexed.  The plan of
such blocks is tested without a cluster in ``tests/tracks/test_rally_step_indexing.py``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster.control import control_client
from esdash.plugin.control import ControlClient, ControlError
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INITIAL, EXTRA = 60, 40
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 25\n'
    'warmup_max = "0s"\n'
)


def write_track(directory: Path, index: str, pipeline: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"kind": {"type": "keyword"}, "n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(body))
    corpora = []
    for kind, count in (("initial", INITIAL), ("extra", EXTRA)):
        docs = "".join(json.dumps({"kind": kind, "n": n}) + "\n" for n in range(count))
        (directory / f"{kind}.json").write_text(docs)
        corpora.append(
            {
                "name": kind,
                "documents": [
                    {"source-file": f"{kind}.json", "document-count": count, "target-index": index}
                ],
            }
        )
    track = {
        "version": 2,
        "indices": [{"name": index, "body": "index.json"}],
        "corpora": corpora,
        "schedule": [
            {"operation": {"operation-type": "delete-index"}},
            {"operation": {"operation-type": "create-index"}},
            {
                "name": "put-pipeline",
                "operation": {
                    "operation-type": "put-pipeline",
                    "id": pipeline,
                    "body": {"description": "no processors", "processors": []},
                },
            },
            {"name": "initial", "operation": {"operation-type": "bulk", "corpora": "initial"}},
            {
                "parallel": {
                    "completed-by": "q",
                    "tasks": [
                        {
                            "name": "during",
                            "operation": {
                                "operation-type": "bulk",
                                "corpora": "extra",
                                "bulk-size": 10,
                                "pipeline": pipeline,
                            },
                            "clients": 2,
                        },
                        {
                            "name": "q",
                            "operation": {
                                "name": "match-everything",
                                "operation-type": "search",
                                "body": {"query": {"match_all": {}}},
                            },
                            "warmup-time-period": 0,
                            "time-period": 6,
                        },
                    ],
                }
            },
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


@pytest.fixture
def control(shared_cluster: tuple[Path, Path]) -> Iterator[ControlClient]:
    run = RunDir.open(shared_cluster[0])
    client = control_client(run, "elasticsearch", run.read_topology().nodes)
    try:
        yield client
    finally:
        client.close()


def test_a_bulk_task_indexes_during_the_search_of_its_parallel_block(
    shared_cluster: tuple[Path, Path], shared_tmp: Path, control: ControlClient
) -> None:
    cluster_run, runs = shared_cluster
    tag = uuid.uuid4().hex[:8]
    index, pipeline = f"during-{tag}", f"during-pipeline-{tag}"
    track = write_track(shared_tmp / f"during-track-{tag}", index, pipeline)
    session = write_session(
        shared_tmp, f"during-{tag}", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    try:
        result = esdash(
            "run", str(session), "--cluster", str(cluster_run), env_runs=runs, timeout=300
        )
        found = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
        assert found, result.stdout + result.stderr
        run = Path(found[0].split(": ", 1)[1]).parent
        results = json.loads((run / "results.json").read_text())
        assert results["ingest"]["docs"] == INITIAL
        # the summary printed at the end marks the bulk task's row: its docs/s are indexed
        assert any("during (bulk)" in line for line in result.stdout.splitlines())

        (step,) = results["steps"]
        assert step["name"] == "q" and step["planned"]["indexing"] == ["during"]
        assert step["status"] == "measured", step
        search = step["queries"]["match-everything"]
        assert search["ok"] > 0 and search["failed"] == 0
        bulk = step["queries"]["during"]
        indexed = bulk["docs"]
        assert 0 < indexed <= EXTRA and bulk["failed"] == 0 and not bulk["rejected_docs"]
        assert set(bulk["per_rank"]) == {"1", "2"}  # one client in each rank

        control.refresh(index)
        assert control.count(index) == INITIAL + indexed
        # the two clients sent different documents: every extra document once
        answer = control.request(
            "search extra",
            "POST",
            f"/{index}/_search",
            {
                "size": 0,
                "query": {"term": {"kind": "extra"}},
                "aggs": {"n": {"terms": {"field": "n", "size": 100}}},
            },
        )
        buckets = answer["aggregations"]["n"]["buckets"]
        assert len(buckets) == indexed and {b["doc_count"] for b in buckets} == {1}
        out = shared_tmp / f"during-report-{tag}"
        esdash(
            "report", str(run), "--format", "rally", "--no-figures", "--out", str(out),
            env_runs=runs,
        )  # fmt: skip
        (only,) = json.loads((out / "rally.json").read_text())["runs"]
        metrics = {entry["task"]: entry for entry in only["op_metrics"]}
        assert metrics["during"]["throughput"]["unit"] == "docs/s"
        assert metrics["during"]["error_rate"] == 0
        assert metrics["during"]["esdash"]["docs"] == indexed
        # the block's one search is reported under its task's name, as Rally names it
        assert metrics["q"]["operation"] == "match-everything"
        assert metrics["q"]["throughput"]["unit"] == "ops/s"
    finally:
        control.delete_index(index)
        with contextlib.suppress(ControlError):  # not there when the run never put it
            control.request("delete pipeline", "DELETE", f"/_ingest/pipeline/{pipeline}", None)
