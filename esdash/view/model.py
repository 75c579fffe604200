"""What a live view shows, folded from a run directory: pure Python, no Textual.

The dashboard (``esdash.tui``) and any other viewer feed :class:`RunModel` with what
:class:`esdash.view.source.RunSource` polled (stream records, cluster samples, run state)
and ask it for an immutable :class:`Snapshot` of one moment of the run: the newest one when
following a live run, or any earlier one when replaying (``ViewParams.upto``).

Folding (``_Fold``) keeps, per *scope* — ingest, the warm-up of step k, the measurement of
step k — and per operation, the cumulative counters and latency histogram of the scope, plus
the records of the last :data:`MAX_WINDOW` seconds for the sliding window, each merged by
:mod:`esdash.stats.merge` (the accumulator rank 0 merges the ranks' payloads with, so the
dashboard adds up exactly what the results do).  Statistics are
those of :mod:`esdash.stats` (percentiles only where the sample count supports them, exact
gmean/gstd from the ``ln`` sums), computed on HDR counts (:mod:`esdash.rundir.hdr`): a
record's histogram is decoded once, and adding counts arrays is what keeps a 4 Hz redraw of
a 64-rank run light.

Every figure is one of :mod:`esdash.stats.metrics` (one definition each), of one of its kinds:

* **now** = the sliding window: the records of the current scope whose ``t`` lies within the
  last ``window`` seconds, over the seconds they cover;
* **final** = the scope's figure from ``results.json`` (the summary's, the report's), once
  the scope is over at the position shown and the run wrote its results; **so far** = the
  same quantity from the stream until then (seconds: :class:`esdash.stats.metrics.StreamSeconds`);
* documents are documents indexed (docs/s) for the ingest and a step's bulk tasks, and the
  documents searches returned (hits/s) for everything else;
* **phase** labels: queued, starting cluster, starting benchmark, ingest, warm-up step k/n,
  measuring step k/n, done / failed / aborted;
* **STALLED**: a run without a final record whose newest record is older than
  :data:`STALL_INTERVALS` intervals (by the writer's wall clock, so skew adds to it).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeGuard

import msgspec

from esdash.rundir import hdr
from esdash.rundir.records import (
    MAX_INT,
    ClusterSample,
    ErrorSample,
    Event,
    Final,
    Header,
    IngestProgress,
    Interval,
    JsonMapping,
    JsonObject,
    NodeStatus,
    PlannedStepInfo,
    Results,
    RunInfo,
    StreamRecord,
)
from esdash.stats import PERCENTILES, Summary, bucket_counts, metrics, summarize
from esdash.stats import Bucket as Bucket  # a histogram's bar, as viewers draw it
from esdash.stats.merge import LAST_ERRORS, LENIENT, SKIP, OpData
from esdash.stats.metrics import OpFigures, StreamSeconds
from esdash.view.leakage import LeakageReading
from esdash.view.trust import trust_lines

#: Percentiles the dashboard shows (each only where the sample count supports it).
SHOWN_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9)
#: Sliding-window lengths a view can choose (seconds); the model keeps enough for the longest.
WINDOWS: tuple[float, ...] = (5.0, 10.0, 30.0, 60.0)
MAX_WINDOW = max(WINDOWS)
#: Time spans of the charts (seconds; None = the whole run).
SPANS: tuple[float | None, ...] = (15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, None)
#: STALLED after this many intervals without a record (and at least STALL_MIN seconds).
STALL_INTERVALS = 3
STALL_MIN = 5.0
#: At most this many points per chart series (longer series are thinned evenly).
MAX_POINTS = 600
#: Cluster samples kept for replay (2 s apart: 40 minutes).
CLUSTER_SAMPLES = 1200

Scope = tuple[str, "int | None"]

#: The kind of a figure (:mod:`esdash.stats.metrics`), which viewers label: the run's (from
#: ``results.json``), the stream's "so far" until then, the sliding window's "now".
RUN, SO_FAR, NOW = metrics.RUN, metrics.SO_FAR, metrics.NOW
#: The counts of a latency histogram (:mod:`esdash.rundir.hdr`), as viewers pass them on.
LatencyCounts = hdr.Counts


# --------------------------------------------------------------------- statistics


#: Latency statistics in seconds (``gstd`` is a factor): the statistics of one timed series
#: that :func:`esdash.stats.summarize` gives, so the dashboard keeps no copy of them.
Latency = Summary


def latency_of_figures(figures: OpFigures) -> Latency:
    """A figure's latency (``results.json``'s record, in ms) in seconds."""
    stats = figures.latency
    found = {p: figures.latency_s(f"p{p:g}") for p in SHOWN_PERCENTILES}
    return Latency(
        count=stats.count,
        percentiles={p: v for p, v in found.items() if v is not None},
        mean=figures.latency_s("mean"),
        gmean=figures.latency_s("gmean"),
        gstd=stats.gstd,
        min=figures.latency_s("min"),
        max=figures.latency_s("max"),
    )


def op_latency(data: OpData, percentiles: Sequence[float] = SHOWN_PERCENTILES) -> Latency:
    """Latency statistics of merged records, as :func:`esdash.stats.summarize` gives them."""
    return summarize(data.latency, percentiles)


def _figures(
    data: OpData,
    kind: str,
    seconds: float | None,
    indexing: bool,
    percentiles: Sequence[float] = PERCENTILES,
) -> OpFigures:
    """An operation's figures over ``seconds``; the model decodes no service time."""
    return metrics.op_figures(
        data,
        seconds,
        kind=kind,
        indexing=indexing,
        percentiles=percentiles,
        service_time=False,
    )


