"""``esdash run`` on OpenSearch end to end: the MRI track, all seven queries, brain_age too.

The session is the quickstart's (``sessions/quickstart-opensearch.toml``: OpenSearch, MRI,
default queries) made small: it attaches to the shared 2-node cluster and measures each step
for 2 s, so it checks behaviour, not numbers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tomllib
from engines import Cluster, os_session
from support.cli import esdash

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

REPO = Path(__file__).resolve().parents[2]
QUERIES = ("body_part", "vendor", "age", "body_part_resolution", "brain_age",
           "vendor_body_part", "age_weight")  # fmt: skip
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "1s"\nduration = "2s"\nbulk_size = 500\n'
    'warmup_max = 0\norder = "listed"\n'
)


def test_the_quickstart_session_is_opensearch_with_every_query() -> None:
    session = tomllib.loads((REPO / "sessions" / "quickstart-opensearch.toml").read_text())
    assert session["cluster"]["backend"] == "opensearch" and session["cluster"]["nodes"] == 3
    assert session["track"]["name"] == "mri" and "queries" not in session.get("benchmark", {})
    check = esdash("session", "check", str(REPO / "sessions" / "quickstart-opensearch.toml"),
                   env_runs=REPO / "runs")  # fmt: skip
    assert check.returncode == 0


def test_mri_run_has_all_seven_queries_with_throughput_and_percentiles(
    os_cluster: Cluster, shared_tmp: Path
) -> None:
    session = os_session(shared_tmp, "os-run", 2, track='name = "mri"\ndocuments = 2000',
                         tables=BENCH)  # fmt: skip
    result = esdash(
        "run", str(session), "--cluster", str(os_cluster.run), "--reingest",
        env_runs=os_cluster.runs, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    results_line = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
    results = json.loads(Path(results_line[0].split(": ", 1)[1]).read_text())
    assert results["status"] == "ok"
    assert results["ingest"]["docs_sent"] == 2000 and results["ingest"]["docs_rejected"] == 0
    steps = {step["name"]: step for step in results["steps"]}
    assert tuple(steps) == QUERIES
    for name in QUERIES:
        assert not steps[name]["unsupported"], (name, steps[name]["unsupported"])
        query = steps[name]["queries"][name]
        assert query["requests"] > 0 and query["errors"] == {}, name
        assert query["throughput"]["requests_per_s"] > 0, name
        latency = query["latency"]  # a percentile is there once enough samples support it
        shown = [latency[p] for p in ("p50", "p90", "p99", "p99.9") if p in latency]
        assert len(shown) >= 2 and latency["min"] > 0, (name, latency)
        assert shown == sorted(shown) and shown[-1] <= latency["max"], (name, latency)
        assert latency["count"] < 100 or "p99" in latency, (name, latency)
    summary = result.stdout
    for name in QUERIES:
        assert f"{name} " in summary
    assert "not run" not in summary


def test_client_side_abe_runs_on_opensearch(os_cluster: Cluster, shared_tmp: Path) -> None:
    """The ABE mode against OpenSearch: documents and queries encrypted on the client, the
    queries ABE can express measured without errors, the others reported as not possible."""
    key = shared_tmp / "os-abe.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    tables = f'[encryption]\nmode = "abe"\nkey_file = "{key}"\n' + BENCH
    session = os_session(
        shared_tmp, "os-abe", 2, track='name = "mri"\ndocuments = 800', tables=tables
    )
    result = esdash(
        "run", str(session), "--cluster", str(os_cluster.run), "--reingest",
        env_runs=os_cluster.runs, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("results: "))
    results = json.loads(Path(line.split(": ", 1)[1]).read_text())
    assert results["encryption"] == "abe" and results["ingest"]["docs_rejected"] == 0
    measured = [step for step in results["steps"] if step["queries"]]
    assert len(measured) >= 3  # ABE expresses most of the paper's queries
    for step in measured:
        for name, query in step["queries"].items():
            assert query["ok"] > 0 and query["errors"] == {}, (name, query["errors"])
    refused = [reason for step in results["steps"] for reason in step["unsupported"].values()]
    assert refused and all(r.startswith("not possible under ABE") for r in refused), refused
