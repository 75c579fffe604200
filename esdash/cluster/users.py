"""Which account a node runs as, and the per-cluster accounts esdash makes for that.

Elasticsearch refuses to run as root, and on shared machines a search node should not have
more rights than it needs.  When esdash runs as root (a provisioning script, a site service),
nodes run as an unprivileged account; otherwise they run as the invoking user.

The account is ``cluster.run_as``: a named user, or ``"per-cluster"`` (the default as root),
for which esdash creates a system account when a run starts and removes it when the run's
nodes are gone.  Why per cluster: everything a node can read, its account can read -- the
node's TLS key, the plaintext data of ``encryption.mode = "none"``, the plain side of a
gocryptfs mount -- so with one shared account, a compromised node (a network-facing JVM that
loads plugins) reads every other cluster on the host.  A per-cluster account reads only its
own cluster.  "Cluster" means its data root: every run of a session on the same data (which
a later run reuses) gets the same account name and ids (:func:`account_for`), so its files
keep their owner; another data root never gets those ids.  The cost is a
``useradd``/``userdel`` per run, and a change of owner of the node data when a data root
moves from a named account to a per-cluster one (:meth:`esdash.boundary.Dir.hand_over`).
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import subprocess
import time
from pathlib import Path

import psutil

from esdash.boundary import Dir
from esdash.errors import BadInput, ClusterError
from esdash.plugin.values import Owner
from esdash.rundir.records import NodeAccount, RunInfo

#: ``cluster.run_as`` value for an account made for each cluster (the default as root).
PER_CLUSTER = "per-cluster"
#: The comment of every account esdash creates: only accounts carrying it are removed.
ACCOUNT_MARK = "esdash per-cluster node account"
#: Account names: ``esdash-`` and 8 hex digits of the data root's path.
_PREFIX = "esdash-"
#: Per-cluster uids and gids: ``ID_BASE`` plus a hash of the data root, below 2**31.
ID_BASE = 1_500_000_000
ID_RANGE = 1 << 29
#: How often useradd/userdel are retried while another process holds /etc/passwd's lock.
_LOCK_RETRIES = 20


def _stand_in() -> Owner:
    """Who pre-flight checks assume for an account that does not exist yet.

    A per-cluster account has a group of its own and no other, so what it may open is what
    "others" may open -- exactly what ``nobody`` may.
    """
    try:
        entry = pwd.getpwnam("nobody")
        return Owner(f"a {PER_CLUSTER} account", entry.pw_uid, entry.pw_gid)
    except KeyError:
        return Owner(f"a {PER_CLUSTER} account", 65534, 65534)


def per_cluster(run_as: str | None) -> bool:
    """Whether esdash makes the node account itself (as root, ``run_as`` unset or "per-cluster")."""
    return os.geteuid() == 0 and (not run_as or run_as == PER_CLUSTER)


def resolve_owner(
    run_as: str | None, where: str = "cluster.run_as", session_file: object = None
) -> Owner:
    """The account nodes run as, or a :class:`BadInput` that says how to fix the session.

    For a per-cluster account, which exists only once a run made it, the stand-in of
    :func:`_stand_in` (what pre-flight checks may assume of it).  ``session_file`` (the
    session's path), when given, starts the message: the user must know which file to edit.
    """
    if os.geteuid() != 0:
        return Owner.current()
    if per_cluster(run_as):
        return _stand_in()
    assert run_as is not None
    session = f"{session_file}: " if session_file is not None else ""
    try:
        entry = pwd.getpwnam(run_as)
    except KeyError:
        raise BadInput(
            f"{session}{where} = {run_as!r}: no such user on this host; create it with "
            f'`useradd -m {run_as}`, name an existing unprivileged user, or use "{PER_CLUSTER}"'
        ) from None
    if entry.pw_uid == 0:
        raise BadInput(f"{session}{where} = {run_as!r} has uid 0; name an unprivileged user")
    return Owner(entry.pw_name, entry.pw_uid, entry.pw_gid)


def account_for(data_root: Path) -> NodeAccount:
    """The per-cluster account of the cluster whose data lives in ``data_root``.

    Name and ids derive from the data root's path, so they are the same on every host and
    in every run of that cluster (its data, reused across runs, keeps its owner), and differ
    from every other cluster's.  The ids lie far above the ranges ``useradd`` hands out, so
    a removed account's number never goes to another account that could then read the
    files it left.
    """
    digest = hashlib.sha256(str(data_root.resolve()).encode()).digest()
    offset = int.from_bytes(digest[:4], "big") % ID_RANGE
    name = f"{_PREFIX}{digest[:4].hex()}"
    return NodeAccount(name=name, uid=ID_BASE + offset, gid=ID_BASE + offset, per_cluster=True)


def _run(argv: list[str], what: str) -> None:
    """Run a shadow-utils command, retrying while /etc/passwd is locked by another one."""
    for _ in range(_LOCK_RETRIES):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        if "lock" not in done.stderr:
            raise ClusterError(f"cannot {what}: `{' '.join(argv)}` said: {done.stderr.strip()}")
        time.sleep(0.1)
    raise ClusterError(f"cannot {what}: /etc/passwd stayed locked (another useradd?)")


def create_account(data_root: Path) -> NodeAccount:
    """Create (or find) here the per-cluster account of ``data_root``'s cluster: a system
    account with a group of its own, no home, no login shell (:func:`account_for`)."""
    account = account_for(data_root)
    existing = _marked(account.name)
    if existing is None:
        ensure_account(account)
    elif (existing.pw_uid, existing.pw_gid) != (account.uid, account.gid):
        raise ClusterError(
            f"account {account.name} exists with uid {existing.pw_uid}, not {account.uid}; "
            f"remove it (`userdel {account.name}`) and start again"
        )
    return account


def ensure_account(account: NodeAccount) -> None:
    """On a rank's host: the run's per-cluster account exists here with the recorded ids.

    The orchestrator created it on its own host; ranks on other hosts of the allocation
    create it with the same uid and gid, since the run and data directories they share
    carry those numbers.
    """
    try:
        entry = pwd.getpwnam(account.name)
    except KeyError:
        entry = None
    if entry is not None:
        if (entry.pw_uid, entry.pw_gid) != (account.uid, account.gid):
            raise ClusterError(
                f"account {account.name} exists on this host with uid {entry.pw_uid}, not the "
                f"run's {account.uid}; remove it (`userdel {account.name}`) and start again"
            )
        return
    try:
        holder = pwd.getpwuid(account.uid).pw_name
    except KeyError:
        holder = None
    if holder is not None:
        raise ClusterError(
            f"uid {account.uid} of the run's node account {account.name} belongs to {holder} on "
            f"this host; the hosts of one allocation must agree on it"
        )
    try:
        group = grp.getgrnam(account.name)
    except KeyError:
        group = None
    if group is None:
        _run(["groupadd", "--gid", str(account.gid), account.name], f"create group {account.name}")
    elif group.gr_gid != account.gid:
        raise ClusterError(
            f"group {account.name} exists with gid {group.gr_gid}, not {account.gid}; remove "
            f"it (`groupdel {account.name}`) and start again"
        )
    _run(
        [
            "useradd", "--system", "--uid", str(account.uid), "--gid", str(account.gid),
            "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
            "--comment", ACCOUNT_MARK, account.name,
        ],
        f"create the node account {account.name}",
    )  # fmt: skip


def _marked(name: str) -> pwd.struct_passwd | None:
    """The passwd entry of ``name`` if it is one esdash created (its comment says so)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    if entry.pw_gecos != ACCOUNT_MARK or not name.startswith(_PREFIX):
        raise ClusterError(
            f"account {name} exists here and was not made by esdash; remove it or rename it"
        )
    return entry


def processes_of(uid: int) -> list[int]:
    """Pids of every process running as ``uid`` on this host."""
    found = []
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids is not None and uid in (uids.real, uids.effective):
            found.append(proc.pid)
    return found


def remove_account(account: NodeAccount) -> str | None:
    """Remove a per-cluster account from this host once nothing runs as it; what was done.

    Only an account esdash made (its comment marks it) is removed; while any process still
    runs as it (another rank's node on this host) it stays, and the last one to end removes
    it.  Files it owned keep its uid: node data is taken over by the next run's account.
    """
    if not account.per_cluster or os.geteuid() != 0:
        return None
    try:
        entry = _marked(account.name)
    except ClusterError:
        return None  # not ours (any more): never touched
    if entry is None or entry.pw_uid != account.uid:
        return None
    if processes_of(account.uid):
        return None
    try:
        _run(["userdel", account.name], f"remove the node account {account.name}")
    except ClusterError:
        if _exists(account.name):
            raise
        return None  # another rank of this host removed it a moment earlier
    return f"removed the node account {account.name}"


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def owner_of(account: NodeAccount) -> Owner:
    """The :class:`Owner` nodes run as, from the run's record."""
    return Owner(account.name, account.uid, account.gid)


def recorded_owner(info: RunInfo, run_as: str | None, session_file: object = None) -> Owner:
    """The account ``run.json`` says the nodes ran as (no account is made here)."""
    if info.node_account is not None:
        return owner_of(info.node_account)
    return resolve_owner(run_as, session_file=session_file)


def node_owner(info: RunInfo, run_as: str | None, session_file: object = None) -> Owner:
    """The account a run's nodes run as on this host, from ``run.json`` when it says.

    A per-cluster account made on the orchestrator's host is made here too, with its ids
    (:func:`ensure_account`).  Runs recorded before accounts were recorded name
    ``cluster.run_as`` only: it is looked up again.
    """
    account = info.node_account
    if account is None:
        return resolve_owner(run_as, session_file=session_file)
    if account.per_cluster:
        ensure_account(account)
    return owner_of(account)


def reachable_problem(path: Path, owner: Owner) -> str | None:
    """Why ``owner`` cannot traverse to ``path`` (a directory above it is closed), or None.

    Needed for the run and data directories: the node reaches its config, logs and data
    through them.  esdash never widens a directory it did not create to fix this; it says
    which one and how.
    """
    if os.geteuid() != 0 or owner.uid == 0:
        return None
    for parent in [path, *path.parents]:
        try:
            st = parent.stat()
        except FileNotFoundError:
            continue
        if st.st_uid == owner.uid:
            allowed = st.st_mode & 0o100
        elif st.st_gid == owner.gid:
            allowed = st.st_mode & 0o010
        else:
            allowed = st.st_mode & 0o001
        if not allowed:
            return (
                f"the node account ({owner.name}) cannot enter {parent} (mode "
                f"{oct(st.st_mode & 0o777)}); esdash does not widen it: `chmod o+x {parent}` "
                f"(others may then pass through it, not list it), or choose another place"
            )
    return None


def hand_over_tree(parent: Path, name: str, owner: Owner) -> None:
    """Give ``parent/name``, written by esdash just now, and all below it to ``owner``."""
    with Dir.trusted(parent) as where:
        where.hand_over(name, (owner.uid, owner.gid))
