"""The gocryptfs mode's parts, in process: password sources, /dev/fuse, and real mounts.

The mount tests call ``node_storage`` the way a rank does (as root, for the ES user) against
real gocryptfs; the cluster-level behaviour through the CLI is in ``test_gocryptfs.py``.
"""

from __future__ import annotations

import os
import pwd
import secrets
import stat
import subprocess
from pathlib import Path

import pytest
from esdash_plugins.encryption.gocryptfs import (
    GocryptfsMode,
    check_password_options,
    fuse_problem,
    read_password,
)
from support import gocryptfs as g
from support.procs import as_user, user_dir

from esdash.errors import BadInput, ClusterError
from esdash.plugin_api import Owner

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, mknod, setuid)")


def owner_of(user: str) -> Owner:
    entry = pwd.getpwnam(user)
    return Owner(entry.pw_name, entry.pw_uid, entry.pw_gid)


def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# ------------------------------------------------------------------- password sources


@pytest.mark.parametrize(
    "options",
    [{}, {"password_file": Path("/x"), "password_command": "cat /x"}],
    ids=["neither", "both"],
)
def test_exactly_one_password_source(options: dict) -> None:
    with pytest.raises(BadInput) as info:
        check_password_options(options)
    message = str(info.value)
    assert message.startswith("encryption.password_file:")
    assert "exactly one of encryption.password_file" in message
    assert "encryption.password_command" in message


def test_password_file_must_be_private(tmp_path: Path) -> None:
    secret = secrets.token_hex(16)
    path = private_file(tmp_path / "pass", secret + "\n", 0o644)
    with pytest.raises(BadInput) as info:
        read_password({"password_file": path})
    message = str(info.value)
    assert message.startswith("encryption.password_file:")
    assert "mode 0644" in message and f"chmod 600 {path}" in message
    assert secret not in message
    path.chmod(0o600)
    assert read_password({"password_file": path}) == secret.encode()
    path.chmod(0o400)  # stricter is fine too
    assert read_password({"password_file": path}) == secret.encode()


def test_missing_or_unusable_password_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(
        BadInput,
        match=r"does not exist; create it, readable by you alone .* `\(umask 077; head -c 32",
    ):
        read_password({"password_file": missing})
    empty = private_file(tmp_path / "empty", "\n")
    with pytest.raises(BadInput, match="empty password"):
        read_password({"password_file": empty})
    two = private_file(tmp_path / "two", "a\nb\n")
    with pytest.raises(BadInput, match="more than one line"):
        read_password({"password_file": two})


@ROOT_ONLY
def test_password_file_of_another_user_is_refused(tmp_path: Path, es_user: str) -> None:
    path = private_file(tmp_path / "pass", "pw\n")
    entry = pwd.getpwnam(es_user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    with pytest.raises(BadInput, match=f"belongs to {es_user}, not to the invoking user root"):
        check_password_options({"password_file": path})


def test_password_command(tmp_path: Path) -> None:
    assert read_password({"password_command": "printf 'pw word\\n'"}) == b"pw word"
    failing = tmp_path / "fail.sh"
    failing.write_text("#!/bin/sh\necho the-password-would-be-here\necho no vault >&2\nexit 3\n")
    failing.chmod(0o755)
    with pytest.raises(BadInput) as info:
        read_password({"password_command": str(failing)})
    message = str(info.value)
    assert "encryption.password_command" in message and "exited with code 3: no vault" in message
    assert "the-password-would-be-here" not in message  # stdout is never shown
    with pytest.raises(BadInput, match="is not an executable program here"):
        check_password_options({"password_command": "no-such-program-esdash --x"})


# ----------------------------------------------------------------------------- /dev/fuse


def test_missing_fuse_device_names_the_fix(tmp_path: Path) -> None:
    """A fake device path: the machine's own /dev/fuse must not change under other tests."""
    problem = fuse_problem(Owner.current(), tmp_path / "fuse")
    assert problem is not None
    assert f"{tmp_path / 'fuse'} does not exist" in problem and "modprobe fuse" in problem


@ROOT_ONLY
def test_fuse_device_the_node_user_cannot_open_names_the_fix(tmp_path: Path, es_user: str) -> None:
    """A private copy of the FUSE device node (same major/minor) with mode 0600 root:root."""
    device = tmp_path / "fuse"
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(10, 229))
    problem = fuse_problem(owner_of(es_user), device)
    assert problem is not None
    assert f"so the node user {es_user!r} cannot open it" in problem
    assert f"chmod 0666 {device}" in problem
    device.chmod(0o666)
    assert fuse_problem(owner_of(es_user), device) is None


# ------------------------------------------------------------------------- real mounts


@pytest.fixture
def node_dir(shared_tmp: Path, es_user: str, request: pytest.FixtureRequest):
    """``<data_root>/0`` in a dir the ES user can reach; every mount below it is undone."""
    root = user_dir(shared_tmp / f"storage-{request.node.name}", es_user)
    yield root / "0"
    for point in g.mounts_under(root):
        g.unmount(Path(point), es_user)
    g.stop_pids(g.gocryptfs_pids(root))
    assert g.mounts_under(root) == []


def password_options(directory: Path, password: str) -> dict:
    return {"password_file": private_file(directory / "pass", password + "\n"), "scrypt_n": 10}


