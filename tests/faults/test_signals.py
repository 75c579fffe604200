"""SIGTERM and SIGINT to `esdash run` in every phase: one stop path, nothing left behind.

Issue 15, items 4 and 7.  Real 1-node clusters, real MPI ranks, real signals.  A signal
while the cluster starts lands in an Elasticsearch node's JVM start; the later phases are
the ranks' own, so those cases run on the static engine (``support/static_engine.py``),
whose node is a real process of the run, started and stopped like a JVM.  Each case
starts `esdash run` on its own session (its own runs and data directories, free ports) and
sends the signal when the phase begins -- the run directory's state for the cluster start,
the phase's ``phase`` event in ``stream.jsonl`` for the bench phases (rank 0 holds the short
"results" phase through the test-only ``ESDASH_TEST_PAUSE`` hook) -- never after a sleep.

Every case asserts the exit code, that the run's and the nodes' status name the signal and
the phase, that every process esdash started (launchers, ranks, node guards, both JVMs of
the node) is gone within 15 s of the signal, by PID and create time, and that the results
keep what was measured; after SIGTERM in the query steps the same session runs again to
its end.  `cluster up --foreground`, a rank killed outright while its node starts and a run
on gocryptfs (its mount released) have a case each.  The seconds from the signal to the last
process gone are printed (``-s``) for the issue's table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from support import static_engine
from support.cli import ESDASH, esdash, java_pids_under
from support.faults import (
    PAUSE,
    Seen,
    await_phase,
    cluster_starting,
    descendants,
    gone_within,
    identify,
    make_session,
    running,
    server_logging,
)

pytestmark = [pytest.mark.mpi]

#: What the issue promises: every process esdash started is gone this long after a signal.
GONE_WITHIN = 15.0
#: How each phase appears in run.json's reason ("esdash received SIGTERM during ingest").
PHASE_WORDS = {
    "start": "while the cluster was starting",
    "ingest": "during ingest",
    "steps": "during the query steps",
    "results": "while the results were written",
}


@dataclass
class Signalled:
    """One `esdash run` that got a signal: its end, run directory and processes seen."""

    code: int
    stdout: str
    stderr: str
    run: Path
    runs: Path
    session: Path
    pids: dict[int, float] = field(default_factory=dict)
    #: seconds from the signal to the last process esdash started being gone
    gone_after: float | None = None
    #: what was still running GONE_WITHIN seconds after the signal (pid: command line)
    left: dict[int, str] = field(default_factory=dict)


def signal_run(
    tmp: Path,
    name: str,
    phase: str,
    sig: signal.Signals,
    *args: str,
    session: Path | None = None,
    timeout: float = 240,
    static: bool = False,
) -> Signalled:
    """Start `esdash run`, send ``sig`` as ``phase`` begins, and follow everything to its end
    (``static``: a session of its own on the static engine)."""
    runs = tmp / "runs"
    session = session or make_session(tmp, name, static=static)
    base = static_engine.env_for(static)
    env = {**base, "ESDASH_RUNS": str(runs), "ESDASH_TEST_PAUSE": PAUSE}
    # output to files, not pipes: nothing reads them before the end, and a full pipe would
    # block the run
    stdout, stderr = tmp / f"{name}.out", tmp / f"{name}.err"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        proc = subprocess.Popen(
            [*ESDASH, "run", str(session), *args], stdout=out_file, stderr=err_file, env=env
        )
    try:
        run, seen = await_phase(proc, runs, name, phase, timeout, stderr)
        signalled_at = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=120)
        gone_after, left = gone_within(seen, run, signalled_at, GONE_WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"\n{name}: {sig.name} in phase {phase}: exit {proc.returncode}, gone after {gone_after}")
    out, err = stdout.read_text(), stderr.read_text()
    return Signalled(proc.returncode, out, err, run, runs, session, seen, gone_after, left)


def assert_stopped(result: Signalled, phase: str, sig: signal.Signals) -> None:
    """Exit code, status naming the signal and the phase, and nothing left (by PID)."""
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.code == 130, output
    assert result.gone_after is not None and result.gone_after <= GONE_WITHIN, (
        f"still running {GONE_WITHIN} s after {sig.name}: {result.left}\n{output}"
    )
    assert result.left == {}
    assert len(result.pids) >= 4, result.pids  # launcher, proxy, rank, guard, JVMs at least
    reason = f"esdash received {sig.name} {PHASE_WORDS[phase]}"
    assert f"esdash: interrupted: received {sig.name} {PHASE_WORDS[phase]}" in result.stderr, output
    info = json.loads((result.run / "run.json").read_text())
    assert info["state"] == "interrupted"
    assert info["reason"] == reason
    status = esdash(
        "cluster", "status", str(result.run), env_runs=result.runs, env=static_engine.env()
    ).stdout
    assert f"state interrupted\nreason   {reason}" in status, status
    node = json.loads((result.run / "nodes" / "0" / "status.json").read_text())
    assert node["state"] == "stopped", node
    assert sig.name in node["message"], node


def intervals(run: Path, phase: str) -> list[dict]:
    lines = (run / "stream.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [r for r in records if r["type"] == "interval" and r["phase"] == phase]


#: The start on Elasticsearch (its JVMs are what starts), the ranks' phases on the static engine.
CASES = [
    pytest.param(
        phase,
        sig,
        marks=pytest.mark.es if phase == "start" else pytest.mark.static_engine,
        id=f"{phase}-{sig.name}",
    )
    for phase in ("start", "ingest", "steps", "results")
    for sig in (signal.SIGTERM, signal.SIGINT)
]


@pytest.mark.parametrize(("phase", "sig"), CASES)
def test_a_signal_stops_everything_and_keeps_what_was_measured(
    shared_tmp: Path, phase: str, sig: signal.Signals
) -> None:
    """One run per case, signalled as its phase begins; SIGTERM in the steps is re-run."""
    name = f"sig-{phase}-{sig.name.lower()}"
    result = signal_run(shared_tmp / name, name, phase, sig, static=phase != "start")
    assert_stopped(result, phase, sig)
    results_file = result.run / "results.json"
    if phase == "start":
        assert not results_file.exists()  # no benchmark ran
        assert "cluster up" not in result.stdout
        return
    results = json.loads(results_file.read_text())
    assert "results:" in result.stdout  # the summary is printed
    ingested = intervals(result.run, "ingest")
    streamed = sum(op.get("docs", 0) for r in ingested for op in r["ops"].values())
    # nothing measured is lost: the results count every document the stream shows ingested
    # (a signal as the ingest begins may come before the first bulk answer: 0 and 0)
    assert (results["ingest"] or {}).get("docs", 0) == streamed, results["ingest"]
    if phase != "ingest":  # the ingest ended before the signal
        assert streamed > 0
    elif results["ingest"]:  # cut short: the rank still says what it sent, and its CPU time
        assert results["per_rank"]["1"]["status"] == "aborted", results["per_rank"]
        ingest = results["ingest"]
        assert ingest["docs_sent"] == ingest["docs"] + ingest["docs_rejected"], ingest
        assert ingest["docs_rejected"] == 0 and ingest["client_cpu_seconds"] >= 0, ingest
    if phase == "results":
        # everything was measured: rank 0 writes the whole results, then all stops
        assert results["status"] == "ok", results["reason"]
        assert results["steps"][0]["queries"]["all"]["requests"] > 0
        return
    assert results["status"] == "aborted", results["reason"]
    assert f"received {sig.name}" in results["reason"]  # the ranks got the same signal
    if phase == "steps":  # the signal came as the steps began: the whole ingest is kept
        assert results["ingest"]["docs"] == 1000, results["ingest"]
    if sig == signal.SIGTERM and phase == "steps":  # one re-run is enough: it shares this run
        assert_a_rerun_succeeds(result, static_engine.env())


def assert_a_rerun_succeeds(result: Signalled, env: dict[str, str] | None = None) -> None:
    """The same session again after the fault: it reuses the data and runs to the end."""
    again = esdash("run", str(result.session), env_runs=result.runs, check=False, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    latest = max(result.runs.glob(f"{result.session.stem}-*"), key=lambda p: p.stat().st_mtime)
    assert latest != result.run
    assert json.loads((latest / "results.json").read_text())["status"] == "ok"
    assert json.loads((latest / "run.json").read_text())["state"] == "stopped"


@pytest.mark.es
def test_foreground_cluster_start_stops_on_sigterm(shared_tmp: Path) -> None:
    """`cluster up --foreground` (a batch job's main step) hit by SIGTERM while starting."""
    directory = shared_tmp / "sig-fg"
    session = make_session(directory, "sig-fg")
    runs = directory / "runs"
    proc = subprocess.Popen(
        [*ESDASH, "cluster", "up", str(session), "--foreground"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ESDASH_RUNS": str(runs)},
    )
    seen: Seen = {}
    run = None
    try:
        deadline = time.monotonic() + 180
        while run is None or not cluster_starting(run):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            seen |= descendants(proc.pid)
            found = list(runs.glob("sig-fg-*"))
            run = found[0] if found else None
            time.sleep(0.05)
        seen |= descendants(proc.pid) | identify(java_pids_under(run))
        signalled_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        while running(seen) and time.monotonic() - signalled_at < GONE_WITHIN:
            time.sleep(0.05)
        gone_after = time.monotonic() - signalled_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    print(f"\nsig-fg: SIGTERM while starting: exit {proc.returncode}, gone after {gone_after:.2f}")
    assert proc.returncode == 130, out + err
    assert "interrupted: received SIGTERM while the cluster was starting" in err
    assert running(seen) == {} and java_pids_under(run) == []
    info = json.loads((run / "run.json").read_text())
    assert (info["state"], info["reason"]) == (
        "interrupted",
        "esdash received SIGTERM while the cluster was starting",
    )


@pytest.mark.es
def test_a_killed_cluster_rank_takes_both_jvms_along(shared_tmp: Path) -> None:
    """kill -9 of a rank while its node starts: the node's guard stops both JVMs.

    The kernel tells only a dying process's direct child (PR_SET_PDEATHSIG), and the
    launcher JVM waits for a starting server JVM before it stops it; the guard that leads
    the node's process group is what takes the server JVM down.
    """
    directory = shared_tmp / "sig-rank"
    session = make_session(directory, "sig-rank")
    runs = directory / "runs"
    proc = subprocess.Popen(
        [*ESDASH, "cluster", "up", str(session)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ESDASH_RUNS": str(runs)},
    )
    try:
        deadline = time.monotonic() + 180
        run = None
        while run is None or not server_logging(run):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            found = list(runs.glob("sig-rank-*"))
            run = found[0] if found else None
            time.sleep(0.05)
        jvms = identify(java_pids_under(run))
        ranks = [
            p.pid
            for p in psutil.Process(proc.pid).children(recursive=True)
            if "esdash.cluster.rank" in " ".join(p.cmdline()) and "mpiexec" not in p.name()
        ]
        assert len(ranks) == 1, ranks
        guard = identify([c.pid for c in psutil.Process(ranks[0]).children()])
        killed_at = time.monotonic()
        os.kill(ranks[0], signal.SIGKILL)
        while running(jvms | guard) and time.monotonic() - killed_at < GONE_WITHIN:
            time.sleep(0.05)
        gone_after = time.monotonic() - killed_at
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    print(f"\nsig-rank: kill -9 of the rank: JVMs gone after {gone_after:.2f} s")
    assert running(jvms | guard) == {}
    assert proc.returncode == 4, out + err  # the cluster failed to start
    status = json.loads((run / "nodes" / "0" / "status.json").read_text())
    assert status["state"] == "stopped", status  # not "running": the rank could not say


@pytest.mark.static_engine
@pytest.mark.gocryptfs
def test_sigterm_releases_the_gocryptfs_mount(shared_tmp: Path) -> None:
    """SIGTERM during the steps of a run on gocryptfs: no mount and no gocryptfs process left.

    The node's data directory is mounted whatever the engine: the static engine's node
    stands in for a JVM here."""
    from support import gocryptfs

    name = "sig-gc"
    directory = shared_tmp / name
    directory.mkdir()
    directory.chmod(0o755)
    passfile = directory / "pass"
    passfile.write_text("signal-test-password\n")
    passfile.chmod(0o600)
    tables = '[encryption]\nmode = "gocryptfs"\npassword_file = "pass"\nscrypt_n = 10\n'
    session = make_session(directory, name, tables, static=True)
    data = directory / f"data-{name}"
    result = signal_run(directory, name, "steps", signal.SIGTERM, session=session, static=True)
    try:
        assert_stopped(result, "steps", signal.SIGTERM)
        assert gocryptfs.mounts_under(directory) == []
        assert gocryptfs.gocryptfs_pids(data) == []
    finally:
        for point in gocryptfs.mounts_under(directory):
            gocryptfs.unmount(Path(point), "esdash")
        gocryptfs.stop_pids(gocryptfs.gocryptfs_pids(data))
