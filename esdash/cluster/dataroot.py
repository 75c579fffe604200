"""The data root: where nodes keep their indices, keyed by rank, across jobs.

A later job may run on other hosts and another interconnect and still reuse the indices, as
long as the cluster has the same number of nodes and the same encryption mode: node ``k``
always gets ``<root>/<k>``.  A different size would leave shards without their node, and a
different mode would start nodes on what another mode keeps there (plain nodes next to
gocryptfs cipher directories, say), so both are refused unless the user asks to start fresh;
data is never deleted silently.

The marker ``<root>/esdash-data.json`` records the cluster name, the number of nodes and the
encryption mode with what a node's directory holds (``node_data``: ``"plain"``, or
``"gocryptfs-cipher"``).  Markers written before the mode was recorded are accepted as they
are and get it recorded by the next run.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from esdash.boundary import (
    BoundaryViolation,
    Dir,
    account,
    describe,
    make_dirs,
    require_trusted_path,
)
from esdash.errors import BadInput
from esdash.paths import runs_dir
from esdash.plugin.api import EncryptionMode
from esdash.plugin.values import Owner
from esdash.rundir import files
from esdash.rundir.layout import DATA, PASSABLE
from esdash.rundir.records import DataRootEncryption, DataRootMarker
from esdash.session import Session

MARKER = "esdash-data.json"


def data_root(session: Session) -> Path:
    """``cluster.data_dir``, or ``<runs>/data/<session name>`` (shared by that session's runs)."""
    return session.cluster.data_dir or runs_dir() / DATA / session.name


def cluster_name(session: Session) -> str:
    """Stable across runs of a session, so a reused data directory is recognised."""
    return f"esdash-{session.name}"


def encryption_record(encryption: EncryptionMode) -> DataRootEncryption:
    """What the marker records about the encryption mode."""
    return DataRootEncryption(mode=encryption.name, node_data=encryption.node_data)


def read_marker(root: Path) -> DataRootMarker:
    """The marker of ``root``; a damaged one is one line naming the file and the fix.

    Without a readable marker nobody can tell which cluster's data the root holds, so it
    is neither reused nor deleted: the user restores it or chooses ``--fresh``.
    """
    marker = root / MARKER
    try:
        return files.read(marker, DataRootMarker)
    except files.RunFileError as exc:
        raise BadInput(
            f"{marker}: damaged data-root marker ({exc.problem}); restore it, or start with "
            f"--fresh to delete the node data under {root} (or choose another cluster.data_dir)"
        ) from None


def check_data_root(
    root: Path, cluster_name: str, nodes: int, fresh: bool, encryption: EncryptionMode
) -> str:
    """Whether ``root`` can serve a cluster of ``nodes`` ("new", "reuse" or "fresh").

    Changes nothing, so the orchestrator can refuse before anything is launched.
    """
    marker = root / MARKER
    if not marker.exists():
        return "new"
    if fresh:
        return "fresh"
    info = read_marker(root)
    if info.cluster_name != cluster_name:
        raise BadInput(
            f"{root} holds the data of cluster {info.cluster_name!r}, not "
            f"{cluster_name!r}; choose another cluster.data_dir or start with --fresh"
        )
    if info.nodes != nodes:
        raise BadInput(
            f"{root} holds the data of a {info.nodes}-node cluster "
            f"({info.cluster_name}), and this session asks for {nodes} node(s). "
            f"Reusing indices needs the same size: set cluster.nodes = {info.nodes}, "
            f"choose another cluster.data_dir, or start with --fresh to delete that data"
        )
    recorded = info.encryption
    if recorded is not None and recorded.mode != encryption.name:
        # A marker without the field predates it: accepted, and recorded by prepare_data_root.
        mode = recorded.mode
        held = recorded.node_data or "plain"
        raise BadInput(
            f'{root} holds node data written with encryption.mode = "{mode}" ({held} node '
            f'directories), and this session asks for encryption.mode = "{encryption.name}" '
            f"({encryption.node_data} node directories). A data root keeps the mode it was "
            f'first used with: set encryption.mode = "{mode}", choose another '
            f"cluster.data_dir for this session, or start with --fresh to delete that data"
        )
    return "reuse"


def prepare_data_root(
    root: Path, cluster_name: str, nodes: int, fresh: bool, encryption: EncryptionMode
) -> str:
    """Check or initialise ``root`` for a cluster of ``nodes``; say what was done."""
    verdict = check_data_root(root, cluster_name, nodes, fresh, encryption)
    make_dirs(root, PASSABLE if os.geteuid() == 0 else 0o700)  # an existing one keeps its mode
    require_trusted_path(root, "data root (cluster.data_dir)")
    marker = root / MARKER
    outcome = {"new": "new", "reuse": "reused"}.get(verdict, "")
    if verdict == "fresh":
        old_nodes = _recorded_nodes(marker)
        with Dir.trusted(root) as where:
            for rank in range(old_nodes):
                where.remove_tree(str(rank))  # through descriptors: links are not followed
        outcome = f"fresh (deleted the data of {old_nodes} node(s))"
    files.write(
        marker,
        DataRootMarker(
            cluster_name=cluster_name,
            nodes=nodes,
            encryption=encryption_record(encryption),
            updated=time.time(),
            last=outcome,
        ),
    )
    return outcome


def _recorded_nodes(marker: Path) -> int:
    """How many node directories a marker (even a damaged one) says the root holds."""
    try:
        return files.read(marker, DataRootMarker).nodes
    except files.RunFileError:
        # --fresh on a damaged marker: every numbered node directory goes
        return len([p for p in marker.parent.iterdir() if p.name.isdigit()])


def adopt_node_data(root: Path, rank: int, owner: Owner) -> str | None:
    """Give node ``rank``'s data, left by an earlier run's account, to this run's ``owner``.

    A per-cluster account lives for one run, so the indices a later run reuses belong to an
    account that is gone.  Only entries of that one earlier account change owner, through
    descriptors (:meth:`esdash.boundary.Dir.hand_over`): a link, a hard link or another
    account's file below it stops the start instead.  Where root keeps the rank's
    directory itself (an encryption mode's layout), the entries in it are taken over one by
    one.  Returns what was done, or None when nothing had to change.
    """
    if os.geteuid() != 0:
        return None
    ids = (owner.uid, owner.gid)
    name = str(rank)
    with Dir.trusted(root) as where:
        found = where.lstat(name)
        if found is None:
            return None
        if stat.S_ISLNK(found.st_mode) or not stat.S_ISDIR(found.st_mode):
            raise BoundaryViolation(root / name, describe(found), "a node's data directory")
        if found.st_uid not in (0, owner.uid):
            where.hand_over(name, ids, accept=(found.st_uid,))
            return f"node {rank}'s data taken over from {account(found.st_uid)}"
        if found.st_uid != 0:
            return None
        taken = []
        with where.sub(name, {0}) as mine:
            for entry in mine.names():
                st = mine.lstat(entry)
                if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid in (0, owner.uid):
                    continue
                mine.hand_over(entry, ids, accept=(st.st_uid,))
                taken.append(f"{entry} from {account(st.st_uid)}")
        return f"node {rank}'s {', '.join(taken)} taken over" if taken else None
