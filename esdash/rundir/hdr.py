"""The one HDR histogram of esdash: its layout, the hot-path index, and counts as numpy arrays.

Every latency and service time esdash records goes into a histogram of one layout: values in
microseconds from 1 µs to 1 hour at 3 significant digits (0.1 % resolution), HdrHistogram's
layout.  This module is the only place that knows it:

* **the hot path** (:class:`esdash.bench.recorder.Recorder`) computes a value's bucket index
  with the constants below, inlined (:func:`index_of` is the readable version), and counts into
  a plain dict;
* **counts** everywhere else are numpy ``int64`` arrays indexed like HdrHistogram's counts
  array and cut after the last non-empty bucket (an empty histogram is an empty array), so a
  merge is an addition and a percentile a cumulative sum and a binary search;
* **the stored format** (``hdr`` fields of ``stream.jsonl`` and ``results.json``) is
  HdrHistogram's compressed V2 encoding, written and read with the ``hdrhistogram`` package
  (:func:`encode`, :func:`decode`), so any HdrHistogram tool reads esdash's histograms.

Percentiles and bucket bounds are exactly what ``hdrhistogram`` computes for the same counts
(the tests compare them value for value): percentile ``p`` is the highest value equivalent to
the first bucket whose cumulative count reaches ``max(1, int(p * total / 100 + 0.5))``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

#: Histogram range and precision, in microseconds: 1 µs .. 1 hour, 3 significant digits.
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_FIGURES = 3
#: Seconds per unit of the histograms.
US = 1e-6
#: The range in seconds (values outside it are clamped into it by the recorder).
LOWEST_S = LOWEST_US * US
HIGHEST_S = HIGHEST_US * US

#: Bucket counts: numpy int64, indexed like HdrHistogram's counts array, cut after the last
#: non-empty bucket.
Counts = npt.NDArray[np.int64]


def new_histogram() -> HdrHistogram:
    """An empty ``hdrhistogram`` object of esdash's layout (only the codec needs one)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


_PROBE = new_histogram()
assert _PROBE.unit_magnitude == 0, "the index arithmetic below assumes a lowest value of 1"
#: The hot path's index arithmetic (see :func:`index_of`).
SUB_BUCKET_MASK: int = _PROBE.sub_bucket_mask
HALF_COUNT_MAGNITUDE: int = _PROBE.sub_bucket_half_count_magnitude
HALF_COUNT: int = _PROBE.sub_bucket_half_count
SHIFT: int = HALF_COUNT_MAGNITUDE + 1
#: Length of a full counts array of this layout.
COUNTS_LEN: int = _PROBE.counts_len


def index_of(us: int) -> int:
    """The counts index of ``us`` microseconds (HdrHistogram's arithmetic for lowest value 1).

    ``bucket = bit_length(us | mask) - (half_count_magnitude + 1)``, and the index is
    ``((bucket + 1) << half_count_magnitude) + (us >> bucket) - half_count``.  The recorder
    inlines these two lines; a test checks them against ``hdrhistogram`` for every bucket.
    """
    bucket = (us | SUB_BUCKET_MASK).bit_length() - SHIFT
    return ((bucket + 1) << HALF_COUNT_MAGNITUDE) + (us >> bucket) - HALF_COUNT