# ------------------------------------------------------------------------ folding


@dataclass(frozen=True)
class OpPoint:
    """One operation in one interval record, for the time series (figures ``now``)."""

    requests: int
    errors: int
    rate: float | None  # successful requests per second
    docs_rate: float | None  # documents indexed (bulk) or returned (searches) per second
    p50: float | None
    p99: float | None
    #: A bulk (indexing) operation: its requests carry documents, not a query's answer, so
    #: the charts of the queries leave it out (the table shows its docs/s).
    indexing: bool = False


@dataclass(frozen=True)
class Point:
    """One interval record, light: what the charts draw."""

    seq: int
    t: float
    wall: float
    phase: str
    step: int | None
    ops: Mapping[str, OpPoint]


@dataclass
class _Scope:
    elapsed: float = 0.0
    records: int = 0
    first_t: float | None = None
    last_t: float | None = None
    ops: dict[str, OpData] = field(default_factory=dict)
    #: The scope's seconds as the stream tells them (figures "so far").
    seconds: StreamSeconds = field(default_factory=StreamSeconds)


@dataclass
class _Recent:
    t: float
    scope: Scope
    elapsed: float
    ops: dict[str, OpData]


def scope_of(record: Interval) -> Scope:
    return (record.phase, record.step)


class _Fold:
    """Records folded in order: per-scope totals, a sliding window, run-level errors.

    ``only`` limits the decoding of histograms to one scope: a replay position needs the
    latency of its own scope only, and decoding is what folding costs.
    """

    def __init__(self, keep: int, only: Scope | None = None, header: Header | None = None) -> None:
        self.only = only
        self.header = header
        self.count = 0
        self.scopes: dict[Scope, _Scope] = {}
        self.recent: deque[_Recent] = deque(maxlen=keep)
        self.errors: dict[str, int] = {}
        self.last_errors: dict[str, list[ErrorSample]] = {}
        self.ingest: IngestProgress | None = None
        self.ingest_elapsed = 0.0
        self.last: Interval | None = None

    def add(self, record: Interval, point: bool = False) -> Point | None:
        scope = scope_of(record)
        entry = self.scopes.get(scope)
        if entry is None:
            entry = self.scopes[scope] = _Scope()
        elapsed = record.elapsed
        t = record.t
        entry.elapsed += elapsed
        entry.seconds.add(elapsed, sum(data.requests for data in record.ops.values()))
        entry.records += 1
        entry.first_t = t if entry.first_t is None else entry.first_t
        entry.last_t = t
        ops: dict[str, OpData] = {}
        points: dict[str, OpPoint] = {}
        decoding = LENIENT if self.only is None or scope == self.only else SKIP
        for name, data in record.ops.items():
            acc = ops[name] = OpData()
            acc.add_payload(data, decoding, service_time=SKIP)
            target = entry.ops.get(name)
            if target is None:
                target = entry.ops[name] = OpData()
            target.merge(acc)
            for cls, value in acc.errors.items():
                self.errors[cls] = self.errors.get(cls, 0) + value
            for cls, value in acc.doc_errors.items():
                self.errors[cls] = self.errors.get(cls, 0) + value
            for cls, items in data.last_errors.items():
                kept = self.last_errors.setdefault(cls, [])
                kept.extend(msgspec.structs.replace(item, op=name) for item in items)
                kept.sort(key=lambda item: item.wall or 0.0)
                del kept[:-LAST_ERRORS]
            if point:
                indexing = metrics.indexes_documents(self.header, scope[0], scope[1], name)
                now = _figures(acc, metrics.NOW, elapsed, indexing, (50.0, 99.0))
                points[name] = OpPoint(
                    requests=now.requests,
                    errors=now.failed,
                    rate=now.requests_per_s,
                    docs_rate=now.documents_per_s,
                    p50=now.latency_s("p50"),
                    p99=now.latency_s("p99"),
                    indexing=indexing,
                )
        if record.ingest is not None:
            self.ingest = record.ingest
        if scope[0] == "ingest":
            self.ingest_elapsed += elapsed
        self.recent.append(_Recent(t, scope, elapsed, ops))
        self.last = record
        self.count += 1
        if not point:
            return None
        return Point(
            seq=record.seq,
            t=t,
            wall=record.wall,
            phase=scope[0],
            step=scope[1],
            ops=points,
        )

    def window(self, scope: Scope, t: float, seconds: float) -> tuple[float, dict[str, OpData]]:
        """Seconds covered and per-op totals of the scope's records in ``(t - seconds, t]``."""
        elapsed = 0.0
        ops: dict[str, OpData] = {}
        for recent in reversed(self.recent):
            if recent.t <= t - seconds:
                break
            if recent.scope != scope or recent.t > t:
                continue
            elapsed += recent.elapsed
            for name, acc in recent.ops.items():
                ops.setdefault(name, OpData()).merge(acc)
        return elapsed, ops


