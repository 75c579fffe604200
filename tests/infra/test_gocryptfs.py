"""A gocryptfs directory is initialised, mounted by the unprivileged user, used, unmounted."""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import pytest
from support.prereqs import find_tool
from support.procs import as_user, give, run_bounded, stop, user_dir

pytestmark = pytest.mark.gocryptfs


def is_mounted(path: Path) -> bool:
    """From /proc/self/mountinfo: root cannot even stat another user's FUSE mount point."""
    target = str(path)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[4] == target:
            return True
    return False


def test_mount_write_read_unmount(shared_tmp, es_user):
    base = user_dir(shared_tmp / "gocryptfs", es_user, mode=0o700)
    cipher, plain, passfile = base / "cipher", base / "plain", base / "pass"
    for path in (cipher, plain):
        user_dir(path, es_user, mode=0o700)
    passfile.write_text(secrets.token_hex(32))
    give(passfile, es_user, mode=0o600)

    def as_esuser(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = run_bounded(as_user(es_user, argv), timeout=timeout)
        assert proc.returncode == 0, f"{argv}: {proc.stderr}"
        return proc

    gocryptfs = find_tool("gocryptfs")
    as_esuser(gocryptfs, "-init", "-q", "-scryptn", "10", "-passfile", str(passfile), str(cipher))
    # -fg keeps gocryptfs our child, so it can be waited for after unmounting.
    mount = subprocess.Popen(
        as_user(es_user, [gocryptfs, "-fg", "-q", "-nosyslog", "-passfile", str(passfile),
                          str(cipher), str(plain)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not is_mounted(plain):
            assert mount.poll() is None, mount.stdout.read().decode()
            assert time.monotonic() < deadline, "gocryptfs did not mount within 30 s"
            time.sleep(0.05)

        secret = "esdash plaintext " + secrets.token_hex(8)
        as_esuser("sh", "-c", f'printf %s "{secret}" > "{plain}/doc.txt"')
        assert as_esuser("cat", str(plain / "doc.txt")).stdout == secret
        # Root sees only the ciphertext, which must not contain the plaintext.
        metadata = ("gocryptfs.conf", "gocryptfs.diriv")
        stored = [p for p in cipher.iterdir() if p.name not in metadata]
        assert len(stored) == 1
        assert secret.encode() not in stored[0].read_bytes()
    finally:
        if is_mounted(plain):
            run_bounded(as_user(es_user, [find_tool("fusermount3"), "-u", str(plain)]), timeout=30)
        try:
            rc = mount.wait(timeout=30)  # unmounting ends gocryptfs -fg
        except subprocess.TimeoutExpired:
            rc = stop(mount, timeout=10)
    assert rc == 0
    assert not is_mounted(plain)
