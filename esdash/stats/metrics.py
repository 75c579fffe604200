"""Every figure a run reports, defined once: what it means and the one function that gives it.

A run's numbers show on many surfaces: the live lines of ``esdash run``, the end-of-run
summary, the dashboard, the report (Markdown, HTML, CSV, JSON), ``esdash compare`` and
``rally.json``.  They used to compute their figures each in its own way, and one ingest
read 1,658 docs/s on the live line, 227.2 in the summary and 179.7 on the dashboard.  Now
every surface takes its figures from here and only formats them; what a figure means is
written once, below, and the README's "Metrics" section lists each with where it shows.

**Which stretch of time a figure covers** is part of its definition, and every surface
says which it shows:

* :data:`RUN` -- the run's figure, from ``results.json``, which rank 0 writes once at the
  end from every rank's own account (:func:`run_op`, :func:`run_ingest`).  This is the
  figure of the summary, the report, ``compare`` and ``rally.json``, and the dashboard's
  once a step (or the ingest) is over and the results are there;
* :data:`SO_FAR` -- the same quantity from ``stream.jsonl`` while ``results.json`` is not
  written yet (a run still going, or a replay stopped inside a step): the stream has one
  merged record per interval, not each rank's own time, so its seconds are the lengths of
  the part's interval records (:class:`StreamSeconds`); close to the run's figure, and
  replaced by it once the results exist;
* :data:`NOW` -- one interval record (a live line of ``esdash run``) or the dashboard's
  sliding window: how fast it goes now, not how fast it went.

**Documents**: a bulk request's documents are documents *indexed* (``docs/s``); a search's
are the documents its answers returned, its *hits* (``hits/s``), never "docs/s".

**Rally** defines throughput otherwise (:func:`rally_throughput`): ``rally.json`` carries
Rally's figure under Rally's name with a ``definition`` field naming it, and esdash's own
figure under ``esdash``.  Sources, read for this module: Rally's summary-report
documentation (``docs/summary_report.rst``: throughput, latency, service time, error rate),
its ``esrally/driver/driver.py`` (``ThroughputCalculator``: a throughput sample is every
operation completed since the task began, warm-up included, divided by the seconds since
it began, one sample per 1-second bucket; a failed request weighs 0), ``esrally/metrics.py``
(``GlobalStatsCalculator.summary_stats``: min, mean, median and max of the measurement
samples; ``single_latency`` and ``percentile_value``: percentiles of the raw samples,
interpolated between neighbours, shown by sample size; ``get_error_rate``: failed / all
``service_time`` samples of the measurement), and elastic/rally pull request #2126, which
describes the samples as a running average and proposes per-window ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from esdash.rundir.records import (
    RESULTS_FORMAT,
    Header,
    IngestResult,
    Interval,
    LatencyStats,
    OpPayload,
    OpResult,
    Results,
    StepResult,
)
from esdash.stats import (
    PERCENTILES,
    Samples,
    error_rate,
    latency_stats,
    summarize,
    throughput,
)
from esdash.stats.merge import LENIENT, OpData

#: The run's figure (``results.json``).
RUN = "run"
#: The same figure from the stream, while the results are not written.
SO_FAR = "so far"
#: One interval record, or the dashboard's sliding window.
NOW = "now"

# --------------------------------------------------------------------- definitions
# One sentence each; the summary, the report's notes, rally.json and the README say these.

#: req/s of results format >= 3 (``results.json`` carries it as ``throughput_definition``).
REQUESTS_PER_S = (
    "successful requests / seconds actually measured (the longest any rank measured the "
    "step; idle time between steps excluded)"
)
#: req/s of results written before format 3.
REQUESTS_PER_S_PLANNED = (
    "successful requests / the planned step duration (results format {format}, written "
    "before esdash measured the seconds)"
)
#: req/s of an imported file of the authors.
REQUESTS_PER_S_IMPORTED = "successful requests / the step's execution time in the imported file"
HITS_PER_S = "documents the searches returned (their hits) / the seconds of req/s"
DOCS_PER_S = "documents indexed / the seconds of req/s"
INGEST_DOCS_PER_S = "documents indexed / the ingest's time (from its start to the last rank's end)"
INTERVAL_STD = "the standard deviation of the step's per-interval req/s (full intervals only)"
LATENCY = (
    "latency: from a request's scheduled send to its complete response, successful "
    "requests only (Rally's definition); in a closed loop the same as service time"
)
SERVICE_TIME = "service time: from a request's actual send to its complete response"
PERCENTILE = (
    "percentiles (p50, p90, p99, p99.9) from the merged HDR histograms (3 significant "
    "digits), shown only when the sample count supports them (p99 needs 100 samples, "
    "p99.9 1000); min, max, mean, gmean and gstd (a factor) exact"
)
ERROR_RATE = (
    "failed / all requests (a partial answer and a request still open at the step's end are failed)"
)
STREAM_SECONDS = (
    "the lengths of the part's interval records in the stream, from its first record with "
    "a request (once the part is over: to its last such record)"
)
NOW_DEFINITION = "the same, over one interval record (live lines) or the last seconds shown"

#: Rally's own definitions, for ``rally.json`` (see the module docstring for the sources).
RALLY_THROUGHPUT = (
    "rally: min/mean/median/max of Rally's throughput samples, each the operations "
    "completed since the task began (warm-up included; documents for bulk, a failed "
    "request weighs 0) / the seconds since it began, measurement samples only; computed "
    "by esdash from the stream's interval records (one sample at the end of each measured "
    "interval, where Rally takes one per second of completions)"
)
#: Short names of the definitions above, for a ``definition`` field beside each figure.
RALLY_THROUGHPUT_NAME = "rally: running averages since the task's start, warm-up included"
RALLY_PERCENTILES_NAME = "esdash: percentiles of the merged HDR histogram"
RALLY_LATENCY = (
    "esdash: percentiles of the merged HDR histogram (3 significant digits; Rally "
    "interpolates between raw samples), 100_0 = the exact maximum, mean exact; latency "
    "from the scheduled send as in Rally"
)
RALLY_SERVICE_TIME = (
    "esdash: percentiles of the merged HDR histogram (3 significant digits; Rally "
    "interpolates between raw samples), 100_0 = the exact maximum, mean exact; service "
    "time from the actual send as in Rally"
)
RALLY_ERROR_RATE = (
    "rally and esdash: failed / all requests of the measurement (esdash also counts a "
    "request still open at the step's end as failed)"
)
RALLY_DURATION = (
    "rally: milliseconds from the task's start (warm-up included) to its last measured "
    "interval, from the stream; without a stream, esdash's seconds measured x 1000"
)


def throughput_definition(results: Results) -> str:
    """How ``results``' req/s is defined: measured seconds (format 3), the planned
    duration (older files), or an imported file's execution time."""
    if results.imported_from is not None:
        return REQUESTS_PER_S_IMPORTED
    if results.format >= RESULTS_FORMAT:
        return results.throughput_definition or REQUESTS_PER_S
    return REQUESTS_PER_S_PLANNED.format(format=results.format)


