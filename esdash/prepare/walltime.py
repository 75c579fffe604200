"""How long a run takes, phase by phase, before anything is launched.

Every Slurm user has to name a time limit (``#SBATCH --time``) before the job runs: too short
and Slurm kills the job before its results are written, too long and it waits longer in the
queue.  :func:`estimate_wall_time` adds up what a run of a session will do, in the order
``esdash run`` does it -- corpus preparation, cluster start, ingest, settling, the global
warm-up, every query step in every round, results, cluster stop -- and says of each figure
what it is:

* ``fixed``: the session fixes it (a timed step's pause, warm-up and measured time);
* ``bound``: the most it can take, and the run goes on after it (``settle_timeout``, the
  global warm-up's bound, a counted step's time limits);
* ``estimate``: nothing bounds it, so it is estimated from a previous run of the same session
  in the runs directory (which one is named), else from the corpus size and an assumed rate
  measured on esdash's 2-core development machine (named in the figure's ``basis``).

``esdash plan``, ``esdash submit --dry-run`` and ``esdash sweep --dry-run`` print it;
``esdash submit`` and ``esdash sweep --submit`` ask Slurm for the total plus a margin
(:mod:`esdash.prepare.timelimit`) when the session's ``[slurm]`` table sets no ``time``.  A
bounded phase counts at its bound, so the total is what the run takes at most when the
estimates hold.
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput, EsdashError
from esdash.paths import cache_dir, runs_dir
from esdash.plugin.api import Track
from esdash.plugin.planning import PlannedTask
from esdash.plugin.values import Corpus, Distribution, QueryStep
from esdash.prepare.plan import global_warmup_bound, step_pause, step_timing
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import BenchPlan, JsonObject, Results, RunInfo
from esdash.session import Session

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: What a figure is (see the module docstring).
FIXED, BOUND, ESTIMATE = "fixed", "bound", "estimate"

# ---- assumptions, used only where no previous run of the session tells (README "Wall time")
#: Launch to a healthy cluster.  esdash's runs on its 2-core development machine took 10-39 s
#: (1 node: tests/fixtures/runs/dev*, 9.6 s and 39.3 s from run.json's created to ready; 2
#: nodes: 26 s in the test suite); 60 s leaves room for several JVMs sharing a host.
CLUSTER_START_S = 60.0
#: Ingest rate.  The ingests esdash recorded on its 2-core development machine ran at
#: 347-2,122 docs/s on 1 node (tests/fixtures/runs) and ~1,650 docs/s for the quickstart's 3
#: nodes (issue 29); an MRI document is ~1,520 bytes, so 1,000 docs/s is ~1.5 MB/s.
INGEST_DOCS_PER_S = 1_000.0
INGEST_BYTES_PER_S = 1.5e6
#: Corpus preparation (generate, check every line, scan the offsets), measured on the same
#: machine under ``nice -n 19``: 13,500 (MRI) and 16,500 (nyc_taxis) generated docs/s all
#: told, and 62-110 MB/s to check and scan a file that is there.
PREPARE_DOCS_PER_S = 10_000.0
PREPARE_BYTES_PER_S = 50e6
#: ``after_ingest = "none"``: a refresh and a flush of a fresh index.
SETTLE_NONE_S = 10.0
#: Rank 0 merging and writing results.json, the ranks ending, the summary printed.
RESULTS_S = 5.0
#: The nodes get 12 s after SIGTERM before SIGKILL (``esdash.run.stop.STOP_GRACE``); the
#: fixtures took 18-19 s from their final record to a stopped cluster, results included.
STOP_S = 15.0
#: Run directories of the session looked at, newest first, for its previous figures.
PREVIOUS_RUNS = 20


@dataclass(frozen=True)
class PhaseTime:
    """One phase of a run: its seconds, what kind of figure they are and where they come from."""

    key: str
    label: str
    seconds: float
    kind: str
    basis: str

    def to_json(self) -> JsonObject:
        return {
            "phase": self.key,
            "label": self.label,
            "seconds": round(self.seconds, 1),
            "kind": self.kind,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class StepTime:
    """One query step: its pause, warm-up and measured time in each round it runs.

    A counted step's warm-up and measured time are its time limits (kind ``bound``); a step
    nothing can run (every query refused) runs in no round and takes no time.
    """

    name: str
    pause: float
    warmup: float
    duration: float
    rounds: int
    kind: str

    @property
    def once(self) -> float:
        return self.pause + self.warmup + self.duration

    @property
    def seconds(self) -> float:
        return self.rounds * self.once

    def to_json(self) -> JsonObject:
        return {
            "name": self.name,
            "pause": self.pause,
            "warmup": self.warmup,
            "duration": self.duration,
            "rounds": self.rounds,
            "seconds": round(self.seconds, 1),
            "kind": self.kind,
        }


@dataclass(frozen=True)
class WallTime:
    """Every phase of one run of a session, in the order it runs, and its steps."""

    phases: tuple[PhaseTime, ...]
    steps: tuple[StepTime, ...]

    @property
    def total(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    def phase(self, key: str) -> PhaseTime | None:
        return next((phase for phase in self.phases if phase.key == key), None)

    @property
    def cluster_seconds(self) -> float:
        """The cluster's own start and stop (shared by a sweep's points on one cluster)."""
        return sum(p.seconds for p in self.phases if p.key in ("cluster_start", "cluster_stop"))

    @property
    def run_seconds(self) -> float:
        """Everything but the cluster's start and stop: one ``esdash run --cluster``."""
        return self.total - self.cluster_seconds

    def count(self, kind: str) -> int:
        """How many phases that take time are of ``kind`` (fixed, bound, estimate)."""
        return sum(1 for phase in self.phases if phase.kind == kind and phase.seconds > 0)

    def to_json(self) -> JsonObject:
        return {
            "total": round(self.total, 1),
            "phases": [phase.to_json() for phase in self.phases],
            "steps": [step.to_json() for step in self.steps],
        }


