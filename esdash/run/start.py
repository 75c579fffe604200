"""Starting a run: check, prepare the run directory, start the cluster here or submit it.

Every way into a run passes :func:`prepare`: it runs the pre-flight checks of the launch
stage (:mod:`esdash.prepare.checks`), then creates the run directory with the session,
the distribution and the node account recorded.  Then either

* :func:`start_cluster` starts one rank per node (``mpiexec`` here, ``srun`` inside an
  allocation) through :mod:`esdash.launch.process`, records the launcher's identity and
  waits for a healthy cluster (on any failure it stops what it started), or
* :func:`submit` writes the batch script and hands it to ``sbatch``, or
* :func:`detach` starts ``esdash run`` in its own session for the dashboard.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.cluster.distribution import resolve_home
from esdash.cluster.health import wait_ready
from esdash.cluster.users import (
    create_account,
    owner_of,
    per_cluster,
    reachable_problem,
    resolve_owner,
)
from esdash.errors import BadInput, ClusterError
from esdash.launch import mpi, owner, process, slurm
from esdash.paths import runs_dir
from esdash.plugin.manager import get_plugins
from esdash.prepare.slurm_job import job_request, session_time
from esdash.progress import CHECKS_GRACE, Phase, Progress, for_stderr
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health, LaunchRecord, NodeAccount, NodeStatus, RunInfo
from esdash.session import Session, load_session

if TYPE_CHECKING:
    from esdash.plugin.api import Backend
    from esdash.plugin.values import Distribution, Owner
    from esdash.prepare.timelimit import JobTime
    from esdash.prepare.walltime import WallTime

#: How long ``start_cluster`` waits for a healthy cluster before giving up (seconds).
DEFAULT_TIMEOUT = 300.0


def check(session: Session, fresh: bool = False) -> tuple[Backend, Owner, Distribution]:
    """Everything :func:`prepare` checks before it creates anything (``submit --dry-run``)."""
    plugins = get_plugins()
    backend = plugins.backend(session.cluster.backend.name)
    plugins.interconnect(session.cluster.interconnect)
    owner = resolve_owner(session.cluster.run_as, session_file=session.path)
    from esdash.prepare import checks  # numpy and more: not for every `esdash` command

    checks.require(session, "launch", fresh=fresh, owner=owner, plugins=plugins)
    return backend, owner, backend.inspect(resolve_home(session))


def prepare(
    session: Session, run: RunDir | None = None, fresh: bool = False, account: bool = True
) -> RunDir:
    """Check everything that can be checked before launch, and create the run directory.

    ``account``: make the node account now when the session asks for a per-cluster one
    (the default as root).  A run directory prepared for later -- a batch job, the
    dashboard's detached run -- gets it when the run itself prepares it again, on the host
    it runs on.
    """
    backend, owner, distribution = check(session, fresh)
    if run is None:
        run = RunDir.create(runs_dir(), session.name)
    run.write_session(session.path.read_bytes())
    from esdash.cluster.dataroot import data_root

    for where in (run.path, data_root(session)):
        problem = reachable_problem(where, owner)  # a per-cluster account: as "others"
        if problem:
            raise BadInput(problem)
    node_account = None
    if per_cluster(session.cluster.run_as) and account:
        node_account = create_account(data_root(session))
        owner = owner_of(node_account)
    elif not per_cluster(session.cluster.run_as):
        node_account = NodeAccount(name=owner.name, uid=owner.uid, gid=owner.gid)
    with new_run_info(run, session, "prepared") as info:
        info.home = str(distribution.home)
        info.engine = backend.name
        info.version = distribution.version
        info.nodes = session.cluster.nodes
        info.security = session.cluster.security
        info.owner = owner.name
        info.node_account = node_account
    return run


@contextmanager
def new_run_info(run: RunDir, session: Session, state: str) -> Iterator[RunInfo]:
    """Edit a new run's ``run.json`` by attribute, with what every run records at its birth.

    A run directory is found again by its session (name and absolute path) and dated by
    ``created``; the cluster run that ``prepare`` makes and the benchmark run ``esdash run
    --cluster`` makes must record both alike, so the listing of runs and the dashboard
    read them with one rule.  The caller sets the rest; ``state`` is the first state.
    """
    with run.edit_info() as info:
        info.session_name = session.name
        info.session_path = str(session.path.resolve())
        yield info
        info.state = state
        info.created = time.time()


def launch_cluster(run: RunDir, session: Session, fresh: bool) -> subprocess.Popen[bytes]:
    """Start the cluster step (one rank per node) detached from this terminal."""
    from esdash.run.stop import check_interrupts, deferred_interrupts

    check_interrupts("before the cluster started")  # nothing of this cluster runs yet
    args = ["esdash.cluster.rank", str(run.path)] + (["--fresh"] if fresh else [])
    command = mpi.rank_command(args, session.cluster.nodes, session.cluster.nodes_per_host)
    # A signal between starting the launcher and recording it would leave an unrecorded
    # cluster: it is only noted here, and raised by the caller (``check_interrupts``).
    with deferred_interrupts():
        launcher, record = process.start(
            command, output=run.launcher_log, cwd=run.path, restore_signals=False
        )
        with run.edit_info() as info:
            info.state = "starting"
            info.launcher = record
            info.slurm_job = os.environ.get("SLURM_JOB_ID") or info.slurm_job
    return launcher


class NodeWatch:
    """Issue 17, item 6: one line per node as it starts, runs or fails, while ``up`` waits.

    The ranks write ``nodes/<rank>/status.json`` and rank 0 ``health.json``; this reads them
    (in the progress ticker's thread, every half second) and notes each node's change of
    state, and keeps the phase's count (nodes running) and health current.
    """

    def __init__(self, run: RunDir, nodes: int) -> None:
        self.run = run
        self.nodes = nodes
        self.seen: dict[int, str | None] = {}

    def poll(self, phase: Phase) -> None:
        statuses = self.run.node_statuses()
        for rank, status in sorted(statuses.items()):
            if self.seen.get(rank) != status.state and status.state is not None:
                self.seen[rank] = status.state
                phase.note(node_line(status, self.nodes))
        running = sum(1 for s in statuses.values() if s.state == "running")
        phase.update(f"running{self._health()}", done=running)

    def _health(self) -> str:
        health = self.run.read_health()
        if health is None:
            return ""
        if not health.ok:
            return ", cluster not answering yet"
        return f", cluster {health.status} with {health.number_of_nodes} node(s)"


def node_line(status: NodeStatus, nodes: int) -> str:
    """``node-1 (rank 1 of 3) running on host1, http 10.0.0.2:9201, pid 4242``."""
    name = status.name or f"node {status.rank}"
    where = f" on {status.host}" if status.host else ""
    text = f"{name} (rank {status.rank} of {nodes}) {status.state}{where}"
    if status.state == "running" and status.http_port:
        text += f", http {status.address or status.host}:{status.http_port}, pid {status.pid}"
    elif status.state in ("failed", "stopped") and status.message:
        text += f": {status.message}"
    return text


def start_cluster(
    run: RunDir,
    session: Session,
    fresh: bool,
    timeout: float = DEFAULT_TIMEOUT,
    hold: bool = False,
    progress: Progress | None = None,
) -> tuple[subprocess.Popen[bytes], Health]:
    """Launch the ranks of a prepared run and wait until the cluster is healthy.

    ``progress`` (default: standard error) says that the start begins before the launcher
    is started, one line per node as it changes state, and the count while it waits.

    On any failure (Ctrl-C included) the cluster is stopped before the error propagates.
    A command that holds :class:`esdash.run.stop.Interrupts` gets SIGTERM and SIGHUP handled
    the same way, as :class:`esdash.run.stop.Interrupted` naming the signal; with ``hold``
    its signals are only recorded from the moment the cluster is ready (the caller then
    owns a running cluster and stops it itself: no signal may fall between the two).
    """
    progress = progress or for_stderr()
    nodes = session.cluster.nodes
    what = f"starting {nodes} {session.cluster.backend.name} node(s)"
    with progress.phase(what, total=nodes, poll=NodeWatch(run, nodes).poll):
        return _launch_and_wait(run, session, fresh, timeout, hold, progress)


def _launch_and_wait(
    run: RunDir,
    session: Session,
    fresh: bool,
    timeout: float,
    hold: bool,
    progress: Progress,
) -> tuple[subprocess.Popen[bytes], Health]:
    """:func:`start_cluster` inside its progress phase."""
    from esdash.run.stop import Interrupted, check_interrupts, hold_interrupts, stop_cluster

    launcher = launch_cluster(run, session, fresh)
    try:
        check_interrupts()  # one that arrived while the launcher started
        try:
            health = wait_ready(run, session.cluster.nodes, launcher, timeout)
        except ClusterError:
            retried = _restart_with_new_ports(run, session, fresh, launcher, progress)
            if retried is None:
                raise
            launcher = retried
            health = wait_ready(run, session.cluster.nodes, launcher, timeout)
        if hold:
            hold_interrupts()
    except Interrupted as exc:
        # SIGINT, SIGTERM or SIGHUP while waiting: everything started is stopped, and the
        # run's status, every node's status and the CLI's message name the signal.
        where = "while the cluster was starting"
        why = f"esdash received {exc.signal_name} {where}"
        stop_cluster(run, launcher, reason="interrupted", why=why)
        raise Interrupted(exc.signal_name, where) from None
    except BaseException as exc:
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed to start"
        stop_cluster(run, launcher, reason=reason)
        raise
    return launcher, health


def _restart_with_new_ports(
    run: RunDir,
    session: Session,
    fresh: bool,
    launcher: subprocess.Popen[bytes],
    progress: Progress,
) -> subprocess.Popen[bytes] | None:
    """Issue 15, item 6: the one retry of a start whose automatic port was taken meanwhile.

    Ranks choose free ports seconds before their nodes bind them (:mod:`esdash.cluster.ports`);
    when another process took one in between, the whole cluster starts again with newly
    chosen ports (a master's transport port is in every node's seed hosts, so one node alone
    cannot move).  The failed start is stopped first: then every rank has recorded why its
    node failed.  Returns the new launcher, or None (nothing relaunched) for any other
    failure, which the caller raises as before.
    """
    from esdash.cluster import ports
    from esdash.run.stop import stop_cluster

    stop_cluster(run, launcher, reason="failed to start")
    reason = ports.retry_reason(run, session)
    if not reason:
        return None
    progress.line(f"{reason}; starting again with new ports")
    ports.forget_failed_start(run)
    return launch_cluster(run, session, fresh)


def up(
    session: Session,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    run: RunDir | None = None,
    hold: bool = False,
    progress: Progress | None = None,
    owned: bool = False,
) -> tuple[RunDir, subprocess.Popen[bytes], Health]:
    """Prepare and start a cluster; return once it is healthy (or leave nothing running).

    ``hold``, ``progress``: see :func:`start_cluster`.  ``owned``: this process owns the
    cluster (``cluster up --foreground``, a sweep): should it die without stopping it, the
    ranks stop it themselves (:mod:`esdash.launch.owner`).  Unowned, it lives on after the
    command returns, until ``esdash cluster down``.
    """
    progress = progress or for_stderr()
    what = f"checking session {session.name} and preparing its run directory"
    with progress.phase(what, announce_after=CHECKS_GRACE):
        run = prepare(session, run, fresh)
    if owned:
        owner.hold(run, session.cluster.owner_grace)
    progress.line(f"run directory: {run.path}")
    launcher, health = start_cluster(run, session, fresh, timeout, hold, progress)
    return run, launcher, health


# --------------------------------------------------------------------------- Slurm


@dataclass(frozen=True)
class Submitted:
    """A session handed to Slurm: its run directory, batch script and job id, and the
    estimated wall time with the ``--time`` the job asked for."""

    run: RunDir
    script: Path
    job: str
    wall_time: WallTime | None = None
    job_time: JobTime | None = None


@dataclass(frozen=True)
class SubmitPreview:
    """``esdash submit --dry-run``: the run directory a submit would create, its script, the
    estimated wall time and the ``--time`` the script asks for."""

    run: RunDir
    script: str
    wall_time: WallTime
    job_time: JobTime


def _time_for(
    session: Session, distribution: Distribution, bench: bool, root: Path | None
) -> tuple[WallTime, JobTime]:
    """The job's estimated wall time, and the ``--time`` it asks for: the session's own
    ``slurm.time``, else the estimate with its margin.  A job without ``bench`` holds the
    cluster for one ``esdash run --cluster`` of the session: the same phases, cluster first."""
    from esdash.prepare.timelimit import job_time
    from esdash.prepare.walltime import estimate_wall_time

    track = get_plugins().track(session.track.name)
    wall = estimate_wall_time(
        session, track, distribution=distribution, cluster_first=not bench, runs=root
    )
    return wall, job_time(session_time(session), wall.total)


def _job_command(session: Session, run: RunDir, bench: bool, fresh: bool) -> list[str]:
    """What the job runs: ``esdash run`` (``bench``) or ``esdash cluster up --foreground``."""
    flags = ["--fresh"] if fresh else []
    if session.trusts_track_code:  # a --trust-track-code given to submit reaches the job
        flags.append("--trust-track-code")
    session_path = str(session.path.resolve())
    if bench:
        return slurm.python_command("run", session_path, "--run-dir", str(run.path), *flags)
    return slurm.python_command(
        "cluster", "up", session_path, "--run-dir", str(run.path), "--foreground", *flags
    )


def preview_submit(
    session: Session, *, bench: bool, fresh: bool = False, root: Path | None = None
) -> SubmitPreview:
    """``esdash submit --dry-run``: :func:`submit`'s checks and script, writing nothing.

    The run directory is the one :func:`submit` would create now (not created); the script
    is returned for printing, never written.
    """
    _backend, _owner, distribution = check(session, fresh)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run = RunDir((root or runs_dir()) / f"{session.name}-{stamp}")
    wall, limit = _time_for(session, distribution, bench, root)
    command = _job_command(session, run, bench, fresh)
    script = slurm.batch_script(job_request(session), run, command, default_time=limit.limit.text)
    return SubmitPreview(run, script, wall, limit)


def submit(
    session: Session,
    *,
    bench: bool,
    fresh: bool = False,
    root: Path | None = None,
) -> Submitted:
    """Prepare a run directory (under ``root``) and submit its batch script.

    ``bench`` runs the whole benchmark in the job (``esdash run``), otherwise only the
    cluster (``esdash cluster up --foreground``).  ``esdash submit`` and the dashboard's
    submit key both come here; ``esdash submit --dry-run`` goes to :func:`preview_submit`.
    """
    run = _prepare_fresh_dir(session, root or runs_dir())
    command = _job_command(session, run, bench, fresh)
    script = run.job_script
    try:
        backend = get_plugins().backend(session.cluster.backend.name)
        distribution = backend.inspect(Path(str(run.read_info().home)))
        wall, limit = _time_for(session, distribution, bench, root)
        text = slurm.batch_script(job_request(session), run, command, default_time=limit.limit.text)
    except BadInput:  # a value sbatch would misread: nothing was submitted from the directory
        shutil.rmtree(run.path, ignore_errors=True)
        raise
    script.write_text(text)
    job = slurm.submit(script)
    with run.edit_info() as info:
        info.state, info.submitted, info.slurm_job, info.script = "queued", True, job, str(script)
    return Submitted(run, script, job, wall, limit)


# ------------------------------------------------------------------ detached esdash run


@dataclass
class Launch:
    """An ``esdash run`` started detached (by the dashboard), and its run directory."""

    session: str
    session_path: Path
    process: subprocess.Popen[bytes]
    run: Path
    started: float

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> Path:
        return RunDir(self.run).run_log

    def exit_code(self) -> int | None:
        return self.process.poll()


def _prepare_fresh_dir(session: Session, root: Path) -> RunDir:
    """A new run directory, checked and prepared; removed again if preparing fails."""
    run = RunDir.create(root, session.name)
    try:
        prepare(session, run, account=False)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)  # nothing was launched in it
        raise
    return run


def detach(
    session_path: Path,
    root: Path,
    python: str = sys.executable,
    prepare: Callable[[Session, Path], RunDir] = _prepare_fresh_dir,
) -> Launch:
    """Prepare a run directory, then start ``esdash run SESSION --run-dir RUN`` detached.

    Preparing checks what ``esdash run`` would check before launching anything (plugins,
    distribution, data root) and raises its error.  The process gets its own session, so
    quitting the dashboard (or its terminal closing) never stops it; its output goes to
    ``esdash-run.log`` in the run directory, and the launch record keeps its identity.
    ``prepare`` makes the run directory (tests without a distribution pass a lighter one).
    """
    session = load_session(session_path)
    run = prepare(session, root)
    env = {**os.environ, "ESDASH_RUNS": str(root)}
    command = [python, "-m", "esdash", "run", str(session.path), "--run-dir", str(run.path)]
    started = time.time()
    child, record = process.start(command, output=run.run_log, env=env)
    run.write_launch_record(
        LaunchRecord(
            pid=record.pid,
            host=record.host or socket.gethostname(),
            command=record.command,
            create_time=record.create_time,
            started=started,
            output=str(run.run_log),
        )
    )
    return Launch(session.name, session.path, child, run.path, started)
