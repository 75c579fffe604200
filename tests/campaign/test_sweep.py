"""`esdash sweep` for real: a tiny campaign is interrupted, resumed and reported.

One 1-node cluster, workers per node 1 and 2, no encryption, 500 documents, one query step
of one second (four for the second point, so the interrupt lands inside it).  The report's
numbers are checked against the runs' own results.json.  What is tested is the campaign's
machinery, not an engine: the cluster is the static engine's (``support/static_engine.py``),
a real node process the sweep starts, keeps across points and stops.
"""

from __future__ import annotations

import csv
import json
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import static_engine
from support.cli import ESDASH, esdash, write_session

from esdash.view import format as fmt
from esdash.view.campaign import read_progress

pytestmark = [pytest.mark.static_engine, pytest.mark.mpi]
ENV = static_engine.env()

STEPS = [
    {
        "name": "all",
        "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
        "warmup_time_secs": 0,
    }
]
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 250\n'
    'queries = "one-step.json"\n'
)
CAMPAIGN = """
name = "tiny"
session = "tinybase.toml"

[axes]
benchmark.workers_per_node = [1, 2]
encryption.mode = ["none"]

[per_value."benchmark.workers_per_node".2]
benchmark.duration = "4s"
"""


def summary(directory: Path) -> dict:
    for _ in range(20):
        try:
            return json.loads((directory / "campaign.json").read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    raise AssertionError(f"no readable campaign.json in {directory}")


def points(directory: Path) -> dict[int, dict]:
    return {p["values"]["benchmark.workers_per_node"]: p for p in summary(directory)["points"]}


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _stop(sweep: subprocess.Popen, runs: Path) -> None:
    """Leave nothing running, whatever happened: the sweep, then any cluster it started."""
    if sweep.poll() is None:
        sweep.send_signal(signal.SIGINT)
        try:
            sweep.wait(timeout=240)
        except subprocess.TimeoutExpired:
            sweep.kill()
            sweep.wait()
    for run_file in runs.glob("*/run.json"):
        if "campaign_cluster" in run_file.read_text() and static_engine.node_pids_under(
            run_file.parent
        ):
            esdash("cluster", "down", str(run_file.parent), env_runs=runs, check=False, env=ENV)


def test_tiny_campaign_is_resumable_and_its_report_matches_the_runs(shared_tmp: Path) -> None:
    root = shared_tmp / "sweep"
    root.mkdir()
    root.chmod(0o755)
    runs = root / "runs"
    (root / "one-step.json").write_text(json.dumps(STEPS))
    write_session(
        root,
        "tinybase",
        1,
        security=False,
        extra_cluster=static_engine.cluster_table(),
        track='name = "mri"\ndocuments = 500',
        tables=BENCH,
    )
    campaign = root / "tiny.toml"
    campaign.write_text(CAMPAIGN)
    directory = root / "tiny-campaign"  # not the default: the resume hint must name it

    # 1. interrupt the sweep while the first point measures (its ingest is done)
    sweep = subprocess.Popen(
        [*ESDASH, "sweep", str(campaign), "--dir", str(directory), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**ENV, "ESDASH_RUNS": str(runs)},
    )
    try:
        wait_for(
            lambda: (
                (directory / "campaign.json").exists()
                and points(directory)[1]["status"] == "running"
            ),
            300,
            "the first point to start",
        )
        live = summary(directory)
        assert live["state"] == "running"
        assert live["current"][0]["point"] == points(directory)[1]["id"]
        progress = read_progress(directory)  # as the dashboard reads it
        assert progress.state == "running" and progress.point_counts.running == 1
        assert progress.current[0].run == points(directory)[1]["run"]
        stream = Path(points(directory)[1]["run"], "stream.jsonl")
        wait_for(lambda: b'"measure"' in _read(stream), 180, "the first point to measure")
        sweep.send_signal(signal.SIGINT)
        output, _ = sweep.communicate(timeout=300)
    finally:
        _stop(sweep, runs)
    assert sweep.returncode == 130, output
    first = points(directory)
    assert first[1]["status"] == "interrupted" and first[2]["status"] == "pending", output
    assert summary(directory)["state"] == "interrupted"
    hint = next(line for line in output.splitlines() if "resume with: " in line)
    command = shlex.split(hint.split("resume with: ", 1)[1])
    assert command == ["esdash", "sweep", str(campaign), "--dir", str(directory)]
    assert static_engine.node_pids_under(Path(first[1]["cluster_run"])) == []  # stopped

    # 2. resume with the printed command; the interrupted first point ingests again, so
    #    that its completed run carries the ingest figures
    resumed = esdash(*command[1:], env_runs=runs, timeout=600, env=ENV)
    assert "2 points, 0 completed, 2 to run on 1 cluster(s)" in resumed.stdout
    assert "workers_per_node=1 mode=none: running (re-ingests)" in resumed.stdout
    assert "workers_per_node=2 mode=none: running (reuses the index)" in resumed.stdout
    final = points(directory)
    assert final[1]["status"] == "completed" and final[1]["attempts"] == 2
    assert final[1]["run"] != first[1]["run"]
    assert final[2]["status"] == "completed" and final[2]["attempts"] == 1
    assert summary(directory)["state"] == "finished"
    assert read_progress(directory).counts.completed == 2
    # a completed point is not run again
    again = esdash("sweep", str(campaign), "--dir", str(directory), env_runs=runs, env=ENV)
    assert "0 to run" in again.stdout

    # 3. the report's numbers are the runs' numbers
    out = root / "report"
    esdash(
        "report",
        str(directory),
        "--format",
        "md,html,csv,json",
        "--out",
        str(out),
        env_runs=runs,
        env=ENV,
    )
    report = json.loads((out / "report.json").read_text())
    results = {w: json.loads(Path(p["run"], "results.json").read_text()) for w, p in final.items()}
    rows = {r["workers_per_node"]: r for r in report["tables"]["queries"]["records"]}
    markdown = (out / "report.md").read_text()
    for workers, result in results.items():
        op = result["steps"][0]["queries"]["all"]
        row = rows[workers]
        assert row["requests"] == op["requests"] and row["runs"] == 1
        # one definition of req/s: successful requests / seconds measured, as results.json
        assert row["throughput_mean"] == op["throughput"]["requests_per_s"]
        assert row["latency_gmean_ms"] == op["latency"]["gmean"]
        assert row["latency_gstd"] == op["latency"]["gstd"]
        assert row["latency_p1_ms"] == op["latency"].get("p1")
        assert row["latency_p99_ms"] == op["latency"].get("p99")
        assert f"| {fmt.ms(fmt.from_ms(op['latency']['gmean']))} |" in markdown
    ingest = report["tables"]["ingest"]["records"]
    assert [r["workers_per_node"] for r in ingest] == [1]  # the second point reused the index
    assert ingest[0]["docs"] == 500
    assert ingest[0]["duration_s_mean"] == results[1]["ingest"]["duration_s"]
    with (out / "report.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 2
    for line in table:
        op = results[int(line["workers_per_node"])]["steps"][0]["queries"]["all"]
        assert float(line["requests_per_s"]) == op["throughput"]["requests_per_s"]
        assert float(line["latency_gmean_ms"]) == op["latency"]["gmean"]
    figures = [f for figure in report["figures"] for f in figure["files"].values()]
    assert any("latency-all" in f for f in figures) and any("timeline" in f for f in figures)
    assert any("throughput-vs-workers" in f for f in figures)
    for name in figures:
        data = (out / name).read_bytes()
        if name.endswith(".png"):
            assert data.startswith(b"\x89PNG\r\n\x1a\n"), name
        else:
            assert data.lstrip().startswith(b"<?xml") and b"<svg" in data[:2000], name
    html = (out / "report.html").read_text()
    assert "<table>" in html and 'src="figures/' in html
    assert "[benchmark]" in markdown  # the exact session of every point

    # 4. compare the two points: numbers straight from their results
    compared = esdash(
        "compare", final[1]["run"], final[2]["run"], "--format", "json", env_runs=runs
    )
    rows = json.loads(compared.stdout)["comparisons"]
    rate = next(r for r in rows if r["metric"] == "req/s")
    one = results[1]["steps"][0]["queries"]["all"]["throughput"]["requests_per_s"]
    two = results[2]["steps"][0]["queries"]["all"]["throughput"]["requests_per_s"]
    assert rate["baseline"] == one and rate["value"] == two
    assert rate["pct"] == pytest.approx((two / one - 1) * 100)
