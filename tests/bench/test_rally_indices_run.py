"""A Rally track with two indices and two bulk tasks, run on the shared 2-node cluster.

Indices ``rix-a`` (40 documents) and ``rix-b`` (60), each filled by its own bulk task from
its own corpus, then a search of ``rix-*``: both indices hold their documents, the
wildcard search ran without failures and hits the documents of both, the results count
what each index received, and a second run reuses both indices by their own fingerprints.
The plan of such a track is tested without a cluster in
``tests/tracks/test_rally_indices.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.http import Connection, Target
from esdash.plugin.control import ControlClient
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

COUNTS = {"rix-a": 40, "rix-b": 60}
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 25\n'
    'warmup_max = "0s"\n'
)
MATCH_ALL = {"query": {"match_all": {}}, "track_total_hits": True}


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"source": {"type": "keyword"}, "n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(body))
    corpora = []
    for name, count in COUNTS.items():
        docs = "".join(json.dumps({"source": name, "n": n}) + "\n" for n in range(count))
        (directory / f"{name}.json").write_text(docs)
        corpora.append(
            {
                "name": f"{name}-corpus",
                "documents": [
                    {"source-file": f"{name}.json", "document-count": count, "target-index": name}
                ],
            }
        )
    track = {
        "version": 2,
        "indices": [{"name": name, "body": "index.json"} for name in COUNTS],
        "corpora": corpora,
        "schedule": [
            {"operation": {"operation-type": "delete-index"}},
            {"operation": {"operation-type": "create-index"}},
            *(
                {
                    "name": f"bulk-{name}",
                    "operation": {"operation-type": "bulk", "corpora": f"{name}-corpus"},
                }
                for name in COUNTS
            ),
            {
                "operation": {
                    "name": "all-rix",
                    "operation-type": "search",
                    "index": "rix-*",
                    "body": MATCH_ALL,
                },
                "warmup-time-period": 0,
                "time-period": 2,
            },
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


@pytest.fixture(scope="module")
def cluster(shared_cluster: tuple[Path, Path]) -> Iterator[tuple[Path, Path, ControlClient]]:
    """The shared cluster, its runs directory and a control client; the rix indices are
    removed afterwards (they would only take room from later tests)."""
    run = RunDir.open(shared_cluster[0])
    control = control_client(run, "elasticsearch", run.read_topology().nodes)
    try:
        yield shared_cluster[0], shared_cluster[1], control
    finally:
        for name in COUNTS:
            control.delete_index(name)
        control.close()


def run_once(cluster: tuple[Path, Path, ControlClient], session: Path) -> tuple[dict, list]:
    """One ``esdash run --cluster``: its results.json and stream records."""
    run, runs, _ = cluster
    result = esdash("run", str(session), "--cluster", str(run), env_runs=runs, timeout=300)
    found = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
    assert found, result.stdout + result.stderr
    directory = Path(found[0].split(": ", 1)[1]).parent
    results = json.loads((directory / "results.json").read_text())
    stream = [json.loads(line) for line in (directory / "stream.jsonl").read_text().splitlines()]
    return results, stream


def search_total(run: Path, target: str) -> int:
    node = RunDir.open(run).read_topology().nodes[0]
    connection = Connection(Target(node.name, node.http_address, True), pki.read_credentials(run))
    try:
        status, body = connection.request(
            "POST", f"/{target}/_search", json.dumps(MATCH_ALL).encode(), "application/json"
        )
    finally:
        connection.close()
    assert status == 200, body
    return int(json.loads(body)["hits"]["total"]["value"])


def test_two_indices_two_bulk_tasks_and_a_wildcard_search(
    cluster: tuple[Path, Path, ControlClient], shared_tmp: Path
) -> None:
    control = cluster[2]
    track = write_track(shared_tmp / "rix-track")
    session = write_session(
        shared_tmp, "rix", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    for name in COUNTS:  # whatever an earlier session left: start from no rix index
        control.delete_index(name)

    results, stream = run_once(cluster, session)
    for name, count in COUNTS.items():
        assert control.count(name) == count, name
    assert results["ingest"]["docs_sent"] == sum(COUNTS.values())
    assert results["ingest"]["per_index"] == COUNTS
    events = {r["kind"]: r["message"] for r in stream if r["type"] == "event"}
    assert "index rix-a created" in events["index"] and "index rix-b created" in events["index"]
    (step,) = results["steps"]
    numbers = step["queries"]["all-rix"]
    assert step["status"] == "measured" and numbers["ok"] > 0 and numbers["failed"] == 0
    # the step's search, sent as the run sent it, hits the documents of both indices
    assert search_total(cluster[0], "rix-*") == sum(COUNTS.values())

    # the same session again: each index is reused by its own fingerprint
    results, stream = run_once(cluster, session)
    events = {r["kind"]: r["message"] for r in stream if r["type"] == "event"}
    for name, count in COUNTS.items():
        assert f"index {name} reused with {count} documents" in events["index"]
        assert control.count(name) == count
    assert results["steps"][0]["queries"]["all-rix"]["failed"] == 0
