"""Starting a run: check, prepare the run directory, start the cluster here or submit it.

Every way into a run passes :func:`prepare`: it runs the pre-flight checks of the launch
stage (:mod:`esdash.cluster.preflight`), then creates the run directory with the session,
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from esdash.cluster import ports, preflight
from esdash.cluster.distribution import resolve_home
from esdash.cluster.health import wait_ready
from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput, ClusterError
from esdash.launch import mpi, process, slurm
from esdash.paths import runs_dir
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health, LaunchRecord
from esdash.session import Session, load_session

#: How long ``start_cluster`` waits for a healthy cluster before giving up (seconds).
DEFAULT_TIMEOUT = 300.0


def prepare(session: Session, run: RunDir | None = None, fresh: bool = False) -> RunDir:
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


def start_cluster(
    run: RunDir,
    session: Session,
    fresh: bool,
    timeout: float = DEFAULT_TIMEOUT,
    hold: bool = False,
) -> tuple[subprocess.Popen[bytes], Health]:
    """Launch the ranks of a prepared run and wait until the cluster is healthy.

    On any failure (Ctrl-C included) the cluster is stopped before the error propagates.
    A command that holds :class:`esdash.run.stop.Interrupts` gets SIGTERM and SIGHUP handled
    the same way, as :class:`esdash.run.stop.Interrupted` naming the signal; with ``hold``
    its signals are only recorded from the moment the cluster is ready (the caller then
    owns a running cluster and stops it itself: no signal may fall between the two).
    """
    from esdash.run.stop import Interrupted, check_interrupts, hold_interrupts, stop_cluster

    launcher = launch_cluster(run, session, fresh)
    try:
        check_interrupts()  # one that arrived while the launcher started
        try:
            health = wait_ready(run, session.cluster.nodes, launcher, timeout)
        except ClusterError:
            retried = _restart_with_new_ports(run, session, fresh, launcher)
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
    run: RunDir, session: Session, fresh: bool, launcher: subprocess.Popen[bytes]
) -> subprocess.Popen[bytes] | None:
    """Issue 15, item 6: the one retry of a start whose automatic port was taken meanwhile.

    Ranks choose free ports seconds before their nodes bind them (:mod:`esdash.cluster.ports`);
    when another process took one in between, the whole cluster starts again with newly
    chosen ports (a master's transport port is in every node's seed hosts, so one node alone
    cannot move).  The failed start is stopped first: then every rank has recorded why its
    node failed.  Returns the new launcher, or None (nothing relaunched) for any other
    failure, which the caller raises as before.
    """
    from esdash.run.stop import stop_cluster

    stop_cluster(run, launcher, reason="failed to start")
    reason = ports.retry_reason(run, session)
    if not reason:
        return None
    print(f"esdash: {reason}; starting again with new ports", file=sys.stderr)
    ports.forget_failed_start(run)
    return launch_cluster(run, session, fresh)


def up(
    session: Session,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    run: RunDir | None = None,
    hold: bool = False,
) -> tuple[RunDir, subprocess.Popen[bytes], Health]:
    """Prepare and start a cluster; return once it is healthy (or leave nothing running).

    ``hold``: see :func:`start_cluster`.
    """
    run = prepare(session, run, fresh)
    launcher, health = start_cluster(run, session, fresh, timeout, hold)
    return run, launcher, health


# --------------------------------------------------------------------------- Slurm


@dataclass(frozen=True)
class Submitted:
    """A session handed to Slurm: its run directory, batch script and job (None: dry run)."""

    run: RunDir
    script: Path
    job: str | None


def submit(
    session: Session,
    *,
    bench: bool,
    fresh: bool = False,
    dry_run: bool = False,
    root: Path | None = None,
) -> Submitted:
    """Prepare a run directory (under ``root``) and submit its batch script.

    ``bench`` runs the whole benchmark in the job (``esdash run``), otherwise only the
    cluster (``esdash cluster up --foreground``).  ``dry_run`` writes the script only.
    ``esdash submit`` and the dashboard's submit key both come here.
    """
    run = _prepare_fresh_dir(session, root or runs_dir())
    flags = ["--fresh"] if fresh else []
    session_path = str(session.path.resolve())
    if bench:
        command = slurm.python_command("run", session_path, "--run-dir", str(run.path), *flags)
    else:
        command = slurm.python_command(
            "cluster", "up", session_path, "--run-dir", str(run.path), "--foreground", *flags
        )
    script = run.job_script
    script.write_text(slurm.batch_script(session, run, command))
    if dry_run:
        with run.edit_info() as info:
            info.state, info.script = "prepared", str(script)
        return Submitted(run, script, None)
    job = slurm.submit(script)
    with run.edit_info() as info:
        info.state, info.submitted, info.slurm_job, info.script = "queued", True, job, str(script)
    return Submitted(run, script, job)


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
        prepare(session, run)
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
