"""Statistics from merged measurements: percentiles, geometric mean and std, throughput.

Inputs are what the recorder keeps (:mod:`esdash.bench.recorder`): HDR counts
(:mod:`esdash.rundir.hdr`) plus exact count, min, max, sum and sums of ``ln(x)`` and
``ln(x)**2``.  Outputs
are in seconds (times) and per second (rates); renderers choose display units.

* **mean**, **gmean**, **gstd** are exact (from the sums, not from buckets).  ``gstd`` is the
  multiplicative standard deviation ``exp(s)``, where ``s`` is the sample standard deviation
  (``n - 1`` in the denominator, as ``scipy.stats.gstd``) of ``ln(x)``; a value lies within
  ``gmean / gstd .. gmean * gstd`` as often as a normal one lies within one sigma.
* **percentiles** come from the histogram (3 significant digits: within 0.1 %), clipped to
  the exact min and max.  A percentile ``p`` is reported only if the sample count ``n``
  supports it: ``n >= ceil(1 / (1 - p/100))``.  So p50 needs 2 samples, p90 needs 10, p99
  needs 100, p99.9 needs 1000, and p1 needs 2 (Rally hides unsupported percentiles the
  same way; reporting a "p99.9" of 20 samples would just be the max under another name).
* **throughput** is successful requests (or documents) per second of a wall-clock window;
  **error rate** is failed requests / all requests (Rally's definition).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np

from esdash.rundir import hdr, records
from esdash.rundir.records import JsonObject

#: The percentiles esdash reports (where the sample count supports them).
PERCENTILES: tuple[float, ...] = (1.0, 50.0, 90.0, 99.0, 99.9)

_US = hdr.US


class Samples(Protocol):
    """What :func:`summarize` needs; :class:`esdash.stats.merge.SeriesData` provides it."""

    counts: hdr.Counts
    count: int
    min: float | None
    max: float | None
    sum: float
    ln_sum: float
    ln_sq_sum: float


def percentile_name(percentile: float) -> str:
    """``99.9`` -> ``"p99.9"``, ``50.0`` -> ``"p50"``."""
    return f"p{percentile:g}"


def min_samples(percentile: float) -> int:
    """The smallest sample count that supports ``percentile``: ``ceil(1 / (1 - p/100))``.

    Computed with exact fractions: in floating point ``1 / (1 - 0.999)`` is a hair above
    1000 and would demand 1001 samples.
    """
    if not 0 <= percentile < 100:
        raise ValueError(f"percentile {percentile!r} is outside [0, 100)")
    p = Fraction(str(percentile)) / 100
    return math.ceil(1 / (1 - p))


def supported_percentiles(
    count: int, percentiles: Sequence[float] = PERCENTILES
) -> tuple[float, ...]:
    """The percentiles ``count`` samples support (see the module docstring for the rule)."""
    return tuple(p for p in percentiles if count >= min_samples(p))


def geometric(count: int, ln_sum: float, ln_sq_sum: float) -> tuple[float | None, float | None]:
    """Geometric mean and geometric standard deviation from exact sums of logs.

    ``(None, None)`` without samples; the std is ``None`` for a single sample.
    """
    if count <= 0:
        return None, None
    mean_ln = ln_sum / count
    gmean = math.exp(mean_ln)
    if count < 2:
        return gmean, None
    variance = (ln_sq_sum - count * mean_ln * mean_ln) / (count - 1)
    return gmean, math.exp(math.sqrt(max(variance, 0.0)))


@dataclass(frozen=True)
class Summary:
    """Statistics of one timed series, in seconds (``gstd`` is a factor, unitless)."""

    count: int
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    gmean: float | None = None
    gstd: float | None = None
    percentiles: dict[float, float] = field(default_factory=dict)

    def p(self, percentile: float) -> float | None:
        """The ``percentile``-th percentile (None where the samples do not support it)."""
        return self.percentiles.get(percentile)

    def value(self, name: str) -> float | None:
        """A statistic by name: ``min``, ``mean``, ``gmean``, ``gstd``, ``max``, ``p99``..."""
        if name.startswith("p"):
            for percentile, value in self.percentiles.items():
                if percentile_name(percentile) == name:
                    return value
            return None
        if name in ("count", "min", "max", "mean", "gmean", "gstd"):
            found: float | None = getattr(self, name)
            return found
        raise KeyError(name)

    def to_dict(self, scale: float = 1.0, digits: int = 6) -> JsonObject:
        """JSON form; times multiplied by ``scale`` (1000 for milliseconds)."""

        def scaled(value: float | None) -> float | None:
            return None if value is None else round(value * scale, digits)

        out: JsonObject = {
            "count": self.count,
            "min": scaled(self.min),
            "mean": scaled(self.mean),
            "gmean": scaled(self.gmean),
            "gstd": None if self.gstd is None else round(self.gstd, digits),
        }
        for percentile, value in sorted(self.percentiles.items()):
            out[percentile_name(percentile)] = scaled(value)
        out["max"] = scaled(self.max)
        return out


def latency_stats(summary: Summary, scale: float = 1.0, digits: int = 6) -> records.LatencyStats:
    """The results record of a summary; times multiplied by ``scale`` (1000: milliseconds)."""

    def scaled(value: float | None) -> float | None:
        return None if value is None else round(value * scale, digits)

    values = {
        percentile_name(p).replace(".", "_"): scaled(v) for p, v in summary.percentiles.items()
    }
    return records.LatencyStats(
        count=summary.count,
        min=scaled(summary.min),
        mean=scaled(summary.mean),
        gmean=scaled(summary.gmean),
        gstd=None if summary.gstd is None else round(summary.gstd, digits),
        max=scaled(summary.max),
        **values,
    )


def summarize(samples: Samples, percentiles: Sequence[float] = PERCENTILES) -> Summary:
    """Count, extremes, mean, gmean, gstd and the supported percentiles of ``samples``."""
    count = samples.count
    if count <= 0:
        return Summary(count=0)
    gmean, gstd = geometric(count, samples.ln_sum, samples.ln_sq_sum)
    values = hdr.percentiles(samples.counts, supported_percentiles(count, percentiles))
    low, high = samples.min, samples.max
    if low is not None and high is not None:
        values = {p: min(max(v, low), high) for p, v in values.items()}
    return Summary(
        count=count,
        min=low,
        max=high,
        mean=samples.sum / count,
        gmean=gmean,
        gstd=gstd,
        percentiles=values,
    )


def throughput(count: float, seconds: float) -> float | None:
    """``count`` per second over a window of ``seconds`` (``None`` for an empty window)."""
    if seconds <= 0:
        return None
    return count / seconds


def error_rate(failed: int, requests: int) -> float | None:
    """Failed / all requests, as a fraction (``None`` without requests)."""
    if requests <= 0:
        return None
    return failed / requests


@dataclass(frozen=True)
class Spread:
    """Mean, sample std and range of a series, e.g. per-interval throughput."""

    n: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    median: float | None = None
    max: float | None = None

    def to_dict(self, digits: int = 3) -> JsonObject:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "n": self.n,
            "mean": rounded(self.mean),
            "std": rounded(self.std),
            "min": rounded(self.min),
            "median": rounded(self.median),
            "max": rounded(self.max),
        }


def spread_record(values: Iterable[float], digits: int = 3) -> records.Spread:
    """The results record of :func:`spread` (rounded to ``digits``)."""
    return records.Spread(**spread(values).to_dict(digits))


def spread(values: Iterable[float]) -> Spread:
    """The :class:`Spread` of ``values`` (std is ``None`` below two values)."""
    data = list(values)
    if not data:
        return Spread(n=0)
    return Spread(
        n=len(data),
        mean=statistics.fmean(data),
        std=statistics.stdev(data) if len(data) > 1 else None,
        min=min(data),
        median=statistics.median(data),
        max=max(data),
    )


@dataclass(frozen=True)
class Bucket:
    """One bar of a log-scaled latency histogram: ``[low, high)`` in seconds."""

    low: float
    high: float
    count: int


def bucket_counts(
    counts: hdr.Counts,
    log_buckets: int = 30,
    lowest: float | None = None,
    highest: float | None = None,
) -> list[Bucket]:
    """Counts in ``log_buckets`` bars of equal width on a log scale (dashboard and figures).

    The range defaults to the histogram's own (lowest to highest value); with
    ``lowest``/``highest`` (seconds) two histograms share one axis, or a view keeps its axis
    steady between refreshes.  An HDR bucket goes to the bar its lowest value falls in;
    values outside the range go to the first or last bar, so the bars always add up to the
    histogram's total.  Empty without samples.
    """
    if log_buckets < 1:
        raise ValueError("log_buckets must be at least 1")
    found = hdr.value_range(counts)
    if found is None:
        return []
    low_us = max((lowest if lowest is not None else found[0]) / _US, 1.0)
    high_us = (highest if highest is not None else found[1]) / _US
    if high_us <= low_us:
        high_us = low_us * 10
    log_low = math.log(low_us)
    width = (math.log(high_us) - log_low) / log_buckets
    edges = [math.exp(log_low + k * width) for k in range(log_buckets)] + [high_us]
    size = counts.size
    bounds = [0]
    for edge in edges[1:-1]:
        bounds.append(min(size, max(bounds[-1], hdr.bucket_index(edge))))
    bounds.append(size)
    cumulative = np.concatenate(([0], np.cumsum(counts)))
    return [
        Bucket(
            edges[k] * _US,
            edges[k + 1] * _US,
            int(cumulative[bounds[k + 1]] - cumulative[bounds[k]]),
        )
        for k in range(log_buckets)
    ]
