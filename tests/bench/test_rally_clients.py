"""A Rally task's ``clients`` and ``cache``, run for real on the shared 2-node cluster.

Two bench ranks (one per node): a task with 1 client leaves the second rank idle, a task with
5 clients runs 3 and 2 of them as concurrent connections, and the request cache is used as
Rally uses it: ``cache: false`` is sent as ``request_cache=false`` (no hits), a search without
``cache`` leaves it to the index (size-0 searches are cached by default), ``cache: true`` asks
for it even with hits returned.  The cache counters come from the index stats rank 0 reads
around every step.  Index stats and a raw request run as timed steps too, and the report's
``rally`` format gives the run's numbers under Rally's metric names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

pytestmark = [pytest.mark.es, pytest.mark.mpi]

#: No global warm-up: its searches (size-0 aggregations, cached by the index default) would
#: still land in the request cache at the first step's start and count as that step's hits.
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 100\n'
    'warmup_max = "0s"\n'
)
AGG = {"size": 0, "aggs": {"by": {"terms": {"field": "colour"}}}}


def search(name: str, body: dict, clients: int, **more: object) -> dict:
    return {
        "operation": {"name": name, "operation-type": "search", "body": body, **more},
        "clients": clients,
        "warmup-time-period": 0,
        "time-period": 2,
    }


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    index = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"colour": {"type": "keyword"}, "n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(index))
    colours = ("red", "green", "blue")
    docs = "".join(json.dumps({"colour": colours[i % 3], "n": i}) + "\n" for i in range(300))
    (directory / "docs.json").write_text(docs)
    track = {
        "version": 2,
        "indices": [{"name": "paint", "body": "index.json"}],
        "corpora": [
            {
                "name": "paint",
                "documents": [
                    {"source-file": "docs.json", "document-count": 300, "target-index": "paint"}
                ],
            }
        ],
        # Rank 0 reads the cache counters at each step's edges while the next step already
        # runs: a step that must show no hits sits between steps that make none (index
        # stats, health), so a reading a moment late cannot pick up a neighbour's hits.
        "schedule": [
            {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 100}},
            search("five-clients", {"query": {"term": {"colour": "red"}}}, 5, cache=True),
            search("agg-default", AGG, 2),
            {
                "operation": {"name": "paint-stats", "operation-type": "index-stats"},
                "clients": 2,
                "time-period": 2,
            },
            search("one-client", {"query": {"match_all": {}}}, 1, cache=False),
            search("agg-uncached", AGG, 2, cache=False),
            {
                "operation": {
                    "name": "health",
                    "operation-type": "raw-request",
                    "path": "/_cluster/health",
                    "request-params": {"wait_for_status": "yellow"},
                },
                "time-period": 2,
            },
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_clients_are_spread_over_the_ranks_and_cache_is_sent_as_rally_does(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    track = write_track(shared_tmp / "paint-track")
    session = write_session(
        shared_tmp, "clients", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    run = next(
        Path(line.split(": ", 1)[1]).parent
        for line in result.stdout.splitlines()
        if line.startswith("results: ")
    )
    results = json.loads((run / "results.json").read_text())
    steps = {step["name"]: step for step in results["steps"]}
    assert [steps[n]["planned"]["clients"] for n in steps] == [5, 2, 2, 1, 2, 1]
    assert all(step["status"] == "measured" for step in steps.values()), steps

    # which rank ran how many clients: 1 -> 1+0, 5 -> 3+2, 2 -> 1+1
    ranks = results["per_rank"]
    both = {"agg-default": 1, "agg-uncached": 1, "paint-stats": 1}
    assert {r: ranks[r]["step_clients"] for r in ranks} == {
        "1": {"one-client": 1, "five-clients": 3, **both, "health": 1},
        "2": {"one-client": 0, "five-clients": 2, **both, "health": 0},
    }
    one = steps["one-client"]["queries"]["one-client"]
    assert set(one["per_rank"]) == {"1"}  # the idle rank sent nothing
    five = steps["five-clients"]["queries"]["five-clients"]
    assert set(five["per_rank"]) == {"1", "2"} and five["failed"] == 0

    # index stats and a raw request are timed requests like searches
    for name in ("paint-stats", "health"):
        numbers = steps[name]["queries"][name]
        assert numbers["ok"] > 0 and numbers["failed"] == 0, numbers

    def cache(name: str) -> dict:
        return steps[name]["caches"]

    # cache: false -> no request-cache hits; the index default caches size-0 searches;
    # cache: true caches a search returning hits too
    assert cache("one-client")["request_cache_hits"] == 0
    assert cache("agg-uncached")["request_cache_hits"] == 0
    assert cache("agg-default")["request_cache_hits"] > 0
    assert cache("five-clients")["request_cache_hits"] > 0

    # the same run under Rally's metric names: one entry per task, the values esdash's own
    out = shared_tmp / "clients-report"
    esdash(
        "report", str(run), "--format", "rally", "--no-figures", "--out", str(out), env_runs=runs
    )
    document = json.loads((out / "rally.json").read_text())
    assert document["schema"] == "esdash-rally-metrics/2"
    (only,) = document["runs"]
    metrics = {entry["task"]: entry for entry in only["op_metrics"]}
    assert list(metrics) == ["bulk", *steps]
    assert metrics["bulk"]["throughput"]["unit"] == "docs/s"
    five_metrics = metrics["five-clients"]
    assert five_metrics["throughput"]["unit"] == "ops/s"
    assert five_metrics["throughput"]["definition"].startswith("rally:")
    assert five_metrics["esdash"]["requests_per_s"] == five["throughput"]["requests_per_s"]
    assert five_metrics["latency"]["50_0"] == five["latency"]["p50"]
    assert five_metrics["service_time"]["100_0"] == five["service_time"]["max"]
    assert five_metrics["error_rate"] == 0
    assert five_metrics["esdash"]["clients"] == 5
