"""`esdash submit` against a real Slurm with three emulated nodes (several slurmd).

The job's ranks start with ``srun --mpi=pmi2`` and spread over the three Slurm nodes; the
cluster is followed through the run directory and stopped with `esdash cluster down`, or by
Slurm itself (``scancel``: SIGTERM, then SIGKILL after KillWait, as at a time limit).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.cli import esdash, java_pids_under, write_session

pytestmark = [pytest.mark.es, pytest.mark.mpi, pytest.mark.slurm]


def submit(session: Path, env_runs: Path, env: dict) -> tuple[Path, str]:
    out = esdash("submit", str(session), env_runs=env_runs, env=env).stdout
    job = out.split("submitted job ", 1)[1].split(";", 1)[0]
    run = Path(out.split("run directory: ", 1)[1].splitlines()[0].strip())
    return run, job


def status(run: Path, runs: Path, env: dict) -> dict:
    out = esdash("cluster", "status", str(run), "--json", env_runs=runs, env=env).stdout
    return json.loads(out)


def wait_for(predicate, run: Path, runs: Path, env: dict, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    info = status(run, runs, env)
    while time.monotonic() < deadline:
        if predicate(info):
            return info
        failed = [n for n in info["nodes"].values() if n.get("state") == "failed"]
        assert not failed, f"node(s) failed: {json.dumps(failed, indent=1)[:3000]}"
        time.sleep(1)
        info = status(run, runs, env)
    raise AssertionError(f"timed out; last status: {json.dumps(info, indent=1)[:3000]}")


def green(nodes: int):
    def check(info: dict) -> bool:
        health = info.get("health") or {}
        return health.get("status") == "green" and health.get("number_of_nodes") == nodes

    return check


def test_submit_spreads_three_nodes_and_down_ends_the_job(slurm_cluster, shared_tmp: Path):
    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "slurm3", 3, extra_cluster="nodes_per_host = 1")
    # no [slurm] time: the job asks for the run's estimated wall time with its margin (made
    # before the submit: once the job's cluster is up, its start becomes the next estimate's)
    plan = esdash("plan", str(session), "--json", env_runs=runs, env=slurm_cluster.env)
    estimated = json.loads(plan.stdout)["slurm_time"]
    assert estimated["from"] == "estimate"
    run, job = submit(session, runs, slurm_cluster.env)
    script = (run / "job.sbatch").read_text()
    assert "#SBATCH --nodes=3" in script and "#SBATCH --ntasks-per-node=1" in script
    assert f"#SBATCH --time={estimated['time']}\n" in script
    first = status(run, runs, slurm_cluster.env)
    assert first["slurm_job"] == job
    assert first["slurm_state"] in {"PENDING", "CONFIGURING", "RUNNING"}
    try:
        info = wait_for(green(3), run, runs, slurm_cluster.env, timeout=300)
        assert info["slurm_state"] == "RUNNING"
        spread = sorted(node["slurm_node"] for node in info["nodes"].values())
        assert spread == ["lo1", "lo2", "lo3"]
        launcher = json.loads((run / "run.json").read_text())["launcher"]["command"]
        assert launcher[:2] == ["srun", "--mpi=pmi2"]
    finally:
        esdash("cluster", "down", str(run), env_runs=runs, env=slurm_cluster.env)
    wait_for(lambda i: i["slurm_state"] == "FINISHED", run, runs, slurm_cluster.env, 60)
    assert java_pids_under(run) == []
    states = {n["state"] for n in status(run, runs, slurm_cluster.env)["nodes"].values()}
    assert states == {"stopped"}


def test_slurm_signals_stop_the_nodes_cleanly(slurm_cluster, shared_tmp: Path):
    """scancel (what a time limit does: SIGTERM, then KillWait) leaves no node behind."""
    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "slurm1", 1)
    run, job = submit(session, runs, slurm_cluster.env)
    wait_for(green(1), run, runs, slurm_cluster.env, timeout=240)
    slurm_cluster.run(["scancel", job])
    info = wait_for(
        lambda i: i["slurm_state"] == "FINISHED", run, runs, slurm_cluster.env, timeout=120
    )
    assert java_pids_under(run) == []
    node = info["nodes"]["0"]
    assert node["state"] == "stopped", node
    assert node["message"] == "received SIGTERM"


def test_submit_bench_runs_the_whole_benchmark_in_the_job(slurm_cluster, shared_tmp: Path):
    """`esdash submit --bench`: cluster and bench ranks both start with srun in the job."""
    runs = shared_tmp / "runs"
    (shared_tmp / "slurm-steps.json").write_text(
        json.dumps(
            [
                {
                    "name": "all",
                    "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
                    "warmup_time_secs": 1,
                    "execution_time_secs": 2,
                }
            ]
        )
    )
    session = write_session(
        shared_tmp,
        "slurmbench",
        1,
        track='name = "mri"\ndocuments = 300',
        tables='[benchmark]\nworkers_per_node = 2\nqueries = "slurm-steps.json"\n',
    )
    out = esdash("submit", str(session), "--bench", env_runs=runs, env=slurm_cluster.env).stdout
    job = out.split("submitted job ", 1)[1].split(";", 1)[0]
    run = Path(out.split("run directory: ", 1)[1].splitlines()[0].strip())
    wait_for(lambda i: i.get("slurm_state") == "FINISHED", run, runs, slurm_cluster.env, 300)
    info = json.loads((run / "run.json").read_text())
    assert info["slurm_job"] == job
    assert info["launcher"]["command"][0] == "srun"
    assert info["bench_launcher"]["command"][0] == "srun"
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok", results.get("reason")
    assert results["steps"][0]["queries"]["all"]["requests"] > 0
    assert sorted(results["per_rank"]) == ["1", "2"]
    assert java_pids_under(run) == []
    output = next(run.glob("slurm-*.out")).read_text()
    assert "esdash run" in output and "results:" in output
