"""Running one search node as a child of its MPI rank, and stopping it cleanly.

The node runs in the foreground under its rank, as the unprivileged owner (set directly by
the kernel through ``setuid``; no ``su``/``runuser`` in between, so signals reach it).  It
asks the kernel for SIGTERM when the rank dies (``PR_SET_PDEATHSIG``), so even a rank that is
killed outright leaves no Elasticsearch behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path

from esdash.launch import process
from esdash.plugin.api import NodeCommand, Owner
from esdash.rundir.records import ProcessRecord

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child after setuid: SIGTERM this process when its parent (the rank) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class NodeProcess:
    """One node process: started once, polled, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, command: NodeCommand, owner: Owner, output: Path) -> None:
        self.command = command
        self.owner = owner
        self.output = output
        self.process: subprocess.Popen[bytes] | None = None
        self.record: ProcessRecord | None = None

    def start(self) -> int:
        switch_user = os.geteuid() == 0
        self.process, self.record = process.start(
            self.command.argv,
            output=self.output,
            cwd=self.command.cwd,
            env=self.command.env,
            user=(self.owner.uid, self.owner.gid) if switch_user else None,
            preexec_fn=_die_with_parent,
        )
        return self.process.pid

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def poll(self) -> int | None:
        return self.process.poll() if self.process else None

    def stop(self, grace: float = 60.0) -> int | None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; return the exit code."""
        if self.process is None:
            return None
        process.stop(self.record, grace=grace, group=False, process=self.process)
        return self.process.returncode