def _bounds(probe: HdrHistogram) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Lowest and highest value (µs) equivalent to each index, from the package itself."""
    low = np.array([probe.get_value_from_index(i) for i in range(COUNTS_LEN)], dtype=np.int64)
    high = np.array([probe.get_highest_equivalent_value(int(v)) for v in low], dtype=np.int64)
    return low, high


#: Per counts index: the lowest and highest value in microseconds it stands for.
LOW_US, HIGH_US = _bounds(_PROBE)
del _PROBE


def empty() -> Counts:
    """Counts of a histogram without samples."""
    return np.zeros(0, dtype=np.int64)


def trim(counts: Counts) -> Counts:
    """``counts`` cut after its last non-empty bucket (a view, not a copy)."""
    nonzero = np.flatnonzero(counts)
    return counts[: nonzero[-1] + 1] if nonzero.size else counts[:0]


def from_mapping(counts: Mapping[int, int]) -> Counts:
    """Counts from a sparse ``{index: count}`` mapping (the recorder's form)."""
    if not counts:
        return empty()
    out = np.zeros(max(counts) + 1, dtype=np.int64)
    for index, count in counts.items():
        out[index] += count
    return out


def add(into: Counts, other: Counts) -> Counts:
    """``into + other`` bucket by bucket; ``into`` is reused (in place) when it is long enough."""
    if other.size > into.size:
        grown = np.zeros(other.size, dtype=np.int64)
        grown[: into.size] = into
        into = grown
    into[: other.size] += other
    return into


def total(counts: Counts) -> int:
    return int(counts.sum())


# ------------------------------------------------------------------------- codec


def decode(encoded: str) -> Counts:
    """The counts of an encoded histogram (``HISTF...``), in esdash's layout.

    A histogram of another layout (written by another HdrHistogram tool) is re-binned into
    esdash's; a corrupt one raises ``ValueError``.
    """
    try:
        histogram = HdrHistogram.decode(encoded)
    except Exception as exc:  # the codec raises several kinds (zlib, base64, its own)
        raise ValueError(f"not an encoded HDR histogram ({type(exc).__name__}: {exc})") from None
    if not histogram.get_total_count():
        return empty()
    if (
        histogram.lowest_trackable_value != LOWEST_US
        or histogram.highest_trackable_value != HIGHEST_US
        or histogram.significant_figures != SIGNIFICANT_FIGURES
    ):
        rebinned = new_histogram()
        rebinned.add(histogram)
        histogram = rebinned
    # A view of the codec's own counts array: one copy of the used part, nothing else.
    view: Counts = np.frombuffer(histogram.counts, dtype=np.int64)
    last: int = histogram.get_counts_array_index(histogram.get_max_value())
    used: Counts = view[: last + 1].copy()  # numpy's stubs leave copy() of a slice untyped
    return used


def merge(encoded: Iterable[str]) -> Counts:
    """The counts of several encoded histograms added up."""
    counts = empty()
    for item in encoded:
        counts = add(counts, decode(item))
    return counts


class Encoder:
    """Encodes counts into the stored format, reusing one ``hdrhistogram`` object.

    Allocating that object (a full counts array) costs more than encoding a typical interval,
    so a recorder keeps one encoder for all its drains.  The encoding depends only on the
    counts, their total and the maximum, so it is the same string as recording every value
    into a fresh histogram (a test checks this).
    """

    def __init__(self) -> None:
        self._scratch: HdrHistogram | None = None

    def encode(self, counts: Counts | Mapping[int, int]) -> str:
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = new_histogram()
        array = np.frombuffer(scratch.counts, dtype=np.int64)
        if isinstance(counts, Mapping):
            indices = list(counts)
            for index, count in counts.items():
                array[index] += count
            count_sum = sum(counts.values())
        else:
            nonzero = np.flatnonzero(counts)
            indices = nonzero.tolist()
            array[nonzero] = counts[nonzero]
            count_sum = int(counts.sum())
        try:
            if indices:
                scratch.total_count = count_sum
                scratch.min_value = int(LOW_US[min(indices)])
                scratch.max_value = int(LOW_US[max(indices)])
            return str(scratch.encode().decode("ascii"))
        finally:
            array[indices] = 0
            scratch.total_count = 0
            scratch.min_value = sys.maxsize
            scratch.max_value = 0


def encode(counts: Counts | Mapping[int, int]) -> str:
    """The stored format of ``counts`` (a fresh encoder; keep an :class:`Encoder` to reuse)."""
    return Encoder().encode(counts)


# ---------------------------------------------------------------------- statistics


def percentiles(counts: Counts, wanted: Sequence[float]) -> dict[float, float]:
    """Values in **seconds** of the ``wanted`` percentiles (0..100), as HdrHistogram gives them.

    Empty when there are no samples.  Percentile 0 is the lowest value of the first bucket,
    any other the highest value of the bucket where the cumulative count reaches its target.
    """
    if not wanted or not counts.size:
        return {}
    cumulative = np.cumsum(counts)
    count = int(cumulative[-1])
    if not count:
        return {}
    values: dict[float, float] = {}
    for percentile in sorted(set(wanted)):
        if percentile > 100:
            break
        target = max(int(percentile * count / 100 + 0.5), 1)
        index = int(np.searchsorted(cumulative, target, side="left"))
        value = HIGH_US[index] if percentile else LOW_US[index]
        values[percentile] = float(value) * US
    return values


def value_range(counts: Counts) -> tuple[float, float] | None:
    """Lowest and highest value (seconds) of the non-empty buckets; the highest is exclusive
    (one microsecond above the last bucket's highest value).  None without samples."""
    nonzero = np.flatnonzero(counts)
    if not nonzero.size:
        return None
    low = max(int(LOW_US[nonzero[0]]), 1)
    high = int(HIGH_US[nonzero[-1]]) + 1
    return low * US, high * US


def buckets(counts: Counts) -> Iterator[tuple[float, float, int]]:
    """``(lowest, highest, count)`` in seconds for every non-empty bucket, in value order.

    A bucket holds every value from ``lowest`` to ``highest`` (microsecond resolution below
    2 ms, 0.1 % of the value above).
    """
    for index in np.flatnonzero(counts).tolist():
        yield float(LOW_US[index]) * US, float(HIGH_US[index]) * US, int(counts[index])


def bucket_index(us: float) -> int:
    """The counts index of the bucket holding ``ceil(us)`` microseconds (clamped to the range)."""
    value = min(max(math.ceil(us), LOWEST_US), HIGHEST_US)
    return index_of(value)


__all__ = [
    "COUNTS_LEN",
    "HALF_COUNT",
    "HALF_COUNT_MAGNITUDE",
    "HIGHEST_S",
    "HIGHEST_US",
    "LOWEST_S",
    "LOWEST_US",
    "SHIFT",
    "SIGNIFICANT_FIGURES",
    "SUB_BUCKET_MASK",
    "US",
    "Counts",
    "Encoder",
    "add",
    "bucket_index",
    "buckets",
    "decode",
    "empty",
    "encode",
    "from_mapping",
    "index_of",
    "merge",
    "new_histogram",
    "percentiles",
    "total",
    "trim",
    "value_range",
]