# ------------------------------------------------------------------ model inputs


@dataclass
class Update:
    """What one poll of a run directory found (see :class:`esdash.view.source.RunSource`)."""

    records: list[StreamRecord] = field(default_factory=list)
    cluster: list[ClusterSample] = field(default_factory=list)
    run_info: RunInfo | None = None
    session: JsonObject | None = None
    nodes: dict[int, NodeStatus] | None = None
    slurm_state: str | None = None
    log: tuple[str, str] | None = None
    problems: list[str] = field(default_factory=list)
    stream_exists: bool | None = None
    results: Results | None = None
    #: ``leakage.json`` when it appeared or changed (a run in a client-side mode).
    leakage: LeakageReading | None = None

    #: The fields a poll fills only when it found something new (None: nothing this time);
    #: the model takes each one found whole, in place of what it had.
    REPLACING: ClassVar[tuple[str, ...]] = (
        "run_info",
        "session",
        "nodes",
        "slurm_state",
        "log",
        "stream_exists",
        "results",
        "leakage",
    )

    def __bool__(self) -> bool:
        return bool(self.records or self.cluster or self.problems) or any(
            getattr(self, name) is not None for name in self.REPLACING
        )


@dataclass(frozen=True)
class ViewParams:
    """What the viewer asks for: a position, a window, a chart span, a selected operation."""

    upto: int | None = None  # index of the newest interval record shown; None: follow
    window: float = 10.0
    span: float | None = 120.0
    selected: str | None = None
    hist_cumulative: bool = True
    hist_rows: int = 12


# --------------------------------------------------------------------- snapshot


@dataclass(frozen=True)
class OpRow:
    """One operation of the scope shown: its figures ``now`` (the sliding window) and of
    the whole scope (``all_kind``: ``final``, the results' figure, or ``so far``)."""

    name: str
    requests: int
    errors: int
    window_requests: int
    window_errors: int
    rate_now: float | None
    docs_now: float | None
    rate_all: float | None
    docs_all: float | None
    now: Latency
    all: Latency
    #: Documents indexed (docs/s) rather than returned by a search (hits/s).
    indexing: bool = False
    #: Which figure of the whole scope ``all`` is: the results' (``metrics.RUN``, shown as
    #: "final") or the stream's (``metrics.SO_FAR``).
    all_kind: str = metrics.SO_FAR

    @property
    def unit(self) -> str:
        return "docs/s" if self.indexing else "hits/s"


@dataclass(frozen=True)
class IngestView:
    docs_done: int
    docs_total: int | None
    docs_per_s: float | None
    eta: float | None
    done: bool
    #: Which figure ``docs_per_s`` is: ``metrics.NOW`` (the window, while ingesting),
    #: ``metrics.RUN`` (the results' ingest figure) or ``metrics.SO_FAR`` (the stream's).
    rate_kind: str = metrics.NOW


@dataclass(frozen=True)
class NodeRow:
    name: str
    state: str | None
    heap_percent: float | None
    cpu_percent: float | None
    gc_ms_per_s: float | None
    segments: int | None
    docs: int | None
    rejected: int
    rejected_new: int


@dataclass(frozen=True)
class ClusterView:
    status: str | None
    nodes: tuple[NodeRow, ...]
    time: float | None
    unassigned: int | None = None


@dataclass(frozen=True)
class ErrorLine:
    error_class: str
    count: int
    message: str | None
    status: int | None
    node: str | None


@dataclass(frozen=True)
class EventLine:
    t: float
    level: str
    kind: str
    message: str


