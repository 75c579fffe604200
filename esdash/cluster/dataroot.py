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

import shutil
import time
from pathlib import Path

from esdash.errors import BadInput
from esdash.paths import runs_dir
from esdash.plugin.api import EncryptionMode
from esdash.rundir import files
from esdash.rundir.layout import DATA
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
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    marker = root / MARKER
    outcome = {"new": "new", "reuse": "reused"}.get(verdict, "")
    if verdict == "fresh":
        old_nodes = _recorded_nodes(marker)
        for rank in range(old_nodes):
            shutil.rmtree(root / str(rank), ignore_errors=True)
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
