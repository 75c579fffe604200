"""Running one search node as a child of its MPI rank, and stopping it cleanly.

The node runs in the foreground under its rank, as the unprivileged owner (set directly by
the kernel through ``setuid``; no ``su``/``runuser`` in between, so signals reach it).

A node is more than one process: ``bin/elasticsearch`` (and ``bin/opensearch``) execs a
launcher JVM that forks the server JVM.  So the node runs under the guard of
:mod:`esdash.launch.guard`, which leads the node's process group: a stop signals the whole
group (both JVMs at once; signalling only the launcher left a starting server JVM running
for the length of its discovery timeout), and when the rank dies -- even by SIGKILL -- the
guard stops the group by itself within :data:`STOP_GRACE` seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from esdash.boundary import PRIVATE_UMASK
from esdash.launch import process
from esdash.plugin.values import NodeCommand, Owner
from esdash.rundir.records import ProcessRecord

#: Seconds from SIGTERM to SIGKILL for a node's processes.  A search node shuts down in a
#: second or two (its data is safe without a flush: the translog is fsynced); anything
#: slower must not keep a Ctrl-C from taking everything down within 15 s.
STOP_GRACE = 10.0


class NodeProcess:
    """One node, its process group led by a guard: started once, polled, stopped as a group."""

    def __init__(self, command: NodeCommand, owner: Owner, output: Path) -> None:
        self.command = command
        self.owner = owner
        self.output = output
        self.process: subprocess.Popen[bytes] | None = None
        self.record: ProcessRecord | None = None
        #: The node's own first process (the guard's child): what status.json shows.
        self.node_pid: int | None = None

    def start(self) -> int:
        """Start the node under its guard; return the node's pid (or the guard's, if unseen).

        The guard watches this process: call it from the thread that stays (the kernel tells
        the guard when the *thread* that started it ends).
        """
        switch_user = os.geteuid() == 0
        self.process, self.record = process.start(
            self.command.argv,
            output=self.output,
            cwd=self.command.cwd,
            env=self.command.env,
            user=(self.owner.uid, self.owner.gid) if switch_user else None,
            guard=STOP_GRACE,
            umask=PRIVATE_UMASK,  # its indices, translog, logs: its account's alone
        )
        self.node_pid = process.guarded_command(self.process)
        return self.node_pid or self.process.pid

    @property
    def pid(self) -> int | None:
        return self.node_pid or (self.process.pid if self.process else None)

    def poll(self) -> int | None:
        """The exit code once the node and everything it started are gone (the guard's)."""
        return self.process.poll() if self.process else None

    def stop(self, grace: float = STOP_GRACE) -> int:
        """SIGTERM to the node's group, ``grace`` seconds, then SIGKILL; return the exit code.

        The code is the node's own (the guard ends the way the node did): negative for a
        signal, as :class:`subprocess.Popen` reports it.
        """
        if self.process is None:
            raise RuntimeError("the node was never started")
        process.stop(self.record, grace=grace, group=True, process=self.process)
        code = self.process.poll()
        return -signal.SIGKILL if code is None else code  # None: not even SIGKILL ended it