# ------------------------------------------------------------------- previous runs


@dataclass(frozen=True)
class _Previous:
    """A run directory of the same session, and what it recorded."""

    run: RunDir
    info: RunInfo

    @property
    def name(self) -> str:
        return self.run.name

    def results(self) -> Results | None:
        try:
            return files.read(self.run.results_file, Results)
        except (EsdashError, OSError):  # missing or damaged: this run tells nothing
            return None

    def plan(self) -> BenchPlan | None:
        try:
            return self.run.read_bench_plan()
        except (EsdashError, OSError):
            return None

    def track_table(self) -> object:
        """The ``[track]`` table the run was made with (None when unreadable)."""
        try:
            return tomllib.loads(files.read_regular(self.run.session_file).decode()).get("track")
        except (OSError, ValueError, UnicodeDecodeError):
            return None


def _previous_runs(session: Session, runs: Path) -> Iterator[_Previous]:
    """Run directories of ``session`` under ``runs``, newest first (by their UTC stamp).

    Only directories named as :meth:`RunDir.create` names them and that
    :meth:`RunDir.open` accepts (as root: owned by root and nobody else can rewrite them)
    are read; a damaged ``run.json`` is passed over.
    """
    pattern = re.compile(re.escape(session.name) + r"-(\d{8}-\d{6})(?:-(\d+))?")
    try:
        found = [
            (match.group(1), int(match.group(2) or 0), path)
            for path in runs.iterdir()
            if (match := pattern.fullmatch(path.name)) and path.is_dir()
        ]
    except OSError:
        return
    for _stamp, _suffix, path in sorted(found, reverse=True)[:PREVIOUS_RUNS]:
        try:  # as root, a directory another user controls is refused, so not read
            run = RunDir.open(path)
            info = run.read_info()
        except (EsdashError, OSError):
            continue
        if info.session_name == session.name:
            yield _Previous(run, info)


# ------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class _CorpusSize:
    """What can be known of the corpus a run ingests without writing a file."""

    documents: int | None
    size: int | None
    #: Every file is there and the corpus check remembers it: nothing is read again.
    prepared: bool
    #: Where the figures come from, for the bases of the corpus and ingest phases.
    said: str


