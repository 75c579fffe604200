"""A guard that leads a process group and takes the whole group down with its parent.

Why it exists: an Elasticsearch or OpenSearch node is two JVMs.  ``bin/elasticsearch`` execs a
launcher JVM, and that forks the server JVM.  The kernel's die-with-parent setting
(``PR_SET_PDEATHSIG``) reaches only a direct child of the dying process and is not inherited
across ``fork``, so when a rank was killed outright only the launcher JVM was told -- and
while the server is still starting the launcher does not stop it (it waits for the server to
be ready, up to the 30 s discovery timeout of a node whose master is gone), so a killed rank
left a server JVM holding its ports.

:func:`esdash.launch.process.start` with ``guard=`` runs the command under this script
instead.  The guard

* leads the process group (``start`` gives it its own session), so a group signal from the
  rank reaches both JVMs at once;
* asks for SIGTERM when its parent (the rank) dies, and checks at once whether the parent
  died before it could ask;
* is a child subreaper: when the launcher JVM exits, the server JVM becomes the guard's
  child, so the guard sees -- and waits for -- every process the command started;
* on SIGTERM/SIGINT/SIGHUP, its parent's death or the command's own end, signals SIGTERM to
  its group, waits ``--grace`` seconds for every descendant, then SIGKILLs the rest;
* ends the way the command ended (same exit code, or the same signal), once no descendant
  is left;
* enters the command's working directory itself (``--cwd``), as the account it runs as:
  root, which starts it, cannot enter a node account's FUSE mount (gocryptfs keeps the
  node's scratch files there).

It is run as a script (``python -I -S guard.py``) and imports the standard library only: it
runs as the node's unprivileged owner with the node's environment, where esdash itself may
not be importable, and it starts in a few milliseconds.  It never signals a process that is
not its own descendant or in its own group.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_POLL = 0.05
#: Seconds the guard still waits after SIGKILL before it exits anyway.
GIVE_UP_AFTER_KILL = 10.0
#: Signals that ask the guard to stop its group.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _die_with_parent() -> None:
    """In the command's child (after fork, before exec): SIGTERM it if the guard dies.

    A guard killed outright (SIGKILL) cannot stop its group; the launcher is at least told.
    """
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _descendants(root: int) -> list[int]:
    """Every live process below ``root``, read from ``/proc`` (ppid links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Guard:
    """Runs one command in its own group and stops the group as a whole (see the module)."""

    def __init__(
        self, command: Sequence[str], parent: int, grace: float, cwd: str | None = None
    ) -> None:
        self.command = list(command)
        self.parent = parent
        self.grace = grace
        self.cwd = cwd
        self.requested: list[int] = []
        self.status: int | None = None  # the command's wait status, once it ended

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.requested.append(signum)

    def _signal_all(self, sig: int) -> None:
        """``sig`` to this guard's group (when it leads it) and to every descendant.

        TERM reaches this guard as well, which only notes it; KILL goes to descendants only.
        """
        me = os.getpid()
        if sig != signal.SIGKILL and os.getpgid(0) == me:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(me, sig)
        for pid in _descendants(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _parent_gone(self) -> bool:
        return os.getppid() != self.parent

    def _reap(self, child: int) -> bool:
        """Collect ended descendants; True once none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return False
            if pid == child:
                self.status = status

    def run(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if self._parent_gone() or self.requested:
            return 128 + signal.SIGTERM  # stopped before the command started
        child = subprocess.Popen(self.command, preexec_fn=_die_with_parent, cwd=self.cwd)
        stopping_since: float | None = None
        killed = False
        while not self._reap(child.pid):
            wanted = self.requested or self._parent_gone() or self.status is not None
            if wanted and stopping_since is None:
                stopping_since = time.monotonic()
                self._signal_all(signal.SIGTERM)
            waited = time.monotonic() - stopping_since if stopping_since is not None else 0.0
            if waited > self.grace and not killed:
                killed = True
                self._signal_all(signal.SIGKILL)
            elif waited > self.grace + GIVE_UP_AFTER_KILL:
                break  # unkillable (a process stuck in the kernel): do not hang the rank
            time.sleep(_POLL)
        # reaped above: keep Popen from waiting for it again
        child.returncode = os.waitstatus_to_exitcode(self.status) if self.status is not None else 0
        return self._end_like_the_command()

    def _end_like_the_command(self) -> int:
        """The command's exit code; a command killed by a signal makes the guard die of it."""
        status = self.status
        if status is None:
            return 128 + signal.SIGTERM
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            sys.stdout.flush()
            os.kill(os.getpid(), sig)
            return 128 + sig  # not reached for fatal signals
        return os.WEXITSTATUS(status)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="guard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--parent", type=int, required=True, help="pid whose death stops all")
    parser.add_argument("--grace", type=float, required=True, help="seconds from TERM to KILL")
    parser.add_argument(
        "--cwd", help="the command's working directory, entered as the guard's own account"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    return Guard(command, args.parent, args.grace, args.cwd).run()


if __name__ == "__main__":
    sys.exit(main())