# ----------------------------------------------------------------------- figures


@dataclass(frozen=True)
class OpFigures:
    """The figures of one operation: a query of a step, a bulk task, the ingest's bulk.

    ``kind`` is :data:`RUN`, :data:`SO_FAR` or :data:`NOW`; ``indexing`` says what its
    documents are (indexed: docs/s; returned by a search: hits/s).  Latency and service
    time are ``results.json``'s record, in milliseconds, whichever the source.
    """

    kind: str
    indexing: bool
    requests: int
    failed: int
    docs: int
    requests_per_s: float | None
    documents_per_s: float | None
    latency: LatencyStats
    service_time: LatencyStats = field(default_factory=LatencyStats)
    #: Seconds the rates divide by (None where results.json does not keep them per op).
    seconds: float | None = None
    #: Spread of the per-interval req/s (run figures of a measured step).
    interval_std: float | None = None
    interval_n: int = 0

    @property
    def ok(self) -> int:
        return self.requests - self.failed

    @property
    def error_rate(self) -> float | None:
        return error_rate(self.failed, self.requests)

    @property
    def unit(self) -> str:
        """``docs/s`` (documents indexed) or ``hits/s`` (documents a search returned)."""
        return "docs/s" if self.indexing else "hits/s"

    @property
    def docs_per_s(self) -> float | None:
        """Documents indexed per second (None for a search: its documents are hits)."""
        return self.documents_per_s if self.indexing else None

    @property
    def hits_per_s(self) -> float | None:
        """Documents a search returned per second (None for a bulk operation)."""
        return None if self.indexing else self.documents_per_s

    def latency_s(self, name: str) -> float | None:
        """A latency statistic in seconds (``p99``, ``gmean``, ``max`` ...; gstd as is)."""
        value = self.latency.value(name)
        if value is None or name == "gstd":
            return value
        return value / 1000.0


