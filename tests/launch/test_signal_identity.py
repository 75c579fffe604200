"""`esdash cluster down` and the dashboard's stop signal only processes esdash proves are its own.

Real processes and real run directories throughout: the unrelated process is a ``sleep``
this test starts itself (not through esdash), and the run directory is written with the
rundir package's own writers.  A pid that changed owner is what it looks like to esdash
after a reboot or on a shared run directory: the recorded pid, held by a process whose
create time and command line are not the recorded ones.  No search cluster is needed: the
stop path reads only the run directory and the process table.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psutil
import pytest

from esdash.cli import main
from esdash.launch import process
from esdash.run.stop import stop_run
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ProcessRecord

#: What an esdash launcher record looks like: the command of an MPI launcher of ranks.
LAUNCHER_COMMAND = ["mpiexec", "-n", "1", sys.executable, "-m", "esdash.cluster.rank"]


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """Somebody else's job: a process esdash did not start, in a group of its own.

    Yielded once it runs ``sleep`` (between fork and exec it still shows our command line).
    """
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).cmdline() != ["sleep", "300"]:
            assert time.monotonic() < deadline, "sleep did not start"
            time.sleep(0.01)
        yield child
    finally:
        child.kill()
        child.wait()


def running(child: subprocess.Popen[bytes]) -> bool:
    """Alive and not a zombie (a signalled child of ours stays a zombie until reaped)."""
    try:
        return psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and child.poll() is None
    except psutil.NoSuchProcess:
        return False


def reused(child: subprocess.Popen[bytes]) -> ProcessRecord:
    """A complete launcher record whose pid ``child`` holds now: an earlier launcher's."""
    created = psutil.Process(child.pid).create_time()
    return ProcessRecord(
        pid=child.pid,
        host=socket.gethostname(),
        command=LAUNCHER_COMMAND,
        create_time=created - 3600.0,
    )


def pid_only(child: subprocess.Popen[bytes]) -> ProcessRecord:
    """A record as an older esdash (or a hand edit) left it: pid and host, no identity."""
    return ProcessRecord(pid=child.pid, host=socket.gethostname())


def make_run(
    root: Path, state: str, launcher: ProcessRecord, node_pid: int | None = None
) -> RunDir:
    """A run directory with one node, written by the rundir package's writers."""
    run = RunDir.create(root, "signals")
    with run.edit_info() as info:
        info.session_name = "signals"
        info.state = state
        info.nodes = 1
        info.launcher = launcher
    with run.edit_node_status(0) as status:
        status.state = "stopped" if state == "stopped" else "running"
        status.pid = node_pid
    return run


