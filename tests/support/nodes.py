"""Finding a node's server JVM, proven to be that node's before anything signals it."""

from __future__ import annotations

import psutil

from esdash.launch import process
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ProcessRecord

#: The server JVM's main class (the launcher JVM that starts it has another).
SERVER_MAIN = "org.elasticsearch.bootstrap.Elasticsearch"


def server_jvm(run: RunDir, rank: int) -> ProcessRecord:
    """The identity of node ``rank``'s server JVM, proven before anything signals it.

    The status file names the process the rank started (pid, start time); that launcher must
    have been created just before the recorded start, and the server JVM is its descendant
    running :data:`SERVER_MAIN` with this node's directories on its command line.  The record
    returned carries pid, create time and command line: :func:`process.send` checks all three
    again.
    """
    status = run.node_statuses()[rank]
    assert status.state == "running" and status.pid and status.started
    launcher = process.identify(status.pid)
    assert launcher.create_time is not None, f"node {rank}'s launcher {status.pid} is gone"
    assert launcher.create_time <= status.started + process.CREATE_TIME_TOLERANCE
    assert status.started - launcher.create_time < 60, "pid reused since the node started"
    node_dir = f"{run.node_dir(rank)}/"
    servers = [
        child
        for child in psutil.Process(status.pid).children(recursive=True)
        if any(SERVER_MAIN in part for part in child.cmdline())
    ]
    tree = [c.cmdline() for c in psutil.Process(status.pid).children(recursive=True)]
    assert len(servers) == 1, tree
    record = process.identify(servers[0].pid)
    assert record.create_time is not None and record.create_time >= launcher.create_time
    # its temporary and log directories (ES_TMPDIR, GC log) are this node's
    assert any(node_dir in part for part in record.command), (node_dir, record.command)
    assert process.find(record) is not None
    return record
