"""Helpers for gocryptfs tests: mounts made by hand (leftovers of "earlier runs"), scans.

Root cannot stat another user's FUSE mount, so mount state always comes from
``/proc/self/mountinfo``; processes are found through ``/proc`` and stopped by PID.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
from pathlib import Path

from support.prereqs import find_tool
from support.procs import stop, wait_gone


def ids(user: str) -> dict:
    """Popen arguments that run a child directly as ``user`` (no runuser: signals reach it)."""
    entry = pwd.getpwnam(user)
    if os.geteuid() == entry.pw_uid:
        return {}
    # uid *and* gid: FUSE lets only the mounting uid and gid use a mount without allow_other.
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def mount_entry(path: Path) -> dict | None:
    """The mountinfo entry whose mount point is ``path``: fstype, source, options."""
    found = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(path):
            tail = fields[fields.index("-") + 1 :]
            found = {"fstype": tail[0], "source": tail[1], "options": tail[2]}
    return found


def mounts_under(root: Path) -> list[str]:
    """Every mount point at or below ``root``."""
    prefix = str(root).rstrip("/") + "/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(prefix)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def gocryptfs_pids(root: Path) -> list[int]:
    """Live gocryptfs processes whose command line mentions a path under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        mentions = any(str(root).encode() in a for a in argv)
        if argv[0].endswith(b"gocryptfs") and mentions and _state(int(entry.name)) not in "ZX":
            found.append(int(entry.name))
    return found


def init_cipher(cipher: Path, password: str, user: str, scrypt_n: int = 10) -> None:
    """``gocryptfs -init`` of an empty ``cipher`` dir as ``user``."""
    cipher.mkdir(parents=True, exist_ok=True)
    entry = pwd.getpwnam(user)
    for path in (cipher.parent, cipher):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    cipher.chmod(0o700)
    done = subprocess.run(
        [find_tool("gocryptfs"), "-init", "-q", "-scryptn", str(scrypt_n), str(cipher)],
        input=(password + "\n").encode(),
        capture_output=True,
        cwd="/",
        timeout=60,
        **ids(user),
    )
    assert done.returncode == 0, done.stderr


def start_mount(cipher: Path, plain: Path, password: str, user: str) -> subprocess.Popen:
    """``gocryptfs -fg`` of ``cipher`` on ``plain`` as ``user``; returns once it is mounted."""
    plain.mkdir(parents=True, exist_ok=True)
    entry = pwd.getpwnam(user)
    os.chown(plain, entry.pw_uid, entry.pw_gid)
    proc = subprocess.Popen(
        [find_tool("gocryptfs"), "-fg", "-nosyslog", str(cipher), str(plain)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd="/",
        start_new_session=True,
        **ids(user),
    )
    proc.stdin.write((password + "\n").encode())
    proc.stdin.close()
    deadline = time.monotonic() + 30
    while mount_entry(plain) is None:
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "gocryptfs did not mount within 30 s"
        time.sleep(0.02)
    return proc


def dead_mount(cipher: Path, plain: Path, password: str, user: str) -> None:
    """Leave a dead mount at ``plain``: its gocryptfs SIGKILLed ("Transport endpoint ...")."""
    proc = start_mount(cipher, plain, password, user)
    proc.kill()
    proc.wait(timeout=60)  # a FUSE daemon can take its time to die on a loaded machine
    proc.stdout.close()
    assert mount_entry(plain) is not None


def unmount(plain: Path, user: str, proc: subprocess.Popen | None = None) -> None:
    """Teardown for hand-made mounts: unmount (lazily if need be), stop the process."""
    if mount_entry(plain) is not None:
        for extra in ([], ["-z"]):
            subprocess.run(
                [find_tool("fusermount3"), "-u", *extra, str(plain)],
                capture_output=True,
                cwd="/",
                timeout=30,
                **ids(user),
            )
            if mount_entry(plain) is None:
                break
    if proc is not None:
        stop(proc, sig=signal.SIGTERM, timeout=10)
        if proc.stdout:
            proc.stdout.close()


def stop_pids(pids: list[int]) -> None:
    """SIGTERM, then SIGKILL, processes that are not our children (found by PID)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        if not wait_gone(pid, 10):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 10)


def files_containing(root: Path, needles: list[bytes]) -> dict[bytes, list[Path]]:
    """Which of ``needles`` occur in the raw bytes of which files under ``root``."""
    hits: dict[bytes, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        for needle in needles:
            if needle in data:
                hits.setdefault(needle, []).append(path)
    return hits


def bytes_under(root: Path) -> int:
    """Total size of the regular files under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def processes_mentioning(secret: bytes) -> list[str]:
    """Processes whose command line or environment contains ``secret`` (as seen by root)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for name in ("cmdline", "environ"):
            try:
                if secret in (entry / name).read_bytes():
                    found.append(f"{entry.name} {name}")
            except OSError:
                continue
    return found
