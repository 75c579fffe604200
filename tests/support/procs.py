"""Starting and stopping processes the way the tests must: by PID, never by name.

Daemons are started in the foreground as our own children, so they can be waited for.  The
test process also becomes a *child subreaper*: processes that daemonise (slurmstepd, which
slurmd double-forks; anything started with ``-d``) are re-parented to it instead of to PID 1,
which on some machines (microVMs, containers) never reaps them.  :func:`reap_orphans` collects
them at the end of the session.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def as_user(user: str, argv: Sequence[str], *, allow_root: bool = False) -> list[str]:
    """``argv`` run as ``user``: prefixed with ``runuser`` when we are root and need to switch.

    Elasticsearch refuses to run as root, and so must every helper that starts it; pass
    ``allow_root=True`` only for tools that may legitimately run as root.
    """
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0 and not allow_root:
        raise ValueError(f"refusing to run {argv[0]} as root (user {user!r})")
    if os.geteuid() == entry.pw_uid:
        return list(argv)
    if os.geteuid() != 0:
        raise PermissionError(f"cannot switch to user {user!r} without root")
    return ["runuser", "-u", user, "--", *argv]


def chown_tree(path: Path, user: str) -> None:
    """Give ``path`` (a file, or a directory recursively) to ``user`` and its primary group."""
    entry = pwd.getpwnam(user)
    os.lchown(path, entry.pw_uid, entry.pw_gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), entry.pw_uid, entry.pw_gid)


def give(path: Path, user: str, mode: int) -> Path:
    """Set ``mode`` on an existing file or directory and give it (recursively) to ``user``."""
    path.chmod(mode)
    chown_tree(path, user)
    return path


def user_dir(path: Path, user: str, mode: int = 0o755) -> Path:
    """Create ``path`` owned by ``user`` (parents as the caller), e.g. a node's work dir."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    chown_tree(path, user)
    return path


def is_gone(pid: int) -> bool:
    """True when ``pid`` has exited: reaped here if it is our child, or a zombie elsewhere."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return True
    except ChildProcessError:
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return fields[0] in ("Z", "X")


def wait_gone(pid: int, timeout: float) -> bool:
    """Poll until ``pid`` has exited; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.1)
    return is_gone(pid)


def stop(
    proc: subprocess.Popen, *, sig: int = signal.SIGTERM, timeout: float = 30.0, group: bool = True
) -> int | None:
    """Signal a child we started, wait for it, and SIGKILL it (and its group) on timeout.

    ``group`` also signals the process group when the child leads one
    (``start_new_session=True``), so helpers it forked go too.
    """
    if proc.poll() is not None:
        return proc.returncode
    _signal(proc, sig, group)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL, group)
        return proc.wait(timeout=10)


def _signal(proc: subprocess.Popen, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def run_bounded(
    argv: Sequence[str], *, timeout: float, **kwargs: object
) -> subprocess.CompletedProcess:
    """``subprocess.run`` in its own process group, killed as a group on timeout.

    ``mpiexec`` and ``srun`` fork helpers; killing only the leader would orphan them.
    """
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    with subprocess.Popen(argv, start_new_session=True, **_popen_kwargs(kwargs)) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL, group=True)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _popen_kwargs(kwargs: dict) -> dict:
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    return kwargs


def become_subreaper() -> bool:
    """Adopt orphaned descendants (see the module docstring); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children() -> list[tuple[int, str]]:
    """Live (non-zombie) direct children of this process, as (pid, command line)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != me or fields[0] in ("Z", "X"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, IndexError, ValueError):
            continue
        found.append((int(entry.name), cmdline))
    return found


def reap_orphans() -> int:
    """Collect every exited child without blocking; returns how many were reaped."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1
