"""Stopping a run: the cluster, the benchmark ranks, the ``esdash run`` that drives them.

One path for every stop (``esdash cluster down``, Ctrl-C of ``esdash run``, the dashboard's
stop key, sweeps, a failed start):

1. the stop file: every rank sees it within half a second, stops its node (TERM, then KILL
   after its grace) and records why;
2. the launcher (``mpiexec``/``srun``), if it lingers past the grace period: TERM, then
   KILL, to its process group, through :func:`esdash.launch.process.stop`, which signals
   only a process whose pid, create time and command line are still the recorded ones
   (:func:`esdash.launch.process.check`); a pid that cannot be proved to be the recorded
   launcher is refused, and the stop says so;
3. ``scancel`` for a submitted job still in the queue;
4. storage the ranks could not release themselves (a SIGKILLed rank leaves its gocryptfs
   mount): the encryption mode's ``release_storage``.

A stop from outside (``esdash cluster down``, the dashboard's stop key: :func:`take_down`,
:func:`stop_run`) never signals a run whose ``run.json`` state says it is over
(:data:`ENDED`): its pids may be anybody's by now (a reboot, a shared run directory).

Signals: a command that starts things (``esdash run``, ``esdash cluster up``) holds one
:class:`Interrupts` from its start to the end of its stop path.  SIGINT (Ctrl-C), SIGTERM
(``kill``, ``scancel``, a Slurm time limit) and SIGHUP are recorded by name; while nothing
is half-started the first one raises :class:`Interrupted` at once, and inside a stop path
(:func:`deferred_interrupts`) signals are only recorded, so a second Ctrl-C never cuts the
stop short.  ``run.json`` keeps the state (``interrupted``) and the reason, which names the
signal and the phase ("esdash received SIGTERM while the cluster was starting"); each rank
copies that reason into its node's status.  The CLI exits with ``EXIT_ABORT`` (130).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from esdash.cluster.health import failure_report, running_nodes
from esdash.cluster.users import recorded_owner, remove_account
from esdash.errors import ClusterError, EsdashError
from esdash.launch import process, slurm
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RUN_INFO, RunDir
from esdash.rundir.records import ProcessRecord, RunInfo
from esdash.session import load_run_session

#: Seconds a cluster gets to stop on its own after the stop file before its launcher is
#: signalled.  Ranks see the stop file within half a second and give their node
#: ``esdash.cluster.node.STOP_GRACE`` (10 s) before SIGKILL, so a healthy cluster is gone
#: long before; the launcher is signalled only when ranks hang.
STOP_GRACE = 12.0

#: ``run.json`` states of a run that is over: what it recorded has ended (or is being stopped
#: by the esdash that set the state), so a stop from outside signals nothing of it.
ENDED = ("stopped", "killed", "failed", "failed to start", "interrupted", "finished")

#: The signals that stop a command of esdash (Ctrl-C, kill/scancel/time limit, hang-up).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal reached esdash; what it had started is stopped when this propagates.

    A :class:`KeyboardInterrupt`, so code that already handles Ctrl-C handles SIGTERM and
    SIGHUP alike; the CLI prints the message and exits with ``EXIT_ABORT``.
    """

    def __init__(self, signal_name: str, where: str = "") -> None:
        self.signal_name = signal_name
        self.where = where
        super().__init__(f"received {signal_name}{f' {where}' if where else ''}")