@pytest.mark.gocryptfs
def test_node_storage_mounts_as_the_node_user_and_unmounts(
    node_dir: Path, es_user: str, shared_tmp: Path
) -> None:
    password = secrets.token_urlsafe(24)
    options = password_options(node_dir.parent, password)
    secret = "plaintext " + secrets.token_hex(12)
    owner = owner_of(es_user)
    with GocryptfsMode().node_storage(node_dir, owner, options) as plain:
        assert plain == node_dir / "plain"
        entry = g.mount_entry(plain)
        assert entry["fstype"] == "fuse.gocryptfs"
        assert entry["source"] == str(node_dir / "cipher")
        assert f"user_id={owner.uid}" in entry["options"]
        assert g.processes_mentioning(password.encode()) == []
        done = subprocess.run(
            as_user(es_user, ["sh", "-c", f'printf %s "{secret}" > {plain}/doc']),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    assert g.mount_entry(node_dir / "plain") is None
    assert g.gocryptfs_pids(node_dir) == []
    assert (node_dir / "cipher" / "gocryptfs.conf").exists()
    assert g.files_containing(node_dir, [secret.encode(), password.encode()]) == {}
    # Reuse: the same password mounts it again and the file is there.
    with GocryptfsMode().node_storage(node_dir, owner, options) as plain:
        done = subprocess.run(as_user(es_user, ["cat", f"{plain}/doc"]), capture_output=True)
        assert done.stdout.decode() == secret
    assert g.mount_entry(node_dir / "plain") is None


@pytest.mark.gocryptfs
def test_wrong_password_names_the_cipher_dir_and_mounts_nothing(
    node_dir: Path, es_user: str
) -> None:
    g.init_cipher(node_dir / "cipher", secrets.token_urlsafe(16), es_user)
    wrong = secrets.token_urlsafe(16)
    options = password_options(node_dir.parent, wrong)
    with (
        pytest.raises(BadInput) as info,
        GocryptfsMode().node_storage(node_dir, owner_of(es_user), options),
    ):
        pytest.fail("mounted with a wrong password")
    message = str(info.value)
    assert f"wrong password for the encrypted node data in {node_dir / 'cipher'}" in message
    assert "--fresh" in message and wrong not in message
    assert g.mount_entry(node_dir / "plain") is None
    assert g.gocryptfs_pids(node_dir) == []


@pytest.mark.gocryptfs
def test_dead_mount_is_released_before_mounting(
    node_dir: Path, es_user: str, capsys: pytest.CaptureFixture
) -> None:
    g.init_cipher(node_dir / "cipher", "pw", es_user)
    g.dead_mount(node_dir / "cipher", node_dir / "plain", "pw", es_user)
    options = password_options(node_dir.parent, "pw")
    with GocryptfsMode().node_storage(node_dir, owner_of(es_user), options) as plain:
        assert g.mount_entry(plain)["fstype"] == "fuse.gocryptfs"
        assert len(g.gocryptfs_pids(node_dir)) == 1
    assert "unmounted a dead mount left behind at" in capsys.readouterr().err
    assert g.mount_entry(node_dir / "plain") is None


@pytest.mark.gocryptfs
def test_busy_leftover_mount_is_refused_with_the_fix(node_dir: Path, es_user: str) -> None:
    """A leftover mount something still uses is reported, never pulled away."""
    g.init_cipher(node_dir / "cipher", "pw", es_user)
    plain = node_dir / "plain"
    proc = g.start_mount(node_dir / "cipher", plain, "pw", es_user)
    holder = subprocess.Popen(["sh", "-c", f"cd {plain} && exec sleep 60"], **g.ids(es_user))
    try:
        g_options = password_options(node_dir.parent, "pw")
        with (
            pytest.raises(ClusterError) as info,
            GocryptfsMode().node_storage(node_dir, owner_of(es_user), g_options),
        ):
            pytest.fail("mounted over a busy mount")
        message = str(info.value)
        live = f"a live gocryptfs mount (pid {proc.pid}) that cannot be unmounted"
        assert f"{plain} is still mounted by an earlier run, {live}" in message
        assert "Device or resource busy" in message
        assert f"fusermount3 -u {plain}" in message and "esdash cluster down" in message
        assert g.mount_entry(plain) is not None  # left alone
        assert proc.poll() is None
    finally:
        holder.kill()
        holder.wait()
        g.unmount(plain, es_user, proc)


@pytest.mark.gocryptfs
def test_release_storage_unmounts_what_a_killed_rank_left(node_dir: Path, es_user: str) -> None:
    """An idle mount whose rank died: ``esdash cluster down`` releases it this way."""
    g.init_cipher(node_dir / "cipher", "pw", es_user)
    proc = g.start_mount(node_dir / "cipher", node_dir / "plain", "pw", es_user)
    try:
        message = GocryptfsMode().release_storage(node_dir, owner_of(es_user), {})
        assert message.startswith(f"unmounted a live gocryptfs mount (pid {proc.pid}) left behind")
        assert g.mount_entry(node_dir / "plain") is None
        assert proc.wait(timeout=10) == 0
        assert GocryptfsMode().release_storage(node_dir, owner_of(es_user), {}) is None
    finally:
        g.unmount(node_dir / "plain", es_user, proc)


@pytest.mark.gocryptfs
def test_plaintext_in_the_way_is_refused(node_dir: Path, es_user: str) -> None:
    options = password_options(node_dir.parent, "pw")
    owner = owner_of(es_user)
    (node_dir / "nodes").mkdir(parents=True)  # a plain node's data (mode "none")
    with (
        pytest.raises(BadInput, match='encryption.mode = "none"') as info,
        GocryptfsMode().node_storage(node_dir, owner, options),
    ):
        pytest.fail("mounted next to plaintext")
    assert "--fresh" in str(info.value)
    (node_dir / "nodes").rmdir()
    (node_dir / "plain").mkdir()
    (node_dir / "plain" / "stray").write_text("written while unmounted")
    with (
        pytest.raises(BadInput, match="although nothing is mounted there"),
        GocryptfsMode().node_storage(node_dir, owner, options),
    ):
        pytest.fail("mounted over plaintext")
    assert g.mount_entry(node_dir / "plain") is None
