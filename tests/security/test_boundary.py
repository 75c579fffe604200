"""The privilege boundary's operations against what the node account can plant.

Issue 28, item 1.  Every operation of :class:`esdash.boundary.Dir` that root performs in a
directory the node account can write is run against a symbolic link to a root-owned canary,
a hard link to it, a FIFO and a replaced directory, each planted *as the node account*
(``runuser``), and must end with a one-line :class:`BoundaryViolation` (or ignore the entry
safely) while the canary keeps its bytes, owner and mode.  The hard link is the one plant
made by root on the account's behalf: this kernel's ``fs.protected_hardlinks`` stops an
account from linking a file it does not own, but esdash must not depend on a sysctl.

The cluster-level matrix (the same plants under a real cluster's directories, then cluster
start, status, stop, a gocryptfs start and a run end) is ``test_plants.py``.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest
from support import prereqs

from esdash.boundary import BoundaryViolation, Dir, clean_text, trusted_path_problem

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the boundary is root's")

CANARY_TEXT = b"CANARY-root-only-secret-4711\n"


def _node() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(prereqs.es_user())
    except KeyError:
        prereqs.unavailable(f"the node account {prereqs.es_user()} does not exist")


def as_node(*argv: str) -> None:
    subprocess.run(["runuser", "-u", _node().pw_name, "--", *argv], check=True)


@pytest.fixture
def area(shared_tmp: Path, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """``root/`` (root's, 0711) holding ``node/`` (the node account's), and a root canary."""
    here = shared_tmp / "boundary" / request.node.name.replace("[", "-").replace("]", "")
    here.mkdir(parents=True)
    here.chmod(0o711)
    root = here / "root"
    root.mkdir(mode=0o711)
    root.chmod(0o711)
    node = root / "node"
    node.mkdir(mode=0o700)
    os.chown(node, _node().pw_uid, _node().pw_gid)
    canary = here / "canary"
    canary.write_bytes(CANARY_TEXT)
    canary.chmod(0o600)
    return node, canary


def fingerprint(path: Path) -> tuple[str, int, int, int, int]:
    """Content, owner, group, mode and modification time (a hard link changes its link
    count, which is the plant, not the harm)."""
    st = os.lstat(path)
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        st.st_uid,
        st.st_gid,
        stat.S_IMODE(st.st_mode),
        st.st_mtime_ns,
    )


def plant(kind: str, where: Path, canary: Path) -> None:
    """``where`` made into ``kind`` as the node account (a hard link: by root, see module)."""
    if kind == "symlink":
        as_node("ln", "-s", str(canary), str(where))
    elif kind == "hardlink":
        os.link(canary, where)
    elif kind == "fifo":
        as_node("mkfifo", str(where))
    elif kind == "replaced-dir":
        as_node("ln", "-s", str(canary.parent), str(where))
    else:
        raise AssertionError(kind)


KINDS = ("symlink", "hardlink", "fifo", "replaced-dir")


@pytest.mark.parametrize("kind", KINDS)
def test_reading_a_node_file_refuses_every_plant(area, kind: str) -> None:
    node, canary = area
    before = fingerprint(canary)
    plant(kind, node / "node.log", canary)
    with (
        Dir.open(node.parent) as root,
        root.sub("node", {_node().pw_uid}) as mine,
        pytest.raises(BoundaryViolation) as caught,
    ):
        mine.tail("node.log", 40, {_node().pw_uid})
    message = str(caught.value)
    assert "\n" not in message and str(node / "node.log") in message
    assert "refused without touching it" in message
    assert CANARY_TEXT.strip().decode() not in message
    assert fingerprint(canary) == before


@pytest.mark.parametrize("kind", KINDS)
def test_handing_a_tree_over_refuses_links_out_and_changes_no_canary(area, kind: str) -> None:
    """A symlink is changed itself (lchown), never followed; a hard link stops the walk."""
    node, canary = area
    before = fingerprint(canary)
    as_node("mkdir", str(node / "sub"))
    plant(kind, node / "sub" / "entry", canary)
    ids = (_node().pw_uid, _node().pw_gid)
    with Dir.open(node.parent) as root:
        if kind == "hardlink":
            with pytest.raises(BoundaryViolation, match="a hard link"):
                root.hand_over("node", ids)
        else:
            root.hand_over("node", ids)  # the link or FIFO itself, never its target
    assert fingerprint(canary) == before
    if kind != "hardlink":
        assert os.lstat(node / "sub" / "entry").st_uid == _node().pw_uid


def test_a_third_accounts_entry_stops_a_hand_over(area) -> None:
    node, canary = area
    nobody = pwd.getpwnam("nobody")
    third = node / "theirs"
    third.write_text("x")
    os.chown(third, nobody.pw_uid, nobody.pw_gid)
    with Dir.open(node.parent) as root, pytest.raises(BoundaryViolation, match="nobody"):
        root.hand_over("node", (_node().pw_uid, _node().pw_gid))
    assert os.lstat(third).st_uid == nobody.pw_uid


@pytest.mark.parametrize("kind", KINDS)
def test_making_a_directory_refuses_a_plant_in_its_place(area, kind: str) -> None:
    """What gocryptfs' ``plain``/``cipher`` and a node's ``<rank>`` are made with (C1)."""
    node, canary = area
    before = fingerprint(canary)
    dir_before = os.stat(canary.parent)
    plant(kind, node / "plain", canary)
    with Dir.open(node, {_node().pw_uid}) as mine, pytest.raises(BoundaryViolation):
        mine.make("plain", 0o700, (_node().pw_uid, _node().pw_gid)).close()
    assert fingerprint(canary) == before
    after = os.stat(canary.parent)
    assert (after.st_uid, after.st_mode) == (dir_before.st_uid, dir_before.st_mode)


@pytest.mark.parametrize("kind", ("symlink", "fifo", "replaced-dir"))
def test_removing_a_tree_removes_links_not_their_targets(area, kind: str) -> None:
    node, canary = area
    before = fingerprint(canary)
    as_node("mkdir", "-p", str(node / "config" / "certs"))
    plant(kind, node / "config" / "certs" / "node.key", canary)
    with Dir.open(node, {_node().pw_uid}) as mine:
        mine.remove_tree("config")
    assert not (node / "config").exists()
    assert fingerprint(canary) == before
    assert canary.parent.is_dir()


def test_writing_replaces_a_planted_link_instead_of_following_it(area) -> None:
    """``status.json``'s old write (C2) followed a link at a predictable temporary name."""
    node, canary = area
    before = fingerprint(canary)
    for name in ("status.json", ".status.json.1234.tmp"):
        as_node("ln", "-s", str(canary), str(node / name))
    with Dir.open(node, {_node().pw_uid}) as mine:
        mine.write("status.json", b'{"log_tail": "$(touch /tmp/pwned)"}\n')
    assert fingerprint(canary) == before
    assert not (node / "status.json").is_symlink()
    assert stat.S_IMODE(os.lstat(node / "status.json").st_mode) == 0o600


def test_the_node_account_cannot_plant_in_roots_directory(area) -> None:
    """The split: ``nodes/<rank>/`` is root's 0711, so nothing can be put where root writes."""
    node, canary = area
    done = subprocess.run(
        ["runuser", "-u", _node().pw_name, "--", "ln", "-s", str(canary), str(node.parent / "x")],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "Permission denied" in done.stderr


def test_terminal_escapes_in_a_node_log_are_neutralised() -> None:
    assert clean_text("a\x1b[2Jb\x07c\n\td") == "a?[2Jb?c\n\td"


def test_a_run_directory_under_another_users_directory_is_not_trusted(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    nobody = pwd.getpwnam("nobody")
    theirs = tmp_path / "theirs"
    (theirs / "run").mkdir(parents=True)
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    assert "belongs to nobody" in (trusted_path_problem(theirs / "run") or "")
    writable = tmp_path / "writable"
    (writable / "run").mkdir(parents=True)
    writable.chmod(0o777)
    assert "every user" in (trusted_path_problem(writable / "run") or "")
    sticky = tmp_path / "sticky"
    (sticky / "run").mkdir(parents=True)
    sticky.chmod(0o1777)
    assert trusted_path_problem(sticky / "run") is None  # like /tmp: entries stay their owners'
