"""The one accumulator of recorded payloads: across ranks, across intervals, across runs.

A :class:`Merged` holds decoded histograms and summed counters.  It accepts payloads
(:meth:`Merged.add`), other ``Merged`` objects (:meth:`Merged.merge`) and turns back into a
payload of the same shape (:meth:`Merged.to_payload`), so a merge of merges is just another
merge: rank 0 merges the ranks of one interval for the stream, the run accumulator merges
intervals per step and per rank for the results, and every reader (the dashboard's model,
a run's intervals, the live lines, the authors' files) folds stream records the same way.
Producer and readers sharing one accumulator is what keeps their numbers equal; it lives
here, below both, so that no reader imports the ranks' code.

Merging is exact for everything but the histograms' bucket resolution: counters and the
``ln`` sums add, min and max take the extremes, histogram counts (:mod:`esdash.rundir.hdr`)
add bucket by bucket.  Decoding a histogram costs a fraction of a millisecond, so empty ones
are never decoded, and a reader that needs no percentiles of a series skips it
(:data:`SKIP`); files a reader did not write may hold a histogram damaged past its pattern,
which :data:`LENIENT` counts as no histogram where the ranks' own payloads (:data:`STRICT`)
raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from esdash.rundir import hdr
from esdash.rundir.records import (
    ErrorSample,
    ErrorTime,
    NodePayload,
    OpPayload,
    RankPayload,
    SeriesPayload,
)

#: How many recent messages are kept per error class (by the recorder, and in every merge).
LAST_ERRORS = 3

#: How a payload's histograms are read (see the module's docstring).
Decoding = Literal["strict", "lenient", "skip"]
#: Decode, and raise ``ValueError`` on a damaged histogram (the ranks' own payloads).
STRICT: Decoding = "strict"
#: Decode, and count a damaged histogram as none (its counters and sums still add).
LENIENT: Decoding = "lenient"
#: Do not decode: counters and sums only, no percentiles (nor a faithful :meth:`to_payload`).
SKIP: Decoding = "skip"


def _add_counts(into: dict[str, int], other: Mapping[str, int]) -> None:
    for key, value in other.items():
        into[key] = into.get(key, 0) + value


class SeriesData:
    """One timed quantity: its HDR counts plus exact count, extremes and sums.

    Times (``min``, ``max``, ``sum``) are in seconds.  Satisfies :class:`esdash.stats.Samples`.
    """

    __slots__ = ("counts", "count", "min", "max", "sum", "ln_sum", "ln_sq_sum", "clamped")

    def __init__(self) -> None:
        self.counts: hdr.Counts = hdr.empty()
        self.count = 0
        self.min: float | None = None
        self.max: float | None = None
        self.sum = 0.0
        self.ln_sum = 0.0
        self.ln_sq_sum = 0.0
        self.clamped = 0

    def _add_scalars(self, other: SeriesPayload | SeriesData) -> None:
        """Everything but the histogram: a payload's and a merged series' add alike."""
        self.count += other.count
        low, high = other.min, other.max
        if low is not None:
            self.min = low if self.min is None else min(self.min, low)
        if high is not None:
            self.max = high if self.max is None else max(self.max, high)
        self.sum += other.sum
        self.ln_sum += other.ln_sum
        self.ln_sq_sum += other.ln_sq_sum
        self.clamped += other.clamped

    def add_payload(self, data: SeriesPayload, decoding: Decoding = STRICT) -> None:
        if data.count and decoding != SKIP:
            try:
                decoded = hdr.decode(data.hdr)  # a new array: ours to add into later
            except ValueError:
                if decoding == STRICT:
                    raise
            else:
                self.counts = hdr.add(self.counts, decoded) if self.counts.size else decoded
        self._add_scalars(data)

    def merge(self, other: SeriesData) -> None:
        if other.counts.size:  # none without samples, nor where their decoding was skipped
            self.counts = hdr.add(self.counts, other.counts)
        self._add_scalars(other)

    def to_payload(self) -> SeriesPayload:
        return SeriesPayload(
            hdr=hdr.encode(self.counts),
            count=self.count,
            min=self.min,
            max=self.max,
            sum=self.sum,
            ln_sum=self.ln_sum,
            ln_sq_sum=self.ln_sq_sum,
            clamped=self.clamped,
        )


class NodeData:
    """Counters of one operation against one node; ``ln`` sums of latency give its gmean."""

    __slots__ = ("requests", "docs", "ln_sum", "ln_sq_sum", "errors", "doc_errors")

    def __init__(self) -> None:
        self.requests = 0
        self.docs = 0
        self.ln_sum = 0.0
        self.ln_sq_sum = 0.0
        self.errors: dict[str, int] = {}
        self.doc_errors: dict[str, int] = {}

    @property
    def ok(self) -> int:
        return self.requests - sum(self.errors.values())

    def add(self, data: NodePayload | NodeData) -> None:
        """Add a payload's counters, or another node's (the same fields)."""
        self.requests += data.requests
        self.docs += data.docs
        self.ln_sum += data.ln_sum
        self.ln_sq_sum += data.ln_sq_sum
        _add_counts(self.errors, data.errors)
        _add_counts(self.doc_errors, data.doc_errors)

    def to_payload(self) -> NodePayload:
        return NodePayload(
            requests=self.requests,
            docs=self.docs,
            ln_sum=self.ln_sum,
            ln_sq_sum=self.ln_sq_sum,
            errors=dict(self.errors),
            doc_errors=dict(self.doc_errors),
        )


class OpData:
    """Everything merged for one operation."""

    __slots__ = (
        "requests",
        "docs",
        "bytes",
        "errors",
        "doc_errors",
        "error_time_count",
        "error_time_sum",
        "error_time_max",
        "latency",
        "service_time",
        "nodes",
        "last_errors",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.docs = 0
        self.bytes = 0
        self.errors: dict[str, int] = {}
        self.doc_errors: dict[str, int] = {}
        self.error_time_count = 0
        self.error_time_sum = 0.0
        self.error_time_max: float | None = None
        self.latency = SeriesData()
        self.service_time = SeriesData()
        self.nodes: dict[str, NodeData] = {}
        self.last_errors: dict[str, list[ErrorSample]] = {}

    @property
    def failed(self) -> int:
        """Failed requests (all classes)."""
        return sum(self.errors.values())

    @property
    def ok(self) -> int:
        """Successful requests: what the histograms and the throughput count."""
        return self.requests - self.failed

    def _keep_errors(self, classes: Mapping[str, Iterable[ErrorSample]]) -> None:
        for error_class, items in classes.items():
            kept = self.last_errors.setdefault(error_class, [])
            kept.extend(items)
            kept.sort(key=lambda item: item.wall or 0.0)
            del kept[:-LAST_ERRORS]

    def _longest(self, seconds: float | None) -> None:
        if seconds is not None and (self.error_time_max is None or seconds > self.error_time_max):
            self.error_time_max = seconds

    def add_payload(
        self, data: OpPayload, decoding: Decoding = STRICT, service_time: Decoding | None = None
    ) -> None:
        """Add one operation of a payload; ``service_time`` reads that series another way
        than ``decoding`` (the dashboard shows no service-time percentiles: it skips them)."""
        self.requests += data.requests
        self.docs += data.docs
        self.bytes += data.bytes
        _add_counts(self.errors, data.errors)
        _add_counts(self.doc_errors, data.doc_errors)
        self.error_time_count += data.error_time.count
        self.error_time_sum += data.error_time.sum
        self._longest(data.error_time.max)
        self.latency.add_payload(data.latency, decoding)
        self.service_time.add_payload(
            data.service_time, decoding if service_time is None else service_time
        )
        for name, node in data.nodes.items():
            self.nodes.setdefault(name, NodeData()).add(node)
        self._keep_errors(data.last_errors)

    def merge(self, other: OpData) -> None:
        self.requests += other.requests
        self.docs += other.docs
        self.bytes += other.bytes
        _add_counts(self.errors, other.errors)
        _add_counts(self.doc_errors, other.doc_errors)
        self.error_time_count += other.error_time_count
        self.error_time_sum += other.error_time_sum
        self._longest(other.error_time_max)
        self.latency.merge(other.latency)
        self.service_time.merge(other.service_time)
        for name, node in other.nodes.items():
            self.nodes.setdefault(name, NodeData()).add(node)
        self._keep_errors(other.last_errors)

    def to_payload(self) -> OpPayload:
        return OpPayload(
            requests=self.requests,
            docs=self.docs,
            bytes=self.bytes,
            errors=dict(self.errors),
            doc_errors=dict(self.doc_errors),
            error_time=ErrorTime(
                count=self.error_time_count, sum=self.error_time_sum, max=self.error_time_max
            ),
            latency=self.latency.to_payload(),
            service_time=self.service_time.to_payload(),
            nodes={name: node.to_payload() for name, node in sorted(self.nodes.items())},
            last_errors={cls: list(items) for cls, items in self.last_errors.items()},
        )


class Merged:
    """Merged payloads: per-operation data plus which ranks contributed.

    ``elapsed`` is the longest interval among the merged payloads: ranks of one interval
    cover the same wall-clock window, so the longest is that window.  It is *not* a sum;
    time spans across intervals are the caller's business (see
    :class:`esdash.bench.results.RunAccumulator`).
    """

    def __init__(self) -> None:
        self.ops: dict[str, OpData] = {}
        self.ranks: set[int] = set()
        self.payloads = 0
        self.elapsed = 0.0

    def op(self, name: str) -> OpData:
        data = self.ops.get(name)
        if data is None:
            data = self.ops[name] = OpData()
        return data

    def add(self, payload: RankPayload, rank: int | None = None) -> Merged:
        """Merge one payload (from :meth:`Recorder.drain` or :meth:`to_payload`); chainable.

        ``rank`` overrides the payload's own ``rank`` (or ``ranks``) field.
        """
        if rank is not None:
            self.ranks.add(rank)
        else:
            if payload.rank is not None:
                self.ranks.add(payload.rank)
            self.ranks.update(payload.ranks)
        self.payloads += 1
        self.elapsed = max(self.elapsed, payload.elapsed)
        for name, data in payload.ops.items():
            self.op(name).add_payload(data)
        return self

    def add_ops(self, ops: Mapping[str, OpPayload], decoding: Decoding = STRICT) -> Merged:
        """Merge the operations of a stream record (no rank, no elapsed); chainable."""
        for name, data in ops.items():
            self.op(name).add_payload(data, decoding)
        return self

    def merge(self, other: Merged) -> Merged:
        """Merge another ``Merged`` in place (no encoding round trip); chainable."""
        self.ranks |= other.ranks
        self.payloads += other.payloads
        self.elapsed = max(self.elapsed, other.elapsed)
        for name, data in other.ops.items():
            self.op(name).merge(data)
        return self

    def copy(self) -> Merged:
        return Merged().merge(self)

    def to_payload(self) -> RankPayload:
        """A payload of the recorder's shape, with ``ranks`` listing who contributed."""
        return RankPayload(
            rank=None,
            ranks=sorted(self.ranks),
            elapsed=self.elapsed,
            ops={name: data.to_payload() for name, data in sorted(self.ops.items())},
        )

    @property
    def requests(self) -> int:
        return sum(data.requests for data in self.ops.values())


def merge_payloads(payloads: Iterable[RankPayload]) -> Merged:
    """Merge payloads into a new :class:`Merged`."""
    merged = Merged()
    for payload in payloads:
        merged.add(payload)
    return merged


def empty_series_payload() -> SeriesPayload:
    """The payload of a series without samples (for hand-built payloads and tests)."""
    return SeriesData().to_payload()


__all__ = [
    "LAST_ERRORS",
    "LENIENT",
    "SKIP",
    "STRICT",
    "Decoding",
    "Merged",
    "NodeData",
    "OpData",
    "SeriesData",
    "empty_series_payload",
    "merge_payloads",
]
