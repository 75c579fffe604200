"""Per-rank recording of request outcomes: cheap on the hot path, drained once per interval.

The load generator calls :meth:`Recorder.record` once per successful request and
:meth:`Recorder.record_error` once per failed one.  Those calls do arithmetic on a few
attributes (``record`` a batch of requests at a time) and nothing else: no I/O, no plugin
calls, no histogram objects.  Every
``interval`` seconds the rank calls :meth:`Recorder.drain`, which turns what was counted into a
small JSON/pickle-friendly *payload* and starts a new interval.  Rank 0 merges payloads
(:mod:`esdash.stats.merge`); statistics come from :mod:`esdash.stats`.

Definitions (Rally's, so numbers compare one to one):

* **service time**: from actually sending a request to having its full response;
* **latency**: from when the request was *scheduled* to be sent (pacing) to having its
  response.  In a closed loop (no target throughput) both are the same;
* **requests**: completed requests, successful or failed; **errors**: the failed ones, by
  class (below); latency and service-time histograms describe *successful* requests only, so
  a flood of fast rejections cannot make an overloaded cluster look fast;
* **docs**: documents a request returned (search) or indexed (bulk); **bytes**: response
  bytes (search) or request bytes (bulk), as the load generator reports them.

Error classes (a small, closed taxonomy; anything else is a programming error)::

    timeout                 no response within the client's timeout
    connection              connect/reset/closed: no HTTP response at all
    http_<status>           a non-2xx response, e.g. http_429 (rejected), http_503
    other                   any other client-side failure (e.g. an unreadable response)
    partial                 a 2xx search answer from only some shards, or timed out
    bulk_item_<type>        documents a bulk request rejected, by Elasticsearch error type,
                            e.g. bulk_item_mapper_parsing_exception (counts documents, not
                            requests: see record_bulk_rejections)

Histograms are esdash's one HDR layout (:mod:`esdash.rundir.hdr`: 1 µs .. 1 hour at 3
significant digits).  The hot path computes the bucket index itself (``hdr.index_of``,
inlined) and counts into a dict; ``drain`` encodes the counts into the stored format.  Values
outside the range are clamped into it (and counted in ``clamped``), never dropped.  Alongside
each histogram the recorder keeps exact count, min, max, sum and the sums of ``ln(x)`` and
``ln(x)**2``: mean, geometric mean and geometric standard deviation are then exact instead of
bucket-approximated.

The payload is a :class:`esdash.rundir.records.RankPayload` (``PAYLOAD_VERSION`` 1; every
field is documented in ``docs/stream.md``): per operation, requests, docs, bytes, errors by
class, rejected documents, the two series (latency, service time) with their encoded
histograms and exact aggregates, per-node counters and the newest error messages.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from esdash.plugin.redaction import redact_values
from esdash.rundir import hdr
from esdash.rundir.records import (
    ERROR_CLASS_RE,
    ErrorSample,
    ErrorTime,
    NodePayload,
    OpPayload,
    RankPayload,
    SeriesPayload,
)
from esdash.stats.merge import LAST_ERRORS

#: Successful requests :meth:`Recorder.record` keeps before it counts them (see there).
RECORD_BATCH = 1024

#: How long each kept error message may be (how many are kept: :data:`LAST_ERRORS`).
MESSAGE_LIMIT = 300

_REQUEST_ERROR_RE = re.compile(r"^(timeout|connection|other|partial|open|http_[1-5][0-9][0-9])$")
_NOT_NAME = re.compile(r"[^a-z0-9_]+")

# The bucket index arithmetic of esdash.rundir.hdr.index_of, inlined in _count below: module
# constants are as cheap to read there as locals.
_MASK = hdr.SUB_BUCKET_MASK
_HALF_MAG = hdr.HALF_COUNT_MAGNITUDE
_HALF = hdr.HALF_COUNT
_SHIFT = hdr.SHIFT
_LOWEST_S = hdr.LOWEST_S
_HIGHEST_S = hdr.HIGHEST_S


def error_class_of_status(status: int) -> str:
    """The error class of a non-2xx HTTP status: ``http_429``, ``http_503``..."""
    return f"http_{int(status)}"


def bulk_item_class(reason: str) -> str:
    """The error class of documents a bulk request rejected.

    ``reason`` is Elasticsearch's error ``type`` (``mapper_parsing_exception`` becomes
    ``bulk_item_mapper_parsing_exception``).  A request-level class (``http_429``,
    ``timeout``...) stays as it is: all documents of a bulk request that failed as a whole
    were rejected for that reason.
    """
    if ERROR_CLASS_RE.match(reason):
        return reason
    name = _NOT_NAME.sub("_", reason.lower()).strip("_") or "unknown"
    return f"bulk_item_{name}"


def error_family(error_class: str) -> str:
    """A coarse group for display: ``http_4xx``, ``http_5xx``, ``bulk_item`` or the class."""
    if error_class.startswith("http_") and len(error_class) == 8:
        return f"http_{error_class[5]}xx"
    if error_class.startswith("bulk_item_"):
        return "bulk_item"
    return error_class


class _Series:
    """Counts of one timed quantity (latency or service time) in one interval."""

    __slots__ = ("counts", "count", "min", "max", "sum", "ln_sum", "ln_sq_sum", "clamped")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.min = math.inf
        self.max = 0.0
        self.sum = 0.0
        self.ln_sum = 0.0
        self.ln_sq_sum = 0.0
        self.clamped = 0

    def payload(self, encoder: hdr.Encoder) -> SeriesPayload:
        """This series' payload, its histogram encoded with ``encoder`` (reused per drain)."""
        return SeriesPayload(
            hdr=encoder.encode(self.counts),
            count=self.count,
            min=self.min if self.count else None,
            max=self.max if self.count else None,
            sum=self.sum,
            ln_sum=self.ln_sum,
            ln_sq_sum=self.ln_sq_sum,
            clamped=self.clamped,
        )