def _corpus_size(session: Session, track: Track, previous: Sequence[_Previous]) -> _CorpusSize:
    """The corpus' documents and bytes: from the files the track reads as they are (its
    ``corpus_check``), else from the corpus a previous run of the session planned, else
    the track's ``documents`` option (the generators' count); whatever is unknown is None."""
    from esdash.plugin.corpus_scan import corpus_checked

    options = session.track.options
    try:
        status = track.corpus_check(options, cache_dir() / "corpora")
    except BadInput:  # the corpus pre-flight check refuses it with this message
        status = None
    if status is not None and status.files:
        paths = [(Path(path), paired) for path, paired in status.files]
        size = _size(path for path, _ in paths)
        if size is not None:
            prepared = all(corpus_checked(Corpus(path, None, paired)) for path, paired in paths)
            return _CorpusSize(None, size, prepared, f"{_bytes(size)} of corpus files")
    for earlier in previous:
        plan = earlier.plan()
        if plan is None or earlier.track_table() != session.source.get("track"):
            continue
        path = Path(plan.corpus_path)
        counts = [plan.corpus_documents, *(i.corpus_documents for i in plan.more_indices)]
        documents = sum(c for c in counts if c is not None) if None not in counts else None
        said = f"{documents:,} documents" if documents is not None else "the corpus"
        size = _size([path])
        if size is not None:
            corpus = Corpus(path, plan.corpus_documents, plan.corpus_has_actions)
            said = f"{said} ({_bytes(size)}) as run {earlier.name} planned"
            return _CorpusSize(documents, size, corpus_checked(corpus), said)
        if documents is not None:
            return _CorpusSize(documents, None, False, f"{said} as run {earlier.name} planned")
    count = options.get("documents")
    if isinstance(count, int) and not isinstance(count, bool):
        return _CorpusSize(count, None, False, f"{count:,} documents (track.documents)")
    return _CorpusSize(None, None, False, "")


def _size(paths: Iterable[Path]) -> int | None:
    """The bytes of ``paths`` together, or None when one is not a readable regular file."""
    total = 0
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        total += info.st_size
    return total


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _corpus_phase(corpus: _CorpusSize) -> PhaseTime:
    label = "corpus preparation"
    if corpus.prepared:
        basis = f"{corpus.said}, checked and scanned before: nothing to read again"
        return PhaseTime("corpus", label, 0.0, ESTIMATE, basis)
    if corpus.size is not None:
        basis = (
            f"{corpus.said} checked line by line and scanned at an assumed "
            f"{PREPARE_BYTES_PER_S / 1e6:g} MB/s (measured 62-110 MB/s on a 2-core machine)"
        )
        return PhaseTime("corpus", label, corpus.size / PREPARE_BYTES_PER_S, ESTIMATE, basis)
    if corpus.documents is not None:
        basis = (
            f"{corpus.said} generated (unless the cache has them), checked and scanned at an "
            f"assumed {PREPARE_DOCS_PER_S:,.0f} docs/s (measured 13,500-16,500 on a 2-core "
            f"machine)"
        )
        return PhaseTime("corpus", label, corpus.documents / PREPARE_DOCS_PER_S, ESTIMATE, basis)
    return PhaseTime("corpus", label, 0.0, ESTIMATE, _UNKNOWN_SIZE)


_UNKNOWN_SIZE = (
    "unknown: the track tells no corpus size before it writes its corpus; a run of this "
    "session gives the next estimate its figures"
)


