"""A Rally track with a composable template and a data stream, run on shared OpenSearch.

The track's ``create-composable-template`` task installs the template (rank 0, before the
ingest), the bulk task sends the corpus of ``target-data-stream`` as ``create`` actions (a
data stream refuses ``index``), and the template makes the stream on the first document.
A second run deletes the stream and ingests it anew, as Rally does.  (Elasticsearch's
integ-test zip lacks the data-streams module, so this runs on OpenSearch.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engines import Cluster, os_session
from support.cli import esdash

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

STREAM, DOCUMENTS = "dsr-metrics", 50
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 20\n'
    "warmup_max = 0\n"
)


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    template = {
        "index_patterns": ["dsr-*"],
        "data_stream": {},
        "priority": 500,
        "template": {
            "settings": {"number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {"properties": {"@timestamp": {"type": "date"}, "n": {"type": "long"}}},
        },
    }
    (directory / "template.json").write_text(json.dumps(template))
    docs = "".join(
        json.dumps({"@timestamp": 1_700_000_000_000 + n * 1000, "n": n}) + "\n"
        for n in range(DOCUMENTS)
    )
    (directory / "docs.json").write_text(docs)
    track = {
        "version": 2,
        "composable-templates": [
            {"name": "dsr-template", "index-pattern": "dsr-*", "template": "template.json"}
        ],
        "data-streams": [{"name": STREAM}],
        "corpora": [
            {
                "name": "metrics",
                "documents": [
                    {
                        "source-file": "docs.json",
                        "document-count": DOCUMENTS,
                        "target-data-stream": STREAM,
                    }
                ],
            }
        ],
        "schedule": [
            {"operation": {"operation-type": "create-composable-template"}},
            {"operation": {"operation-type": "bulk"}},
            {
                "operation": {
                    "name": "count-all",
                    "operation-type": "search",
                    "index": "dsr-*",
                    "body": {"size": 0, "track_total_hits": True},
                },
                "warmup-time-period": 0,
                "time-period": 2,
            },
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_a_data_stream_track_runs_and_is_ingested_anew(
    os_cluster: Cluster, shared_tmp: Path
) -> None:
    cluster = os_cluster
    cluster.request("DELETE", f"/_data_stream/{STREAM}")
    track = write_track(shared_tmp / "dsr-track")
    session = os_session(
        shared_tmp, "dsr", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    try:
        for _ in range(2):  # the second run finds the stream and makes it anew
            result = esdash(
                "run", str(session), "--cluster", str(cluster.run),
                env_runs=cluster.runs, check=False, timeout=300,
            )  # fmt: skip
            assert result.returncode == 0, result.stdout + result.stderr
            line = next(x for x in result.stdout.splitlines() if x.startswith("results: "))
            results = json.loads(Path(line.split(": ", 1)[1]).read_text())
            assert results["ingest"]["docs_sent"] == DOCUMENTS
            assert results["ingest"]["docs_rejected"] == 0
            (step,) = results["steps"]
            numbers = step["queries"]["count-all"]
            assert numbers["requests"] > 0 and numbers["errors"] == {}, numbers
            streams = cluster.ok("GET", f"/_data_stream/{STREAM}")["data_streams"]
            assert [s["name"] for s in streams] == [STREAM]
            cluster.ok("POST", f"/{STREAM}/_refresh")
            assert cluster.ok("GET", f"/{STREAM}/_count")["count"] == DOCUMENTS
        assert f"data stream {STREAM} deleted and ingested anew" in result.stdout
    finally:
        cluster.request("DELETE", f"/_data_stream/{STREAM}")
        cluster.request("DELETE", "/_index_template/dsr-template")
