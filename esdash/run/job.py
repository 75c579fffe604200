"""``esdash run``: the whole job, headless -- cluster, ingest, query steps, results, summary.

Everything that can be checked is checked before anything is launched: the session, the
plugins, the distribution, the corpus (generated once and cached) and the query steps.
The bench ranks then run as one MPI step beside the cluster's step; this process only
follows the run stream (``stream.jsonl``) to print progress, exactly as any other viewer
would, and prints the summary at the end — also after Ctrl-C.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from esdash.bench.sink import results_from_stream
from esdash.errors import (
    EXIT_ABORT,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_THRESHOLD,
    BadInput,
    ClusterError,
    EsdashError,
)
from esdash.launch import mpi, owner, process
from esdash.paths import cache_dir
from esdash.plugin.api import ClientCodec, Track
from esdash.plugin.corpus_scan import check_whole_corpus
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin.manager import get_plugins
from esdash.plugin.values import Corpus, QueryStep
from esdash.prepare import checks
from esdash.prepare.plan import make_plan
from esdash.progress import CHECKS_GRACE, for_stderr
from esdash.progress import Progress as Lines
from esdash.run import start, stop
from esdash.run.leakage import record_leakage
from esdash.rundir.files import tail
from esdash.rundir.layout import RUN_INFO, RunDir
from esdash.rundir.records import (
    BenchPlan,
    Event,
    Interval,
    ProcessRecord,
    Results,
    StreamRecord,
)
from esdash.session import Session

#: Seconds the ranks may linger after the final record before they are terminated.
LINGER_SECONDS = 20.0


@dataclass
class RunOptions:
    cluster: Path | None = None
    keep: bool = False
    fresh: bool = False
    reingest: bool = False
    #: ``auto``: re-ingest an index whose fingerprint differs; ``require``: refuse to run.
    reuse_index: str = "auto"
    thresholds: tuple[str, ...] = ()
    timeout: float = start.DEFAULT_TIMEOUT
    #: a run directory prepared in advance (``esdash submit --bench`` creates it)
    run_dir: Path | None = None
    #: as root, accept a ``cluster`` run directory another user controls (``--allow-foreign``)
    allow_foreign: bool = False


def prepare_workload(session: Session) -> tuple[Track, Corpus, tuple[QueryStep, ...]]:
    """Track, corpus and query steps, resolved before any cluster is started."""
    plugins = get_plugins()
    track = plugins.track(session.track.name)
    corpus = track.corpus(session.track.options, cache_dir() / "corpora")
    if not Path(corpus.path).is_file():
        raise BadInput(f"track {track.name}: corpus {corpus.path} does not exist")
    check_whole_corpus(corpus)  # every line, once per file identity (cached)
    # Scan once here; the ranks then only read the cached offsets.
    ranks = session.benchmark.workers_per_node * session.cluster.nodes
    plan_slices(corpus, ranks, cache_dir() / "offsets")
    return track, corpus, session.query_steps(track)


def client_codec_for(
    session: Session, track: Track, thresholds: tuple[str, ...] = ()
) -> ClientCodec | None:
    """The encryption mode's client codec (None for modes that send data unchanged).

    Built before any cluster starts: a missing or unsafe key stops the run right here, with
    the message ``esdash session check`` gives for it.
    """
    from esdash.cluster.dataroot import data_root

    checks.require(session, "session", thresholds=thresholds)
    mode = get_plugins().encryption(session.encryption.name)
    return mode.client_codec(
        session.encryption.options,
        track,
        track_options=session.track.options,
        data_root=data_root(session),
    )


def _bench_run_dir(session: Session, cluster_run: RunDir, run: RunDir | None = None) -> RunDir:
    """A new run directory for a benchmark against an already running cluster.

    ``run`` is one created in advance (``esdash sweep`` records it before the run starts).
    """
    from esdash.paths import runs_dir

    cluster = cluster_run.read_info()
    run = run or RunDir.create(runs_dir(), session.name)
    run.write_session(session.path.read_bytes())
    run.write_topology(cluster_run.read_topology())
    with start.new_run_info(run, session, "running") as info:
        info.cluster_run = str(cluster_run.path)
        info.home = cluster.home
        info.engine = cluster.engine
        info.version = cluster.version
        info.nodes = cluster.nodes
    return run


def require_running(cluster_run: RunDir, session: Session) -> None:
    """``run --cluster RUN``: refuse at once, in one line, a cluster that is not running.

    Without this the bench ranks met refused connections and the summary was a table of
    "(no data)" (issue 17, item 6).  ``run.json``'s state decides; a cluster recorded as
    running whose launcher on this host has ended is not running either.
    """
    info = cluster_run.read_info()
    state = info.state or "unknown"
    if state == "running" and info.launcher is not None and process.here(info.launcher):
        if not process.alive(info.launcher):
            state = f"running in {RUN_INFO}, but its launcher (pid {info.launcher.pid}) has ended"
    elif state != "running" and info.reason:
        state = f"{state}: {info.reason}"
    if state == "running":
        return
    session_path = info.session_path or str(session.path)
    raise ClusterError(
        f"the cluster of {cluster_run.path} is not running (state {state}); start one with "
        f"`esdash cluster up {session_path}` and pass the run directory it prints to --cluster"
    )


def launch_bench(run: RunDir, session: Session) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start the benchmark step: rank 0 coordinates and records, one rank per worker."""
    workers = session.benchmark.workers_per_node * session.cluster.nodes
    hosts = -(-session.cluster.nodes // session.cluster.nodes_per_host)
    command = mpi.rank_command(["esdash.bench.rank", str(run.path)], workers + 1, None, hosts)
    launcher, record = process.start(
        command, output=run.bench_log, cwd=run.path, restore_signals=False
    )
    with run.edit_info() as info:
        info.bench_launcher = record
    return launcher, record


#: Seconds the bench ranks get to wrap up after a forwarded stop signal before they are
#: killed: they abort within an interval and rank 0 writes the results; the cluster still
#: has to stop within the 15 s a stop signal promises.
ABORT_GRACE = 8.0

#: What a stop signal to ``esdash run`` becomes for the bench ranks (they handle INT, TERM).
FORWARDED = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGTERM}

