"""The guard of :mod:`esdash.launch.guard`: a process group that goes with its parent.

No search engine needed: a shell whose background child stands in for the server JVM the
launcher JVM forks.  The parent (the rank) is a small Python process started here, so it can
be SIGKILLed as a rank would be.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli import pids_alive

from esdash.launch import process

#: "launcher" that forks a "server" and waits for it, printing both pids.
TWO_LEVELS = 'sleep 300 & echo "$$ $!"; wait'

#: The rank: starts the guarded command, prints its guard's pid, then waits to be killed.
RANK = """
import sys, time
from pathlib import Path
from esdash.launch import process
child, record = process.start(["sh", "-c", sys.argv[1]], output=Path(sys.argv[2]), guard=5.0)
print(child.pid, flush=True)
time.sleep(300)
"""


def wait_for(predicate, timeout: float = 10.0) -> float:
    """Seconds until ``predicate()`` holds; fails after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - start


def pids_in(output: Path) -> list[int]:
    wait_for(lambda: output.exists() and output.read_text().strip() != "")
    return [int(word) for word in output.read_text().split()]


def test_a_killed_parent_takes_the_whole_group_along(tmp_path: Path) -> None:
    output = tmp_path / "out"
    rank = subprocess.Popen(
        [sys.executable, "-c", RANK, TWO_LEVELS, str(output)], stdout=subprocess.PIPE, text=True
    )
    try:
        guard = int(rank.stdout.readline())
        launcher, server = pids_in(output)
        assert pids_alive([guard, launcher, server]) == [guard, launcher, server]
        assert os.getpgid(server) == guard  # the guard leads the node's group
        rank.kill()  # SIGKILL: no handler, no finally
        rank.wait()
        seconds = wait_for(lambda: not pids_alive([guard, launcher, server]))
    finally:
        if rank.poll() is None:
            rank.kill()
            rank.wait()
    assert seconds < 2.0


def test_the_guard_outlives_its_command_until_every_descendant_is_gone(tmp_path: Path) -> None:
    """The launcher exits on TERM at once; the server, re-parented to the guard, is waited for
    (and ends the way the command ended)."""
    output = tmp_path / "out"
    # a server that needs a moment after TERM, as a JVM running its shutdown hooks does
    slow_server = 'sh -c "trap \\"sleep 1; exit 0\\" TERM; sleep 300 & wait" & echo "$$ $!"; wait'
    child, record = process.start(["sh", "-c", slow_server], output=output, guard=5.0)
    launcher, server = pids_in(output)
    time.sleep(0.2)  # the server's trap is set
    started = time.monotonic()
    assert process.stop(record, grace=5.0, group=True, process=child) == "exited"
    assert time.monotonic() - started >= 0.9  # the guard waited for the server
    assert pids_alive([launcher, server]) == []
    assert child.returncode == -signal.SIGTERM  # the command died of TERM, and so did the guard


def test_the_command_ending_stops_what_it_left_behind(tmp_path: Path) -> None:
    """A launcher that exits while its server runs (a crash): the guard stops the server."""
    output = tmp_path / "out"
    child, _ = process.start(
        ["sh", "-c", 'sleep 300 & echo "$$ $!"; sleep 0.3; exit 3'], output=output, guard=5.0
    )
    launcher, server = pids_in(output)
    assert child.wait(timeout=10) == 3  # the command's own exit code
    assert pids_alive([launcher, server]) == []


def test_a_server_ignoring_term_is_killed_after_the_grace(tmp_path: Path) -> None:
    output = tmp_path / "out"
    stubborn = 'sh -c "trap \\"\\" TERM; sleep 300 & wait; sleep 300" & echo "$$ $!"; wait'
    child, _ = process.start(["sh", "-c", stubborn], output=output, guard=1.0)
    launcher, server = pids_in(output)
    time.sleep(0.2)
    started = time.monotonic()
    process.signal_child(child, signal.SIGTERM)  # only the guard: it signals its group
    child.wait(timeout=10)
    assert 0.9 <= time.monotonic() - started < 5
    assert pids_alive([launcher, server]) == []