def _ingest_phase(
    session: Session, corpus: _CorpusSize, previous: Sequence[_Previous], ingest: bool
) -> PhaseTime:
    """The ingest at the rate the newest run of the session measured (scaled to the corpus'
    documents when known), else at an assumed rate; none for a reused index."""
    label = "ingest"
    if not ingest:
        return PhaseTime(label, label, 0.0, ESTIMATE, "none: the index is reused")
    reused = "; none when the data root already holds the index (reused)"
    for earlier in previous:
        results = earlier.results()
        done = results.ingest if results is not None else None
        if done is None or not done.docs or not done.duration_s:
            continue
        rate = done.docs / done.duration_s
        measured = f"run {earlier.name}: {done.docs:,} docs in {done.duration_s:.1f} s"
        if corpus.documents is not None:
            basis = f"{corpus.documents:,} documents at {rate:,.0f} docs/s ({measured})"
            return PhaseTime(label, label, corpus.documents / rate, ESTIMATE, basis + reused)
        if earlier.track_table() == session.source.get("track"):  # the same corpus
            return PhaseTime(label, label, done.duration_s, ESTIMATE, f"as {measured}{reused}")
    if corpus.documents is not None:
        basis = f"{corpus.said} at an assumed {INGEST_DOCS_PER_S:,.0f} docs/s"
        seconds = corpus.documents / INGEST_DOCS_PER_S
    elif corpus.size is not None:
        basis = f"{corpus.said} at an assumed {INGEST_BYTES_PER_S / 1e6:g} MB/s"
        seconds = corpus.size / INGEST_BYTES_PER_S
    else:
        return PhaseTime(label, label, 0.0, ESTIMATE, _UNKNOWN_SIZE)
    basis += " (esdash's ingests on a 2-core machine ran at 347-2,122 docs/s)"
    return PhaseTime(label, label, seconds, ESTIMATE, basis + reused)


# ----------------------------------------------------------------- cluster phases


def _cluster_start(session: Session, previous: Sequence[_Previous]) -> PhaseTime:
    label = f"cluster start ({session.cluster.nodes} node(s))"
    for earlier in previous:
        info = earlier.info
        launched = info.launcher.create_time if info.launcher is not None else None
        if info.nodes == session.cluster.nodes and launched and info.ready:
            took = max(0.0, info.ready - launched)
            basis = f"as run {earlier.name}: {took:.0f} s from launch to a healthy cluster"
            return PhaseTime("cluster_start", label, took, ESTIMATE, basis)
    basis = (
        f"assumed {CLUSTER_START_S:.0f} s (esdash's cluster starts on a 2-core machine: "
        f"10-39 s); a run of this session gives its own"
    )
    return PhaseTime("cluster_start", label, CLUSTER_START_S, ESTIMATE, basis)


def _cluster_stop() -> PhaseTime:
    basis = f"assumed {STOP_S:.0f} s: the nodes get 12 s after SIGTERM, then SIGKILL"
    return PhaseTime("cluster_stop", "cluster stop", STOP_S, ESTIMATE, basis)


# --------------------------------------------------------------- settle, warm-up


def _settle_phase(session: Session) -> PhaseTime:
    bench = session.benchmark
    label = f"settling (after_ingest = {bench.after_ingest})"
    if bench.after_ingest == "none":
        basis = f"assumed {SETTLE_NONE_S:.0f} s: a refresh and a flush"
        return PhaseTime("settle", label, SETTLE_NONE_S, ESTIMATE, basis)
    what = (
        "force-merge, then no merges running"
        if bench.after_ingest == "force-merge"
        else "until no merges run and no shard moves"
    )
    basis = f"benchmark.settle_timeout: {what}, at most this (usually seconds)"
    return PhaseTime("settle", label, bench.settle_timeout, BOUND, basis)


def warmup_bound(session: Session, queries: int) -> float:
    """The longest the global warm-up may take before the steps
    (:func:`esdash.prepare.plan.global_warmup_bound`; none without a query to warm up)."""
    return global_warmup_bound(session.benchmark, session.track.options) if queries else 0.0


def _warmup_phase(session: Session, steps: Sequence[QueryStep], runnable: set[str]) -> PhaseTime:
    queries = {q.name for step in steps if step.name in runnable for q in step.queries}
    bound = warmup_bound(session, len(queries))
    if not bound:
        why = "no query to warm up" if not queries else "benchmark.warmup_max = 0"
        return PhaseTime("warmup", "global warm-up", 0.0, FIXED, f"none ({why})")
    basis = (
        f"benchmark.warmup_max: rounds over {len(queries)} query name(s) until each runs "
        f"steadily, at most this"
    )
    return PhaseTime("warmup", "global warm-up", bound, BOUND, basis)


