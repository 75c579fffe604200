"""Bringing a cluster up, waiting for it, reporting on it and taking it down.

The orchestrator (``esdash cluster up``) never talks to the nodes directly: it starts the
rank launcher, then follows the run directory, where the ranks write their status and rank 0
the cluster's health.  That works the same from the root network namespace, a login node or
the first node of an allocation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from esdash.cluster import preflight
from esdash.cluster.distribution import resolve_home
from esdash.cluster.node import wait_for_exit
from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput, ClusterError, EsdashError
from esdash.launch import mpi, slurm
from esdash.paths import runs_dir
from esdash.plugin.manager import get_plugins
from esdash.rundir.files import tail
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health, NodeStatus, ProcessRecord
from esdash.session import Session, load_run_session

#: How long ``up`` waits for a healthy cluster before giving up (seconds).
DEFAULT_TIMEOUT = 300.0


def prepare_run(session: Session, run: RunDir | None = None, fresh: bool = False) -> RunDir:
    """Check everything that can be checked before launch, and create the run directory."""
    plugins = get_plugins()
    backend = plugins.backend(session.cluster.backend.name)
    plugins.interconnect(session.cluster.interconnect)
    owner = resolve_owner(session.cluster.run_as)
    preflight.require(session, "launch", fresh=fresh, owner=owner, plugins=plugins)
    distribution = backend.inspect(resolve_home(session))
    if run is None:
        run = RunDir.create(runs_dir(), session.name)
    shutil.copyfile(session.path, run.session_file)
    _check_reachable(run.path, owner.name, owner.uid)
    with run.edit_info() as info:
        info.session_name = session.name
        info.session_path = str(session.path.resolve())
        info.home = str(distribution.home)
        info.engine = backend.name
        info.version = distribution.version
        info.nodes = session.cluster.nodes
        info.security = session.cluster.security
        info.owner = owner.name
        info.state = "prepared"
        info.created = time.time()
    return run


def release_storage(run: RunDir) -> list[str]:
    """Undo storage setup that ranks on this host could not undo themselves.

    A rank killed outright (SIGKILL, a lost MPI job) never reaches the ``finally`` that
    unmounts its encrypted data directory.  Once the ranks are gone, ``down`` calls the mode's
    optional ``release_storage(data_dir, owner, options)`` for every rank of the run placed on
    this host; ranks on other hosts are released by the next ``up`` there.  Returns what was
    done; problems are printed as warnings, never raised: taking a run down must not stop
    half-way.
    """
    done: list[str] = []
    try:
        session = load_run_session(run)
        info = run.read_info()
        topology = run.read_topology()
    except EsdashError:
        return done  # the run never got as far as placing nodes
    if not info.data_root:
        return done
    try:
        encryption = get_plugins().encryption(session.encryption.name)
        release = getattr(encryption, "release_storage", None)
        if release is None:
            return done
        owner = resolve_owner(session.cluster.run_as)
    except EsdashError as exc:
        print(f"esdash: warning: cannot check the run's data directories: {exc}", file=sys.stderr)
        return done
    host = socket.gethostname()
    for rank, node in enumerate(topology.nodes):
        if node.host != host:
            continue
        try:
            message = release(Path(info.data_root) / str(rank), owner, session.encryption.options)
        except EsdashError as exc:
            print(f"esdash: warning: node {rank}: {exc}", file=sys.stderr)
            continue
        if message:
            done.append(f"node {rank}: {message}")
    return done


def _check_reachable(path: Path, user: str, uid: int) -> None:
    """The node user must be able to traverse to the run directory (root's tmp dirs are 0700)."""
    if os.geteuid() != 0 or uid == 0:
        return
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001 and parent.stat().st_uid != uid:
            raise BadInput(
                f"the node user {user!r} cannot enter {parent} (mode {oct(mode & 0o777)}); "
                f"put runs somewhere it can reach (ESDASH_RUNS) or `chmod o+x {parent}`"
            )


def launch(run: RunDir, session: Session, fresh: bool) -> subprocess.Popen[bytes]:
    """Start the cluster step (one rank per node) detached from this terminal."""
    args = ["esdash.cluster.rank", str(run.path)] + (["--fresh"] if fresh else [])
    command = mpi.rank_command(args, session.cluster.nodes, session.cluster.nodes_per_host)
    process = mpi.start_detached(command, run.launcher_log, run.path)
    with run.edit_info() as info:
        info.state = "starting"
        info.launcher = ProcessRecord(pid=process.pid, host=socket.gethostname(), command=command)
        info.slurm_job = os.environ.get("SLURM_JOB_ID") or info.slurm_job
    return process


def _failure_report(run: RunDir) -> str:
    lines = []
    for rank, status in sorted(run.node_statuses().items()):
        if status.state == "failed":
            lines.append(f"node {rank}: {status.message or 'failed'}")
            if status.log_tail:
                lines.append("  last log lines:\n    " + status.log_tail.replace("\n", "\n    "))
    return "\n".join(lines)


def wait_ready(
    run: RunDir, nodes: int, process: subprocess.Popen[bytes] | None, timeout: float
) -> Health:
    """Wait for green (yellow is enough for one node); raise with the reason on failure."""
    wanted = {"green"} if nodes > 1 else {"green", "yellow"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failures = _failure_report(run)
        if failures:
            raise ClusterError(f"the cluster in {run.path} failed to start:\n{failures}")
        if process is not None and process.poll() is not None:
            raise ClusterError(
                f"the rank launcher exited with code {process.returncode} before the cluster "
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


@dataclass
class Endpoints:
    http: list[str]
    scheme: str
    credentials: Path | None


def endpoints(run: RunDir) -> Endpoints:
    topology = run.read_topology()
    secure = run.credentials_file.exists()
    http = [node.http_address for node in topology.nodes]
    return Endpoints(http, "https" if secure else "http", run.credentials_file if secure else None)


def up(
    session: Session,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    run: RunDir | None = None,
) -> tuple[RunDir, subprocess.Popen[bytes], Health]:
    """Start the cluster and return once it is healthy; on any failure leave nothing running."""
    run = prepare_run(session, run, fresh)
    process, health = start(run, session, fresh, timeout)
    return run, process, health


def start(
    run: RunDir, session: Session, fresh: bool, timeout: float
) -> tuple[subprocess.Popen[bytes], Health]:
    """Launch the ranks of a prepared run and wait until the cluster is healthy."""
    process = launch(run, session, fresh)
    try:
        health = wait_ready(run, session.cluster.nodes, process, timeout)
    except BaseException as exc:
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed to start"
        stop(run, process, reason=reason)
        raise
    return process, health


def stop(
    run: RunDir,
    process: subprocess.Popen[bytes] | None = None,
    grace: float = 90.0,
    reason: str = "stopped",
) -> str:
    """Ask every rank to stop its node, wait, and escalate if the launcher lingers."""
    run.request_stop()
    info = run.read_info()
    launcher = info.launcher
    pid = process.pid if process is not None else (launcher.pid if launcher else None)
    local = launcher is not None and launcher.host == socket.gethostname()
    outcome = "stopped"
    if pid and local:
        if not _wait_launcher(process, pid, grace):
            _signal_group(pid, signal.SIGTERM)
            if not _wait_launcher(process, pid, 15):
                _signal_group(pid, signal.SIGKILL)
                _wait_launcher(process, pid, 10)
                outcome = "killed"
    else:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _running_nodes(run):
            time.sleep(0.5)
    job = info.slurm_job
    if job and info.submitted and slurm.job_state(job) not in ("FINISHED",):
        slurm.cancel(job)
    for message in release_storage(run):
        print(f"esdash: {message}", file=sys.stderr)
    with run.edit_info() as changed:
        changed.state = reason if reason != "stopped" else outcome
        changed.stopped = time.time()
    return outcome


def _signal_group(pid: int, sig: int) -> None:
    """Signal the launcher's process group (it was started as a session leader)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _alive(pid: int) -> bool:
    return not wait_for_exit(pid, 0)


def _wait_launcher(process: subprocess.Popen[bytes] | None, pid: int, timeout: float) -> bool:
    if process is not None:
        try:
            process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    return wait_for_exit(pid, timeout)


def _running_nodes(run: RunDir) -> list[int]:
    return [
        rank
        for rank, status in run.node_statuses().items()
        if status.state in ("starting", "running")
    ]


@dataclass(frozen=True)
class ClusterStatus:
    """Everything known about a run's cluster, from its files (and squeue for a job)."""

    run: Path
    session: str | None
    state: str | None
    slurm_job: str | None
    nodes: dict[int, NodeStatus]
    slurm_state: str | None = None
    launcher_alive: bool | None = None
    health: Health | None = None
    endpoints: tuple[str, ...] = ()
    credentials: Path | None = None


def status(run: RunDir) -> ClusterStatus:
    """Everything known about a run, from its files (and squeue for a submitted job)."""
    info = run.read_info()
    slurm_state = None
    if info.slurm_job and info.submitted:
        slurm_state = slurm.job_state(info.slurm_job)
    launcher_alive = None
    launcher = info.launcher
    if launcher is not None and launcher.host == socket.gethostname():
        launcher_alive = _alive(launcher.pid)
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
        slurm_state=slurm_state,
        launcher_alive=launcher_alive,
        health=health,
        endpoints=found,
        credentials=credentials,
    )


def foreground(run: RunDir, process: subprocess.Popen[bytes]) -> int:
    """Stay with a running cluster until it ends, a signal arrives or ``down`` is requested."""
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {
        sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }
    try:
        while process.poll() is None and not received and not run.stop_requested():
            time.sleep(0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if process.poll() is None:
        stop(run, process, reason="stopped")
        return 0
    for message in release_storage(run):
        print(f"esdash: {message}", file=sys.stderr)
    failures = _failure_report(run)
    if failures:
        with run.edit_info() as info:
            info.state = "failed"
        raise ClusterError(f"the cluster in {run.path} failed:\n{failures}")
    with run.edit_info() as info:
        info.state = "stopped"
    return 0
