"""Each bench rank is two processes: the MPI process that launchers watch, and its worker.

MPICH's ``mpiexec`` ends the whole job when any of its processes dies of a signal, even with
``-disable-auto-cleanup`` (which only spares the others when one *exits* with an error code):
``kill -9`` of one load rank used to take every rank down within a second.  So every rank
forks before MPI is initialised.  The parent initialises MPI, takes part in the start
exchange (gather, broadcast), hands its child the outcome through a pipe, and then only waits:
it forwards SIGTERM and SIGINT to the child, and when the child ends it exits normally with
an error code if the child failed -- a death by signal never reaches the launcher.  A worker
that died without its final report gets one line from its parent in its channel file
(``{"kind": "exit", ...}``: the signal or the exit code), so rank 0 names the cause at once.

The child never touches MPI (it was forked before ``MPI_Init``, so no MPI state is copied)
and asks the kernel for SIGTERM should its parent die (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from esdash.bench.channel import ChannelWriter
from esdash.rundir.layout import RunDir

_PR_SET_PDEATHSIG = 1
#: The record a parent appends for a worker that ended without its final report.
KIND_EXIT = "exit"

#: The child's work: given the start exchange's outcome, return an exit code.
Role = Callable[[dict[str, Any]], int]
#: The parent's part: the MPI start exchange, given the child's pid; returns what the child
#: needs (JSON), or None when there is nothing to do.
Exchange = Callable[[int], dict[str, Any] | None]


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data``: a write to a pipe may be partial (a signal, more than the buffer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_split(run: RunDir, exchange: Exchange, role: Role) -> int:
    """Fork; the parent runs ``exchange`` (MPI) and supervises, the child runs ``role``."""
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    child = os.fork()
    if child == 0:  # ------------------------------------------------------- the worker
        os.close(write_end)
        code = 1
        try:
            _die_with_parent()
            if os.getppid() != parent:  # it died before the line above took effect
                os._exit(1)
            data = _read_all(read_end)
            os.close(read_end)
            if data:
                code = role(json.loads(data))
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(read_end)
    return _supervise(run, child, write_end, exchange)


def _supervise(run: RunDir, child: int, write_end: int, exchange: Exchange) -> int:
    """The parent: forward signals, run the start exchange, wait for the child."""

    ended = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        # our own unreaped child: its pid cannot belong to anybody else yet
        if not ended:
            os.kill(child, signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    try:
        handover = exchange(child)
        if handover is not None:
            # the child may be gone already (a signal): waitpid below says how
            with contextlib.suppress(BrokenPipeError):
                _write_all(write_end, json.dumps(handover).encode())
    finally:
        os.close(write_end)
    os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
    ended = True
    _, status = os.waitpid(child, 0)
    if handover is None:
        return 1
    rank = int(handover["rank"])
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        _report_exit(run, rank, {"signal": name, "reason": f"killed by {name}"})
        return 1
    code = os.WEXITSTATUS(status)
    if code not in (0, 1):  # 1: the worker reported its own failure in its final record
        _report_exit(run, rank, {"code": code, "reason": f"exited with code {code}"})
    return 0 if code == 0 else 1


def _report_exit(run: RunDir, rank: int, what: dict[str, Any]) -> None:
    """One line in the worker's channel: how it ended, for rank 0 (rank 0 itself: nobody)."""
    if rank == 0:
        return
    with contextlib.suppress(OSError):  # the run directory is gone: nobody left to read it
        ChannelWriter(run.rank_channel(rank)).write({"kind": KIND_EXIT, "rank": rank, **what})