def run_op(op: OpResult, indexing: bool = False) -> OpFigures:
    """The run's figures of one operation of ``results.json`` (a query, a bulk task)."""
    intervals = op.throughput.intervals
    return OpFigures(
        kind=RUN,
        indexing=indexing,
        requests=op.requests,
        failed=op.failed,
        docs=op.docs,
        requests_per_s=op.throughput.requests_per_s,
        documents_per_s=op.throughput.docs_per_s,
        latency=op.latency,
        service_time=op.service_time,
        interval_std=intervals.std,
        interval_n=intervals.n,
    )


def step_ops(step: StepResult) -> dict[str, OpFigures]:
    """Every operation of a step, in its order; a bulk task indexing during it counts docs."""
    indexing = set(step.planned.indexing)
    return {name: run_op(op, name in indexing) for name, op in step.queries.items()}


def step_op(step: StepResult, name: str) -> OpFigures | None:
    op = step.queries.get(name)
    return None if op is None else run_op(op, name in step.planned.indexing)


def ingest_ops(ingest: IngestResult) -> dict[str, OpFigures]:
    """The ingest's bulk operations (their documents are indexed ones)."""
    return {name: run_op(op, indexing=True) for name, op in ingest.ops.items()}


@dataclass(frozen=True)
class IngestFigures:
    """The ingest as a whole: documents indexed, its time and its rate."""

    kind: str
    docs: int
    seconds: float | None
    docs_per_s: float | None
    rejected: int = 0


def run_ingest(ingest: IngestResult) -> IngestFigures:
    """The run's ingest figures (``results.json``): documents / the ingest's time."""
    docs = ingest.docs or 0
    rate = ingest.docs_per_s
    if rate is None and ingest.duration_s:
        rate = throughput(docs, ingest.duration_s)
    return IngestFigures(RUN, docs, ingest.duration_s, rate, sum(ingest.rejected_docs.values()))


# ----------------------------------------------------------------- from the stream


def _stats(samples: Samples | None, percentiles: Sequence[float]) -> LatencyStats:
    if samples is None or samples.count <= 0:
        return LatencyStats()
    return latency_stats(summarize(samples, percentiles), scale=1000.0, digits=4)


def from_samples(
    kind: str,
    *,
    requests: int,
    failed: int,
    docs: int,
    seconds: float | None,
    latency: Samples | None,
    service_time: Samples | None = None,
    indexing: bool = False,
    percentiles: Sequence[float] = PERCENTILES,
) -> OpFigures:
    """Figures of counts and samples over ``seconds`` (a stream record, a window, a part).

    The rates are :func:`esdash.stats.throughput` of the successful requests and of the
    documents; the statistics :func:`esdash.stats.summarize`, in ms as ``results.json``
    keeps them (same rounding).
    """
    ok = requests - failed
    window = seconds if seconds is not None and seconds > 0 else None
    return OpFigures(
        kind=kind,
        indexing=indexing,
        requests=requests,
        failed=failed,
        docs=docs,
        requests_per_s=None if window is None else throughput(ok, window),
        documents_per_s=None if window is None else throughput(docs, window),
        latency=_stats(latency, percentiles),
        service_time=_stats(service_time, percentiles),
        seconds=seconds,
    )


def op_figures(
    data: OpData,
    seconds: float | None,
    *,
    kind: str = NOW,
    indexing: bool = False,
    percentiles: Sequence[float] = PERCENTILES,
    service_time: bool = True,
) -> OpFigures:
    """Figures of one operation merged from stream records (:mod:`esdash.stats.merge`) over
    ``seconds``: one record, a window, a part so far.  ``service_time=False`` leaves its
    statistics out (a reader that skipped decoding that series)."""
    return from_samples(
        kind,
        requests=data.requests,
        failed=data.failed,
        docs=data.docs,
        seconds=seconds,
        latency=data.latency,
        service_time=data.service_time if service_time else None,
        indexing=indexing,
        percentiles=percentiles,
    )


