"""A node's part of the run directory, laid out so its account cannot misdirect root.

::

    nodes/<rank>/               root's, 0711: only root writes here
        status.json             the node's state (root writes it, 0600)
        stdout.log              the node's output (root opens it, the node writes to it)
        config/                 written by root (the backend), then handed to the node account
        logs/  tmp/             the node account's (0700)

The node account can write below ``config/``, ``logs/`` and ``tmp/`` only, so it cannot put
a link where root writes ``status.json`` or opens ``stdout.log`` (findings C2 and H1 of the
security audit).  What root still does in the node's own directories -- read the end of its
log after a failure, delete an old ``config/`` before writing a new one, hand directories
over -- goes through :mod:`esdash.boundary`, which refuses links, hard links, FIFOs and
foreign owners there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from esdash.boundary import BoundaryViolation, Dir
from esdash.plugin.values import Owner
from esdash.rundir.layout import NODE_CONFIG, NODE_LOGS, NODE_STDOUT, NODE_TMP, RunDir

#: Mode of a node's directory in the run directory: the node passes through, lists nothing.
NODE_DIR_MODE = 0o711
#: Mode of the directories the node account owns (its umask keeps their files private too).
PRIVATE_DIR_MODE = 0o700


@dataclass(frozen=True)
class RunDirsOfNode:
    """The run-directory part of a node's directories (data lives in the data root)."""

    config: Path
    logs: Path
    tmp: Path


def make_node_dir(run: RunDir, rank: int) -> None:
    """``nodes/<rank>/``, root's own (refused if anyone else owns what is there)."""
    with Dir.trusted(run.nodes_dir) as nodes, nodes.make(str(rank), NODE_DIR_MODE):
        pass


def prepare(run: RunDir, rank: int, owner: Owner) -> RunDirsOfNode:
    """Make ``nodes/<rank>/``, empty its ``config/`` for the backend, give ``logs/`` and
    ``tmp/`` to the node account; a link or foreign entry there stops the start."""
    ids = (owner.uid, owner.gid)
    with Dir.trusted(run.nodes_dir) as nodes, nodes.make(str(rank), NODE_DIR_MODE) as mine:
        mine.remove_tree(NODE_CONFIG)  # the backend writes it anew, as root, then hands it over
        for name in (NODE_LOGS, NODE_TMP):
            with mine.make(name, PRIVATE_DIR_MODE, ids):
                pass
    return RunDirsOfNode(
        config=run.node_config_dir(rank), logs=run.node_logs_dir(rank), tmp=run.node_tmp_dir(rank)
    )


def hand_over_config(run: RunDir, rank: int, owner: Owner) -> None:
    """Give ``config/`` (written by root just now, in root's directory) to the node account."""
    with Dir.trusted(run.node_dir(rank)) as mine:
        mine.hand_over(NODE_CONFIG, (owner.uid, owner.gid))


def log_tail(run: RunDir, rank: int, owner: Owner, log_name: str, lines: int = 40) -> str:
    """The end of the node's own log (else of its output) for a failure report.

    Read without following anything the node account could have planted: a link, a hard
    link or a FIFO in its place is named instead of read.  Control characters are replaced,
    so the text cannot rewrite the terminal that prints it.
    """
    try:
        with Dir.trusted(run.node_dir(rank)) as mine:
            try:
                with mine.sub(NODE_LOGS, {owner.uid}) as logs:
                    text = logs.tail(log_name, lines, {owner.uid})
            except FileNotFoundError:
                text = ""
            return text or mine.tail(NODE_STDOUT, lines)
    except BoundaryViolation as exc:
        return f"(the node's log was not read: {exc})"
    except OSError as exc:
        return f"(the node's log could not be read: {exc.strerror or exc})"