@dataclass(frozen=True)
class Snapshot:
    """One moment of a run, everything a view needs; immutable, cheap to hand around."""

    version: int
    run_id: str
    session: str
    track: str
    encryption: str
    interconnect: str
    #: The search engine and its version (``opensearch 3.4.0``), as the run recorded them.
    engine: str
    nodes: int | None
    ranks: int | None
    slurm_job: str | None
    slurm_state: str | None
    phase: str
    phase_key: str
    elapsed: float | None
    planned: float | None
    finished: bool
    status: str | None
    reason: str | None
    stalled: bool
    age: float | None
    interval: float
    position: int
    count: int
    following: bool
    t: float | None
    t_end: float | None
    window: float
    scope: Scope | None
    ops: tuple[OpRow, ...] = ()
    selected: str | None = None
    histogram: tuple[Bucket, ...] = ()
    hist_count: int = 0
    series: tuple[Point, ...] = ()
    span: float | None = None
    ingest: IngestView | None = None
    errors: tuple[ErrorLine, ...] = ()
    events: tuple[EventLine, ...] = ()
    ranks_all: tuple[int, ...] = ()
    ranks_missing: tuple[int, ...] = ()
    ranks_lost: tuple[int, ...] = ()
    #: Search nodes lost (``node_lost`` and not ``node_back`` since), by name.
    nodes_lost: tuple[str, ...] = ()
    cluster: ClusterView | None = None
    log: tuple[str, str] | None = None
    problems: tuple[str, ...] = ()
    last_seq: int | None = None
    last_wall: float | None = None
    #: When the run has results: settling, warm-up, flagged steps, medians over rounds.
    trust: tuple[str, ...] = ()
    #: The run's leakage report (client-side encryption), or why it cannot be read.
    leakage: LeakageReading | None = None


def _session_field(session: JsonMapping, table: str, key: str, default: Any) -> Any:
    value = session.get(table)
    return value.get(key, default) if isinstance(value, Mapping) else default


def _is_rank(value: object) -> TypeGuard[int]:
    """An event's ``data`` is free-form JSON: only a whole number from 0 up names a rank
    (anything else in a damaged stream is skipped, not a crash of the view)."""
    return type(value) is int and 0 <= value <= MAX_INT