def payload_figures(data: OpPayload, seconds: float | None, *, indexing: bool = False) -> OpFigures:
    """Figures :data:`NOW` of one operation of one stream record: a record is one interval
    (a window or a part so far merges records first: :func:`op_figures`).  A histogram
    damaged past its pattern gives no percentiles (:data:`esdash.stats.merge.LENIENT`)."""
    merged = OpData()
    merged.add_payload(data, LENIENT)
    return op_figures(merged, seconds, indexing=indexing)


def indexes_documents(header: Header | None, phase: str, step: int | None, name: str) -> bool:
    """Whether ``name``'s documents are indexed ones (docs/s) rather than hits (hits/s):
    every operation of the ingest, and a bulk task indexing during a query step."""
    if phase == "ingest":
        return True
    if header is None or step is None or not 0 <= step < len(header.steps):
        return False
    return name in header.steps[step].indexing


def interval_figures(record: Interval, header: Header | None = None) -> dict[str, OpFigures]:
    """Every operation of one interval record, ``now``: counts over the record's length."""
    return {
        name: payload_figures(
            data,
            record.elapsed,
            indexing=indexes_documents(header, record.phase, record.step, name),
        )
        for name, data in sorted(record.ops.items())
    }


@dataclass
class StreamSeconds:
    """The seconds of a part of the run (ingest, a step's warm-up or measurement) as the
    stream tells them: the lengths of its interval records from the first that carried a
    request; once the part is over, to the last that did.

    The stream merges the ranks of one interval into one record whose length is the
    longest rank's, so for several ranks this is a little more than the run's window
    (each rank's own time, in ``results.json``); a record before any request (ranks still
    starting) or after the last (ranks done, waiting) is no measurement.
    """

    total: float = 0.0
    leading: float = 0.0
    trailing: float = 0.0
    started: bool = False

    def add(self, elapsed: float, requests: int) -> None:
        self.total += elapsed
        if requests > 0:
            self.started = True
            self.trailing = 0.0
        elif not self.started:
            self.leading += elapsed
        else:
            self.trailing += elapsed

    def seconds(self, ended: bool) -> float:
        return max(0.0, self.total - self.leading - (self.trailing if ended else 0.0))


def stream_rate(records: Iterable[tuple[float, int]]) -> float | None:
    """req/s of an ended part from its stream records, given as (length, successful
    requests) each: the figure :data:`SO_FAR` has once the part is over."""
    seconds = StreamSeconds()
    ok = 0
    for elapsed, count in records:
        seconds.add(elapsed, count)
        ok += count
    window = seconds.seconds(ended=True)
    return throughput(ok, window) if window > 0 else None


# --------------------------------------------------------------------------- Rally


@dataclass(frozen=True)
class RallyThroughput:
    """Rally's throughput of one task from a stream: its samples and their statistics."""

    samples: tuple[float, ...]
    #: Seconds from the task's start to its last measured interval (Rally's ``duration``).
    seconds: float | None

    def summary(self) -> dict[str, float | None]:
        """``min``, ``mean``, ``median``, ``max`` as Rally's summary has them."""
        if not self.samples:
            return {"min": None, "mean": None, "median": None, "max": None}
        return {
            "min": min(self.samples),
            "mean": statistics.fmean(self.samples),
            "median": statistics.median(self.samples),
            "max": max(self.samples),
        }


def rally_throughput(
    records: Iterable[Interval], step: int | None, op: str, indexing: bool = False
) -> RallyThroughput:
    """Rally's throughput samples of ``op`` in ``step`` (None: the ingest) from a stream.

    As Rally's ``ThroughputCalculator`` counts them: the task begins with its first
    request (here: the first record of its warm-up or measurement that carried one); each
    sample is everything completed since then -- successful requests, or documents
    indexed for a bulk operation -- over the seconds since then, warm-up included; only
    the samples of the measurement count, one at the end of each of its records with a
    completed request.
    """
    count = 0
    seconds = 0.0
    started = False
    samples: list[float] = []
    last: float | None = None
    for record in records:
        if step is None:
            if record.phase != "ingest":
                continue
        elif record.step != step or record.phase not in ("warmup", "measure"):
            continue
        data: OpPayload | None = record.ops.get(op)
        requests = data.requests if data is not None else 0
        if not started and not requests:
            continue
        started = True
        seconds += record.elapsed
        if data is None:
            continue
        count += data.docs if indexing else data.requests - sum(data.errors.values())
        if requests and record.phase != "warmup" and seconds > 0:
            samples.append(count / seconds)
            last = seconds
    return RallyThroughput(tuple(samples), last)
