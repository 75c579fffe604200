"""A cluster's state as its run directory tells it: waiting for health, and the status.

The orchestrator never talks to the nodes to learn how they are: the ranks write their
status and rank 0 the cluster's health into the run directory, and everything here reads
those files.  That works the same from the root network namespace, a login node or the
first node of an allocation.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from esdash.errors import ClusterError, EsdashError
from esdash.launch import process, slurm
from esdash.rundir.files import tail
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health, NodeStatus


def failure_report(run: RunDir) -> str:
    """Every failed node with its message and the last lines of its log ('' if none)."""
    lines = []
    for rank, status in sorted(run.node_statuses().items()):
        if status.state == "failed":
            lines.append(f"node {rank}: {status.message or 'failed'}")
            if status.log_tail:
                lines.append("  last log lines:\n    " + status.log_tail.replace("\n", "\n    "))
    return "\n".join(lines)


def wait_ready(
    run: RunDir, nodes: int, launcher: subprocess.Popen[bytes] | None, timeout: float
) -> Health:
    """Wait for green (yellow is enough for one node); raise with the reason on failure."""
    wanted = {"green"} if nodes > 1 else {"green", "yellow"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failures = failure_report(run)
        if failures:
            raise ClusterError(f"the cluster in {run.path} failed to start:\n{failures}")
        if launcher is not None and launcher.poll() is not None:
            raise ClusterError(
                f"the rank launcher exited with code {launcher.returncode} before the cluster "
                f"was ready; its output ({run.launcher_log}):\n{tail(run.launcher_log, 30)}"
            )
        try:
            health = run.read_health()
        except EsdashError:
            health = None  # being replaced right now
        if (
            health is not None
            and health.ok
            and health.status in wanted
            and health.number_of_nodes == nodes
        ):
            with run.edit_info() as info:
                info.state = "running"
                info.ready = time.time()
            return health
        time.sleep(0.25)
    raise ClusterError(
        f"the cluster in {run.path} was not ready after {timeout:.0f} s; "
        f"see `esdash cluster status {run.path}` and the node logs in {run.nodes_dir}"
    )


def running_nodes(run: RunDir) -> list[int]:
    """Ranks whose node is starting or running, by their status files."""
    return [
        rank
        for rank, status in run.node_statuses().items()
        if status.state in ("starting", "running")
    ]


@dataclass(frozen=True)
class Endpoints:
    """Where clients reach the cluster: ``host:port`` per node, the scheme and credentials."""

    http: list[str]
    scheme: str
    credentials: Path | None


def endpoints(run: RunDir) -> Endpoints:
    topology = run.read_topology()
    secure = run.credentials_file.exists()
    http = [node.http_address for node in topology.nodes]
    return Endpoints(http, "https" if secure else "http", run.credentials_file if secure else None)


@dataclass(frozen=True)
class ClusterStatus:
    """Everything known about a run's cluster, from its files (and squeue for a job)."""

    run: Path
    session: str | None
    state: str | None
    slurm_job: str | None
    nodes: dict[int, NodeStatus]
    #: why it stopped, when something stopped it ("esdash received SIGTERM during ingest")
    reason: str | None = None
    slurm_state: str | None = None
    launcher_alive: bool | None = None
    health: Health | None = None
    endpoints: tuple[str, ...] = ()
    credentials: Path | None = None
    #: The process that owns the run (``esdash run``, ``cluster up --foreground``): its
    #: pid and whether it is ``alive``, ``gone`` or ``released`` the run; None: no owner.
    owner: OwnerState | None = None
    #: The run's recorded processes still alive on this host, by role (``launcher``,
    #: ``bench launcher``): what ``cluster down`` stops.
    processes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OwnerState:
    """The owner of a run as ``cluster status`` shows it."""

    pid: int
    host: str | None
    state: str  # alive | gone | released | elsewhere


def owner_state(run: RunDir) -> OwnerState | None:
    """Who owns ``run`` and whether it is still there (:mod:`esdash.launch.owner`)."""
    try:
        lease = run.read_owner_lease()
    except EsdashError:
        return None
    if lease is None:
        return None
    if lease.released:
        state = "released"
    elif not process.here(lease.owner):
        state = "elsewhere"
    else:
        state = "alive" if process.alive(lease.owner) else "gone"
    return OwnerState(lease.owner.pid, lease.owner.host, state)


def live_processes(run: RunDir) -> dict[str, int]:
    """The run's recorded launchers that still run on this host, by role."""
    info = run.read_info()
    found = {}
    for role, record in (("launcher", info.launcher), ("bench launcher", info.bench_launcher)):
        if record is not None and process.here(record) and process.alive(record):
            found[role] = record.pid
    return found


def status(run: RunDir) -> ClusterStatus:
    """Everything known about a run, from its files (and squeue for a submitted job)."""
    info = run.read_info()
    slurm_state = None
    if info.slurm_job and info.submitted:
        slurm_state = slurm.job_state(info.slurm_job)
    launcher_alive = None
    if info.launcher is not None and process.here(info.launcher):
        launcher_alive = process.alive(info.launcher)
    health = None
    with contextlib.suppress(EsdashError):
        health = run.read_health()
    found: tuple[str, ...] = ()
    credentials = None
    if run.topology_file.exists():
        ends = endpoints(run)
        found = tuple(f"{ends.scheme}://{e}" for e in ends.http)
        credentials = ends.credentials
    return ClusterStatus(
        run=run.path,
        session=info.session_name,
        state=info.state,
        slurm_job=info.slurm_job,
        nodes=run.node_statuses(),
        reason=info.reason,
        slurm_state=slurm_state,
        launcher_alive=launcher_alive,
        health=health,
        endpoints=found,
        credentials=credentials,
        owner=owner_state(run),
        processes=live_processes(run),
    )
