"""``results.json`` (schema ``esdash.results/1``): the numbers of a run, per step and query.

Rank 0 feeds every interval payload it receives into a :class:`RunAccumulator`, which keeps,
per *part* of the run (``("ingest", None)``, ``("warmup", k)``, ``("measure", k)``):

* one cumulative :class:`~esdash.stats.merge.Merged` per rank (per-rank breakdowns; their
  merge is the part's total, and per-node counters are inside every ``Merged``);
* per interval ``seq``: successful requests and docs per op, and each rank's covered time
  (the per-interval throughput series, for "mean ± std over intervals");
* each rank's covered time in total (the part's window).

:func:`build_results` turns that into the results document.  Definitions:

* **window** of a part: the longest time any rank spent in it (the sum of that rank's payload
  ``elapsed``), i.e. from the common start to the last rank's end.  ``set_window`` overrides
  it when the caller knows the exact barrier-to-end time.
* **throughput**: successful requests (and docs) of the part / its window.  **Interval
  throughput**: the same per interval, summed over ranks / the interval's longest rank time;
  intervals shorter than half the nominal interval (slivers at phase boundaries) are left out
  of the mean ± std, but their requests count in the overall throughput.
* **latency / service time**: of successful requests (see :mod:`esdash.bench.recorder`);
  statistics as in :mod:`esdash.stats`, written in **milliseconds** (Rally's unit);
  ``gstd`` is a factor.
* **error rate**: failed / all requests, a fraction.  Documents a bulk request rejected are
  counted separately (``rejected_docs``), by reason.

Layout (abridged; ``docs/stream.md`` has the field list)::

    {"schema": "esdash.results/1", "run_id", "started", "ended", "status", "reason",
     "units": {...}, "ranks": 4,
     "ingest": {"duration_s", "docs", "docs_per_s", "rejected_docs": {reason: n},
                "ops": {"bulk": <op>}} | null,
     "steps": [{"index", "name", "planned": {...}, "status", "duration_s",
                "warmup": {"requests", "errors"}, "queries": {"<query>": <op>}}]}
    <op> = {"requests", "ok", "failed", "errors": {class: n}, "error_rate", "docs", "bytes",
            "rejected_docs", "throughput": {"requests_per_s", "docs_per_s",
            "intervals": {"n", "mean", "std", "min", "median", "max"}},
            "latency": <stats>, "service_time": <stats>, "error_time_mean": ms | null,
            "per_rank": {"<rank>": {...}}, "per_node": {"<node>": {...}},
            "last_errors": {...}, "histograms": {"latency": hdr, "service_time": hdr}}
    <stats> = {"count", "min", "mean", "gmean", "gstd", "p1", "p50", "p90", "p99", "p99.9",
               "max"}   (percentiles only where the sample count supports them)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from esdash.rundir import hdr
from esdash.rundir.records import (
    RESULTS_FORMAT,
    RESULTS_SCHEMA,
    Final,
    Header,
    Histograms,
    IngestResult,
    JsonMapping,
    JsonObject,
    LatencyStats,
    NodeLatency,
    NodeOpResult,
    OpResult,
    PlannedStepInfo,
    RankOpResult,
    RankPayload,
    Results,
    Steadiness,
    StepPlan,
    StepResult,
    Throughput,
    Trend,
    WarmupCounts,
)
from esdash.stats import (
    Summary,
    error_rate,
    geometric,
    latency_stats,
    spread_record,
    summarize,
    throughput,
)
from esdash.stats.merge import Merged, NodeData, OpData
from esdash.stats.metrics import REQUESTS_PER_S
from esdash.stats.trend import steadiness

SCHEMA = RESULTS_SCHEMA
MS = 1000.0
#: Intervals shorter than this share of the nominal interval are left out of the spread.
MIN_INTERVAL_SHARE = 0.5

Part = tuple[str, "int | None"]


@dataclass
class _Interval:
    """One interval of one part: per-op successes and docs, each rank's covered time."""

    ops: dict[str, list[int]] = field(default_factory=dict)  # op -> [ok, docs]
    elapsed: dict[int, float] = field(default_factory=dict)  # rank -> seconds
    #: Sum and count of successful requests' latency (seconds), all ops: the mean's parts.
    latency_sum: float = 0.0
    latency_count: int = 0

    @property
    def length(self) -> float:
        return max(self.elapsed.values(), default=0.0)


