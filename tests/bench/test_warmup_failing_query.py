"""A global warm-up whose query fails every request says so, on the shared cluster.

Such a query can never converge; before, the warm-up waited for it until ``warmup_max`` and
nothing said why.  Now rank 0 names it with the server's message (a warning in the stream)
and does not wait for it; its step's own warm-up then fails with the same message.  Which
round ends the warm-up depends on the machine (the good query must converge, or the bound
ends it), so this run bounds it at a few seconds; tests/bench/test_warmup_judge.py pins the
decision itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

pytestmark = [pytest.mark.es, pytest.mark.mpi]

BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 100\n'
    'warmup_max = "6s"\nwarmup_round = "1s"\n'
)
#: A number range with a bound that is no number: HTTP 400 for every request.
BROKEN = {"query": {"range": {"n": {"gte": "not-a-number"}}}}


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(body))
    (directory / "docs.json").write_text("".join(f'{{"n": {i}}}\n' for i in range(100)))
    documents = [{"source-file": "docs.json", "document-count": 100, "target-index": "warm"}]

    def search(name: str, query: dict) -> dict:
        return {"operation": {"name": name, "operation-type": "search", "body": query}}

    track = {
        "version": 2,
        "indices": [{"name": "warm", "body": "index.json"}],
        "corpora": [{"name": "warm", "documents": documents}],
        "schedule": [
            {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 100}},
            search("good", {"query": {"match_all": {}}}),
            {**search("broken", BROKEN), "warmup-iterations": 1, "iterations": 1},
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_a_query_failing_every_warm_up_request_is_named_not_waited_for(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    track = write_track(shared_tmp / "warm-track")
    session = write_session(
        shared_tmp, "warmfail", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs, check=False)
    line = next((x for x in result.stdout.splitlines() if x.startswith("results: ")), None)
    assert line is not None, result.stdout + result.stderr
    run = Path(line.split(": ", 1)[1]).parent
    results = json.loads((run / "results.json").read_text())
    warm = results["global_warmup"]
    assert warm["queries"]["broken"]["errors"] > 0 and not warm["queries"]["broken"]["converged"]
    records = [json.loads(x) for x in (run / "stream.jsonl").read_text().splitlines()]
    said = [
        r["message"]
        for r in records
        if r["type"] == "event" and r["kind"] == "warmup" and r["level"] == "warning"
    ]
    assert any("every request of broken failed" in m and "HTTP 400" in m for m in said), said
    # the good query's step measured; the broken one's own warm-up failed with the message
    steps = {step["name"]: step for step in results["steps"]}
    assert steps["good"]["status"] == "measured", steps["good"]
    assert steps["broken"]["status"].startswith("warm-up failed"), steps["broken"]
