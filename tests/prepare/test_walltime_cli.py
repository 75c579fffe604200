"""The estimate where a user sees it: ``esdash plan [--json]`` and ``esdash submit --dry-run``.

``plan --json`` carries the estimate as data (every phase with its seconds, kind and basis,
every step, the total, and the ``--time`` a submit would ask for); ``submit --dry-run`` prints
the script with that ``--time`` when the session sets none, keeps the session's own one
otherwise (and says when it is shorter than the total), and lists the phases on stderr.
Nothing here starts a cluster or writes a file (``esdash submit --dry-run`` writes nothing).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.cli import esdash

from esdash.prepare.timelimit import slurm_seconds, time_limit

SESSION = """\
name = "{name}"
[cluster]
nodes = 2
heap = "256m"
run_as = "esdash"
[track]
name = "mri"
documents = 2500
[benchmark]
warmup = "2s"
duration = "5s"
warmup_max = "1m"
settle_timeout = "2m"
repetitions = 2
"""
PHASES = ["corpus", "cluster_start", "ingest", "settle", "warmup", "steps", "results"]
PHASES += ["cluster_stop"]


def write(tmp_path: Path, name: str = "clock", extra: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SESSION.format(name=name) + extra)
    return path


def test_plan_json_carries_the_estimate_as_data(tmp_path: Path) -> None:
    result = esdash("plan", str(write(tmp_path)), "--json", env_runs=tmp_path / "runs")
    document = json.loads(result.stdout)
    assert list(document) == ["tasks", "wall_time", "slurm_time"]
    assert [task["name"] for task in document["tasks"]][0] == "ingest"
    wall = document["wall_time"]
    assert list(wall) == ["total", "phases", "steps"]
    assert [phase["phase"] for phase in wall["phases"]] == PHASES
    for phase in wall["phases"]:
        assert list(phase) == ["phase", "label", "seconds", "kind", "basis"]
        assert phase["kind"] in ("fixed", "estimate", "bound") and phase["basis"]
    by_phase = {phase["phase"]: phase for phase in wall["phases"]}
    assert (by_phase["settle"]["seconds"], by_phase["settle"]["kind"]) == (120.0, "bound")
    assert (by_phase["warmup"]["seconds"], by_phase["warmup"]["kind"]) == (60.0, "bound")
    assert wall["total"] == pytest.approx(sum(p["seconds"] for p in wall["phases"]), abs=0.5)
    for step in wall["steps"]:
        assert list(step) == ["name", "pause", "warmup", "duration", "rounds", "seconds", "kind"]
        assert step["seconds"] == step["rounds"] * (step["pause"] + step["warmup"] + 5.0)
    steps_total = sum(step["seconds"] for step in wall["steps"])
    assert by_phase["steps"]["seconds"] == pytest.approx(steps_total)
    assert document["slurm_time"] == {
        "time": time_limit(wall["total"]).text,
        "from": "estimate",
        "estimate_with_margin": time_limit(wall["total"]).text,
        "margin": "+25 %, at least +10 min",
        "session_shorter_than_total": False,
    }
    assert not (tmp_path / "runs").exists()


def test_plan_prints_every_phase_and_step_with_its_kind(tmp_path: Path) -> None:
    out = esdash("plan", str(write(tmp_path)), env_runs=tmp_path / "runs").stdout
    lines = out.splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith("wall time of a run: "))
    table = lines[head + 1 :]
    assert re.match(r"  corpus preparation +\S+ +estimate +2,500 documents", table[0])
    assert re.match(r"  settling \(after_ingest = wait\) +2m00s +bound +benchmark", table[3])
    assert re.match(r"  global warm-up +1m00s +bound +benchmark.warmup_max", table[4])
    assert re.match(r"  query steps +\S+ +fixed +\d step\(s\) x 2 round\(s\)", table[5])
    assert re.match(r"    body_part +14s +fixed +2 s warm-up \+ 5 s measured, 2 rounds", table[6])
    assert table[-1].startswith("  esdash submit asks Slurm for --time=")
    assert table[-1].endswith("(no [slurm] time is set)")


def submit_dry_run(tmp_path: Path, session: Path, *flags: str):
    return esdash("submit", str(session), "--dry-run", *flags, env_runs=tmp_path / "runs")


@pytest.mark.es
def test_submit_asks_for_the_estimate_when_the_session_sets_no_time(tmp_path: Path) -> None:
    result = submit_dry_run(tmp_path, write(tmp_path), "--bench")
    time = re.search(r"^#SBATCH --time=(\S+)$", result.stdout, re.M)
    assert time is not None, result.stdout
    said = re.search(r"asks Slurm for --time=(\S+): the total (\S+) \+25 %", result.stderr)
    assert said is not None and said.group(1) == time.group(1), result.stderr
    total = json.loads(
        esdash("plan", str(write(tmp_path)), "--json", env_runs=tmp_path / "runs").stdout
    )["wall_time"]["total"]
    assert time.group(1) == time_limit(total).text
    seconds = slurm_seconds(time.group(1))
    assert seconds is not None and seconds >= total + 600
    # the phases, in the order the job runs them (--bench: the corpus before the cluster)
    assert result.stderr.index("corpus preparation") < result.stderr.index("cluster start")
    assert "esdash submit: the job runs the benchmark" in result.stderr
    # a job that only holds the cluster: the cluster first, then `esdash run --cluster`
    held = submit_dry_run(tmp_path, write(tmp_path))
    assert held.stderr.index("cluster start") < held.stderr.index("corpus preparation")
    assert f"#SBATCH --time={time.group(1)}\n" in held.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.es
def test_submit_keeps_the_session_time_and_says_when_it_is_short(tmp_path: Path) -> None:
    long = write(tmp_path, "long", '[slurm]\ntime = "1-00:00:00"\n')
    result = submit_dry_run(tmp_path, long, "--bench")
    assert "#SBATCH --time=1-00:00:00\n" in result.stdout
    assert "asks Slurm for --time=1-00:00:00: set by [slurm] time\n" in result.stderr
    short = write(tmp_path, "short", '[slurm]\ntime = "5"\n')
    result = submit_dry_run(tmp_path, short, "--bench")
    assert "#SBATCH --time=5\n" in result.stdout
    said = "asks Slurm for --time=5: set by [slurm] time, SHORTER than the total"
    assert said in result.stderr
    assert not (tmp_path / "runs").exists()