def down(run: RunDir, capsys: pytest.CaptureFixture[str], grace: float = 0.2) -> tuple[int, str]:
    """``esdash cluster down RUN`` through the CLI's main function: exit code and output."""
    code = main(["cluster", "down", str(run.path), "--grace", str(grace)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_cluster_down_refuses_a_pid_that_belongs_to_another_process(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    """The issue's reproduction, through a separate ``esdash`` process as a user runs it."""
    run = make_run(tmp_path / "runs", "running", reused(stranger), node_pid=stranger.pid)
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "cluster", "down", str(run.path), "--grace", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert running(stranger)
    said = result.stdout + result.stderr
    assert f"the launcher not signalled: pid {stranger.pid} now belongs to another process" in said
    assert "`sleep 300`" in said and "mpiexec" in said
    # the recorded launcher provably ended (its pid is somebody else's): the run is down
    assert result.returncode == 0, said
    assert f"{run.path}: stopped; 1 of 1 node(s) down" in result.stdout
    assert run.read_info().state == "stopped"
    assert run.node_statuses()[0].state == "stopped"


def test_cluster_down_refuses_a_record_without_identity(
    tmp_path: Path, stranger: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """An old run directory's launcher (pid only) is never signalled, whatever runs there."""
    run = make_run(tmp_path / "runs", "running", pid_only(stranger))
    code, said = down(run, capsys)
    assert running(stranger)
    assert f"pid {stranger.pid} runs `sleep 300`" in said
    assert "has no start time or command line" in said
    assert code == 1  # the node still says running, and its launcher could not be checked
    assert run.read_info().state == "running"  # the run may still be up: state kept


def test_cluster_down_signals_nothing_of_a_stopped_run(
    tmp_path: Path, stranger: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """Even a process that matches its record exactly is left alone once the run is over."""
    record = process.identify(stranger.pid, ["sleep", "300"])
    assert process.check(record).kind == process.CONFIRMED  # it would be signalled otherwise
    run = make_run(tmp_path / "runs", "stopped", record)
    before = run.info_file.read_bytes()
    code, said = down(run, capsys)
    assert running(stranger)
    assert code == 0
    notice = f"esdash: stopping the cluster of {run.path} ..."  # said before anything slow
    assert sorted(said.splitlines()) == sorted(
        [notice, f"{run.path}: already stopped (run.json); nothing signalled"]
    )
    assert run.info_file.read_bytes() == before
    assert not run.stop_requested()


def test_an_over_run_with_a_node_still_marked_running_gets_only_the_stop_file(
    tmp_path: Path, stranger: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    record = process.identify(stranger.pid, ["sleep", "300"])
    run = make_run(tmp_path / "runs", "interrupted", record, node_pid=stranger.pid)
    code, said = down(run, capsys)
    assert running(stranger)
    assert code == 0
    assert "already interrupted (run.json); nothing signalled" in said
    assert "1 node(s) still marked running were asked to stop (stop file)" in said
    assert run.stop_requested()


def test_cluster_down_still_stops_a_confirmed_launcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate is not a refusal of everything: a launcher esdash recorded is stopped."""
    child, record = process.start(["sleep", "300"], output=tmp_path / "launcher.log")
    try:
        run = make_run(tmp_path / "runs", "running", record)
        code, said = down(run, capsys, grace=0.2)
        assert child.wait(timeout=30) == -signal.SIGTERM
        assert code == 0, said
        assert f"{run.path}: stopped; 1 of 1 node(s) down" in said
        assert "not signalled" not in said
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_dashboard_stop_refuses_strangers_and_over_runs(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    """The dashboard's stop key (:func:`stop_run`): the driver, bench launcher and launcher."""
    run = make_run(tmp_path / "runs", "running", reused(stranger))
    with run.edit_info() as info:
        info.driver = msgspec.structs.replace(reused(stranger), command=["esdash", "run", "s"])
        info.bench_launcher = pid_only(stranger)
    outcome = stop_run(run.path, grace=0.2)
    assert running(stranger)
    assert f"esdash run not signalled: pid {stranger.pid} now belongs to another process" in (
        outcome
    )
    assert "the benchmark launcher not signalled" in outcome
    assert "has no start time or command line" in outcome
    assert "the launcher not signalled" in outcome

    over = make_run(tmp_path / "over", "stopped", process.identify(stranger.pid))
    with over.edit_info() as info:
        info.driver = process.identify(stranger.pid)
    assert stop_run(over.path, grace=0.2) == "already stopped (run.json); nothing signalled"
    assert running(stranger)


def test_check_confirms_only_complete_matching_records(
    stranger: subprocess.Popen[bytes],
) -> None:
    """The one gate every signal goes through, kind by kind."""
    record = process.identify(stranger.pid, ["sleep", "300"])
    assert process.check(record).kind == process.CONFIRMED
    no_time = msgspec.structs.replace(record, create_time=None)
    no_command = msgspec.structs.replace(record, command=[])
    for incomplete in (no_time, no_command, pid_only(stranger)):
        verdict = process.check(incomplete)
        assert verdict.kind == process.UNPROVEN and verdict.process is None
        assert process.send(incomplete, signal.SIGTERM) is False
        assert process.stop(incomplete, grace=0.1) == "refused"
    assert process.check(reused(stranger)).kind == process.REUSED
    assert process.stop(reused(stranger), grace=0.1) == "gone"
    elsewhere = msgspec.structs.replace(record, host=None)
    assert process.check(elsewhere).kind == process.ELSEWHERE
    assert process.send(elsewhere, signal.SIGTERM) is False
    assert running(stranger)
    assert process.check(None).kind == process.GONE
