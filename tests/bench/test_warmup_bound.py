"""The global warm-up keeps its bound and says why it stops, after the rounds it is about.

Issue 29, item 1: ``warmup_max = "10s"`` used to run a 30 s round (the bound allowed "at least
one round" of the session's 5 s per query), and the "ends without converging" warning came
before that round ran.  Now the rounds shrink until the judged rounds fit in the bound, a
bound too short to judge (fewer than 3 rounds of 1 s per query) is refused by ``session
check``, and the verdict is an event after the last round, with its figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.bench.warmup import WarmupSchedule
from esdash.cluster.jvmload import jvm_cpu
from esdash.cluster.rank import JVM_SAMPLE_SECONDS
from esdash.stats.convergence import (
    JUDGED_ROUNDS,
    MIN_SLOT,
    bound_problem,
    fitted_slot,
    needed_seconds,
)


@pytest.mark.parametrize(
    ("queries", "slot", "bound"),
    [
        (6, 5.0, 10.0),
        (6, 5.0, 18.0),
        (6, 5.0, 300.0),
        (1, 5.0, 10.0),
        (3, 2.0, 10.0),
        (7, 5.0, 1e4),
    ],
)
def test_the_rounds_never_run_past_the_bound(queries: int, slot: float, bound: float) -> None:
    schedule = WarmupSchedule.fitting(0.0, tuple(f"q{i}" for i in range(queries)), slot, bound)
    assert schedule.max_rounds * schedule.round_seconds <= bound + 1e-9
    assert MIN_SLOT <= schedule.slot <= slot
    if bound_problem(queries, bound) is None:
        assert schedule.max_rounds >= JUDGED_ROUNDS  # enough rounds to judge
    if bound >= JUDGED_ROUNDS * queries * slot:
        assert schedule.slot == slot  # a bound that allows the asked slot keeps it


def test_a_bound_too_short_to_judge_is_named_with_the_minimum() -> None:
    assert needed_seconds(6) == 18.0
    assert fitted_slot(5.0, 6, 18.0) == 1.0
    problem = bound_problem(6, 10.0)
    assert problem is not None
    assert "at least 18s" in problem and "'0s' for no global warm-up" in problem
    assert bound_problem(6, 18.0) is None and bound_problem(6, 0.0) is None


def test_session_check_refuses_a_bound_too_short_to_judge(tmp_path: Path) -> None:
    session = write_session(
        tmp_path, "shortwarm", 1, tables='[benchmark]\nwarmup_max = "5s"\n', ports=False
    )
    result = esdash("session", "check", str(session), env_runs=tmp_path / "runs", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    line = next(x for x in result.stderr.splitlines() if "benchmark.warmup_max" in x)
    assert "cannot tell whether" in line and "set warmup_max to at least" in line


BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 100\n'
    'queries = "steps.json"\nwarmup_max = "10s"\n'
)


@pytest.mark.es
@pytest.mark.mpi
def test_a_ten_second_bound_warms_at_most_ten_seconds(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    """On the shared cluster: two queries, the session's 5 s rounds shrunk to fit 10 s."""
    cluster_run, runs = shared_cluster
    directory = shared_tmp / "warm-bound"
    directory.mkdir()
    queries = [
        {"name": "all", "body": {"query": {"match_all": {}}}},
        {"name": "term", "body": {"query": {"term": {"PatientSex": "F"}}}},
    ]
    (directory / "steps.json").write_text(json.dumps([{"name": "s", "search_queries": queries}]))
    session = write_session(
        directory, "warmbound", 2, track='name = "mri"\ndocuments = 1500', tables=BENCH
    )
    esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    run = max(runs.glob("warmbound-*"), key=lambda p: p.stat().st_mtime)
    warm = json.loads((run / "results.json").read_text())["global_warmup"]
    assert warm["bound_seconds"] == 10.0
    assert warm["seconds"] <= 10.0, warm
    assert warm["rounds"] >= JUDGED_ROUNDS or warm["converged"], warm
    events = [
        json.loads(line)
        for line in (run / "stream.jsonl").read_text().splitlines()
        if '"kind":"warmup"' in line.replace(" ", "")
    ]
    phases = {
        json.loads(line)["data"]["phase"]: json.loads(line)["t"]
        for line in (run / "stream.jsonl").read_text().splitlines()
        if '"kind":"phase"' in line.replace(" ", "")
    }
    assert phases["steps"] - phases["warmup"] <= 10.0 + 3.0  # the lead and the gap
    verdict = events[-1]
    assert verdict["t"] >= phases["steps"] - 1.0  # after the rounds, not before them
    assert verdict["message"].startswith("global warm-up converged") or (
        "without converging" in verdict["message"]
    ), verdict
    assert "%/min" in verdict["message"] and "JIT" in verdict["message"], verdict  # the figures


@pytest.mark.es
@pytest.mark.mpi
def test_every_node_reports_what_its_jvm_compiles(shared_cluster: tuple[Path, Path]) -> None:
    """The warm-up's JIT figure comes from each node's status, refreshed by its rank."""
    cluster_run, _ = shared_cluster
    statuses = [json.loads(p.read_text()) for p in sorted(cluster_run.glob("nodes/*/status.json"))]
    assert len(statuses) >= 2, statuses
    for status in statuses:
        jvm = status["jvm"]
        assert jvm["compiler"] > 0 and jvm["other"] > 0, jvm  # a started JVM has compiled
        assert time.time() - jvm["time"] < 10 * JVM_SAMPLE_SECONDS, jvm


def test_cpu_by_thread_kind_of_a_process_and_of_none() -> None:
    """A Python process has no JIT threads: everything is "other"; a gone pid: None.

    (A child of its own: below the test process itself run the shared clusters' JVMs.)
    """
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sum(range(3_000_000)); print(); sys.stdout.flush(); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline()  # its CPU is spent
        reading = jvm_cpu(child.pid)
        assert reading is not None
        assert reading.compiler == 0.0 and reading.other > 0, reading
    finally:
        child.kill()
        child.wait()
    assert jvm_cpu(child.pid) is None