class _Op:
    """Everything counted for one operation in one interval."""

    __slots__ = (
        "requests",
        "docs",
        "nbytes",
        "latency",
        "service_time",
        "nodes",
        "errors",
        "doc_errors",
        "error_time_count",
        "error_time_sum",
        "error_time_max",
        "last_errors",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.docs = 0
        self.nbytes = 0
        self.latency = _Series()
        self.service_time = _Series()
        # node -> [requests, docs, sum ln(latency), sum ln(latency)^2, errors, doc_errors]
        self.nodes: dict[str, list[Any]] = {}
        self.errors: dict[str, int] = {}
        self.doc_errors: dict[str, int] = {}
        self.error_time_count = 0
        self.error_time_sum = 0.0
        self.error_time_max: float | None = None
        self.last_errors: dict[str, deque[ErrorSample]] = {}

    def node(self, node: str) -> list[Any]:
        entry = self.nodes.get(node)
        if entry is None:
            entry = self.nodes[node] = [0, 0, 0.0, 0.0, {}, {}]
        return entry

    def payload(self, encoder: hdr.Encoder) -> OpPayload:
        return OpPayload(
            requests=self.requests,
            docs=self.docs,
            bytes=self.nbytes,
            errors=dict(self.errors),
            doc_errors=dict(self.doc_errors),
            error_time=ErrorTime(
                count=self.error_time_count, sum=self.error_time_sum, max=self.error_time_max
            ),
            latency=self.latency.payload(encoder),
            service_time=self.service_time.payload(encoder),
            nodes={
                name: NodePayload(
                    requests=entry[0],
                    docs=entry[1],
                    ln_sum=entry[2],
                    ln_sq_sum=entry[3],
                    errors=dict(entry[4]),
                    doc_errors=dict(entry[5]),
                )
                for name, entry in self.nodes.items()
            },
            last_errors={cls: list(items) for cls, items in self.last_errors.items()},
        )


class Recorder:
    """One rank's counts for the current interval; :meth:`drain` hands them over.

    Not thread-safe: one recorder per thread (or per asyncio loop) that sends requests.
    ``clock`` (monotonic) measures each payload's ``elapsed``; ``wall`` timestamps error
    messages.  Both are parameters so tests can drive them.
    """

    def __init__(
        self,
        rank: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.rank = rank
        self._clock = clock
        self._wall = wall
        self._ops: dict[str, _Op] = {}
        self._batch: list[tuple[str, str, float, float, int, int]] = []
        self._started = clock()
        #: Every drain encodes with this one (allocating a histogram costs more than encoding
        #: a typical interval).
        self._encoder = hdr.Encoder()

    def _op(self, op: str) -> _Op:
        state = self._ops.get(op)
        if state is None:
            state = self._ops[op] = _Op()
        return state

    def record(
        self,
        op: str,
        node: str,
        latency: float,
        service_time: float,
        docs: int = 0,
        nbytes: int = 0,
    ) -> None:
        """Count one successful request (times in seconds).

        This is the hot path, so it only appends the request to a batch.  The batch is
        counted when :data:`RECORD_BATCH` requests have come, before a failed request or
        rejected documents are counted, and by :meth:`drain`.  Between two requests the load
        generator waits for the server, whose work evicts the recorder's state from the CPU
        caches: counting each request at once cost about 7 us of CPU on a busy 2-core node,
        against about 1 us per request counted in a batch (``bench/driver.py``).  Requests
        are counted in the order they came, so every sum is the same to the last bit.
        """
        batch = self._batch
        batch.append((op, node, latency, service_time, docs, nbytes))
        if len(batch) >= RECORD_BATCH:
            self._count_batch()

    def _count_batch(self) -> None:
        """Count the batched requests, in the order they came."""
        batch = self._batch
        if batch:
            count = self._count
            for request in batch:
                count(*request)
            batch.clear()

    def _count(
        self,
        op: str,
        node: str,
        latency: float,
        service_time: float,
        docs: int,
        nbytes: int,
    ) -> None:
        """Count one successful request: written out by hand (the bucket index of both
        series inlined, no helper calls) because it runs once per request on every rank."""
        state = self._ops.get(op)
        if state is None:
            state = self._op(op)
        state.requests += 1
        state.docs += docs
        state.nbytes += nbytes

        series = state.latency
        if latency < _LOWEST_S:
            latency = _LOWEST_S
            series.clamped += 1
        elif latency > _HIGHEST_S:
            latency = _HIGHEST_S
            series.clamped += 1
        series.count += 1
        if latency < series.min:
            series.min = latency
        if latency > series.max:
            series.max = latency
        series.sum += latency
        ln_latency = math.log(latency)
        series.ln_sum += ln_latency
        series.ln_sq_sum += ln_latency * ln_latency
        us = int(latency * 1e6)
        bucket = (us | _MASK).bit_length() - _SHIFT
        index = ((bucket + 1) << _HALF_MAG) + (us >> bucket) - _HALF
        counts = series.counts
        counts[index] = counts.get(index, 0) + 1

        series = state.service_time
        if service_time < _LOWEST_S:
            service_time = _LOWEST_S
            series.clamped += 1
        elif service_time > _HIGHEST_S:
            service_time = _HIGHEST_S
            series.clamped += 1
        series.count += 1
        if service_time < series.min:
            series.min = service_time
        if service_time > series.max:
            series.max = service_time
        series.sum += service_time
        ln = math.log(service_time)
        series.ln_sum += ln
        series.ln_sq_sum += ln * ln
        us = int(service_time * 1e6)
        bucket = (us | _MASK).bit_length() - _SHIFT
        index = ((bucket + 1) << _HALF_MAG) + (us >> bucket) - _HALF
        counts = series.counts
        counts[index] = counts.get(index, 0) + 1

        entry = state.nodes.get(node)
        if entry is None:
            entry = state.node(node)
        entry[0] += 1
        entry[1] += docs
        entry[2] += ln_latency
        entry[3] += ln_latency * ln_latency

    def record_error(
        self,
        op: str,
        node: str,
        error_class: str,
        status: int | None,
        message: str,
        latency: float | None = None,
    ) -> None:
        """Count one failed request.

        ``error_class`` is one of ``timeout``, ``connection``, ``other``, ``partial`` (a 2xx
        answer from only some shards), ``open`` (no answer yet when its step ended; the
        latency is how long it had been open) or ``http_<status>``
        (see the module docstring); anything else raises :class:`ValueError`, because a
        misspelt class would silently split one kind of error into two.  ``latency`` (seconds
        until the failure was known), when given, is summed separately: it never enters the
        histograms of successful requests.
        """
        if not _REQUEST_ERROR_RE.match(error_class):
            raise ValueError(
                f"unknown request error class {error_class!r}: use timeout, connection, other, "
                f"partial, open or http_<status>"
            )
        self._count_batch()  # keeps everything in the order it came
        state = self._op(op)
        state.requests += 1
        state.errors[error_class] = state.errors.get(error_class, 0) + 1
        entry = state.node(node)
        entry[0] += 1
        entry[4][error_class] = entry[4].get(error_class, 0) + 1
        if latency is not None:
            state.error_time_count += 1
            state.error_time_sum += latency
            if state.error_time_max is None or latency > state.error_time_max:
                state.error_time_max = latency
        self._remember(state, error_class, status, message, node)

    def record_bulk_rejections(
        self,
        op: str,
        node: str,
        rejections: Mapping[str, int],
        messages: Mapping[str, str] | None = None,
    ) -> None:
        """Count documents a bulk request did not index, by reason.

        ``rejections`` maps Elasticsearch's error type of the failed items (or a request
        error class, when the whole request failed) to a number of documents; see
        :func:`bulk_item_class` for the names they are counted under.  These are document
        counts: the request itself is counted by :meth:`record` or :meth:`record_error`.
        ``messages`` may give one example reason per type for the error list.
        """
        self._count_batch()
        state = self._op(op)
        entry = state.node(node)
        for reason, count in rejections.items():
            if count <= 0:
                continue
            name = bulk_item_class(reason)
            state.doc_errors[name] = state.doc_errors.get(name, 0) + count
            entry[5][name] = entry[5].get(name, 0) + count
            if messages and reason in messages:
                self._remember(state, name, None, messages[reason], node)

    def _remember(
        self, state: _Op, error_class: str, status: int | None, message: str, node: str
    ) -> None:
        recent = state.last_errors.get(error_class)
        if recent is None:
            recent = state.last_errors[error_class] = deque(maxlen=LAST_ERRORS)
        # Every kept message passes here: no document value an engine quotes is stored.
        text = redact_values(str(message))[:MESSAGE_LIMIT]
        recent.append(ErrorSample(status=status, message=text, node=node, wall=self._wall()))

    def drain(self) -> RankPayload:
        """The payload of the interval since the last drain; the next interval starts now.

        Operations without any request in the interval are left out.  The cost is counting
        the requests still batched (about 1 us each) and one histogram encoding per series
        (a fraction of a millisecond), once per interval.
        """
        now = self._clock()
        self._count_batch()
        ops, self._ops = self._ops, {}
        elapsed, self._started = now - self._started, now
        return RankPayload(
            rank=self.rank,
            elapsed=elapsed,
            ops={name: state.payload(self._encoder) for name, state in ops.items()},
        )

    @property
    def pending(self) -> int:
        """Requests counted since the last drain (successful and failed)."""
        return len(self._batch) + sum(state.requests for state in self._ops.values())


class SharedRecorder(Recorder):
    """A :class:`Recorder` that several client threads of one rank record into at once.

    A step with more clients than bench ranks runs several clients in one rank as
    concurrent connections, each in its own thread; they count into this one recorder so
    the rank still sends one payload per interval.  A lock serialises the counting (an
    uncontended lock costs a fraction of the microsecond a request costs to count).
    """

    def __init__(
        self,
        rank: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(rank, clock, wall)
        self._lock = threading.Lock()

    def record(
        self,
        op: str,
        node: str,
        latency: float,
        service_time: float,
        docs: int = 0,
        nbytes: int = 0,
    ) -> None:
        with self._lock:
            super().record(op, node, latency, service_time, docs, nbytes)

    def record_error(
        self,
        op: str,
        node: str,
        error_class: str,
        status: int | None,
        message: str,
        latency: float | None = None,
    ) -> None:
        with self._lock:
            super().record_error(op, node, error_class, status, message, latency)

    def record_bulk_rejections(
        self,
        op: str,
        node: str,
        rejections: Mapping[str, int],
        messages: Mapping[str, str] | None = None,
    ) -> None:
        with self._lock:
            super().record_bulk_rejections(op, node, rejections, messages)

    def drain(self) -> RankPayload:
        with self._lock:
            return super().drain()

    @property
    def pending(self) -> int:
        with self._lock:
            return super().pending
