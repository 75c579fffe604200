"""Processes are signalled only while pid, host, create time and command line still match.

Real processes throughout: ``sleep``, a Python child that ignores SIGTERM, a script started
through its ``#!`` line.  A pid whose owner changed is simulated the only way one can be
without waiting for the kernel to recycle it: a record with the right pid and another
create time or command line, which is what a recycled pid looks like to esdash.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import psutil

from esdash.launch import process


def test_start_records_the_identity_psutil_sees(tmp_path: Path) -> None:
    child, record = process.start(["sleep", "30"], output=tmp_path / "out.log")
    try:
        assert record.pid == child.pid and record.command == ["sleep", "30"]
        assert record.create_time == psutil.Process(child.pid).create_time()
        assert process.here(record) and process.alive(record)
        found = process.find(record)
        assert found is not None and found.pid == child.pid
        assert psutil.Process(child.pid).cmdline() == ["sleep", "30"]
    finally:
        child.kill()
        child.wait()
    assert not process.alive(record)


def test_a_record_of_someone_else_is_never_signalled(tmp_path: Path) -> None:
    child, record = process.start(["sleep", "30"], output=tmp_path / "out.log")
    assert record.create_time is not None
    try:
        older = msgspec.structs.replace(record, create_time=record.create_time - 100)
        other = msgspec.structs.replace(record, command=["sleep", "31"])
        elsewhere = msgspec.structs.replace(record, host="another-host")
        for stranger in (older, other, elsewhere):
            assert process.find(stranger) is None
            assert process.send(stranger, signal.SIGKILL) is False
            assert process.stop(stranger, grace=0.1) == "gone"
        assert child.poll() is None  # still running: nobody signalled it
    finally:
        child.kill()
        child.wait()


def test_stop_escalates_from_term_to_kill(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    child, record = process.start([sys.executable, "-c", stubborn], output=tmp_path / "o.log")
    time.sleep(0.5)  # let it install its handler
    outcome = process.stop(record, grace=0.5, kill_after=0.5)
    assert outcome == "killed"
    child.wait(timeout=5)
    assert child.returncode == -signal.SIGKILL


def test_stop_of_our_child_reaps_it_and_reports_exit(tmp_path: Path) -> None:
    child, record = process.start(["sleep", "30"], output=tmp_path / "out.log")
    assert process.stop(record, grace=5, process=child) == "exited"
    assert child.returncode == -signal.SIGTERM
    assert process.stop(record, grace=1, process=child) == "gone"


def test_group_signal_reaches_the_whole_session(tmp_path: Path) -> None:
    """A launcher and the ranks it started share the group ``start`` gave them."""
    script = "sleep 30 & sleep 30 & wait"
    child, record = process.start(["sh", "-c", script], output=tmp_path / "out.log")
    deadline = time.monotonic() + 5
    while len(psutil.Process(child.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    ranks = psutil.Process(child.pid).children()
    assert len(ranks) == 2
    assert process.send(record, signal.SIGTERM, group=True)
    gone, alive = psutil.wait_procs(ranks, timeout=5)
    assert alive == [] and len(gone) == 2
    child.wait(timeout=5)


def test_a_script_started_through_its_shebang_is_still_itself(tmp_path: Path) -> None:
    script = tmp_path / "runner"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    script.chmod(0o755)
    child, record = process.start([str(script), "--flag"], output=tmp_path / "out.log")
    try:
        cmdline = psutil.Process(child.pid).cmdline()
        assert cmdline[1:] == [str(script), "--flag"]  # [interpreter, script, args]
        assert process.alive(record)
    finally:
        child.kill()
        child.wait()


def test_identify_of_a_finished_process_matches_nothing_later() -> None:
    done = subprocess.Popen(["true"])
    done.wait()
    record = process.identify(done.pid, ["true"])
    assert record.create_time is None
    assert not process.alive(record)
