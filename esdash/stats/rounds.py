"""Repeated rounds of the same steps: the median with its confidence interval, and order bias.

One round of a benchmark is one sample of a noisy, skewed quantity; a mean of a few rounds
is pulled around by one bad round.  esdash reports the **median over rounds** with the
distribution-free confidence interval of the median, which assumes nothing but independent
rounds: the ``j``-th smallest and ``j``-th largest of ``n`` values enclose the true median
with probability ``1 - 2 * P(Bin(n, 1/2) <= j - 1)``.  The narrowest such pair that still
reaches the requested coverage is the interval.  Below six rounds even ``(min, max)`` covers
less than 95 % (five rounds: 93.75 %), so only the range is given, labelled "range, n=N".

:func:`position_effect` measures what a balanced order is for: whether a step runs faster
or slower because of *where* it ran in a round (first after ingest, last after everything
else warmed the caches), pooled over all queries.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

#: Fewer rounds than this get the range instead of a confidence interval.
MIN_CI_ROUNDS = 6

IntervalKind = Literal["ci", "range"]


@dataclass(frozen=True)
class MedianInterval:
    """The median of ``n`` values and an interval around it.

    ``kind`` is ``"ci"`` for an order-statistic confidence interval reaching the requested
    coverage, ``"range"`` for min..max of too few values; ``coverage`` is the probability the
    interval actually achieves (for a range, that of ``(min, max)``; 0 for a single value).
    """

    median: float
    low: float
    high: float
    n: int
    coverage: float
    kind: IntervalKind

    @property
    def label(self) -> str:
        """``"96.9 % CI"`` or ``"range, n=4"``: what a table prints next to the interval."""
        if self.kind == "ci":
            return f"{self.coverage * 100:.1f} % CI"
        return f"range, n={self.n}"


def binomial_cdf_half(n: int, k: int) -> float:
    """``P(Bin(n, 1/2) <= k)``, exactly (integer arithmetic, one rounding at the end)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / (1 << n)


def order_statistic_coverage(n: int, j: int) -> float:
    """Coverage of ``(x_(j), x_(n+1-j))`` (1-based order statistics) for the median."""
    return 1.0 - 2.0 * binomial_cdf_half(n, j - 1)


def median_interval(values: Sequence[float], coverage: float = 0.95) -> MedianInterval:
    """The median of ``values`` with its order-statistic confidence interval (or range).

    For ``n >= 6``: the largest ``j`` (narrowest interval) with
    ``1 - 2 * P(Bin(n, 1/2) <= j - 1) >= coverage``; six values give ``(min, max)`` at
    96.875 %.  When not even ``(min, max)`` reaches ``coverage`` (or ``n < 6``) the result
    is the range, ``kind = "range"``.  Raises ``ValueError`` without values or for a
    coverage outside (0, 1).
    """
    if not 0 < coverage < 1:
        raise ValueError(f"coverage {coverage!r} is outside (0, 1)")
    data = sorted(float(v) for v in values)
    n = len(data)
    if not n:
        raise ValueError("the median of no values")
    median = statistics.median(data)
    best = 0
    if n >= MIN_CI_ROUNDS:
        for j in range(1, n // 2 + 1):
            if order_statistic_coverage(n, j) >= coverage:
                best = j
            else:
                break
    if best:
        return MedianInterval(
            median,
            data[best - 1],
            data[n - best],
            n,
            order_statistic_coverage(n, best),
            "ci",
        )
    return MedianInterval(
        median, data[0], data[-1], n, order_statistic_coverage(n, 1) if n > 1 else 0.0, "range"
    )


#: One measurement of a round: (position in the round, query name, throughput).
Slot = tuple[int, str, float]


@dataclass(frozen=True)
class PositionEffect:
    """Relative throughput by position in a round, all queries pooled.

    ``by_position[p]`` is the median, over every query and round, of the throughput at
    position ``p`` divided by that query's median throughput over all positions: 1.10 at
    position 0 means steps run 10 % faster in the first slot.  ``first_over_last`` is
    ``by_position[first] / by_position[last]`` (``None`` with fewer than two positions).
    """

    by_position: dict[int, float] = field(default_factory=dict)
    first_over_last: float | None = None


def position_effect(rounds: Sequence[Sequence[Slot]]) -> PositionEffect:
    """The :class:`PositionEffect` of ``rounds``, each a sequence of (position, query, req/s).

    A query whose median throughput is 0 (it never succeeded) has no relative throughput and
    is left out.
    """
    by_query: dict[str, list[float]] = {}
    for round_ in rounds:
        for _position, query, value in round_:
            by_query.setdefault(query, []).append(float(value))
    medians = {query: statistics.median(values) for query, values in by_query.items()}
    relative: dict[int, list[float]] = {}
    for round_ in rounds:
        for position, query, value in round_:
            base = medians[query]
            if base:
                relative.setdefault(position, []).append(float(value) / base)
    by_position = {p: statistics.median(relative[p]) for p in sorted(relative)}
    ratio = None
    if len(by_position) >= 2:
        first, last = by_position[min(by_position)], by_position[max(by_position)]
        ratio = first / last if last else None
    return PositionEffect(by_position, ratio)