#: How each phase of the bench stream (its ``phase`` events) is named in a stop reason.
PHASE_WORDS = {
    "ingest": "during ingest",
    "settle": "while the index settled",
    "warmup": "during the warm-up",
    "steps": "during the query steps",
    "results": "while the results were written",
}


#: What a run awaits while its stream is quiet, by the phase of its last ``phase`` event.
AWAITED = {
    "ingest": "ingesting",
    "settle": "settling the index",
    "warmup": "warming up",
    "steps": "running the query steps",
    "results": "writing the results",
}


def awaited(phase: str | None, session: Session) -> str:
    """``settling the index``: what a quiet stream is waiting for, for the tick line."""
    if phase is None:
        ranks = session.benchmark.workers_per_node * session.cluster.nodes + 1
        return f"starting {ranks} bench rank(s) (no record yet)"
    return AWAITED.get(phase, f"in phase {phase}")


@dataclass
class Progress:
    """The bench phase ``follow`` has seen in the stream, and the one a signal interrupted."""

    phase: str | None = None
    interrupted_in: str | None = None

    def see(self, item: StreamRecord) -> None:
        if isinstance(item, Event) and item.kind == "phase":
            phase = item.data.get("phase")
            if isinstance(phase, str):
                self.phase = phase

    def reason(self, interrupts: stop.Interrupts) -> str:
        """``esdash received SIGTERM during ingest``: the signal and the phase it hit."""
        phase = self.interrupted_in or self.phase
        if phase is None:
            where = "as the benchmark started"
        else:
            where = PHASE_WORDS.get(phase, f"in phase {phase}")
        return f"esdash received {interrupts.first} {where}"


