"""`esdash sweep` without running anything: the plan, Slurm job scripts, errors; no file."""

from __future__ import annotations

from pathlib import Path

from support.cli import esdash

CAMPAIGN = """
name = "plan"
session = "base.toml"
repetitions = 2

[axes]
cluster.nodes = [3, 1]
benchmark.workers_per_node = [1, 2]

[slurm]
time = "03:00:00"
"""
BASE = """
name = "base"
[cluster]
heap = "256m"
nodes_per_host = 1
run_as = "esdash"
[track]
name = "mri"
documents = 500
[slurm]
partition = "debug"
"""


def setup(tmp_path: Path) -> Path:
    (tmp_path / "base.toml").write_text(BASE)
    (tmp_path / "plan.toml").write_text(CAMPAIGN)
    return tmp_path / "plan.toml"


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    campaign = setup(tmp_path)
    result = esdash("sweep", str(campaign), "--dry-run", env_runs=tmp_path / "runs")
    lines = result.stdout.splitlines()
    assert "8 points, 0 completed, 8 to run on 2 cluster(s)" in lines[0]
    assert lines[1:6] == [
        "cluster 1: 1n-none over loopback",
        "  nodes=1 workers_per_node=1 #1: ingest (unless the index is complete)",
        "  nodes=1 workers_per_node=2 #1: reuse index",
        "  nodes=1 workers_per_node=1 #2: reuse index",
        "  nodes=1 workers_per_node=2 #2: reuse index",
    ]
    verdict = [line for line in lines if line.startswith("esdash sweep: ")][-1]
    assert verdict.endswith("every point to run passes its pre-flight checks; nothing was written")
    # then the wall time of the points to run, per Slurm job (tests/prepare has the figures)
    after = lines[lines.index(verdict) + 1 :]
    assert after[0].startswith("wall time of the points to run")
    jobs = [line.split(":")[0] for line in after if line.startswith("  Slurm job for ")]
    assert jobs == ["  Slurm job for 1 node(s)", "  Slurm job for 3 node(s)"]
    kept = "esdash sweep --submit asks Slurm for --time=03:00:00: set by [slurm] time"
    assert sum(line.strip().startswith(kept) for line in after) == 2  # the campaign's time
    assert not (tmp_path / "runs").exists()  # no campaign directory, no campaign.json


def test_dry_run_runs_the_preflight_checks_of_every_point(tmp_path: Path) -> None:
    """The checks ``esdash session check`` runs: here, nodes with no account to run as."""
    campaign = setup(tmp_path)
    base = tmp_path / "base.toml"
    base.write_text(base.read_text().replace('run_as = "esdash"\n', 'run_as = "no-such-user-x"\n'))
    result = esdash("sweep", str(campaign), "--dry-run", env_runs=tmp_path / "runs", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = result.stderr.splitlines()
    assert len(errors) == 1, errors  # one line per finding, not one per point
    assert errors[0].startswith(f"esdash: error: {base}: "), errors  # the base lacks the key
    assert "cluster.run_as = 'no-such-user-x': no such user on this host" in errors[0]
    assert errors[0].endswith(
        "(8 points: nodes=1 workers_per_node=1 #1, nodes=1 workers_per_node=2 #1, "
        "nodes=1 workers_per_node=1 #2, +5 more)"
    )
    assert "cluster 1: 1n-none over loopback" in result.stdout  # the plan is still shown
    assert "  nodes=3 workers_per_node=2 #2: reuse index -- REFUSED" in result.stdout
    verdict = [line for line in result.stdout.splitlines() if line.startswith("esdash sweep: ")]
    assert "8 of 8 point(s) to run would fail" in verdict[-1]
    assert not (tmp_path / "runs").exists()


def test_submit_dry_run_prints_one_job_per_cluster_size(tmp_path: Path) -> None:
    campaign = setup(tmp_path)
    result = esdash(
        "sweep",
        str(campaign),
        "--submit",
        "--dry-run",
        "--retries",
        "2",
        "--reuse-index=require",
        env_runs=tmp_path / "runs",
    )
    directory = tmp_path / "runs" / "campaigns" / "plan"
    scripts = result.stdout.split("# " + str(directory / "jobs"))[1:]
    assert len(scripts) == 2, result.stdout
    for nodes, script in zip((1, 3), scripts, strict=True):
        assert script.startswith(f"/nodes-{nodes}/job.sbatch ({nodes} node(s), 4 points): ")
        assert "not written, not submitted (dry run)\n#!/bin/bash\n" in script
        assert f"#SBATCH --nodes={nodes}" in script  # one host per node
        assert "#SBATCH --time=03:00:00" in script and "#SBATCH --partition=debug" in script
        assert f"--only cluster.nodes={nodes} --retries 2 --reuse-index=require" in script
        assert f"sweep {campaign.resolve()} --dir {directory}" in script
    assert not (tmp_path / "runs").exists()  # no script, no job record, no campaign.json


def test_errors_exit_2_naming_file_and_key(tmp_path: Path) -> None:
    campaign = setup(tmp_path)
    bad = esdash(
        "sweep", str(campaign), "--only", "nodes=7", env_runs=tmp_path / "runs", check=False
    )
    assert bad.returncode == 2 and "the axis cluster.nodes has the values 3, 1" in bad.stderr
    campaign.write_text(CAMPAIGN.replace("repetitions = 2", "repetition = 2"))
    bad = esdash("sweep", str(campaign), "--dry-run", env_runs=tmp_path / "runs", check=False)
    assert bad.returncode == 2
    assert f'{campaign}: repetition: unknown key (did you mean "repetitions"?)' in bad.stderr


def test_a_point_left_running_by_a_dead_sweep_is_resumed(tmp_path: Path) -> None:
    """On this host the pid tells; elsewhere a run silent for 10 minutes is abandoned."""
    import os
    import socket
    import time

    from esdash.campaign.spec import Point
    from esdash.campaign.state import CampaignDir
    from esdash.rundir.records import PointRunner, PointState

    point = Point("p", "p", {}, 1, {"name": "x"}, "1n-none")
    directory = CampaignDir(tmp_path / "c")
    run = tmp_path / "run"
    run.mkdir()
    (run / "stream.jsonl").write_text("{}\n")

    def left_running(host: str, pid: int, started: float) -> str:
        state = PointState(
            id=point.id,
            status="running",
            run=str(run),
            started=started,
            digest=point.digest,
            runner=PointRunner(host=host, pid=pid),
        )
        directory.write_point(point, state)
        return directory.status(point)

    here = socket.gethostname()
    assert left_running(here, os.getpid(), time.time()) == "running"
    assert left_running(here, 2**22 + 12345, time.time()) == "interrupted"
    assert left_running("elsewhere", 1, time.time()) == "running"
    old = time.time() - 3600
    os.utime(run / "stream.jsonl", (old, old))
    assert left_running("elsewhere", 1, old) == "interrupted"
