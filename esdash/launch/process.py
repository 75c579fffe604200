"""Processes esdash starts, and the one way it signals and stops them.

A pid alone names a process only while it lives: after it exits, the kernel may give the
number to anybody's new process, and a stop request read from an old run directory would
then kill a stranger.  So every process esdash starts is recorded with its identity -- pid,
host, create time and command line (:class:`esdash.rundir.records.ProcessRecord`) -- and
:func:`find` returns it only when psutil confirms all of them on this host.  Every signal
esdash sends to a process it did not just ``wait`` for goes through :func:`send`, and every
stop through :func:`stop` (TERM, a grace period, KILL); a new way of stopping extends this
module, it never adds a loop elsewhere.

Processes started here get their own session (``start_new_session``): their process group
is theirs, so group signals reach the ranks an MPI launcher started and nothing else, and a
Ctrl-C in esdash's terminal reaches only what esdash forwards.

A command whose processes must not outlive the one starting it (a search node: a launcher
JVM and the server JVM it forks) is started with ``guard=GRACE``: it then runs under
:mod:`esdash.launch.guard`, which leads the group, stops the whole group when its parent
dies (even by SIGKILL) or when the command ends, and escalates to SIGKILL after ``GRACE``
seconds.  :func:`stop` with ``group=True`` stops such a group from outside the same way.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal as signals
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

from esdash.launch import guard as _guard
from esdash.rundir.records import ProcessRecord

#: psutil reads create times with the kernel's clock-tick resolution (1/100 s).
CREATE_TIME_TOLERANCE = 0.05


def guarded(
    argv: Sequence[str], grace: float, parent: int | None = None, cwd: Path | None = None
) -> list[str]:
    """``argv`` run under :mod:`esdash.launch.guard` for ``parent`` (default: this process).

    The guard runs as a script in isolated mode (``-I -S``): it needs the standard library
    only, whatever the environment (a node's is minimal) and the account (the node owner).
    ``cwd`` is entered by the guard, as that account.
    """
    return [
        sys.executable,
        "-I",
        "-S",
        str(Path(_guard.__file__).resolve()),
        "--parent",
        str(os.getpid() if parent is None else parent),
        "--grace",
        f"{grace:g}",
        *(["--cwd", str(cwd)] if cwd is not None else []),
        "--",
        *(str(part) for part in argv),
    ]


def guarded_command(process: subprocess.Popen[bytes], timeout: float = 5.0) -> int | None:
    """The pid of the command a guard started (its first child), once it runs.

    The guard forks it within milliseconds of starting; None if the guard ended first or
    took longer than ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            children = psutil.Process(process.pid).children()
            if children:
                return min(children, key=lambda child: child.create_time()).pid
        time.sleep(0.01)
    return None


def start(
    argv: Sequence[str],
    *,
    output: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    restore_signals: bool = True,
    user: tuple[int, int] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    guard: float | None = None,
    umask: int = -1,
) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start ``argv`` in its own session, stdout and stderr appended to ``output``.

    Returns the process and its identity record (store the record in the run directory).
    ``restore_signals=False`` keeps Python's ignored SIGPIPE in the child: an MPI launcher
    (hydra) otherwise dies writing to a lost rank.  ``user`` (uid, gid) runs it as that
    account with no supplementary groups (set by the kernel, no ``su`` in between, so
    signals reach it); ``preexec_fn`` runs in the child just before ``exec``.  ``guard``
    (seconds of grace) runs it under the guard (see the module): the process returned and
    recorded is then the guard, and :func:`guarded_command` finds the command's own pid.
    ``umask`` (unless -1) is the child's: 0o077 keeps everything a node writes private.
    """
    command = [str(part) for part in argv]
    if guard is not None:
        command = guarded(command, guard, cwd=cwd)
        cwd = None  # entered by the guard, as the account it runs as
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(output.open("ab")) if output is not None else None
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            restore_signals=restore_signals,
            user=user[0] if user else None,
            group=user[1] if user else None,
            extra_groups=[] if user else None,
            preexec_fn=preexec_fn,
            umask=umask,
        )
    _wait_for_exec(process, command)
    return process, identify(process.pid, command)


def _wait_for_exec(process: subprocess.Popen[bytes], command: Sequence[str]) -> None:
    """Return once the child runs ``command`` (between fork and exec it still looks like us).

    Takes milliseconds; gives up after a second (the record still holds ``command``).
    """
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if _same_command(psutil.Process(process.pid).cmdline(), command):
                return
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return
        time.sleep(0.005)


def identify(pid: int, command: Sequence[str] | None = None) -> ProcessRecord:
    """The identity of the running process ``pid`` (its command line as psutil reads it).

    ``command`` is what it was started with; when the process is already gone the record
    keeps that and no create time, so it never matches a later process.
    """
    try:
        found = psutil.Process(pid)
        with found.oneshot():
            create_time, cmdline = found.create_time(), found.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        create_time, cmdline = None, list(command or ())
    return ProcessRecord(
        pid=pid,
        host=socket.gethostname(),
        command=list(command) if command is not None else cmdline,
        create_time=create_time,
    )


def _same_command(cmdline: Sequence[str], command: Sequence[str]) -> bool:
    """Whether a running command line is the recorded one.

    A script started through its ``#!`` line runs as ``[interpreter, /path/script, args]``;
    its path and arguments must still match.
    """
    if list(cmdline) == list(command):
        return True
    if not command or len(cmdline) != len(command) + 1:
        return False
    script, args = cmdline[1], list(cmdline[2:])
    return os.path.basename(script) == os.path.basename(command[0]) and args == list(command[1:])


def find(record: ProcessRecord | None) -> psutil.Process | None:
    """The process ``record`` names, if it still runs on this host and is still it.

    For liveness only (is the run still going?): pid, host, create time (when recorded) and
    command line (when recorded) must match; a zombie is gone.  Records from before create
    times were kept match on the command line alone -- good enough to show a run as alive,
    never to signal it: :func:`check` decides that, and needs a complete record.
    """
    if record is None or record.pid <= 1:
        return None
    if record.host is not None and record.host != socket.gethostname():
        return None
    try:
        found = psutil.Process(record.pid)
        with found.oneshot():
            if found.status() == psutil.STATUS_ZOMBIE:
                return None
            created = found.create_time()
            cmdline = found.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return None  # not ours to signal anyway
    if record.create_time is not None and abs(created - record.create_time) > CREATE_TIME_TOLERANCE:
        return None
    if record.command and not _same_command(cmdline, record.command):
        return None
    return found


#: What :func:`check` found at a recorded pid (:attr:`Check.kind`).
Kind = Literal["confirmed", "gone", "reused", "unproven", "elsewhere"]
CONFIRMED: Kind = "confirmed"  # the recorded process itself: it may be signalled
GONE: Kind = "gone"  # nothing runs at the pid (or a zombie): the recorded process ended
REUSED: Kind = "reused"  # another process holds the pid: the recorded one ended
UNPROVEN: Kind = "unproven"  # something runs at the pid; the record cannot prove it is it
ELSEWHERE: Kind = "elsewhere"  # recorded on another host (or none): not visible from here


@dataclass(frozen=True)
class Check:
    """What runs at a recorded pid: the confirmed process, or why it is not signalled.

    ``refusal`` is one line for the user (``REUSED``, ``UNPROVEN``, ``ELSEWHERE``).
    """

    kind: Kind
    process: psutil.Process | None = None
    refusal: str | None = None


def check(record: ProcessRecord | None) -> Check:
    """Whether ``record``'s process may be signalled: the one gate before any signal.

    Confirmed only when the record is complete (pid, host, create time, command line) and
    psutil reads the same create time and command line at that pid on this host.  A record
    written by an older esdash (no create time or command line) proves nothing: a live pid
    is then ``UNPROVEN`` and never signalled, whatever it runs.
    """
    if record is None or record.pid <= 1:
        return Check(GONE)
    here_now = socket.gethostname()
    if record.host != here_now:
        where = f"on host {record.host}" if record.host else "with no host"
        return Check(
            ELSEWHERE, refusal=f"pid {record.pid} was recorded {where}, this is {here_now}"
        )
    try:
        found = psutil.Process(record.pid)
        with found.oneshot():
            if found.status() == psutil.STATUS_ZOMBIE:
                return Check(GONE)
            created, cmdline = found.create_time(), found.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return Check(GONE)
    except psutil.AccessDenied:
        return Check(UNPROVEN, refusal=f"pid {record.pid} belongs to another user")
    return _compare(record, found, created, cmdline)


def _compare(
    record: ProcessRecord, found: psutil.Process, created: float, cmdline: Sequence[str]
) -> Check:
    """The verdict for the live process at ``record.pid`` (see :func:`check`)."""
    now = f"`{_shown(cmdline)}`, started {_when(created)}"
    then = f"`{_shown(record.command)}`, started {_when(record.create_time)}"
    same_time = record.create_time is None or (
        abs(created - record.create_time) <= CREATE_TIME_TOLERANCE
    )
    same_command = not record.command or _same_command(cmdline, record.command)
    if not (same_time and same_command):
        return Check(
            REUSED,
            refusal=f"pid {record.pid} now belongs to another process ({now}), "
            f"not the recorded one ({then})",
        )
    missing = [
        what
        for what, value in (("start time", record.create_time), ("command line", record.command))
        if not value
    ]
    if missing:
        return Check(
            UNPROVEN,
            refusal=f"pid {record.pid} runs {now}, but its record has no "
            f"{' or '.join(missing)} (written by an older esdash or by hand), "
            "so it cannot be proved to be the recorded process",
        )
    return Check(CONFIRMED, process=found)


def _shown(command: Sequence[str]) -> str:
    """A command line for a one-line message (long ones shortened)."""
    text = shlex.join(command) if command else "?"
    return text if len(text) <= 80 else f"{text[:77]}..."


def _when(created: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created)) if created else "?"


def alive(record: ProcessRecord | None) -> bool:
    """Whether the recorded process still runs here (and is still the one recorded)."""
    return find(record) is not None


def send(
    record: ProcessRecord | None, sig: int, *, group: bool = False, tree: bool = False
) -> bool:
    """Signal the recorded process (``group``: its whole process group) if it is still it.

    Returns whether a signal was sent: only to a process :func:`check` confirms.  A group
    signal requires the process to lead its group, as everything :func:`start` started
    does: anything else is refused.  ``tree`` also signals every descendant, found through
    the confirmed process (so they are ours): an MPI launcher's ranks run in sessions of
    their own, out of reach of its group.
    """
    found = check(record).process
    if found is None:
        return False
    below = _descendants(found) if tree else []
    try:
        if group:
            if os.getpgid(found.pid) != found.pid:
                return False
            os.killpg(found.pid, sig)
        else:
            found.send_signal(sig)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return False
    _signal_all(below, sig)
    return True


def _descendants(found: psutil.Process) -> list[psutil.Process]:
    """Every process below ``found`` (a confirmed one), read before it is signalled."""
    try:
        return list(found.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _signal_all(processes: Sequence[psutil.Process], sig: int) -> None:
    """``sig`` to each process psutil still knows as itself (pid and create time)."""
    for each in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            each.send_signal(sig)  # psutil refuses a reused pid (create time)


def wait_gone(
    record: ProcessRecord | None,
    timeout: float,
    process: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None,
) -> bool:
    """Wait until the recorded process is gone; True when it is (within ``timeout`` s).

    With ``process`` (our own child) it is also reaped, so it leaves no zombie.
    """
    if process is not None:
        try:
            process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while alive(record):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def signal_child(
    child: subprocess.Popen[bytes] | subprocess.Popen[str], sig: int, group: bool = False
) -> None:
    """Signal our own unreaped child: its pid cannot belong to anybody else yet.

    ``group`` signals its process group when it leads one (it started its own session).
    """
    if child.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        if group and os.getpgid(child.pid) == child.pid:
            os.killpg(child.pid, sig)
        else:
            child.send_signal(sig)


def stop(
    record: ProcessRecord | None,
    *,
    grace: float,
    first: int = signals.SIGTERM,
    group: bool = True,
    kill_after: float = 15.0,
    process: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None,
    tree: bool = False,
) -> str:
    """Stop a process: ``first`` (unless 0), ``grace`` seconds, then TERM and KILL.

    Waits ``grace`` seconds for it to end on its own (``first`` is sent at the start when it
    is not 0), then sends SIGTERM (if ``first`` was not already TERM), waits ``kill_after``
    seconds, and finally SIGKILL.  ``process`` is our own child when we started it: it is
    signalled directly (an exec chain, like a launcher script that execs java, changes the
    command line but not the child) and reaped.  Otherwise ``record`` is signalled only
    while :func:`check` confirms it: ``"refused"`` when a live pid cannot be proved to be
    the recorded process (its record is incomplete), ``"gone"`` when nothing here is it.
    ``tree``: the final SIGKILL also reaches every descendant (an MPI launcher's ranks,
    which run in sessions of their own).  Returns ``"gone"``, ``"refused"``, ``"exited"``,
    ``"terminated"`` or ``"killed"``.
    """
    if process is not None:
        if process.poll() is not None:
            return "gone"

        def signal(sig: int) -> None:
            below: list[psutil.Process] = []
            if tree and sig == signals.SIGKILL:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    below = _descendants(psutil.Process(process.pid))
            signal_child(process, sig, group)
            _signal_all(below, sig)
    else:
        verdict = check(record)
        if verdict.kind == UNPROVEN:
            return "refused"
        if verdict.process is None:
            return "gone"

        def signal(sig: int) -> None:
            send(record, sig, group=group, tree=tree and sig == signals.SIGKILL)

    if first:
        signal(first)
    if wait_gone(record, grace, process):
        return "exited"
    if first != signals.SIGTERM:
        signal(signals.SIGTERM)
        if wait_gone(record, kill_after, process):
            return "terminated"
    signal(signals.SIGKILL)
    wait_gone(record, 10.0, process)
    return "killed"


def here(record: ProcessRecord | None) -> bool:
    """Whether the recorded process was started on this host (only then can esdash see it)."""
    return record is not None and record.host == socket.gethostname()