class Interrupts:
    """The stop signals one command receives, by name, from its start to its last stop.

    Use as a context manager in the main thread (elsewhere signals cannot be handled, and it
    records nothing).  Outside :meth:`deferred` the first signal raises :class:`Interrupted`
    at once -- nothing is half-started there -- and later ones are only recorded; inside,
    every signal is only recorded and the code polls :attr:`received`.  The previous
    handlers are restored on exit.
    """

    def __init__(self) -> None:
        self.received: list[str] = []
        self._deferred = 0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
            _ACTIVE.append(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._previous:
            _ACTIVE.remove(self)
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            self._previous = {}

    @property
    def first(self) -> str | None:
        """The name of the first signal received (``SIGTERM``), or None."""
        return self.received[0] if self.received else None

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        if not self._deferred:
            self.hold()  # what runs while this propagates is cleanup: never cut it short
            raise Interrupted(self.received[0])

    def hold(self) -> None:
        """Only record signals from now on (the command owns something it must stop)."""
        self._deferred += 1

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Only record signals inside (starting a process and recording it, stopping)."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1

    def check(self, where: str = "") -> None:
        """Raise :class:`Interrupted` if a signal was recorded (outside :meth:`deferred`)."""
        if self.received and not self._deferred:
            raise Interrupted(self.received[0], where)


_ACTIVE: list[Interrupts] = []


def active_interrupts() -> Interrupts | None:
    """The :class:`Interrupts` in force in this process, if a command installed one."""
    return _ACTIVE[-1] if _ACTIVE else None


def hold_interrupts() -> None:
    """From now on, only record stop signals (see :meth:`Interrupts.hold`)."""
    current = active_interrupts()
    if current is not None:
        current.hold()


def check_interrupts(where: str = "") -> None:
    """Raise :class:`Interrupted` for a signal recorded meanwhile (see :meth:`Interrupts.check`)."""
    current = active_interrupts()
    if current is not None:
        current.check(where)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Record, never raise, stop signals inside (a stop path must run to its end)."""
    current = active_interrupts()
    if current is None:
        yield
        return
    with current.deferred():
        yield


def stop_cluster(
    run: RunDir,
    launcher: subprocess.Popen[bytes] | None = None,
    grace: float = STOP_GRACE,
    reason: str = "stopped",
    why: str | None = None,
) -> str:
    """Ask every rank to stop its node, wait, and escalate if the launcher lingers.

    ``launcher`` is the launcher process when this process started it (it is then also
    reaped).  Returns ``"stopped"``, ``"killed"`` or ``"refused"`` (a recorded launcher
    whose identity cannot be proved is not signalled; the state is kept while a node still
    says running); the run's state becomes ``reason`` (or that outcome) and ``run.json``'s
    reason ``why`` -- written before the stop file, so every rank records it as its node's
    stop reason.  Signals are only recorded meanwhile (:func:`deferred_interrupts`): the
    stop runs to its end.
    """
    with deferred_interrupts():
        if why:
            with run.edit_info() as changed:
                changed.reason = why
        run.request_stop()
        info = run.read_info()
        record = info.launcher
        result = None
        if launcher is not None or process.here(record):
            result = process.stop(
                record, grace=grace, first=0, group=True, process=launcher, tree=True
            )
        if result is None or result == "refused":
            _wait_for_nodes(run, grace)
        else:
            _close_node_statuses(run, why or reason)
        outcome = "killed" if result == "killed" else "stopped"
        job = info.slurm_job
        if job and info.submitted and slurm.job_state(job) not in ("FINISHED",):
            slurm.cancel(job)
        for message in release_storage(run):
            print(f"esdash: {message}", file=sys.stderr)
        release_account(run)
        if result == "refused" and running_nodes(run):
            return "refused"  # the run may still be up: its state stays what it was
        with run.edit_info() as changed:
            changed.state = reason if reason != "stopped" else outcome
            changed.stopped = time.time()
    return "refused" if result == "refused" else outcome


def _wait_for_nodes(run: RunDir, grace: float) -> None:
    """Give the ranks ``grace`` seconds to stop their nodes on the stop file."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and running_nodes(run):
        time.sleep(0.5)


def ended(info: RunInfo) -> str | None:
    """The state of a run that is over (:data:`ENDED`), or None while it may still run."""
    return info.state if info.state in ENDED else None


@dataclass
class Down:
    """What a stop from outside did: the outcome and one line per process not signalled.

    ``outcome`` is :func:`stop_cluster`'s (``stopped``, ``killed``, ``refused``), or
    ``already`` when the run had ended before and nothing was done.
    """

    outcome: str
    notes: list[str] = field(default_factory=list)


def take_down(run: RunDir, grace: float = STOP_GRACE) -> Down:
    """Stop a run's cluster from outside the esdash that started it (``esdash cluster down``).

    A run that is over is left alone: nothing is signalled, and only ranks whose status
    still says running are asked to stop, through the stop file.  Otherwise
    :func:`stop_cluster`, with a line naming the recorded launcher if it is not signalled
    (another process holds its pid, or its record cannot prove it is the launcher).
    """
    info = run.read_info()
    state = ended(info)
    if state is not None:
        release_account(run)  # left by ranks killed outright, if any
        note = f"already {state} ({RUN_INFO}); nothing signalled"
        still = running_nodes(run)
        if still:
            run.request_stop()  # the ranks' own protocol: no signal involved
            note += f"; {len(still)} node(s) still marked running were asked to stop (stop file)"
        return Down("already", [note])
    notes = []
    bench = stop_bench(run)
    if bench:
        notes.append(bench)
    if info.launcher is None and info.bench_launcher is not None:
        return Down("stopped", notes)  # a benchmark against another run's cluster
    refusal = _refusal("the launcher", info.launcher)
    if refusal:
        notes.append(refusal)
    return Down(stop_cluster(run, grace=grace), notes)


#: Seconds the bench ranks get after SIGTERM to write what they measured (rank 0 writes the
#: results) before their launcher's whole tree is killed.
BENCH_GRACE = 8.0


def stop_bench(run: RunDir, grace: float = BENCH_GRACE) -> str | None:
    """Stop a run's bench step from outside (``esdash cluster down``): SIGTERM to its launcher's
    group -- the ranks abort and rank 0 still writes the results -- then, after ``grace``,
    SIGKILL to the launcher and every rank below it.  Only a launcher whose identity is
    confirmed is signalled; a line says what was done or refused (None: no bench runs)."""
    record = run.read_info().bench_launcher
    if record is None or not process.here(record):
        return None
    refusal = _refusal("the benchmark launcher", record)
    if refusal:
        return refusal
    outcome = process.stop(record, grace=grace, group=True, kill_after=2.0, tree=True)
    return None if outcome == "gone" else f"benchmark ranks {outcome}"


def _refusal(what: str, record: ProcessRecord | None) -> str | None:
    """A line saying why ``what`` (a process recorded on this host) will not be signalled."""
    if not process.here(record):
        return None  # its own host's esdash, or its ranks through the stop file, stop it
    verdict = process.check(record)
    if verdict.refusal is None:
        return None
    return f"{what} not signalled: {verdict.refusal}"


def _close_node_statuses(run: RunDir, reason: str) -> None:
    """After the launcher is gone: nodes whose rank died before it could record their end.

    A rank killed outright leaves ``running`` (or ``starting``) in its status file while its
    node's guard has already stopped the node; the status must not claim a live node.
    """
    for rank in running_nodes(run):
        with run.edit_node_status(rank) as status:
            status.state = "stopped"
            status.message = f"{reason}; its rank ended before recording the node's end"


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
        owner = recorded_owner(info, session.cluster.run_as, session.path)
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


def release_account(run: RunDir) -> None:
    """Remove the run's per-cluster node account from this host once its nodes are gone
    (the ranks remove it themselves; this catches ranks that were killed outright)."""
    try:
        account = run.read_info().node_account
        if account is not None:
            remove_account(account)
    except EsdashError as exc:
        print(f"esdash: warning: {exc}", file=sys.stderr)


def stay(run: RunDir, launcher: subprocess.Popen[bytes], interrupts: Interrupts) -> int:
    """Stay with a running cluster until it ends, a signal arrives or ``down`` is requested.

    ``esdash cluster up --foreground`` (a batch job's main step): SIGTERM from Slurm's time
    limit or ``scancel``, SIGINT and SIGHUP stop the cluster the normal way -- its state is
    ``stopped`` and the exit code 0, and the reason names the signal.  ``interrupts`` is the
    command's own (installed before the cluster started).
    """
    with interrupts.deferred():
        while launcher.poll() is None and not interrupts.received and not run.stop_requested():
            time.sleep(0.2)
        if launcher.poll() is None:
            why = f"esdash received {interrupts.first}" if interrupts.first else None
            stop_cluster(run, launcher, reason="stopped", why=why)
            return 0
    for message in release_storage(run):
        print(f"esdash: {message}", file=sys.stderr)
    release_account(run)
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

    Nothing is signalled in a run that is over (:func:`ended`), nor any process whose
    identity is not confirmed; the answer names what was refused.  May take minutes: call
    it from a worker thread.
    """
    run = RunDir(path)
    info = run.read_info()
    state = ended(info)
    if state is not None:
        return f"already {state} ({RUN_INFO}); nothing signalled"
    driver = info.driver
    if driver is None:  # runs the dashboard started before drivers were recorded
        with contextlib.suppress(EsdashError):
            driver = run.read_launch_record()
    refused = _refusal("esdash run", driver)
    notes = [refused] if refused else []
    if driver is not None and process.send(driver, signal.SIGINT):
        if process.wait_gone(driver, grace):
            return f"stopped esdash run (pid {driver.pid}) and its cluster"
        return f"sent Ctrl-C to esdash run (pid {driver.pid}); it is still stopping"
    done = []
    bench = _refusal("the benchmark launcher", info.bench_launcher)
    if bench:
        notes.append(bench)
    if process.send(info.bench_launcher, signal.SIGINT, group=True):
        done.append("interrupted the benchmark ranks")
    down = take_down(run, grace=min(grace, STOP_GRACE))
    if down.outcome != "already":  # its note says so
        done.append(f"cluster {down.outcome}")
    return "; ".join(done + notes + down.notes)