class RunModel:
    """Everything read from one run directory, folded; :meth:`snapshot` gives a view of it."""

    def __init__(self, run_id: str = "") -> None:
        self.run_id = run_id
        self.header: Header | None = None
        self.final: Final | None = None
        self.records: list[Interval] = []
        self.points: list[Point] = []
        self.events: list[Event] = []
        self.cluster: deque[ClusterSample] = deque(maxlen=CLUSTER_SAMPLES)
        self.run_info = RunInfo()
        self.session: JsonObject = {}
        self.nodes: dict[int, NodeStatus] = {}
        self.slurm_state: str | None = None
        self.log: tuple[str, str] | None = None
        self.problems: list[str] = []
        self.stream_exists = False
        self.results: Results | None = None
        self.leakage: LeakageReading | None = None
        self.version = 0
        self._live = _Fold(self._keep())
        self._cursor: _Fold | None = None
        #: The index of each scope's last record so far (is a scope over at a position?).
        self._last_of: dict[Scope, int] = {}
        self._cache: tuple[tuple[int, ViewParams], Snapshot] | None = None

    def _keep(self) -> int:
        interval = self.header.interval if self.header is not None else 1.0
        # split-phase records share a seq: room for two per interval, plus slack
        return int(2 * MAX_WINDOW / max(interval, 0.05)) + 8

    # -------------------------------------------------------------------- input
    def apply(self, update: Update) -> bool:
        """Fold what a poll found; True when anything a view shows changed."""
        if not update:
            return False
        for record in update.records:
            self.add_record(record)
        if update.cluster:
            self.cluster.extend(update.cluster)
        for name in Update.REPLACING:
            found = getattr(update, name)
            if found is not None:
                setattr(self, name, found)
        self.problems.extend(update.problems)
        del self.problems[:-50]
        self.version += 1
        return True

    def add_record(self, record: StreamRecord) -> None:
        if isinstance(record, Header):
            self.header = record
            self.run_id = record.run_id or self.run_id
            self._live = _Fold(self._keep(), header=record)
            self._cursor = None
            self._last_of.clear()
            self.records.clear()
            self.points.clear()
            self.events.clear()
            self.final = None
        elif isinstance(record, Interval):
            self._last_of[scope_of(record)] = len(self.records)
            self.records.append(record)
            point = self._live.add(record, point=True)
            assert point is not None
            self.points.append(point)
        elif isinstance(record, Event):
            self.events.append(record)
        else:
            self.final = record

    # ----------------------------------------------------------------- folding
    def _fold_at(self, index: int) -> _Fold:
        """The records folded up to ``index`` (inclusive)."""
        if index >= len(self.records) - 1:
            return self._live
        scope = scope_of(self.records[index])
        cursor = self._cursor
        if cursor is None or cursor.count > index + 1 or cursor.only != scope:
            cursor = _Fold(self._keep(), only=scope, header=self.header)
        for record in self.records[cursor.count : index + 1]:
            cursor.add(record)
        self._cursor = cursor
        return cursor

    # ---------------------------------------------------------------- snapshot
    def snapshot(self, params: ViewParams, now: float) -> Snapshot:
        """The run at ``params.upto`` (or now) as a view shows it; ``now`` is wall time.

        The expensive part is cached per (data version, params): asking again without new
        data only refreshes the clock, the record age and the STALLED flag.
        """
        key = (self.version, params)
        cached = self._cache
        if cached is None or cached[0] != key:
            cached = self._cache = (key, self._build(params, now))
        snap = cached[1]
        last_wall = self._last_wall()
        age = None if last_wall is None else now - last_wall
        stalled = bool(
            self.final is None
            and self.header is not None
            and age is not None
            and age > max(STALL_INTERVALS * snap.interval, STALL_MIN)
        )
        elapsed = self._elapsed(snap.t, snap.following, now)
        if age == snap.age and stalled == snap.stalled and elapsed == snap.elapsed:
            return snap
        return replace(snap, age=age, stalled=stalled, elapsed=elapsed)

    def _build(self, params: ViewParams, now: float) -> Snapshot:
        header = self.header
        session = (header.session if header is not None else None) or self.session or {}
        steps = header.steps if header is not None else []
        interval = header.interval if header is not None else 1.0
        count = len(self.records)
        following = params.upto is None or params.upto >= count - 1
        position = count - 1 if following else max(0, int(params.upto or 0))
        fold = self._fold_at(position) if count else None
        record = self.records[position] if count else None
        t_pos = record.t if record is not None else None
        t_end = self.records[-1].t if count else None
        scope = scope_of(record) if record is not None else None

        ops: list[OpRow] = []
        histogram: list[Bucket] = []
        hist_count = 0
        selected = params.selected
        if fold is not None and scope is not None and t_pos is not None:
            entry = fold.scopes.get(scope) or _Scope()
            window_elapsed, window_ops = fold.window(scope, t_pos, params.window)
            over = self._over(scope, position)
            finals = self._final_figures(scope) if over else {}
            for name in sorted(entry.ops):
                total = entry.ops[name]
                recent = window_ops.get(name) or OpData()
                indexing = metrics.indexes_documents(header, scope[0], scope[1], name)
                latest = _figures(recent, metrics.NOW, window_elapsed, indexing)
                whole = finals.get(name) or _figures(
                    total, metrics.SO_FAR, entry.seconds.seconds(ended=over), indexing
                )
                ops.append(
                    OpRow(
                        name=name,
                        requests=whole.requests,
                        errors=whole.failed,
                        window_requests=latest.requests,
                        window_errors=latest.failed,
                        rate_now=latest.requests_per_s,
                        docs_now=latest.documents_per_s,
                        rate_all=whole.requests_per_s,
                        docs_all=whole.documents_per_s,
                        now=latency_of_figures(latest),
                        all=latency_of_figures(whole),
                        indexing=whole.indexing,
                        all_kind=whole.kind,
                    )
                )
            names = [row.name for row in ops]
            if selected not in names:
                selected = names[0] if names else None
            if selected is not None:
                source = entry.ops[selected] if params.hist_cumulative else window_ops.get(selected)
                if source is not None and source.latency.counts.size:
                    histogram = bucket_counts(source.latency.counts, params.hist_rows)
                    hist_count = source.latency.count

        final = self.final
        last_wall = self._last_wall()
        age = None if last_wall is None else now - last_wall
        stalled = bool(
            final is None
            and self.header is not None
            and age is not None
            and age > max(STALL_INTERVALS * interval, STALL_MIN)
        )
        phase_key, phase = self._phase(record, steps, following)
        elapsed = self._elapsed(t_pos, following, now)
        planned = self._planned(steps, fold)

        ranks_all = tuple(
            sorted(rank.rank for rank in header.bench.per_rank) if header is not None else ()
        )
        missing = tuple(sorted(record.missing_ranks)) if record is not None else ()
        lost = self._lost_ranks(t_pos if not following else None)

        cluster_nodes = _session_field(session, "cluster", "nodes", None)
        topology_nodes = len(header.topology.nodes) if header is not None else 0
        nodes = topology_nodes or cluster_nodes or self.run_info.nodes
        return Snapshot(
            version=self.version,
            run_id=self.run_id or (header.run_id if header is not None else ""),
            session=str(session.get("name") or self.run_info.session_name or "?"),
            track=str(_session_field(session, "track", "name", "?")),
            encryption=str(_session_field(session, "encryption", "mode", "none")),
            interconnect=str(_session_field(session, "cluster", "interconnect", "loopback")),
            engine=" ".join(
                filter(
                    None,
                    (
                        self.run_info.engine
                        or str(_session_field(session, "cluster", "backend", "elasticsearch")),
                        self.run_info.version,
                    ),
                )
            ),
            nodes=nodes,
            ranks=header.bench.ranks if header is not None else None,
            slurm_job=(header.slurm_job_id if header is not None else None)
            or self.run_info.slurm_job,
            slurm_state=self.slurm_state,
            phase=phase,
            phase_key=phase_key,
            elapsed=elapsed,
            planned=planned,
            finished=final is not None,
            status=final.status if final is not None else None,
            reason=final.reason if final is not None else None,
            stalled=stalled,
            age=age,
            interval=interval,
            position=position if count else -1,
            count=count,
            following=following,
            t=t_pos,
            t_end=t_end,
            window=params.window,
            scope=scope,
            ops=tuple(ops),
            selected=selected,
            histogram=tuple(histogram),
            hist_count=hist_count,
            series=self._series(position, t_pos, params.span) if count else (),
            span=params.span,
            ingest=self._ingest(fold, scope, t_pos, params.window, position),
            errors=self._errors(fold),
            events=self._events(t_pos if not following else None),
            ranks_all=ranks_all,
            ranks_missing=missing,
            ranks_lost=lost,
            nodes_lost=self._lost_nodes(t_pos if not following else None),
            cluster=self._cluster(record.wall if record is not None and not following else None),
            log=self.log,
            problems=tuple(self.problems[-5:]),
            trust=tuple(trust_lines(self.results)) if self.results is not None else (),
            leakage=self.leakage,
            last_seq=record.seq if record is not None else None,
            last_wall=record.wall if record is not None else None,
        )

    # ---------------------------------------------------------------- helpers
    def _over(self, scope: Scope, position: int) -> bool:
        """Whether ``scope`` is over at ``position``: its last record is shown and a later
        record (or the final one) follows it."""
        last = self._last_of.get(scope)
        if last is None or position < last:
            return False
        return last < len(self.records) - 1 or self.final is not None

    def _final_figures(self, scope: Scope) -> dict[str, OpFigures]:
        """The results' figures of a scope's operations (the ingest, a measured step)."""
        results = self.results
        if results is None:
            return {}
        phase, step = scope
        if phase == "ingest":
            return metrics.ingest_ops(results.ingest) if results.ingest is not None else {}
        if phase != "measure":
            return {}
        found = next((s for s in results.steps if s.index == step), None)
        return metrics.step_ops(found) if found is not None else {}

    def _last_wall(self) -> float | None:
        if self.final is not None:
            return self.final.wall
        walls = [r.wall for r in self.records[-1:]] + [e.wall for e in self.events[-1:]]
        if walls:
            return max(walls)
        if self.header is not None:
            return self.header.started
        return None

    def _phase(
        self, record: Interval | None, steps: Sequence[PlannedStepInfo], following: bool
    ) -> tuple[str, str]:
        final = self.final
        if final is not None and following:
            status = final.status
            if status == "ok":
                return "done", "done"
            return status, status + (f": {final.reason}" if final.reason else "")
        if record is None:
            return self._before_stream()
        phase, step = scope_of(record)
        if phase == "ingest":
            return "ingest", "ingest"
        planned = steps[step].name if step is not None and step < len(steps) else ""
        name = record.step_name or planned
        of = f"{(step or 0) + 1}/{len(steps)}" if steps else f"{(step or 0) + 1}"
        if phase == "warmup":
            return "warmup", f"warm-up step {of} {name}".rstrip()
        if phase == "measure":
            return "measure", f"measuring step {of} {name}".rstrip()
        return phase, phase

    def _before_stream(self) -> tuple[str, str]:
        if self.header is not None:
            return "starting", "starting benchmark"
        state = self.run_info.state
        slurm = (self.slurm_state or "").upper()
        if state == "queued" or slurm == "PENDING":
            return "queued", "queued" + (f" (Slurm {self.slurm_state})" if slurm else "")
        if state in ("prepared", "starting"):
            return "starting", "starting cluster"
        if state == "running":
            return "starting", "cluster up, benchmark not started"
        if state:
            return "ended", f"cluster {state}"
        return "waiting", "waiting for the run to start"

    def _elapsed(self, t_pos: float | None, following: bool, now: float) -> float | None:
        if not following:
            return t_pos
        if self.final is not None:
            return self.final.t
        if self.header is not None and self.header.started:
            return max(0.0, now - self.header.started)
        return None

    def _planned(self, steps: Sequence[PlannedStepInfo], fold: _Fold | None) -> float | None:
        if not steps:
            return None
        unsupported: dict[int, int] = {}
        for event in self.events:
            if event.kind == "unsupported" and event.step is not None:
                unsupported[event.step] = unsupported.get(event.step, 0) + 1
        # a counted step's times are limits, not its length, which nobody knows in advance:
        # it adds nothing here (it usually takes far less than its limit)
        planned = sum(
            (s.warmup or 0.0) + (s.duration or 0.0)
            for k, s in enumerate(steps)
            if unsupported.get(k, 0) < len(s.queries or [None]) and s.iterations is None
        )
        ingest = self._ingest_estimate(fold)
        return planned + (ingest or 0.0)

    def _ingest_estimate(self, fold: _Fold | None) -> float | None:
        if fold is None:
            return None
        if ("ingest", None) not in fold.scopes:
            return 0.0
        progress = fold.ingest
        done = progress.docs_done if progress is not None else None
        total = progress.docs_total if progress is not None else None
        spent = fold.ingest_elapsed
        if (
            not done
            or not total
            or done >= total
            or any(scope[0] != "ingest" for scope in fold.scopes)
        ):
            return spent
        return spent * total / done

    def _ingest(
        self,
        fold: _Fold | None,
        scope: Scope | None,
        t_pos: float | None,
        window: float,
        position: int,
    ) -> IngestView | None:
        """The ingest's progress; its rate ``now`` while it runs, then the ingest's own
        figure (the results', or the stream's until they are written)."""
        if fold is None or fold.ingest is None:
            return None
        done = fold.ingest.docs_done
        total = fold.ingest.docs_total
        finished = scope is not None and scope[0] != "ingest"
        ingest: Scope = ("ingest", None)
        over = self._over(ingest, position)
        rate = None
        kind = metrics.NOW
        results = self.results.ingest if self.results is not None else None
        if over and results is not None:
            rate, kind = metrics.run_ingest(results).docs_per_s, metrics.RUN
        elif scope == ingest and not over and t_pos is not None:
            elapsed, ops = fold.window(ingest, t_pos, window)
            docs = sum(acc.docs for acc in ops.values())
            rate = metrics.from_samples(
                metrics.NOW, requests=0, failed=0, docs=docs, seconds=elapsed, latency=None
            ).documents_per_s
        elif ingest in fold.scopes:
            part = fold.scopes[ingest]
            docs = sum(acc.docs for acc in part.ops.values())
            seconds = part.seconds.seconds(ended=True)
            rate = metrics.from_samples(
                metrics.SO_FAR, requests=0, failed=0, docs=docs, seconds=seconds, latency=None
            ).documents_per_s
            kind = metrics.SO_FAR
        eta = None
        if not finished and total and rate:
            eta = max(0.0, (total - done) / rate)
        done_now = finished or bool(total and done >= total)
        return IngestView(done, total, rate, eta, done_now, kind)

    def _errors(self, fold: _Fold | None) -> tuple[ErrorLine, ...]:
        if fold is None:
            return ()
        lines = []
        for cls, value in sorted(fold.errors.items(), key=lambda item: -item[1]):
            recent = fold.last_errors.get(cls)
            last = recent[-1] if recent else None
            lines.append(
                ErrorLine(
                    cls,
                    value,
                    last.message if last is not None else None,
                    last.status if last is not None else None,
                    last.node if last is not None else None,
                )
            )
        return tuple(lines)

    def _events(self, upto_t: float | None) -> tuple[EventLine, ...]:
        events = [e for e in self.events if upto_t is None or e.t <= upto_t]
        return tuple(EventLine(e.t, e.level, e.kind, e.message) for e in events[-20:])

    def _lost_ranks(self, upto_t: float | None) -> tuple[int, ...]:
        lost: set[int] = set()
        for event in self.events:
            if upto_t is not None and event.t > upto_t:
                continue
            data = event.data
            rank = data.get("rank")
            if event.kind == "rank_lost" and _is_rank(rank):
                lost.add(rank)
            if event.kind == "rank_back" and _is_rank(rank):
                lost.discard(rank)
            ranks = data.get("ranks")
            if event.kind == "ranks_missing" and isinstance(ranks, list):
                lost.update(r for r in ranks if _is_rank(r))
        return tuple(sorted(lost))

    def _lost_nodes(self, upto_t: float | None) -> tuple[str, ...]:
        """Nodes whose last ``node_lost``/``node_back`` event (up to ``upto_t``) says lost."""
        lost: set[str] = set()
        for event in self.events:
            if upto_t is not None and event.t > upto_t:
                continue
            node = event.data.get("node")
            if event.kind == "node_lost" and isinstance(node, str):
                lost.add(node)
            elif event.kind == "node_back" and isinstance(node, str):
                lost.discard(node)
        return tuple(sorted(lost))

    def _series(self, position: int, t_pos: float | None, span: float | None) -> tuple[Point, ...]:
        points = self.points[: position + 1]
        if span is not None and t_pos is not None:
            ts = [p.t for p in points]
            points = points[bisect_right(ts, t_pos - span) :]
        if len(points) > MAX_POINTS:
            step = len(points) / MAX_POINTS
            points = [points[int(k * step)] for k in range(MAX_POINTS)] + [points[-1]]
        return tuple(points)

    def _cluster(self, upto_wall: float | None) -> ClusterView | None:
        samples = list(self.cluster)
        if upto_wall is not None:
            times = [s.time for s in samples]
            samples = samples[: bisect_right(times, upto_wall)]
        if not samples:
            if not self.nodes:
                return None
            return ClusterView(
                None,
                tuple(
                    NodeRow(
                        s.name or f"rank {rank}",
                        s.state,
                        None,
                        None,
                        None,
                        None,
                        None,
                        0,
                        0,
                    )
                    for rank, s in sorted(self.nodes.items())
                ),
                None,
            )
        latest = samples[-1]
        previous = samples[-2] if len(samples) > 1 else None
        states = {str(s.name): s.state for s in self.nodes.values()}
        rows = []
        for name, node in sorted(latest.nodes.items()):
            before = previous.nodes.get(name) if previous is not None else None
            gc_rate = None
            rejected = sum(node.rejected.values())
            rejected_before = sum(before.rejected.values()) if before is not None else rejected
            if before is not None and previous is not None:
                seconds = latest.time - previous.time
                if seconds > 0:
                    gc_rate = (node.gc_millis - before.gc_millis) / seconds
            rows.append(
                NodeRow(
                    name=name,
                    state=states.get(name),
                    heap_percent=node.heap_used_percent,
                    cpu_percent=node.cpu_percent,
                    gc_ms_per_s=gc_rate,
                    segments=node.segments,
                    docs=node.docs,
                    rejected=rejected,
                    rejected_new=max(0, rejected - rejected_before),
                )
            )
        health = latest.health
        return ClusterView(health.status, tuple(rows), latest.time, health.unassigned_shards)