def follow(
    run: RunDir,
    launcher: subprocess.Popen[bytes],
    record: ProcessRecord,
    out: TextIO,
    session: Session,
    interrupts: stop.Interrupts,
    progress: Progress | None = None,
    lines: Lines | None = None,
) -> bool:
    """Print the stream while the bench runs; forward a stop signal to the ranks.

    The signal that arrived is forwarded (SIGTERM stays SIGTERM, so the results name it):
    the ranks abort and still write their results.  Once rank 0 writes the results nothing
    is forwarded: everything is measured, and the workers, already finishing, would die of
    the signal and take rank 0 down with them.  A second signal, or ranks still running
    :data:`ABORT_GRACE` seconds later, kill the step: the launcher and every rank below it.
    Each interval record goes to the observer hooks once, as it is read, and ``progress``
    follows the phase events.  Whenever no record arrived for ``lines.tick`` seconds (ranks
    still starting, an index settling) a line says what is awaited.  Returns True when the
    run was interrupted.
    """
    from esdash.view.live import LivePrinter

    progress = progress or Progress()
    lines = lines or Lines(out, tty=False)
    plugins = get_plugins()
    printer = LivePrinter(run.stream_file, out, tty=out.isatty())
    lines.touch()
    last_record = lines.clock.now()

    def observe(records: list[StreamRecord]) -> None:
        nonlocal last_record
        if records:
            lines.touch()
            last_record = lines.clock.now()
        for item in records:
            progress.see(item)
            if isinstance(item, Interval):
                plugins.interval(session, item)

    finished_at = None
    forwarded_at: float | None = None
    killed = False
    while launcher.poll() is None:
        observe(printer.poll())
        if lines.clock.now() - lines.last_output >= lines.tick:
            quiet = lines.clock.now() - last_record
            printer.note(f"esdash: {awaited(progress.phase, session)}: no record for {quiet:.0f} s")
            lines.touch()
        first = interrupts.first
        if first and forwarded_at is None:
            progress.interrupted_in = progress.phase
            forwarded_at = time.monotonic()
            if progress.phase != "results" and not printer.reader.finished:
                process.send(record, FORWARDED.get(first, signal.SIGTERM), group=True)
        elif (
            forwarded_at is not None
            and not killed
            and (len(interrupts.received) > 1 or time.monotonic() - forwarded_at > ABORT_GRACE)
        ):
            killed = True
            process.send(record, signal.SIGKILL, group=True, tree=True)
        if printer.reader.finished and finished_at is None:
            finished_at = time.monotonic()
        if finished_at is not None:
            # the results are written; a hung rank must not keep the job alive
            lingering = time.monotonic() - finished_at
            if lingering > LINGER_SECONDS + 15:
                process.send(record, signal.SIGKILL, group=True, tree=True)
            elif lingering > LINGER_SECONDS:
                process.send(record, signal.SIGTERM, group=True)
        time.sleep(0.1)
    observe(printer.close())
    return bool(interrupts.received)


def run_session(session: Session, options: RunOptions, out: TextIO = sys.stdout) -> int:
    """The whole job; returns the documented exit code.

    SIGINT, SIGTERM and SIGHUP are handled from here to the end, in every phase, by one
    :class:`esdash.run.stop.Interrupts`: while the cluster starts they raise (the start
    stops what it started); from then on they are recorded, forwarded to the bench ranks
    (which abort and still write what they measured), and the cluster is stopped the one
    way (:func:`esdash.run.stop.stop_cluster`).  ``run.json`` ends ``interrupted`` with the
    signal and the phase as its reason, and the exit code is ``EXIT_ABORT``.
    """
    with stop.Interrupts() as interrupts:
        return _run_session(session, options, out, interrupts)


