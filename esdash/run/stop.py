"""Stopping a run: the cluster, the benchmark ranks, the ``esdash run`` that drives them.

One path for every stop (``esdash cluster down``, Ctrl-C of ``esdash run``, the dashboard's
stop key, sweeps, a failed start):

1. the stop file: every rank sees it within half a second, stops its node (TERM, then KILL
   after its grace) and records why;
2. the launcher (``mpiexec``/``srun``), if it lingers past the grace period: TERM, then
   KILL, to its process group, through :func:`esdash.launch.process.stop`, which signals
   only a process whose pid, create time and command line are still the recorded ones;
3. ``scancel`` for a submitted job still in the queue;
4. storage the ranks could not release themselves (a SIGKILLed rank leaves its gocryptfs
   mount): the encryption mode's ``release_storage``.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from esdash.cluster.health import failure_report, running_nodes
from esdash.cluster.users import resolve_owner
from esdash.errors import ClusterError, EsdashError
from esdash.launch import process, slurm
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir
from esdash.session import load_run_session

#: Seconds a cluster gets to stop on its own after the stop file before signals follow.
STOP_GRACE = 90.0


def stop_cluster(
    run: RunDir,
    launcher: subprocess.Popen[bytes] | None = None,
    grace: float = STOP_GRACE,
    reason: str = "stopped",
) -> str:
    """Ask every rank to stop its node, wait, and escalate if the launcher lingers.

    ``launcher`` is the launcher process when this process started it (it is then also
    reaped).  Returns ``"stopped"`` or ``"killed"``; the run's state becomes ``reason``
    (or that outcome).
    """
    run.request_stop()
    info = run.read_info()
    record = info.launcher
    outcome = "stopped"
    if launcher is not None or process.here(record):
        result = process.stop(record, grace=grace, first=0, group=True, process=launcher)
        if result == "killed":
            outcome = "killed"
    else:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and running_nodes(run):
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


def release_storage(run: RunDir) -> list[str]:
    """Undo storage setup that ranks on this host could not undo themselves.

    A rank killed outright (SIGKILL, a lost MPI job) never reaches the ``finally`` that
    unmounts its encrypted data directory.  Once the ranks are gone, the mode's optional
    ``release_storage(data_dir, owner, options)`` runs for every rank of the run placed on
    this host; ranks on other hosts are released by the next start there.  Returns what was
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


def stay(run: RunDir, launcher: subprocess.Popen[bytes]) -> int:
    """Stay with a running cluster until it ends, a signal arrives or ``down`` is requested.

    ``esdash cluster up --foreground`` (a batch job's main step): SIGTERM from Slurm's time
    limit or ``scancel``, SIGINT and SIGHUP stop the cluster the normal way.
    """
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    watched = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, on_signal) for sig in watched}
    try:
        while launcher.poll() is None and not received and not run.stop_requested():
            time.sleep(0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if launcher.poll() is None:
        stop_cluster(run, launcher, reason="stopped")
        return 0
    for message in release_storage(run):
        print(f"esdash: {message}", file=sys.stderr)
    failures = failure_report(run)
    if failures:
        with run.edit_info() as info:
            info.state = "failed"
        raise ClusterError(f"the cluster in {run.path} failed:\n{failures}")
    with run.edit_info() as info:
        info.state = "stopped"
    return 0


def stop_run(path: Path, grace: float = 120.0) -> str:
    """Stop what runs in ``path``, as Ctrl-C would; returns what was done.

    * the ``esdash run`` that drives it, if it runs on this host: SIGINT to it.  It aborts
      the benchmark (results so far are written), then stops the cluster; this waits up to
      ``grace`` seconds.
    * otherwise the benchmark ranks (SIGINT to their launcher's group) and the cluster
      (:func:`stop_cluster`).

    May take minutes: call it from a worker thread.
    """
    run = RunDir(path)
    info = run.read_info()
    driver = info.driver
    if driver is None:  # runs the dashboard started before drivers were recorded
        with contextlib.suppress(EsdashError):
            driver = run.read_launch_record()
    if driver is not None and process.send(driver, signal.SIGINT):
        if process.wait_gone(driver, grace):
            return f"stopped esdash run (pid {driver.pid}) and its cluster"
        return f"sent Ctrl-C to esdash run (pid {driver.pid}); it is still stopping"
    done = []
    if process.send(info.bench_launcher, signal.SIGINT, group=True):
        done.append("interrupted the benchmark ranks")
    outcome = stop_cluster(run, grace=min(grace, STOP_GRACE))
    done.append(f"cluster {outcome}")
    return "; ".join(done)