# ---------------------------------------------------------------------- compare


@dataclass(frozen=True)
class StepQuery:
    """The measured numbers of one query of one step (for comparing runs)."""

    step: int
    step_name: str
    query: str
    requests: int
    errors: int
    rate: float | None  # successful requests per second
    docs_rate: float | None
    p50: float | None  # seconds
    p99: float | None
    gmean: float | None
    gstd: float | None
    source: str  # "results" or "stream"


def step_queries(model: RunModel) -> list[StepQuery]:
    """Per step and query: ``results.json`` when the run wrote it, else the stream so far
    (figures of :mod:`esdash.stats.metrics`)."""
    if model.results is not None:
        return _from_results(model.results)
    header = model.header
    steps = header.steps if header is not None else []
    rows = []
    scopes = model._live.scopes
    for (phase, step), entry in sorted(scopes.items(), key=lambda item: item[0][1] or -1):
        if phase != "measure" or step is None:
            continue
        name = steps[step].name if step < len(steps) else str(step)
        ended = model._over((phase, step), len(model.records) - 1)
        seconds = entry.seconds.seconds(ended=ended)
        for query, acc in sorted(entry.ops.items()):
            indexing = metrics.indexes_documents(header, phase, step, query)
            rows.append(
                _step_query(step, name, query, _figures(acc, metrics.SO_FAR, seconds, indexing))
            )
    return rows


