"""Nothing outlives its run: a killed `esdash run` takes its cluster and bench ranks along.

Issue 36.  ``esdash run`` owns its run (``owner.json``, renewed every second: see
:mod:`esdash.launch.owner`).  Killed outright -- ``kill -9``, or SIGTERM and SIGKILL one
second later, before its clean-up ended (what ``timeout -k``, batch wrappers and Slurm's
``KillWait`` do) -- it can stop nothing itself; its ranks see it gone, wait its grace
(``cluster.owner_grace``, 3 s) and stop their nodes and themselves through the one stop
path.  One case per phase and way of killing, real 1-node clusters and MPI ranks (an
Elasticsearch node while the cluster starts; the static engine's node, a real process of
the run, once it is up: ``support/static_engine.py``); each
asserts that within 15 s of the kill no process of the run remains (by pid and create
time: launchers, ranks, guards, both JVMs, bench ranks), that ``run.json`` says why, that
the stream is intact (every line a record) and that what rank 0 could write is kept.  The
seconds from the kill to the last process gone are printed (``-s``) for the issue's table.

A cluster from ``esdash cluster up`` has no owner: it outlives the command and its shell's
SIGHUP until ``cluster down``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import static_engine
from support.cli import ESDASH, esdash, java_pids_under, run_dir_from
from support.faults import (
    PAUSE,
    Seen,
    await_phase,
    descendants,
    gone_within,
    identify,
    make_session,
    running,
)

pytestmark = [pytest.mark.mpi]

#: What the issue promises: every process of the run is gone this long after the kill.
GONE_WITHIN = 15.0
#: The owner's name in the reason its ranks record.
GONE = "the esdash run that owned this run is gone: pid"


@dataclass
class Orphaned:
    run: Path
    runs: Path
    pids: Seen
    gone_after: float | None
    left: dict[int, str]


def kill_run(tmp: Path, name: str, phase: str, how: str, timeout: float = 240) -> Orphaned:
    """Start `esdash run`, kill it (``how``: "kill" or "term-kill") as ``phase`` begins;
    after the start, on the static engine."""
    runs = tmp / "runs"
    static = phase != "start"
    session = make_session(tmp, name, static=static)
    base = static_engine.env_for(static)
    env = {**base, "ESDASH_RUNS": str(runs), "ESDASH_TEST_PAUSE": PAUSE}
    with (tmp / f"{name}.out").open("w") as out, (tmp / f"{name}.err").open("w") as err:
        proc = subprocess.Popen([*ESDASH, "run", str(session)], stdout=out, stderr=err, env=env)
    try:
        run, seen = await_phase(proc, runs, name, phase, timeout, tmp / f"{name}.err")
        if how == "term-kill":
            proc.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            seen |= descendants(proc.pid)  # anything its stop path started meanwhile
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        gone_after, left = gone_within(seen, run, killed_at, GONE_WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"\n{name}: {how} in phase {phase}: gone after {gone_after}")
    return Orphaned(run, runs, seen, gone_after, left)


def stream_records(run: Path) -> list[dict]:
    """Every line of the stream as a record: a cut line would fail here."""
    return [json.loads(line) for line in (run / "stream.jsonl").read_text().splitlines()]


CASES = [
    pytest.param(
        phase,
        how,
        marks=pytest.mark.es if phase == "start" else pytest.mark.static_engine,
        id=f"{phase}-{how}",
    )
    for phase in ("start", "ingest", "steps", "results")
    for how in ("kill", "term-kill")
]


@pytest.mark.parametrize(("phase", "how"), CASES)
def test_a_killed_run_takes_everything_along(shared_tmp: Path, phase: str, how: str) -> None:
    name = f"orphan-{phase}-{how}"
    result = kill_run(shared_tmp / name, name, phase, how)
    assert result.gone_after is not None and result.gone_after <= GONE_WITHIN, result.left
    assert result.left == {}
    assert len(result.pids) >= 4, result.pids  # launcher, proxy, rank, guard, JVMs at least
    info = json.loads((result.run / "run.json").read_text())
    if how == "kill" or phase == "results":  # nothing but the ranks could record the end
        assert info["state"] == "failed" and GONE in info["reason"], info
        assert GONE in info["orphaned"], info
    else:
        # Its SIGTERM began a stop it did not live to finish: the reason it wrote first, the
        # ranks' word that it is gone, or both -- whoever got there (a stop that ended
        # within the second is simply "interrupted").
        assert "esdash received SIGTERM" in info["reason"] or GONE in info["reason"], info
    node = json.loads((result.run / "nodes" / "0" / "status.json").read_text())
    assert node["state"] == "stopped", node
    status = esdash(
        "cluster", "status", str(result.run), env_runs=result.runs, env=static_engine.env()
    ).stdout
    assert "owner    pid" in status and ": gone" in status, status
    if phase == "start":
        return
    records = stream_records(result.run)
    assert records[0]["type"] == "header"
    results = json.loads((result.run / "results.json").read_text())
    if phase == "results":  # everything was measured before the owner died
        assert results["status"] == "ok", results["reason"]
        return
    assert results["status"] == "aborted", results["reason"]
    assert GONE in results["reason"] or "received SIGTERM" in results["reason"], results
    assert records[-1]["type"] == "final"
    if info.get("orphaned"):  # a stop that ended before the kill left no orphan
        out = str(result.run / "report")
        report = esdash(
            "report",
            str(result.run),
            "--no-figures",
            "--out",
            out,
            env_runs=result.runs,
            env=static_engine.env(),
        )
        assert "ended without its owner" in report.stdout, report.stdout


@pytest.mark.es
def test_a_cluster_up_cluster_outlives_its_command_and_its_shell(shared_tmp: Path) -> None:
    """No owner: neither the command's end nor a SIGHUP to its shell's session stops it."""
    directory = shared_tmp / "orphan-up"
    session = make_session(directory, "orphan-up")
    runs = directory / "runs"
    shell = subprocess.Popen(
        ["bash", "-c", f"{' '.join(ESDASH)} cluster up {session}; sleep 60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "ESDASH_RUNS": str(runs)},
        start_new_session=True,  # the shell leads a session, like a login shell
    )
    try:
        assert shell.stdout is not None
        lines = []
        for line in shell.stdout:
            lines.append(line)
            if line.startswith("stop it with"):
                break
        run = run_dir_from("".join(lines))
        os.killpg(shell.pid, signal.SIGHUP)  # the terminal hangs up
        shell.wait(timeout=10)
        jvms = identify(java_pids_under(run))
        assert len(jvms) == 2
        time.sleep(6)  # longer than any owner's grace
        assert running(jvms).keys() == jvms.keys()
        assert json.loads((run / "nodes" / "0" / "status.json").read_text())["state"] == "running"
        assert not (run / "owner.json").exists()
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    esdash("cluster", "down", str(run), env_runs=runs)
    assert java_pids_under(run) == []
