"""Typed records of every file in a run directory and a campaign directory.

Each file has one record type here (msgspec Structs), so writers cannot produce a file that
readers reject, and readers get attributes instead of raw dicts.  Reading is validating:
:func:`esdash.rundir.files.read` turns any damage into a :class:`RunFileError` that names the
file and the JSON path (``results.json: Expected `int`, got `str` - at `$.steps[0].index```).

Compatibility: unknown fields are ignored when reading (a newer esdash may add fields), and
every field that older files lack has a default, so run directories written before these
records existed (``tests/fixtures/runs/dev-*``) still open.  Removing or renaming a field,
or changing its meaning or unit, needs a new schema (``esdash.stream/2``, results ``format``).

Units: times in the stream and in run info are seconds (``t`` since the header's
``started``, ``wall`` and the other times since the epoch); ``results.json`` gives times in
milliseconds (Rally's unit); histograms count microseconds (:mod:`esdash.rundir.hdr`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

import msgspec

RUN_SCHEMA = "esdash.run/1"
CLUSTER_SCHEMA = "esdash.cluster/1"
STREAM_SCHEMA = "esdash.stream/1"
RESULTS_SCHEMA = "esdash.results/1"
#: ``results.json`` format: 2 adds ``format`` itself (files without it are format 1).
RESULTS_FORMAT = 3
BENCH_SCHEMA = "esdash.bench/1"
CAMPAIGN_SCHEMA = "esdash.campaign/1"
POINT_SCHEMA = "esdash.campaign-point/1"

# JSON as parsed (``json.loads``, ``msgspec.json.decode``, ``tomllib``): data whose shape
# belongs to someone else -- documents, mappings, query bodies, track files, a session's
# tables, an engine's answers.  The members of such objects and arrays are untyped on
# purpose: their shape is checked where they are used, not by the type checker.

#: A JSON object as parsed, whose shape belongs to someone else (a mapping, a query, a
#: session's tables); the receiver may change it.
JsonObject = dict[str, Any]
#: A JSON object as parsed, read-only to the receiver (a dict or a mapping proxy).
JsonMapping = Mapping[str, Any]
#: One JSON value as parsed: an object, an array, a string, a number, a boolean or null
#: (narrow it with ``isinstance`` before use).
JsonValue = Mapping[str, Any] | list[Any] | str | int | float | bool | None

#: The error classes (a small, closed taxonomy; docs/stream.md):
#: ``timeout``, ``connection``, ``other``, ``http_<status>``, ``bulk_item_<type>``.
ERROR_CLASS_PATTERN = (
    r"^(timeout|connection|other|partial|open|http_[1-5][0-9][0-9]|bulk_item_[a-z0-9_]+)\Z"
)
ERROR_CLASS_RE = re.compile(ERROR_CLASS_PATTERN)
ErrorClass = Annotated[str, msgspec.Meta(pattern=ERROR_CLASS_PATTERN)]
#: Every number of a record is bounded, so a damaged file's ``1e308`` or 400-digit integer
#: is refused where the file is read -- one line naming the file and the JSON path --
#: instead of overflowing a viewer's arithmetic later (``time.gmtime(1e308)``,
#: ``float(10**400)``).  The bounds are far beyond any real figure: counts and bytes fit
#: 64 bits, and no time, rate or sum of esdash reaches 1e15.
MAX_INT = 2**63 - 1
MAX_FLOAT = 1e15
Int = Annotated[int, msgspec.Meta(ge=-MAX_INT - 1, le=MAX_INT)]
Float = Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
#: The latest time a record may give, in seconds since the epoch: the end of year 9999,
#: the last one ``time.gmtime`` and :mod:`datetime` can show.
MAX_EPOCH = 253402300799.0
#: A wall-clock time (seconds since the epoch), from 1970 to :data:`MAX_EPOCH`.
Epoch = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_EPOCH)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
#: An encoded HDR histogram (:mod:`esdash.rundir.hdr`): ``HISTF`` and base64.  The pattern
#: is the cheap check every read makes; :meth:`~esdash.rundir.layout.RunDir.read_results`
#: also decodes each one.
HdrText = Annotated[str, msgspec.Meta(pattern=r"^HISTF[A-Za-z0-9+/]*={0,2}\Z")]
#: Counts per error class.
ErrorCounts = dict[ErrorClass, Count]

Phase = Literal["ingest", "warmup", "measure"]
PHASES: tuple[Phase, ...] = ("ingest", "warmup", "measure")
Level = Literal["info", "warning", "error"]
LEVELS: tuple[Level, ...] = ("info", "warning", "error")
RunStatus = Literal["ok", "failed", "aborted"]
STATUSES: tuple[RunStatus, ...] = ("ok", "failed", "aborted")
EventKind = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]*\Z")]


class Record(msgspec.Struct):
    """Base of every record (each sets ``kw_only``: fields are given by name, so adding one
    never shifts another); unknown fields are ignored on read."""


class FrozenRecord(msgspec.Struct, frozen=True):
    """Base of the immutable (and hashable) records: plans, written once and shared."""


# ------------------------------------------------------------------------ run info


class ProcessRecord(Record, kw_only=True):
    """A process esdash started: enough to find it again and to prove it is the same one.

    ``create_time`` (psutil's, seconds since the epoch) and ``command`` together identify
    the process: a PID alone may belong to another process by now (see
    :mod:`esdash.launch.process`).
    """

    pid: Int
    host: str | None = None
    command: list[str] = []
    create_time: Epoch | None = None


class OwnerLease(Record, kw_only=True):
    """``owner.json``: the process that owns a run, renewing its lease every second.

    The ranks of a run-owned cluster and bench step watch it (:mod:`esdash.launch.owner`):
    on the owner's host by its identity, elsewhere by ``beat`` advancing.  ``released``: the
    owner let the run live on without it (``esdash run --keep``).
    """

    owner: ProcessRecord
    #: Seconds the ranks wait after the owner is gone before they stop everything.
    grace: float
    beat: Int = 0
    renewed: Epoch | None = None
    released: bool = False


class NodeAccount(Record, kw_only=True):
    """The account a run's nodes run as (``run.json``'s ``node_account``).

    ``per_cluster``: esdash created it for this run (``cluster.run_as = "per-cluster"``) and
    removes it on every host once the run's nodes are gone.
    """

    name: str
    uid: Int
    gid: Int
    per_cluster: bool = False


class RunInfo(Record, kw_only=True):
    """``run.json``: what was started, by whom, where, and how it stands.

    Written by the orchestrator (``esdash run``, ``cluster up``, ``submit``, sweeps) through
    :meth:`esdash.rundir.files.RunFiles.edit_info`, which keeps fields it does not know.
    """

    schema: str = RUN_SCHEMA
    session_name: str | None = None
    session_path: str | None = None
    #: The distribution the nodes run: its directory, engine and version.
    home: str | None = None
    engine: str | None = None
    version: str | None = None
    nodes: Int | None = None
    security: bool | None = None
    owner: str | None = None
    #: The node account with its ids (``owner`` is its name); None in runs of older esdash.
    node_account: NodeAccount | None = None
    #: prepared, queued, starting, running, stopped, killed, failed, interrupted, ...
    state: str | None = None
    #: Why the run stopped, when something stopped it: "esdash run received SIGTERM while
    #: the cluster was starting", "stop requested (esdash cluster down)".  Also what each
    #: rank records as its node's stop reason.
    reason: str | None = None
    #: Set by its ranks when the run's owner died without stopping it (issue 36): why.
    orphaned: str | None = None
    created: Epoch | None = None
    updated: Epoch | None = None
    ready: Epoch | None = None
    stopped: Epoch | None = None
    launcher: ProcessRecord | None = None
    bench_launcher: ProcessRecord | None = None
    #: The ``esdash run`` driving this run: what a stop request (dashboard) interrupts.
    driver: ProcessRecord | None = None
    bench_exit: Int | None = None
    slurm_job: str | None = None
    submitted: bool = False
    script: str | None = None
    data_root: str | None = None
    data_reuse: str | None = None
    #: A benchmark against another run's cluster (``esdash run --cluster``).
    cluster_run: str | None = None
    campaign: str | None = None
    campaign_cluster: Int | None = None
    campaign_point: str | None = None


class LaunchRecord(ProcessRecord, kw_only=True):
    """``tui-launch.json``: an ``esdash run`` the dashboard started, detached."""

    started: Epoch | None = None
    output: str | None = None


# ------------------------------------------------------------------------ topology


class NodePlan(FrozenRecord, kw_only=True, frozen=True):
    """One node of the cluster as rank 0 planned it."""

    rank: Int
    name: str
    host: str
    interface: str
    address: str
    http_port: Int
    transport_port: Int
    master_eligible: bool

    @property
    def transport_address(self) -> str:
        return f"{self.address}:{self.transport_port}"

    @property
    def http_address(self) -> str:
        return f"{self.address}:{self.http_port}"


class Topology(FrozenRecord, kw_only=True, frozen=True):
    """``topology.json`` (and the stream header's ``topology``): nodes, addresses, roles."""

    cluster_name: str
    nodes: tuple[NodePlan, ...]
    data_root: str | None = None

    @property
    def masters(self) -> tuple[NodePlan, ...]:
        return tuple(node for node in self.nodes if node.master_eligible)

    @property
    def seed_hosts(self) -> list[str]:
        return [node.transport_address for node in self.masters]

    @property
    def single_node(self) -> bool:
        return len(self.nodes) == 1


NodeState = Literal["starting", "running", "stopped", "failed"]
NODE_STATES: tuple[NodeState, ...] = ("starting", "running", "stopped", "failed")


class JvmCpu(Record, kw_only=True):
    """A node's JVMs' CPU seconds so far by what their threads do, read by its cluster rank
    from ``/proc`` every few seconds (``nodes/<rank>/status.json``'s ``jvm``): the JIT
    compiler threads' share says whether the node is still warming up."""

    time: Epoch
    compiler: Float = 0.0
    gc: Float = 0.0
    other: Float = 0.0


class NodeStatus(Record, kw_only=True):
    """``nodes/<rank>/status.json``: one node's state, written by its rank."""

    rank: Int
    state: NodeState | None = None
    name: str | None = None
    host: str | None = None
    address: str | None = None
    interface: str | None = None
    http_port: Int | None = None
    transport_port: Int | None = None
    master_eligible: bool | None = None
    slurm_node: str | None = None
    pid: Int | None = None
    started: Epoch | None = None
    exit_code: Int | None = None
    message: str | None = None
    log_tail: str | None = None
    updated: Epoch | None = None
    #: The session key of a port the node found in use (``cluster.http_port``): an
    #: automatically chosen one makes the start retry once with new ports.
    port_in_use: str | None = None
    #: The node's JVMs' CPU by kind of thread, refreshed while it runs.
    jvm: JvmCpu | None = None


class DataRootEncryption(Record, kw_only=True):
    mode: str
    node_data: str = "plain"


class DataRootMarker(Record, kw_only=True):
    """``<data root>/esdash-data.json``: whose node data the data root holds.

    Markers written before ``encryption`` was recorded have none (accepted; the next run
    records it).
    """

    cluster_name: str
    nodes: Int
    encryption: DataRootEncryption | None = None
    updated: Epoch | None = None
    last: str | None = None


# --------------------------------------------------------------- health and samples


class Health(Record, kw_only=True):
    """``health.json``: the cluster's latest health answer, replaced every second.

    ``ok`` is False (with ``error``) while the cluster cannot be reached; the other fields
    are the engine's ``_cluster/health`` answer.
    """

    ok: bool = False
    time: Epoch | None = None
    error: str | None = None
    cluster_name: str | None = None
    status: str | None = None
    timed_out: bool | None = None
    number_of_nodes: Int | None = None
    number_of_data_nodes: Int | None = None
    active_primary_shards: Int | None = None
    active_shards: Int | None = None
    relocating_shards: Int | None = None
    initializing_shards: Int | None = None
    unassigned_shards: Int | None = None
    delayed_unassigned_shards: Int | None = None
    number_of_pending_tasks: Int | None = None
    number_of_in_flight_fetch: Int | None = None
    active_shards_percent_as_number: Float | None = None


class SampleHealth(Record, kw_only=True):
    status: str | None = None
    number_of_nodes: Int | None = None
    active_shards: Int | None = None
    unassigned_shards: Int | None = None


class NodeSample(Record, kw_only=True):
    """The figures the dashboard shows for one node, from its node statistics."""

    name: str | None = None
    host: str | None = None
    heap_used_percent: Float | None = None
    heap_used_bytes: Int | None = None
    cpu_percent: Float | None = None
    os_cpu_percent: Float | None = None
    gc_count: Int = 0
    gc_millis: Int = 0
    segments: Int | None = None
    docs: Int | None = None
    rejected: dict[str, Int] = {}


class ClusterSample(Record, kw_only=True):
    """One line of ``cluster.jsonl``: the health and every node's figures at ``time``."""

    schema: str = CLUSTER_SCHEMA
    type: str = "sample"
    time: Epoch
    health: SampleHealth = msgspec.field(default_factory=SampleHealth)
    nodes: dict[str, NodeSample] = {}


# -------------------------------------------------------------- recorder payloads


class SeriesPayload(Record, kw_only=True):
    """One timed quantity of one interval: its HDR histogram plus exact aggregates.

    ``hdr`` is the stored format (:mod:`esdash.rundir.hdr`, microseconds); ``min``, ``max``
    and ``sum`` are seconds, ``ln_sum`` and ``ln_sq_sum`` sums of ``ln(x)`` and ``ln(x)²``.
    """

    hdr: HdrText
    count: Count
    min: Float | None = None
    max: Float | None = None
    sum: Float = 0.0
    ln_sum: Float = 0.0
    ln_sq_sum: Float = 0.0
    clamped: Count = 0

    def __post_init__(self) -> None:
        if not self.hdr.startswith("HISTF"):
            raise ValueError("hdr: not an encoded HDR histogram")


class ErrorTime(Record, kw_only=True):
    """Seconds from sending to failure, over the failed requests that reported one."""

    count: Count = 0
    sum: Float = 0.0
    #: The longest: an ``open`` request (no answer when its step ended) is as long as any.
    max: Float | None = None


class ErrorSample(Record, kw_only=True):
    """One recent error message of an error class."""

    status: Int | None = None
    message: str = ""
    node: str | None = None
    wall: Epoch | None = None
    #: The operation it belongs to (added by viewers that list errors across operations).
    op: str | None = None


class NodePayload(Record, kw_only=True):
    """Counters of one operation against one node; ``ln`` sums of the latency."""

    requests: Count
    docs: Count
    ln_sum: Float = 0.0
    ln_sq_sum: Float = 0.0
    errors: ErrorCounts = {}
    doc_errors: ErrorCounts = {}


class OpPayload(Record, kw_only=True):
    """Everything counted for one operation (a query, or ``bulk``) in one interval."""

    requests: Count
    docs: Count
    bytes: Count
    errors: ErrorCounts
    latency: SeriesPayload
    service_time: SeriesPayload
    nodes: dict[str, NodePayload]
    doc_errors: ErrorCounts = {}
    error_time: ErrorTime = msgspec.field(default_factory=ErrorTime)
    last_errors: dict[ErrorClass, list[ErrorSample]] = {}

    def __post_init__(self) -> None:
        failed = sum(self.errors.values())
        if failed > self.requests:
            raise ValueError(f"more errors ({failed}) than requests ({self.requests})")


#: Version of the recorder payload (:class:`RankPayload`).
PAYLOAD_VERSION: Literal[1] = 1


class RankPayload(Record, kw_only=True):
    """What a rank hands over per interval (``Recorder.drain``), or a merge of such."""

    v: Literal[1] = PAYLOAD_VERSION
    rank: Int | None = None
    ranks: list[Int] = []
    elapsed: Float = 0.0
    ops: dict[str, OpPayload] = {}


# -------------------------------------------------------------------------- stream


class PlannedStepInfo(Record, kw_only=True):
    """A planned query step as the stream header and the results describe it."""

    name: str
    queries: list[str]
    warmup: Float | None = None
    duration: Float | None = None
    target_throughput: Float | None = None
    round: Int = 0
    position: Int = 0
    #: Clients over all bench ranks (None: one per bench rank).
    clients: Int | None = None
    #: The bulk loads indexing during the step (recorded among its queries' ops).
    indexing: list[str] = []
    #: Requests per client counted instead of timed (``QueryStep.iterations``); then
    #: ``warmup`` and ``duration`` are the phases' time limits.
    warmup_iterations: Int | None = None
    iterations: Int | None = None


class RankInfo(Record, kw_only=True):
    rank: Int
    host: str | None = None
    target: str | None = None
    pid: Int | None = None


class BenchInfo(Record, kw_only=True):
    ranks: Int
    per_rank: list[RankInfo] = []


class IngestPlan(Record, kw_only=True):
    docs_total: Int | None = None


class IngestProgress(Record, kw_only=True):
    docs_done: Count
    docs_total: Int | None = None


class Header(Record, kw_only=True, tag_field="type", tag="header"):
    """The first record of a stream: the run, its plan and the common start ``started``."""

    schema: str
    run_id: str
    session: JsonObject
    plugins: dict[str, str]
    topology: Topology
    bench: BenchInfo
    started: Epoch
    interval: Annotated[float, msgspec.Meta(gt=0, le=MAX_FLOAT)]
    steps: list[PlannedStepInfo]
    slurm_job_id: str | None = None
    ingest: IngestPlan | None = None

    def __post_init__(self) -> None:
        if not (self.schema == STREAM_SCHEMA or self.schema.startswith(STREAM_SCHEMA + ".")):
            raise ValueError(
                f"schema {self.schema!r} is not {STREAM_SCHEMA} (this esdash reads only that)"
            )


class Interval(Record, kw_only=True, tag_field="type", tag="interval"):
    """One interval (or one phase's part of it): the ranks' payloads merged."""

    seq: Count
    t: Float
    wall: Epoch
    phase: Phase
    elapsed: Float
    ops: dict[str, OpPayload]
    step: Int | None = None
    step_name: str | None = None
    ranks: list[Int] = []
    missing_ranks: list[Int] = []
    ingest: IngestProgress | None = None

    def __post_init__(self) -> None:
        # a warm-up interval without a step is the global warm-up (before the first step)
        if self.phase == "measure" and self.step is None:
            raise ValueError(f"step: a {self.phase} interval needs a step index")


class Event(Record, kw_only=True, tag_field="type", tag="event"):
    """Something a viewer shows once: a phase change, a failed warm-up, a lost node."""

    t: Float
    wall: Epoch
    kind: EventKind
    level: Level
    message: str
    step: Int | None = None
    data: JsonObject = {}


class Final(Record, kw_only=True, tag_field="type", tag="final"):
    """The last record: how the run ended (``wall`` is when it ended)."""

    t: Float
    wall: Epoch
    status: RunStatus
    reason: str | None = None


StreamRecord = Header | Interval | Event | Final


# ------------------------------------------------------------------------- results


class Spread(Record, kw_only=True):
    """Mean, sample std and range of a series, e.g. per-interval throughput."""

    n: Int = 0
    mean: Float | None = None
    std: Float | None = None
    min: Float | None = None
    median: Float | None = None
    max: Float | None = None


class Throughput(Record, kw_only=True):
    """Successful requests (docs) per second over the window, and per full interval."""

    requests_per_s: Float | None = None
    docs_per_s: Float | None = None
    intervals: Spread = msgspec.field(default_factory=Spread)
    docs_intervals: Spread = msgspec.field(default_factory=Spread)


class LatencyStats(Record, kw_only=True, omit_defaults=True):
    """Statistics of a timed series in milliseconds (``gstd`` is a factor).

    A percentile is present only where the sample count supports it (:mod:`esdash.stats`).
    """

    count: Int = 0
    min: Float | None = None
    mean: Float | None = None
    gmean: Float | None = None
    gstd: Float | None = None
    p1: Float | None = None
    p50: Float | None = None
    p90: Float | None = None
    p99: Float | None = None
    p99_9: Float | None = msgspec.field(default=None, name="p99.9")
    max: Float | None = None

    def value(self, name: str) -> float | None:
        """A statistic by its results name (``p99.9``, ``gmean``, ``max`` ...), in ms."""
        attribute = name.replace(".", "_")
        if attribute not in self.__struct_fields__:
            raise KeyError(name)
        value = getattr(self, attribute)
        return None if value is None else float(value)


class Histograms(Record, kw_only=True):
    latency: HdrText | None = None
    service_time: HdrText | None = None


class RankOpResult(Record, kw_only=True):
    requests: Int = 0
    ok: Int = 0
    errors: dict[str, Int] = {}
    error_rate: Float | None = None
    docs: Int = 0
    duration_s: Float | None = None
    requests_per_s: Float | None = None
    latency: LatencyStats = msgspec.field(default_factory=LatencyStats)
    service_time: LatencyStats = msgspec.field(default_factory=LatencyStats)
    histograms: Histograms = msgspec.field(default_factory=Histograms)


class NodeLatency(Record, kw_only=True):
    gmean: Float | None = None
    gstd: Float | None = None


class NodeOpResult(Record, kw_only=True):
    requests: Int = 0
    ok: Int = 0
    errors: dict[str, Int] = {}
    error_rate: Float | None = None
    docs: Int = 0
    rejected_docs: dict[str, Int] = {}
    latency: NodeLatency = msgspec.field(default_factory=NodeLatency)


class OpResult(Record, kw_only=True):
    """One operation of a step (or of the ingest): counts, rates, latency, breakdowns."""

    requests: Int = 0
    ok: Int = 0
    failed: Int = 0
    errors: dict[str, Int] = {}
    error_rate: Float | None = None
    docs: Int = 0
    bytes: Int = 0
    rejected_docs: dict[str, Int] = {}
    throughput: Throughput = msgspec.field(default_factory=Throughput)
    latency: LatencyStats = msgspec.field(default_factory=LatencyStats)
    service_time: LatencyStats = msgspec.field(default_factory=LatencyStats)
    error_time_mean: Float | None = None
    #: The longest failed request (ms): a request still open at its step's end counts here.
    error_time_max: Float | None = None
    per_rank: dict[str, RankOpResult] = {}
    per_node: dict[str, NodeOpResult] = {}
    last_errors: dict[str, list[ErrorSample]] = {}
    histograms: Histograms = msgspec.field(default_factory=Histograms)
    #: The request body, for results imported from the authors' files (they have no names).
    body: JsonObject | None = None


class IngestResult(Record, kw_only=True):
    duration_s: Float | None = None
    #: None for an imported ingest whose document count is not known.
    docs: Int | None = 0
    docs_per_s: Float | None = None
    rejected_docs: dict[str, Int] = {}
    ops: dict[str, OpResult] = {}
    docs_sent: Int | None = None
    docs_rejected: Int | None = None
    client_cpu_seconds: Float | None = None
    encode_seconds: Float | None = None
    #: Summed bulk times of an imported ingest (the authors' files have no CPU time).
    cpu_time_s: Float | None = None
    #: Documents sent per index, when the run ingested several indices.
    per_index: dict[str, Int] = {}
    #: Why the steps did not measure the planned index: documents were rejected (how many
    #: of those sent, by reason, with an example); None when every document was indexed.
    flag: str | None = None


class StepPlan(Record, kw_only=True):
    """What a step was planned to do, as ``results.json`` repeats it."""

    queries: list[str] = []
    warmup: Float | None = None
    duration: Float | None = None
    target_throughput: Float | None = None
    think_time: Float | None = None
    #: Clients over all bench ranks (None: one per bench rank).
    clients: Int | None = None
    #: The bulk loads that indexed during the step: their ops are in ``queries`` of the
    #: step's result, with indexed documents (docs/s), not search hits.
    indexing: list[str] = []
    #: Requests per client, counted instead of timed (then ``warmup`` and ``duration`` are
    #: the phases' time limits).
    warmup_iterations: Int | None = None
    iterations: Int | None = None


class WarmupCounts(Record, kw_only=True):
    #: None for imported results (the authors did not count warm-up requests).
    requests: Int | None = 0
    errors: Int | None = 0


class Trend(Record, kw_only=True):
    """How a per-interval series moved over a step (:func:`esdash.stats.trend.steadiness`)."""

    n: Int = 0
    #: Theil–Sen slope relative to the mean, in % per minute.
    slope_pct_per_min: Float | None = None
    #: Two-sided Mann–Kendall p-value (None: too few intervals to judge).
    p_value: Float | None = None
    #: Coefficient of variation of the series (std / mean).
    cv: Float | None = None
    steady: bool = True
    label: str = ""


class Steadiness(Record, kw_only=True):
    """Steadiness of a measured step: per-interval throughput and mean latency."""

    steady: bool = True
    #: ``steady``, or e.g. ``not steady: throughput +38 %/min``.
    label: str = ""
    throughput: Trend = msgspec.field(default_factory=Trend)
    latency: Trend = msgspec.field(default_factory=Trend)


class CacheCounts(Record, kw_only=True):
    """Index cache activity and segment count over one step's measurement (all shards)."""

    request_cache_hits: Int | None = None
    request_cache_misses: Int | None = None
    query_cache_hits: Int | None = None
    query_cache_misses: Int | None = None
    #: Segments at the end of the measurement (all shard copies).
    segments: Int | None = None
    #: Why the step's numbers may come from a cache rather than from search (None: they do not).
    flag: str | None = None


#: Starts of a step status saying its numbers are not of the planned load on the planned
#: cluster (a viewer flags such steps).
INCOMPLETE_STEP = ("ended early", "lost ranks", "node lost", "rank(s) silent")


class StepResult(Record, kw_only=True):
    """One query step: its plan, what happened, and every query's numbers."""

    index: Int
    name: str
    planned: StepPlan = msgspec.field(default_factory=StepPlan)
    #: ``measured``, ``ended early``, ``lost ranks``, ``no data``, ``not run: ...``,
    #: ``warm-up failed: ...``
    status: str = "no data"
    #: Seconds actually measured (the throughput's denominator; format >= 3).
    duration_s: Float | None = None
    warmup: WarmupCounts = msgspec.field(default_factory=WarmupCounts)
    queries: dict[str, OpResult] = {}
    unsupported: dict[str, str] = {}
    warmup_failed: dict[str, str | None] | None = None
    #: The round (0-based) and the position inside it (``benchmark.repetitions``/``order``).
    round: Int = 0
    position: Int = 0
    steadiness: Steadiness | None = None
    caches: CacheCounts | None = None


class SettleAction(Record, kw_only=True):
    action: str
    seconds: Float
    ok: bool = True
    detail: str = ""


class SettleResult(Record, kw_only=True):
    """What was done between ingest and the first measurement, and how long it took."""

    after_ingest: str = "none"
    seconds: Float = 0.0
    timed_out: bool = False
    actions: list[SettleAction] = []


class WarmupQuery(Record, kw_only=True):
    #: Cluster throughput (req/s) of the query in each global warm-up round.
    rounds: list[Float] = []
    converged: bool = False
    cv: Float | None = None
    p_value: Float | None = None
    errors: Int = 0


class GlobalWarmup(Record, kw_only=True):
    """The global warm-up: rounds over every query until the cluster is warm, or the bound.

    ``criterion`` is the rule it was judged by (:data:`esdash.stats.convergence.CRITERION`);
    per judged round, ``trend`` is the pooled throughput's relative slope per minute and
    ``jit_cores`` the busiest node's JIT compiler CPU (None: not reported); ``reason`` says
    what the last judged round found.  Files of older esdash lack them.
    """

    rounds: Int = 0
    round_seconds: Float = 0.0
    seconds: Float = 0.0
    bound_seconds: Float = 0.0
    converged: bool = False
    queries: dict[str, WarmupQuery] = {}
    criterion: str | None = None
    trend: list[Float | None] = []
    jit_cores: list[Float | None] = []
    reason: str | None = None


class QueryRounds(Record, kw_only=True):
    """One query over the rounds of a run: the median and its interval."""

    step: str
    query: str
    #: req/s in each round (round order); None where a round has no measurement.
    values: list[Float | None] = []
    median: Float | None = None
    low: Float | None = None
    high: Float | None = None
    n: Int = 0
    #: ``ci`` (order-statistic confidence interval, ``coverage``) or ``range`` (n < 6).
    kind: str = "range"
    coverage: Float | None = None
    p50_ms: list[Float | None] = []


class RoundsResult(Record, kw_only=True):
    """Rounds of all steps inside one run (``benchmark.repetitions``), and their order."""

    order: str = "listed"
    repetitions: Int = 1
    seed: Int | None = None
    #: The step names in each round, as run.
    sequences: list[list[str]] = []
    queries: list[QueryRounds] = []
    #: Median throughput by position relative to each query's median (all queries pooled).
    position_effect: list[Float | None] = []
    first_to_last: Float | None = None


class NodeFacts(Record, kw_only=True):
    jvm: str | None = None
    heap_max_bytes: Int | None = None
    #: The node's ``-X`` options as its JVM reports them (``jvm.input_arguments``), those
    #: naming a path left out: what a comparison must show was the same (the JIT, the
    #: collector), including options added through ``ES_JAVA_OPTS``.
    jvm_flags: list[str] = []


class ClusterFacts(Record, kw_only=True):
    """What the cluster said it was, read back after settling (:mod:`esdash.bench.facts`)."""

    engine: str | None = None
    version: str | None = None
    nodes: dict[str, NodeFacts] = {}
    #: Flat index settings: shards, replicas, refresh interval, codec.
    index: dict[str, str] = {}


class RankSummary(Record, kw_only=True):
    """One load rank as rank 0 saw it: ``status`` is ok, failed, aborted or lost."""

    host: str | None = None
    status: str | None = None
    reason: str | None = None
    ingest_node: str | None = None
    step_nodes: dict[str, str | None] = {}
    #: Clients it ran per step (a step's clients are spread over the load ranks).
    step_clients: dict[str, Int] = {}
    #: Wall clock of its last heartbeat (a lost rank: when it went silent).
    last_heartbeat: Epoch | None = None
    #: Interval payloads of it that reached rank 0 (all of them are in the numbers).
    intervals: Int = 0


class NodeEvent(Record, kw_only=True):
    """A search node lost or back during the benchmark, as rank 0 noticed it."""

    #: Seconds since the run's start (T0), and the wall clock.
    t: Float
    wall: Epoch
    node: str
    kind: Literal["lost", "back"]
    #: What showed it: the node's process exited, it stopped answering, it left the cluster.
    cause: str


class HealthPoint(Record, kw_only=True):
    """The cluster's health when it changed (status, nodes or shards), seconds since T0."""

    t: Float
    status: str | None = None
    number_of_nodes: Int | None = None
    active_shards: Int | None = None
    unassigned_shards: Int | None = None
    error: str | None = None


class Results(Record, kw_only=True):
    """``results.json``: the numbers of a run, per step and query (docs/stream.md)."""

    schema: str = RESULTS_SCHEMA
    #: 1 for files written before the field existed.
    format: Int = 1
    run_id: str | None = None
    started: Epoch | None = None
    ended: Epoch | None = None
    status: str | None = None
    reason: str | None = None
    units: dict[str, str] = {}
    ranks: Int | None = None
    ingest: IngestResult | None = None
    steps: list[StepResult] = []
    unattributed_requests: dict[str, Int] = {}
    encryption: str | None = None
    missing_ranks: list[Int] = []
    per_rank: dict[str, RankSummary] = {}
    recovered_from_stream: bool = False
    #: The file an imported result came from: ``{"format", "path"}``.
    imported_from: dict[str, str] | None = None
    #: How req/s is defined in this file (format >= 3: successful / seconds measured).
    throughput_definition: str | None = None
    settle: SettleResult | None = None
    global_warmup: GlobalWarmup | None = None
    rounds: RoundsResult | None = None
    #: Engine, JVMs, heaps and index settings as the cluster reported them.
    cluster: ClusterFacts | None = None
    #: Nodes lost (and back) during the benchmark, in order.
    node_events: list[NodeEvent] = []
    #: The cluster's health over the run: one point per change.
    cluster_health: list[HealthPoint] = []
    #: The track's administrative requests rank 0 sent once (``BenchPlan.track_requests``).
    track_requests: list[RequestResult] = []

    def step(self, name: str) -> StepResult | None:
        return next((step for step in self.steps if step.name == name), None)


# ------------------------------------------------------------------------- leakage

#: ``leakage.json`` format; a change of a field's meaning or unit needs a new one.  Added
#: fields keep it (``length_classes`` and ``baseline`` came later): readers ignore fields they
#: do not know, and files without the new ones read with their defaults.
LEAKAGE_VERSION = 1
#: A share of records, from 0 to 1.
Share = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class LeakageNames(Record, kw_only=True):
    """How field names are stored, and what the cluster learns from them."""

    scheme: str
    #: Field names the track's schema declares (each stored as one token per path segment).
    declared: Count
    learns: str
    #: Distinct lengths of the stored name tokens (1: names reveal no length); None in
    #: files written before lengths were measured.
    length_classes: Count | None = None


class LeakageAttack(Record, kw_only=True):
    """One inference attack run on one field's stored ciphertexts (or the field's baseline).

    ``exact`` and ``within_1pct`` are the shares of the field's records whose value the
    attack recovered exactly and within 1 % of the domain; None where the attack does not
    apply (``applicable`` false, ``note`` says why) or has no numeric domain.  The attacks
    of ABE are ``frequency``, ``sorting``, ``cumulative``, ``window``, ``length`` and
    ``length+frequency``; a reader shows any name it is given.
    """

    name: str
    applicable: bool
    exact: Share | None = None
    within_1pct: Share | None = None
    note: str = ""


class LeakageField(Record, kw_only=True):
    """One encrypted field: its scheme, what it leaks and how well the attacks did."""

    field: str
    type: str
    scheme: str
    learns: str
    records: Count
    distinct: Count
    #: Number of values the field's declared range and step allow; None when unbounded.
    domain: Count | None = None
    #: Distinct lengths of the stored values (measured on the ciphertexts); None in files
    #: written before lengths were measured.
    length_classes: Count | None = None
    attacks: list[LeakageAttack] = []
    #: The yardstick beside the attacks: every record guessed as the field's most frequent
    #: value (``name`` "majority guess"), which needs no ciphertext; None in older files.
    baseline: LeakageAttack | None = None
    #: One plain-language sentence ("PatientAge: dense domain of 101 values, ...").
    verdict: str = ""

    def best_attack(self) -> LeakageAttack | None:
        """The applicable attack that recovered most records exactly (then within 1 %)."""
        measured = [a for a in self.attacks if a.applicable and a.exact is not None]
        if not measured:
            return None
        return max(measured, key=lambda a: (a.exact or 0.0, a.within_1pct or 0.0))


class Leakage(Record, kw_only=True):
    """``leakage.json``: what a client-side encryption mode still reveals to the cluster.

    Written by the orchestrator at the end of a run in a client-side mode, from the report
    the mode's plugin returns (hook ``esdash_leakage``), and by ``esdash leakage SESSION``
    on a generated sample; the viewers only read it.  Shares are fractions (0 to 1).  It
    never holds a plaintext value of the user's data.
    """

    version: Int = LEAKAGE_VERSION
    #: One paragraph: who the adversary is and what it sees.
    threat_model: str
    #: The papers the attacks and bounds come from.
    references: list[str] = []
    #: Documents analysed, where they came from and what the adversary's auxiliary data was.
    documents: Count
    source: str
    auxiliary: str
    key_mode: str
    names: LeakageNames
    fields: list[LeakageField] = []


# ---------------------------------------------------------------------- bench plan


class PlannedQuery(FrozenRecord, kw_only=True, frozen=True):
    """A query as it is sent (encoded by a client-side codec), or why it cannot run."""

    name: str
    index: str
    body: JsonObject | None
    unsupported: str | None = None
    #: ``request_cache`` sent with the query: False, True, or None (not sent: index default).
    request_cache: bool | None = False
    #: A request other than a search (``Query.path``): its method and path.
    method: str = "POST"
    path: str | None = None
    #: Further bodies of the search, cycled by each client (``Query.variants``, encoded like
    #: ``body``); empty in older plans and for a query with one body.
    variants: tuple[JsonObject, ...] = ()
    #: A scroll search's pages (``Query.pages``; -1: every page); None: one request.
    pages: Int | None = None
    #: How the pages are fetched: ``scroll`` or ``search_after`` (``Query.paging``).
    paging: str = "scroll"


class PlannedIndexing(FrozenRecord, kw_only=True, frozen=True):
    """Documents a step indexes while its queries run (``StepIndexing`` with its corpus).

    Recorded in the step under ``name``; ``clients`` over all bench ranks each send their
    own part of the corpus (``corpus_documents`` split over all of them) to ``index`` in
    requests of ``bulk_size`` documents with action ``op_type``, at most
    ``target_throughput`` requests/s together (None: unthrottled), with ``?pipeline=``
    when set, only ``ingest_percentage`` % of each part, again from its start when
    ``looped``.
    """

    name: str
    index: str
    corpus_path: str
    corpus_documents: Int | None
    corpus_has_actions: bool = False
    op_type: str = "index"
    clients: Int = 1
    bulk_size: Int = 1000
    target_throughput: Float | None = None
    pipeline: str | None = None
    looped: bool = False
    ingest_percentage: Float = 100.0


class PlannedStep(FrozenRecord, kw_only=True, frozen=True):
    name: str
    queries: tuple[PlannedQuery, ...]
    warmup: Float
    duration: Float
    target_throughput: Float | None
    think_time: Float = 0.0
    #: The round (0-based) this run of the step belongs to, and its position in the round.
    round: Int = 0
    position: Int = 0
    #: Clients over all bench ranks (None: one per bench rank); see ``QueryStep.clients``.
    clients: Int | None = None
    #: Bulk indexing that runs during the step, beside its queries (``QueryStep.indexing``).
    indexing: tuple[PlannedIndexing, ...] = ()
    #: Seconds before the step's warm-up in which nothing is sent: the step before's last
    #: answers (up to a second late) land there, not in this step's measurement.
    pause: Float = 0.0
    #: Requests per client counted instead of timed (``QueryStep.iterations``): then
    #: ``warmup`` and ``duration`` are the phases' time limits, and the step ends when every
    #: client is done (rank 0 tells the workers when the next step starts).
    warmup_iterations: Int | None = None
    iterations: Int | None = None
    #: Seconds over which the step's clients start one after another (``QueryStep.ramp_up``).
    ramp_up: Float = 0.0

    @property
    def runnable(self) -> tuple[PlannedQuery, ...]:
        return tuple(q for q in self.queries if q.unsupported is None)

    @property
    def counted(self) -> bool:
        """Whether the step counts its requests (and ends when they are sent)."""
        return self.iterations is not None


class PlannedIndex(FrozenRecord, kw_only=True, frozen=True):
    """One index (or data stream) a run prepares and ingests, with its own corpus.

    ``BenchPlan`` keeps its main index in its own fields (older ``bench.json`` files hold
    only those); :attr:`BenchPlan.all_indices` gives every index in this form.
    ``corpus_path`` is empty for an index without documents (created, never ingested).
    ``op_type`` is the bulk action of each document: ``index``, or ``create`` for a data
    stream, which accepts nothing else.
    """

    name: str
    body: JsonObject
    corpus_path: str = ""
    corpus_documents: Int | None = 0
    corpus_has_actions: bool = False
    op_type: str = "index"
    #: True: ``name`` is a data stream (made by the track's index template), not an index.
    data_stream: bool = False

    @property
    def has_corpus(self) -> bool:
        return bool(self.corpus_path)


class PlannedRequest(FrozenRecord, kw_only=True, frozen=True):
    """A request of the track's administrative tasks (Rally's ``force-merge``,
    ``put-settings``, templates, untimed ``raw-request`` ...), sent once by rank 0.

    ``when`` is ``before-ingest`` (after the indices are prepared) or ``after-ingest``
    (before settling and the steps); ``method`` is empty for a sleep of ``seconds``;
    ``wait`` names a condition polled after it (``recovery``); ``missing_ok``: a 404 is
    success; ``timeout`` overrides the control client's request timeout.
    """

    name: str
    operation: str
    method: str
    path: str
    body: JsonObject | None = None
    missing_ok: bool = False
    when: str = "after-ingest"
    seconds: Float = 0.0
    wait: str = ""
    timeout: Float | None = None


class RequestResult(Record, kw_only=True):
    """How one :class:`PlannedRequest` went: ``ok`` or ``error`` (with the engine's
    reason), and how long it took (Rally's service time of an administrative task)."""

    name: str
    operation: str
    when: str
    request: str = ""
    status: str = "ok"
    seconds: Float = 0.0
    started: Epoch | None = None
    error: str | None = None
    #: The HTTP status of an error answer (None: no answer, or no error).
    http_status: Int | None = None


class BenchPlan(FrozenRecord, kw_only=True, frozen=True):
    """``bench.json``: what every bench rank needs, resolved once by the orchestrator."""

    index: str
    index_body: JsonObject
    corpus_path: str
    corpus_documents: Int | None
    corpus_has_actions: bool
    bulk_size: Int
    steps: tuple[PlannedStep, ...]
    interval: Float
    seed: Int
    ranks: Int
    schema: str = BENCH_SCHEMA
    reingest: bool = False
    #: ``esdash run --reuse-index``: ``auto`` re-ingests an index whose ``_meta.esdash``
    #: fingerprint differs from ``index_body``'s, ``require`` refuses to run instead.
    reuse_index: str = "auto"
    track: str = ""
    #: Notes the orchestrator shows as warnings (e.g. field types the distribution lacks).
    notes: tuple[str, ...] = ()
    #: The session's encryption mode, and the client codec's secret-free spec.
    encryption: str = "none"
    client_codec: JsonObject | None = None
    #: Settling after ingest (``force-merge``, ``wait``, ``none``) and its bounds.
    after_ingest: str = "none"
    max_num_segments: Int = 1
    settle_timeout: Float = 600.0
    #: Global warm-up bound and round length per query (0: no global warm-up).
    warmup_max: Float = 0.0
    warmup_round: Float = 5.0
    #: How steps were ordered and how many rounds (``steps`` holds every round, in order).
    order: str = "listed"
    repetitions: Int = 1
    #: The track's other indices and data streams, prepared and ingested after ``index``
    #: (in the order the track's bulk tasks send to them); empty in older plans.
    more_indices: tuple[PlannedIndex, ...] = ()
    #: The track's administrative requests rank 0 sends once, in schedule order.
    track_requests: tuple[PlannedRequest, ...] = ()
    #: True: ``index`` is a data stream (made by the track's index template).
    data_stream: bool = False

    @property
    def main_index(self) -> PlannedIndex:
        """``index`` and its corpus as a :class:`PlannedIndex`."""
        return PlannedIndex(
            name=self.index,
            body=self.index_body,
            corpus_path=self.corpus_path,
            corpus_documents=self.corpus_documents,
            corpus_has_actions=self.corpus_has_actions,
            op_type="create" if self.data_stream else "index",
            data_stream=self.data_stream,
        )

    @property
    def all_indices(self) -> tuple[PlannedIndex, ...]:
        """Every index of the run, the main one first."""
        return (self.main_index, *self.more_indices)

    @property
    def data_streams(self) -> tuple[str, ...]:
        """The data streams the run ingests into (made by the track's index templates)."""
        return tuple(i.name for i in self.all_indices if i.data_stream)

    @property
    def index_names(self) -> str:
        """Every index of the run as one comma-separated target (refresh, stats, ...)."""
        return ",".join(i.name for i in self.all_indices)

    @property
    def documents_total(self) -> int | None:
        """Documents of every corpus the run ingests (None: a count is not known)."""
        counts = [i.corpus_documents for i in self.all_indices if i.has_corpus]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


# ------------------------------------------------------------------------ campaign


class Attempt(Record, kw_only=True):
    run: str | None = None
    cluster_run: str | None = None
    started: Epoch | None = None
    ended: Epoch | None = None
    exit_code: Int | None = None
    status: str | None = None
    reason: str | None = None


class PointRunner(Record, kw_only=True):
    """The sweep process running a point (to tell a live point from an abandoned one)."""

    host: str | None = None
    pid: Int | None = None
    #: psutil's create time of the sweep process: with host and pid, its identity.
    create_time: Epoch | None = None


class PointState(Record, kw_only=True):
    """``points/<id>/state.json``: one campaign point's status and every attempt."""

    schema: str = POINT_SCHEMA
    id: str
    label: str = ""
    values: JsonObject = {}
    repetition: Int = 1
    nodes: Int | None = None
    status: str = "pending"
    digest: str | None = None
    run: str | None = None
    cluster_run: str | None = None
    reason: str | None = None
    started: Epoch | None = None
    ended: Epoch | None = None
    attempts: list[Attempt] = []
    runner: PointRunner | None = None
    updated: Epoch | None = None


class CurrentPoint(Record, kw_only=True):
    """A point a sweep process is running now, and the run directory to follow it in."""

    point: str
    label: str = ""
    run: str | None = None
    cluster_run: str | None = None
    attempt: Int | None = None
    started: Epoch | None = None


class RunnerCluster(Record, kw_only=True):
    number: Int | None = None
    label: str | None = None
    run: str | None = None


class Runner(Record, kw_only=True):
    """``runners/<host>-<pid>.json``: one ``esdash sweep`` process."""

    host: str
    pid: Int | None = None
    #: psutil's create time of the sweep process: with host and pid, its identity.
    create_time: Epoch | None = None
    state: str = "running"
    slurm_job: str | None = None
    started: Epoch | None = None
    updated: Epoch | None = None
    current: CurrentPoint | None = None
    cluster: RunnerCluster | None = None
    #: ``--only`` filters of this sweep.
    only: list[str] = []


class JobRecord(Record, kw_only=True):
    """``jobs/nodes-<N>/job.json``: a Slurm job ``esdash sweep --submit`` wrote."""

    nodes: Int | None = None
    points: Int | None = None
    job: str | None = None
    script: str | None = None
    written: Epoch | None = None
    submitted: Epoch | None = None


class Counts(Record, kw_only=True):
    """How many points have each status, and how many there are."""

    total: Int = 0
    completed: Int = 0
    failed: Int = 0
    running: Int = 0
    pending: Int = 0
    interrupted: Int = 0
    stale: Int = 0

    def of(self, status: str) -> int:
        """The count of one point status (0 for anything that is not one)."""
        return int(getattr(self, status)) if status in COUNTED_STATUSES else 0

    @property
    def ended(self) -> int:
        """Points this sweep is done with (completed, failed, interrupted)."""
        return self.completed + self.failed + self.interrupted

    @property
    def fraction(self) -> float:
        """The completed share of all points (0 for an empty campaign)."""
        return self.completed / self.total if self.total else 0.0


class CampaignPoint(Record, kw_only=True):
    """One point of the summary: one session, one ``esdash run`` per attempt."""

    id: str
    label: str = ""
    status: str = "pending"
    values: JsonObject = {}
    repetition: Int = 1
    nodes: Int | None = None
    cluster: Int | None = None
    ingest: str | None = None
    run: str | None = None
    cluster_run: str | None = None
    attempts: Int = 0
    reason: str | None = None
    started: Epoch | None = None
    ended: Epoch | None = None
    session: str | None = None

    def duration(self, now: float) -> float | None:
        """Seconds of its latest attempt: to its end, or until ``now`` while it runs."""
        if self.started is None:
            return None
        if self.ended is not None:
            return max(0.0, self.ended - self.started)
        return max(0.0, now - self.started) if self.status == "running" else None


class PlannedCluster(Record, kw_only=True):
    """One cluster of the plan (a size and encryption setup), in run order."""

    number: Int
    label: str = ""
    nodes: Int | None = None
    root_label: str = ""
    points: Int = 0


class CampaignSummary(Record, kw_only=True):
    """``campaign.json``: a campaign's progress, rebuilt after every change by the sweep.

    ``schema`` is required: a JSON file without it is not a campaign summary.
    """

    schema: str
    name: str
    state: str = "pending"
    description: str = ""
    file: str | None = None
    base_session: str | None = None
    dir: str | None = None
    updated: Epoch | None = None
    axes: dict[str, list[Any]] = {}
    short_names: dict[str, str] = {}
    repetitions: Int = 1
    ingest: str = ""
    counts: Counts | None = None
    current: list[CurrentPoint] = []
    clusters: list[PlannedCluster] = []
    runners: list[Runner] = []
    jobs: list[JobRecord] = []
    points: list[CampaignPoint] = []

    def point(self, point_id: str) -> CampaignPoint | None:
        return next((p for p in self.points if p.id == point_id), None)

    @property
    def point_counts(self) -> Counts:
        """The counts the file gives, or counted from its points when it has none."""
        return self.counts if self.counts is not None else count_points(self.points)

    def cluster_counts(self, number: int) -> Counts:
        """The status counts of one cluster's points."""
        return count_points(p for p in self.points if p.cluster == number)


def count_points(points: Iterable[CampaignPoint]) -> Counts:
    """The counts of ``points`` by status."""
    counts = Counts()
    for point in points:
        counts.total += 1
        if point.status in COUNTED_STATUSES:
            setattr(counts, point.status, getattr(counts, point.status) + 1)
    return counts


#: Point statuses that :class:`Counts` counts.
COUNTED_STATUSES = ("completed", "failed", "running", "pending", "interrupted", "stale")