def _step_query(step: int, name: str, query: str, figures: OpFigures) -> StepQuery:
    return StepQuery(
        step=step,
        step_name=name,
        query=query,
        requests=figures.requests,
        errors=figures.failed,
        rate=figures.requests_per_s,
        docs_rate=figures.documents_per_s,
        p50=figures.latency_s("p50"),
        p99=figures.latency_s("p99"),
        gmean=figures.latency_s("gmean"),
        gstd=figures.latency.gstd,
        source="results" if figures.kind == metrics.RUN else "stream",
    )


def _from_results(results: Results) -> list[StepQuery]:
    return [
        _step_query(step.index, step.name, query, figures)
        for step in results.steps
        for query, figures in metrics.step_ops(step).items()
    ]


def step_counts(model: RunModel, step: int, query: str) -> LatencyCounts:
    """The latency counts of one query of one measured step (empty if unknown)."""
    if model.results is not None:
        for entry in model.results.steps:
            if entry.index == step and query in entry.queries:
                encoded = entry.queries[query].histograms.latency
                return hdr.decode(encoded) if encoded else hdr.empty()  # checked on read
        return hdr.empty()
    scope = model._live.scopes.get(("measure", step))
    acc = scope.ops.get(query) if scope is not None else None
    return acc.latency.counts if acc is not None else hdr.empty()


@dataclass(frozen=True)
class Histogram:
    """A latency histogram as bars (:func:`esdash.stats.bucket_counts`) and its sample count."""

    buckets: tuple[Bucket, ...]
    total: int


def shared_histograms(
    counts: Sequence[LatencyCounts | None], rows: Sequence[int]
) -> list[Histogram] | None:
    """Several latency histograms on one shared log axis (``rows[k]`` bars for the k-th), so
    that a shift between them shows at a glance; None when none has a sample."""
    found = [c if c is not None else hdr.empty() for c in counts]
    ranges = [r for r in (hdr.value_range(c) for c in found) if r is not None]
    if not ranges:
        return None
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    return [
        Histogram(tuple(bucket_counts(c, bars, low, high)), hdr.total(c))
        for c, bars in zip(found, rows, strict=True)
    ]