# -------------------------------------------------------------------------- steps


def _step_times(
    session: Session, steps: Sequence[QueryStep], runnable: set[str], rounds: int
) -> tuple[StepTime, ...]:
    """Each step as a run schedules it (:func:`esdash.prepare.plan.step_timing`): a timed
    step's pause, warm-up and measured seconds; a counted step's limits; ``rounds`` times
    (:meth:`esdash.session.Session.rounds`)."""
    times = []
    for step in steps:
        warmup, duration, _target = step_timing(step, session.benchmark)
        counted = step.iterations is not None
        pause = step_pause(step, warmup)
        times.append(
            StepTime(
                step.name,
                pause,
                warmup,
                duration,
                rounds if step.name in runnable else 0,
                BOUND if counted else FIXED,
            )
        )
    return tuple(times)


def _steps_phase(steps: Sequence[StepTime], rounds: int) -> PhaseTime:
    running = [step for step in steps if step.rounds]
    counted = sum(step.kind == BOUND for step in running)
    idle = len(steps) - len(running)
    basis = (
        f"{len(running)} step(s) x {rounds} round(s): pause + warm-up + measured time each"
        + (f"; {counted} counted step(s) at their time limits" if counted else "")
        + (f"; {idle} refused step(s) take no time" if idle else "")
    )
    return PhaseTime(
        "steps",
        "query steps",
        sum(step.seconds for step in steps),
        BOUND if counted else FIXED,
        basis,
    )


def task_steps(tasks: Sequence[PlannedTask]) -> tuple[tuple[QueryStep, ...], set[str]]:
    """The query steps of the track's plan in order (a ``parallel`` block's tasks share one),
    and the names of those some task runs: a step whose every task is refused stays in the
    run's plan with the reason but takes no time (:func:`esdash.prepare.plan.in_rounds`)."""
    steps: dict[str, QueryStep] = {}
    running: set[str] = set()
    for task in tasks:
        if task.step is None:
            continue
        steps.setdefault(task.step.name, task.step)
        if task.status == "run":
            running.add(task.step.name)
    return tuple(steps.values()), running


# ----------------------------------------------------------------------- the whole


def estimate_wall_time(
    session: Session,
    track: Track,
    *,
    tasks: Sequence[PlannedTask] | None = None,
    distribution: Distribution | None = None,
    cluster_first: bool = False,
    ingest: bool = True,
    runs: Path | None = None,
) -> WallTime:
    """Every phase of one run of ``session``, in the order it runs, with its seconds.

    ``tasks``: the track's plan as ``esdash plan`` made it (the steps it refuses take no
    time); without it the plan is made here against ``distribution`` (None: nothing is
    refused for a module).  ``cluster_first``: the cluster starts before the corpus is
    prepared, as for a job that only holds the cluster (``esdash submit`` without
    ``--bench``) and the ``esdash run --cluster`` sent to it; otherwise ``esdash run``'s
    order, corpus first.  ``ingest`` False: the index is reused (a sweep's later points).
    ``runs``: where previous runs of the session are (default: the runs directory).
    """
    if tasks is None:
        from esdash.prepare.checks.tasks import track_tasks

        tasks = track_tasks(session, track, distribution)
    steps, runnable = task_steps(tasks)
    previous = list(_previous_runs(session, runs if runs is not None else runs_dir()))
    corpus = _corpus_size(session, track, previous)
    _order, rounds = session.rounds(track, steps)
    step_times = _step_times(session, steps, runnable, rounds)
    start = _cluster_start(session, previous)
    prepare = _corpus_phase(corpus)
    phases = (
        *((start, prepare) if cluster_first else (prepare, start)),
        _ingest_phase(session, corpus, previous, ingest),
        _settle_phase(session),
        _warmup_phase(session, steps, runnable),
        _steps_phase(step_times, rounds),
        PhaseTime(
            "results",
            "results",
            RESULTS_S,
            ESTIMATE,
            f"assumed {RESULTS_S:.0f} s: rank 0 writes the results, the summary is printed",
        ),
        _cluster_stop(),
    )
    return WallTime(phases, step_times)