@dataclass
class _PartData:
    per_rank: dict[int, Merged] = field(default_factory=dict)
    intervals: dict[int, _Interval] = field(default_factory=dict)
    elapsed: dict[int, float] = field(default_factory=dict)  # rank -> seconds
    window: float | None = None


class RunAccumulator:
    """Cumulative data per part of the run and per rank, fed one payload at a time.

    ``interval`` is the nominal interval (seconds), used to leave slivers out of the
    per-interval throughput spread.
    """

    def __init__(self, interval: float | None = None) -> None:
        self.interval = interval
        self._parts: dict[Part, _PartData] = {}

    def add_interval(
        self,
        phase: str,
        step: int | None,
        rank: int,
        payload: RankPayload,
        seq: int | None = None,
    ) -> Merged:
        """Add one rank's payload of one interval; return it decoded.

        The payload is decoded once; merge the returned ``Merged`` into the interval's
        stream record (``interval.merge(returned)``) instead of decoding it a second time.
        Without ``seq`` the payload counts in the totals but not in the interval series.
        """
        decoded = Merged().add(payload, rank=rank)
        part = self._parts.setdefault((phase, step), _PartData())
        cumulative = part.per_rank.get(rank)
        if cumulative is None:
            part.per_rank[rank] = decoded.copy()
        else:
            cumulative.merge(decoded)
        elapsed = payload.elapsed
        part.elapsed[rank] = part.elapsed.get(rank, 0.0) + elapsed
        if seq is not None:
            interval = part.intervals.setdefault(seq, _Interval())
            interval.elapsed[rank] = interval.elapsed.get(rank, 0.0) + elapsed
            for name, data in decoded.ops.items():
                counts = interval.ops.setdefault(name, [0, 0])
                counts[0] += data.ok
                counts[1] += data.docs
                interval.latency_sum += data.latency.sum
                interval.latency_count += data.latency.count
        return decoded

    def set_window(self, phase: str, step: int | None, seconds: float) -> None:
        """Use ``seconds`` as the part's window (e.g. barrier to the last rank's end)."""
        self._parts.setdefault((phase, step), _PartData()).window = seconds

    # ------------------------------------------------------------------------- views
    def parts(self) -> list[Part]:
        return list(self._parts)

    def per_rank(self, phase: str, step: int | None) -> dict[int, Merged]:
        part = self._parts.get((phase, step))
        return dict(sorted(part.per_rank.items())) if part else {}

    def merged(self, phase: str, step: int | None) -> Merged:
        """All ranks of a part merged (a new object)."""
        total = Merged()
        for data in self.per_rank(phase, step).values():
            total.merge(data)
        return total

    def window(self, phase: str, step: int | None) -> float:
        part = self._parts.get((phase, step))
        if part is None:
            return 0.0
        if part.window is not None:
            return part.window
        return max(part.elapsed.values(), default=0.0)

    def rank_window(self, phase: str, step: int | None, rank: int) -> float:
        part = self._parts.get((phase, step))
        return part.elapsed.get(rank, 0.0) if part else 0.0

    def series(self, phase: str, step: int | None) -> list[tuple[float, float, float | None]]:
        """Per full interval: (seconds since the part began, req/s of all ops, mean latency s).

        The steadiness of a step is judged on this series (:func:`steadiness_of`).
        """
        part = self._parts.get((phase, step))
        if part is None or not part.intervals:
            return []
        nominal = self._nominal(part)
        first = min(part.intervals)
        points = []
        for seq, interval in self._full_intervals(part):
            length = interval.length
            ok = sum(counts[0] for counts in interval.ops.values())
            mean = interval.latency_sum / interval.latency_count if interval.latency_count else None
            points.append(((seq - first) * (self.interval or nominal), ok / length, mean))
        return points

    def _nominal(self, part: _PartData) -> float:
        lengths = [i.length for i in part.intervals.values() if i.length > 0]
        return self.interval or (sorted(lengths)[len(lengths) // 2] if lengths else 0.0)

    def _full_intervals(self, part: _PartData) -> list[tuple[int, _Interval]]:
        """The part's intervals in ``seq`` order, boundary slivers left out."""
        nominal = self._nominal(part)
        return [
            (seq, part.intervals[seq])
            for seq in sorted(part.intervals)
            if part.intervals[seq].length > 0
            and part.intervals[seq].length >= MIN_INTERVAL_SHARE * nominal
        ]

    def interval_throughputs(self, phase: str, step: int | None, op: str) -> list[float]:
        """Successful requests per second of ``op`` in each full interval, in ``seq`` order."""
        return [ok for ok, _docs in self.interval_rates(phase, step, op)]

    def interval_rates(self, phase: str, step: int | None, op: str) -> list[tuple[float, float]]:
        """Successful requests and docs per second of ``op`` in each full interval."""
        part = self._parts.get((phase, step))
        if part is None:
            return []
        rates = []
        for _seq, interval in self._full_intervals(part):
            ok, docs = interval.ops.get(op, (0, 0))
            rates.append((ok / interval.length, docs / interval.length))
        return rates


# ------------------------------------------------------------------------------ results


def _stats(summary: Summary) -> LatencyStats:
    return latency_stats(summary, scale=MS, digits=4)


def _rate(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _node_result(node: NodeData) -> NodeOpResult:
    gmean, gstd = geometric(node.ok, node.ln_sum, node.ln_sq_sum)
    failed = node.requests - node.ok
    return NodeOpResult(
        requests=node.requests,
        ok=node.ok,
        errors=dict(sorted(node.errors.items())),
        error_rate=_rate(error_rate(failed, node.requests), 6),
        docs=node.docs,
        rejected_docs=dict(sorted(node.doc_errors.items())),
        latency=NodeLatency(
            gmean=None if gmean is None else round(gmean * MS, 4),
            gstd=None if gstd is None else round(gstd, 4),
        ),
    )


def _histograms(data: OpData) -> Histograms:
    return Histograms(
        latency=hdr.encode(data.latency.counts), service_time=hdr.encode(data.service_time.counts)
    )


def _rank_result(data: OpData, seconds: float) -> RankOpResult:
    return RankOpResult(
        requests=data.requests,
        ok=data.ok,
        errors=dict(sorted(data.errors.items())),
        error_rate=_rate(error_rate(data.failed, data.requests), 6),
        docs=data.docs,
        duration_s=round(seconds, 3),
        requests_per_s=_rate(throughput(data.ok, seconds)),
        latency=_stats(summarize(data.latency)),
        service_time=_stats(summarize(data.service_time)),
        histograms=_histograms(data),
    )


def _op_result(
    acc: RunAccumulator, phase: str, step: int | None, name: str, data: OpData, window: float
) -> OpResult:
    rates = acc.interval_rates(phase, step, name)
    per_rank = {}
    for rank, merged in acc.per_rank(phase, step).items():
        if name in merged.ops:
            per_rank[str(rank)] = _rank_result(merged.ops[name], acc.rank_window(phase, step, rank))
    error_time = (
        round(data.error_time_sum / data.error_time_count * MS, 4)
        if data.error_time_count
        else None
    )
    return OpResult(
        requests=data.requests,
        ok=data.ok,
        failed=data.failed,
        errors=dict(sorted(data.errors.items())),
        error_rate=_rate(error_rate(data.failed, data.requests), 6),
        docs=data.docs,
        bytes=data.bytes,
        rejected_docs=dict(sorted(data.doc_errors.items())),
        throughput=Throughput(
            requests_per_s=_rate(throughput(data.ok, window)),
            docs_per_s=_rate(throughput(data.docs, window)),
            intervals=spread_record(ok for ok, _ in rates),
            docs_intervals=spread_record(docs for _, docs in rates),
        ),
        latency=_stats(summarize(data.latency)),
        service_time=_stats(summarize(data.service_time)),
        error_time_mean=error_time,
        error_time_max=(
            round(data.error_time_max * MS, 4) if data.error_time_max is not None else None
        ),
        per_rank=per_rank,
        per_node={node: _node_result(n) for node, n in sorted(data.nodes.items())},
        last_errors=data.last_errors,
        histograms=_histograms(data),
    )


def _ingest_result(acc: RunAccumulator) -> IngestResult | None:
    if ("ingest", None) not in acc.parts():
        return None
    merged = acc.merged("ingest", None)
    window = acc.window("ingest", None)
    docs = sum(data.docs for data in merged.ops.values())
    rejected: dict[str, int] = {}
    for data in merged.ops.values():
        for reason, count in data.doc_errors.items():
            rejected[reason] = rejected.get(reason, 0) + count
    return IngestResult(
        duration_s=round(window, 3),
        docs=docs,
        docs_per_s=_rate(throughput(docs, window)),
        rejected_docs=dict(sorted(rejected.items())),
        ops={
            name: _op_result(acc, "ingest", None, name, data, window)
            for name, data in sorted(merged.ops.items())
        },
    )


def _trend(points: Sequence[tuple[float, float]], what: str) -> Trend:
    found = steadiness([t for t, _ in points], [v for _, v in points])
    label = found.label if found.steady else found.label.replace("not steady:", f"{what}")
    return Trend(
        n=found.n,
        slope_pct_per_min=None
        if found.slope_pct_per_min is None
        else round(found.slope_pct_per_min, 2),
        p_value=None if found.p_value is None else round(found.p_value, 4),
        cv=None if found.cv is None else round(found.cv, 4),
        steady=found.steady,
        label=label,
    )


def steadiness_of(acc: RunAccumulator, phase: str, step: int | None) -> Steadiness:
    """Whether a step's per-interval throughput and mean latency held still while measured.

    A step is not steady when either series has a significant trend of at least
    ``max_drift`` %/min (:func:`esdash.stats.trend.steadiness`); the label says which and
    how fast, e.g. ``not steady: throughput +38 %/min``.
    """
    points = acc.series(phase, step)
    rate = _trend([(t, r) for t, r, _ in points], "throughput")
    latency = _trend([(t, m) for t, _, m in points if m is not None], "latency")
    unsteady = [trend.label for trend in (rate, latency) if not trend.steady]
    return Steadiness(
        steady=not unsteady,
        label="not steady: " + ", ".join(unsteady) if unsteady else "steady",
        throughput=rate,
        latency=latency,
    )


def step_status(acc: RunAccumulator, index: int, planned: PlannedStepInfo, workers: int) -> str:
    """``measured``, ``ended early`` or ``lost ranks (m of n measured it all)``.

    A rank "measured it all" when its measured seconds reach the planned duration (less one
    interval, or 2 %, for the boundaries).  When no rank did, the step ended early; when
    some did and others did not (or sent nothing), ranks were lost during it.  A step with
    fewer clients than ranks expects only as many ranks as it has clients.
    """
    ranks = acc.per_rank("measure", index)
    if not ranks:
        return "no data"
    if planned.duration is None or planned.iterations is not None:
        # a counted step's duration is a limit; the ranks' reports say whether they
        # sent every iteration (the sink's ``counted_status``)
        return "measured"
    slack = max(acc.interval or 0.0, 0.02 * planned.duration)
    complete = [
        rank
        for rank in ranks
        if acc.rank_window("measure", index, rank) >= planned.duration - slack
    ]
    if not complete:
        return "ended early"
    expected = workers if planned.clients is None else min(workers, planned.clients)
    if len(complete) < max(expected, len(ranks)):
        return f"lost ranks ({len(complete)} of {max(expected, len(ranks))} measured it all)"
    return "measured"


def _step_result(
    acc: RunAccumulator, index: int, planned: PlannedStepInfo, workers: int = 0
) -> StepResult:
    measured = bool(acc.per_rank("measure", index))  # a window alone is not a measurement
    window = acc.window("measure", index)
    merged = acc.merged("measure", index)
    warm = acc.merged("warmup", index)
    order = list(planned.queries)
    names = order + sorted(name for name in merged.ops if name not in order)
    return StepResult(
        index=index,
        name=planned.name,
        planned=StepPlan(
            queries=order,
            warmup=planned.warmup,
            duration=planned.duration,
            target_throughput=planned.target_throughput,
            clients=planned.clients,
            indexing=list(planned.indexing),
            warmup_iterations=planned.warmup_iterations,
            iterations=planned.iterations,
        ),
        status=step_status(acc, index, planned, workers) if measured else "no data",
        duration_s=round(window, 3),
        round=planned.round,
        position=planned.position,
        steadiness=steadiness_of(acc, "measure", index) if measured else None,
        warmup=WarmupCounts(
            requests=warm.requests, errors=sum(data.failed for data in warm.ops.values())
        ),
        queries={
            name: _op_result(acc, "measure", index, name, merged.ops[name], window)
            for name in names
            if name in merged.ops
        },
    )


#: How every req/s in results.json (format >= 3) is defined: the one definition.
THROUGHPUT_DEFINITION = REQUESTS_PER_S

UNITS = {
    "time": "ms",
    "rates": "per second",
    "error_rate": "fraction of requests",
    "gstd": "factor",
}


def build_results(header: Header, acc: RunAccumulator, final: Final | None = None) -> Results:
    """The ``results.json`` document from the stream header, the accumulator and the final
    record (``status``, ``reason``, ``wall``).

    Every planned step appears (``status`` ``"no data"`` when nothing was measured); the
    caller may change ``steps[k]`` (e.g. why a step was skipped) before writing.
    """
    steps = header.steps
    known = {("ingest", None), ("warmup", None)} | {
        (p, k) for p in ("warmup", "measure") for k in range(len(steps))
    }
    unplanned = {
        f"{phase}:{step}": acc.merged(phase, step).requests
        for phase, step in acc.parts()
        if (phase, step) not in known and acc.merged(phase, step).requests
    }
    return Results(
        format=RESULTS_FORMAT,
        run_id=header.run_id,
        started=header.started,
        ended=final.wall if final else None,
        status=final.status if final else None,
        reason=final.reason if final else None,
        units=dict(UNITS),
        ranks=header.bench.ranks,
        ingest=_ingest_result(acc),
        steps=[_step_result(acc, k, step, header.bench.ranks) for k, step in enumerate(steps)],
        unattributed_requests=unplanned,
        throughput_definition=THROUGHPUT_DEFINITION,
    )


# --------------------------------------------------------------- the authors' format

_APPROXIMATION_NOTE = (
    "reconstructed by esdash from histograms: one entry per request, latency = the middle "
    "of its HDR bucket (within 0.1 %), sorted by latency (send order is not kept), docs = "
    "the rank's documents spread evenly over its successful requests, failed requests "
    "appended as {'error_code': status} (-1 for timeouts and connection errors)"
)


def _authors_responses(rank: RankOpResult) -> list[dict[str, float | int]]:
    encoded = rank.histograms.service_time
    counts = hdr.decode(encoded) if encoded else hdr.empty()
    ok = rank.ok
    base, extra = divmod(rank.docs, ok) if ok else (0, 0)
    responses: list[dict[str, float | int]] = []
    for low, high, count in hdr.buckets(counts):
        latency = round((low + high) / 2, 7)
        for _ in range(count):
            docs = base + (1 if len(responses) < extra else 0)
            responses.append({"latency": latency, "docs": docs})
    for error_class, count in sorted(rank.errors.items()):
        code = int(error_class[5:]) if error_class.startswith("http_") else -1
        responses.extend({"error_code": code} for _ in range(count))
    return responses


def export_authors_format(
    results: Results,
    bodies: Mapping[int, JsonMapping] | None = None,
    think_time: Sequence[float] | None = None,
) -> list[JsonObject]:
    """The query results in the reference implementation's output layout (its §2b).

    One element per step: ``{"search_results": [{"query", "responses"}], "warmup_time_secs",
    "execution_time_secs", "sleep_between_requests_secs"}``, with ``responses[k]`` the list of
    rank ``k``'s responses, so the authors' analysis scripts run on esdash results.

    **Approximated**: the authors stored every response; esdash stores histograms.  Each
    response is rebuilt from the rank's *service-time* histogram (the authors timed send to
    response, Rally's service time): its latency is the middle of its bucket, responses are
    in latency order rather than send order, and the rank's documents are spread evenly
    over its successful requests.  Failed requests become ``{"error_code": <status>}``
    (``-1`` for timeouts and connection errors, as the authors' docstring intended).  Every
    step carries ``"esdash_export"`` saying so.  ``query`` is ``{"body": ...}`` when
    ``bodies[step][query]`` is given, else ``{"name": query}``.
    """
    ranks = results.ranks or 0
    out = []
    for step in results.steps:
        index = step.index
        search_results = []
        for name, data in step.queries.items():
            body = (bodies or {}).get(index, {}).get(name)
            per_rank = data.per_rank
            count = max([ranks] + [int(r) + 1 for r in per_rank])
            responses = [
                _authors_responses(per_rank[str(k)]) if str(k) in per_rank else []
                for k in range(count)
            ]
            query = {"body": body} if body is not None else {"name": name}
            search_results.append({"query": query, "responses": responses})
        out.append(
            {
                "search_results": search_results,
                "warmup_time_secs": step.planned.warmup,
                "execution_time_secs": step.planned.duration,
                "sleep_between_requests_secs": think_time[index] if think_time else 0.0,
                "esdash_export": {"approximate": True, "note": _APPROXIMATION_NOTE},
            }
        )
    return out
