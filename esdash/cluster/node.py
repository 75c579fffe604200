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
import time
from pathlib import Path

from esdash.plugin.api import NodeCommand, Owner

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

    def start(self) -> int:
        switch_user = os.geteuid() == 0
        with self.output.open("ab") as out:
            self.process = subprocess.Popen(
                self.command.argv,
                env=self.command.env,
                cwd=self.command.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=self.owner.uid if switch_user else None,
                group=self.owner.gid if switch_user else None,
                extra_groups=[] if switch_user else None,
                start_new_session=True,  # a terminal's Ctrl-C goes to the rank, which decides
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
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait until a process that is not our child is gone; True when it is."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        if _is_zombie(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _is_zombie(pid: int) -> bool:
    """A dead process nobody reaped (PID 1 in some containers does not reap) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
