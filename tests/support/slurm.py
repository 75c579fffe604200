"""A private single-host Slurm cluster: its own munged, one slurmctld and N emulated slurmd.

This is "variant A" of the infra notes: every slurmd runs on this machine on loopback with its
own port, spool and TmpFS, and claims ``CPUs`` cores (``SlurmdParameters=config_overrides``)
so small multi-task jobs don't wait for cores a 2-core runner lacks.  Nothing touches
``/etc/slurm`` or the system munged: the key, the socket and every file live under ``root``.
All daemons run in the foreground as our children and are stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from support.net import free_ports
from support.prereqs import find_tool
from support.procs import as_user, run_bounded, stop

_DAEMON_STOP_TIMEOUT = 20.0


class SlurmError(RuntimeError):
    """The private cluster did not come up or a command against it failed."""


def short_hostname() -> str:
    """slurmctld only runs on the host named in ``SlurmctldHost``: this one's short name."""
    return socket.gethostname().split(".")[0]


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen
    log: Path


def _start(name: str, argv: Sequence[str], log: Path) -> _Daemon:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C on the terminal must not hit it before teardown
        )
    return _Daemon(name, proc, log)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class SlurmCluster:
    """A running private cluster; create it with :meth:`start`, end it with :meth:`stop`.

    ``env`` is the environment for Slurm client commands (``SLURM_CONF`` set, any ``SLURM_*``
    inherited from an enclosing job removed); :meth:`run`/:meth:`srun` use it.
    """

    root: Path
    conf: Path
    nodes: list[str]
    env: dict[str, str]
    munge_socket: Path
    daemons: list[_Daemon] = field(default_factory=list)

    @classmethod
    def start(cls, root: Path, *, nodes: int = 3, cpus: int = 4, timeout: float = 60.0):
        """Write the config under ``root`` (must be traversable by job users), start daemons."""
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        names = [f"lo{i}" for i in range(1, nodes + 1)]
        for sub in ("state", "run", "log", "munge"):
            (root / sub).mkdir(exist_ok=True)
        for name in names:
            (root / "spool" / name).mkdir(parents=True, exist_ok=True)
            (root / "tmp" / name).mkdir(parents=True, exist_ok=True)
            (root / "tmp" / name).chmod(0o1777)
        munge_socket = root / "munge" / "munge.socket"
        conf = root / "slurm.conf"
        ctld_port, *node_ports = free_ports(1 + nodes)
        conf.write_text(_slurm_conf(root, munge_socket, ctld_port, names, node_ports, cpus))
        conf.chmod(0o644)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        env["SLURM_CONF"] = str(conf)
        cluster = cls(root, conf, names, env, munge_socket)
        try:
            cluster._start_munge()
            cluster._spawn("slurmctld", [find_tool("slurmctld"), "-D", "-c", "-f", str(conf)])
            for name in names:
                argv = [find_tool("slurmd"), "-D", "-f", str(conf), "-N", name]
                cluster._spawn(f"slurmd-{name}", argv)
            cluster.wait_idle(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, argv: Sequence[str | None]) -> _Daemon:
        daemon = _start(name, [str(a) for a in argv], self.root / "log" / f"{name}.out")
        self.daemons.append(daemon)
        return daemon

    def _start_munge(self) -> None:
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(128))
        key.chmod(0o600)
        munge_dir = self.root / "munge"
        self._spawn(
            "munged",
            [
                find_tool("munged"),
                "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
                f"--log-file={munge_dir / 'munged.log'}",
            ],
        )
        deadline = time.monotonic() + 10
        while not self.munge_socket.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SlurmError(f"munged did not create {self.munge_socket}")
            time.sleep(0.05)

    def _check_alive(self) -> None:
        for daemon in self.daemons:
            if daemon.proc.poll() is not None:
                raise SlurmError(
                    f"{daemon.name} exited with {daemon.proc.returncode}:\n{_tail(daemon.log)}\n"
                    f"(slurm logs: {self.root / 'log'})"
                )

    def node_states(self) -> dict[str, str]:
        """``{node: state}`` as sinfo reports it (``idle``, ``alloc``, ``unk*``...)."""
        proc = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, timeout=15)
        states = {}
        for line in proc.stdout.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state.strip()
        return states

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Wait until every node is idle (fails early if a daemon died)."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            states = self.node_states()
            if all(states.get(name) == "idle" for name in self.nodes):
                return
            time.sleep(0.2)
        raise SlurmError(f"nodes not idle after {timeout:.0f}s: {states} (logs: {self.root})")

    def run(
        self,
        argv: Sequence[str],
        *,
        user: str | None = None,
        timeout: float = 120.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> subprocess.CompletedProcess:
        """Run a Slurm client command (``sinfo``, ``srun``, ``sbatch``...) against this cluster.

        ``user`` submits as that user (jobs run as the submitter; Elasticsearch needs a
        non-root one).  ``env`` adds variables.  A timeout kills the command's process group.
        """
        full_env = {**self.env, **(env or {})}
        command = [find_tool(argv[0]) or argv[0], *argv[1:]]
        if user is not None:
            command = as_user(user, command, allow_root=True)
        proc = run_bounded(command, timeout=timeout, env=full_env, cwd=cwd or self.root)
        if check and proc.returncode != 0:
            raise SlurmError(
                f"{' '.join(argv)} exited with {proc.returncode}\n"
                f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
            )
        return proc

    def srun(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        """``srun <args>``; keyword arguments as for :meth:`run`."""
        return self.run(["srun", *args], **kwargs)

    def job_ids(self) -> list[str]:
        proc = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=15)
        return proc.stdout.split()

    def cancel_all(self, timeout: float = 30.0) -> None:
        """Cancel every job of this cluster and wait until the queue is empty."""
        ids = self.job_ids()
        if not ids:
            return
        self.run(["scancel", *ids], check=False, timeout=15)
        deadline = time.monotonic() + timeout
        while self.job_ids() and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        """Cancel jobs, then stop slurmd, slurmctld and munged (in that order) by PID."""
        alive = [d for d in self.daemons if d.proc.poll() is None]
        names = {d.name for d in alive}
        if "slurmctld" in names and "munged" in names:
            # Teardown must go on to stop the daemons whatever cancelling does.
            with contextlib.suppress(Exception):
                self.cancel_all()
        order = {"slurmctld": 1, "munged": 2}
        for daemon in sorted(self.daemons, key=lambda d: order.get(d.name, 0)):
            stop(daemon.proc, timeout=_DAEMON_STOP_TIMEOUT)
        self.daemons.clear()


def _slurm_conf(
    root: Path,
    munge_socket: Path,
    ctld_port: int,
    names: Sequence[str],
    node_ports: Sequence[int],
    cpus: int,
) -> str:
    host = short_hostname()
    lines = [
        "# Generated by the esdash test suite (tests/support/slurm.py).",
        f"ClusterName=esdt{os.getpid()}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"TmpFS={root}/tmp/%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "KillWait=5",
        "InactiveLimit=0",
    ]
    for name, port in zip(names, node_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={cpus} RealMemory=4000 State=UNKNOWN"
        )
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"