def _run_session(
    session: Session, options: RunOptions, out: TextIO, interrupts: stop.Interrupts
) -> int:
    from esdash.view.references import judge, misses, render_references
    from esdash.view.summary import evaluate_thresholds, parse_thresholds, render_summary

    thresholds = parse_thresholds(options.thresholds)
    lines = for_stderr()
    if options.cluster is not None:
        require_running(RunDir.open(options.cluster, options.allow_foreign), session)
    what = f"preparing track {session.track.name} (corpus, offsets, query steps, encryption)"
    with lines.phase(what, announce_after=CHECKS_GRACE):  # a refusal here is one line
        track, corpus, steps = prepare_workload(session)
        codec = client_codec_for(session, track, options.thresholds)
    plugins = get_plugins()
    cluster_process = None
    prepared = RunDir.open(options.run_dir) if options.run_dir else None
    if options.cluster is not None:
        cluster_run = RunDir.open(options.cluster, options.allow_foreign)
        run = _bench_run_dir(session, cluster_run, prepared)
    else:
        what = "checking the session and preparing its run directory"
        with lines.phase(what, announce_after=CHECKS_GRACE):
            run = start.prepare(session, prepared, options.fresh)
    with run.edit_info() as info:
        info.driver = process.identify(os.getpid())  # what a stop request signals
    # Before anything is launched: should this process die without stopping what it
    # started (SIGKILL, the OOM killer), the ranks stop it themselves (issue 36).
    owner.hold(run, session.cluster.owner_grace)
    plugins.session_started(session, run.path)
    if options.cluster is None:
        try:
            cluster_process, _ = start.start_cluster(
                run, session, options.fresh, options.timeout, hold=True, progress=lines
            )
        except BaseException:
            plugins.session_finished(session, run.path, None)
            raise
        print(f"cluster up: {run.path}", file=out, flush=True)
    status = EXIT_FAILURE
    results: Results | None = None
    plan: BenchPlan | None = None
    progress = Progress()
    try:
        backend = plugins.backend(session.cluster.backend.name)
        distribution = backend.inspect(Path(str(run.read_info().home)))
        ranks = session.benchmark.workers_per_node * session.cluster.nodes
        seed = session.benchmark.seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        with lines.phase("planning the benchmark (the index as the cluster has it)"):
            plan = make_plan(
                session,
                track,
                corpus,
                steps,
                distribution,
                ranks,
                seed,
                options.reingest,
                codec,
                reuse_index=options.reuse_index,
            )
        run.write_bench_plan(plan)
        # From here on a signal is only recorded (a cluster start held them already): the
        # ranks get it and still write what they measured, and the summary is printed.
        stop.hold_interrupts()
        if interrupts.first:
            raise stop.Interrupted(interrupts.first, "as the benchmark started")
        lines.line(f"starting the benchmark: {ranks + 1} MPI rank(s)")
        launcher, record = launch_bench(run, session)
        interrupted = follow(run, launcher, record, out, session, interrupts, progress, lines)
        results_file = run.results_file
        if not results_file.exists():
            # The MPI step ended before rank 0 wrote the results (with MPICH a lost rank
            # takes the step down): keep what the stream recorded.
            reason = (
                f"the benchmark step ended early (exit code {launcher.returncode}); "
                f"see {run.bench_log}: {tail(run.bench_log, 3)}"
            )
            if interrupted:
                reason = f"{progress.reason(interrupts)}; {reason}"
            if not run.stream_file.exists():
                raise EsdashError(reason)
            results_from_stream(run, plan, reason)
        results = run.read_results()
        print(render_summary(results), file=out)
        failures = evaluate_thresholds(thresholds, results)
        for failure in failures:
            print(f"threshold failed: {failure}", file=out)
        judged = judge(results, session.references)
        for line in render_references(judged):
            print(line, file=out)
        missed = misses(judged)
        if missed:
            print(
                f"{len(missed)} reference figure(s) missed: "
                + "; ".join(j.message for j in missed),
                file=out,
            )
        if interrupted or results.status == "aborted":
            status = EXIT_ABORT
        elif results.status != "ok":
            status = EXIT_FAILURE
        elif failures or missed:
            status = EXIT_THRESHOLD
        else:
            status = EXIT_OK
        print(f"results: {results_file}", file=out)
    finally:
        stop.hold_interrupts()  # the stop runs to its end, whatever arrives now
        why = progress.reason(interrupts) if interrupts.first else None
        with run.edit_info() as info:
            info.bench_exit = EXIT_ABORT if why else status
            if why:
                info.state, info.reason = "interrupted", why
        if codec is not None and plan is not None:
            # what the encryption still leaks: once the plan was made, also after a failure
            if why:  # a stop signal promises a prompt stop: no analysis of seconds now
                said = why.removeprefix("esdash ")
                print(f"leakage analysis skipped: {said}; `esdash leakage` runs it", file=out)
            else:  # it says when it begins; the ticker, that it goes on
                with lines.phase("leakage analysis", announce_after=lines.tick):
                    record_leakage(run, session, track, corpus, codec, out)
        plugins.session_finished(session, run.path, results)
        if cluster_process is not None:
            if options.keep and not why:  # a signal stops everything, --keep or not
                owner.release(run)  # the cluster lives on without this process
                print(f"cluster kept running: esdash cluster down {run.path}", file=out)
            else:
                stop.stop_cluster(
                    run, cluster_process, reason="interrupted" if why else "stopped", why=why
                )
    if why:
        said = why.removeprefix("esdash ")
        print(f"esdash: interrupted: {said}; everything it started is stopped", file=sys.stderr)
    return EXIT_ABORT if why else status
