"""Is a series steady?  Trend tests over the per-interval numbers of one step.

A benchmark step whose throughput still climbs while it is measured (segments merging, JIT
compiling, caches filling) has no single "throughput": its mean depends on when the step
started and how long it ran.  This module says whether a series drifts, so such a step is
flagged instead of silently averaged.

* **Mann–Kendall** (:func:`mann_kendall`) tests for a monotonic trend without assuming a
  distribution or a linear shape: ``S`` counts, over every pair of points, later-above minus
  later-below.  Under "no trend" every order of the values is equally likely.  For small
  series without ties (``n <= 10``) the p-value is exact: the distribution of ``S`` is that
  of the number of inversions of a random permutation (Mahonian numbers, counted by dynamic
  programming).  Otherwise ``S`` is approximately normal with the tie-corrected variance
  ``(n(n-1)(2n+5) - sum t(t-1)(2t+5)) / 18`` (``t`` the size of each group of equal values)
  and ``z = (S - sign(S)) / sqrt(var)`` (continuity correction); the p-value is two-sided.
* **Theil–Sen** (:func:`relative_slope`): the median of the slopes between every pair of
  points, robust to a few outliers (one slow interval does not make a trend).  Divided by
  the mean and scaled to **percent per minute**, so one threshold fits fast and slow steps.
* **coefficient of variation** (:func:`cv`): sample standard deviation over the mean.

A series is judged by both significance and size (:func:`steadiness`): with enough
intervals any tiny drift becomes significant, and a large apparent slope of a few noisy
points may be chance.  Only a drift that is both significant and large is flagged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Largest series without ties whose Mann–Kendall p-value is computed exactly.
EXACT_MAX_N = 10
#: Fewer points than this are too few to judge a trend (the smallest exact p-value of
#: three points is 1/3: no series of three could ever be significant).
MIN_POINTS = 4


@dataclass(frozen=True)
class MannKendall:
    """The Mann–Kendall trend test of one series.

    ``s`` is the statistic (positive: rising), ``z`` its normal score (continuity-corrected;
    0 when ``s`` is 0 or the series is constant), ``p`` the two-sided p-value and ``exact``
    whether ``p`` comes from the exact null distribution rather than the normal
    approximation.
    """

    n: int
    s: int
    z: float
    p: float
    exact: bool = False


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def _statistic(values: Sequence[float]) -> int:
    n = len(values)
    return sum(_sign(values[j] - values[i]) for i in range(n) for j in range(i + 1, n))


def _tie_groups(values: Sequence[float]) -> list[int]:
    counts: dict[float, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return [t for t in counts.values() if t > 1]


def variance_s(n: int, ties: Sequence[int] = ()) -> float:
    """The variance of ``S`` under "no trend", corrected for groups of ``ties`` equal values."""
    correction = sum(t * (t - 1) * (2 * t + 5) for t in ties)
    return (n * (n - 1) * (2 * n + 5) - correction) / 18


def inversion_counts(n: int) -> list[int]:
    """How many permutations of ``n`` items have ``k`` inversions, for every ``k``.

    The Mahonian numbers, built one item at a time: inserting item ``m`` into a permutation
    of ``m - 1`` items adds 0 to ``m - 1`` inversions.  ``S = N - 2 * inversions`` with
    ``N = n(n-1)/2``, so this is the exact null distribution of Mann–Kendall's ``S``.
    """
    counts = [1]
    for m in range(2, n + 1):
        grown = [0] * (len(counts) + m - 1)
        for k, count in enumerate(counts):
            for added in range(m):
                grown[k + added] += count
        counts = grown
    return counts


def exact_p(n: int, s: int) -> float:
    """``P(|S| >= |s|)`` for ``n`` values without ties and no trend (two-sided, exact)."""
    counts = inversion_counts(n)
    pairs = n * (n - 1) // 2
    extreme = sum(c for k, c in enumerate(counts) if abs(pairs - 2 * k) >= abs(s))
    return min(1.0, extreme / math.factorial(n))


def normal_p(z: float) -> float:
    """Two-sided p-value of a standard normal score."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def mann_kendall(values: Sequence[float]) -> MannKendall:
    """The Mann–Kendall test of ``values`` in their order (see the module docstring).

    Exact for ``n <= 10`` without ties, the normal approximation otherwise.  Fewer than two
    values carry no trend: ``s = 0``, ``p = 1``.
    """
    data = [float(v) for v in values]
    n = len(data)
    if n < 2:
        return MannKendall(n=n, s=0, z=0.0, p=1.0, exact=True)
    s = _statistic(data)
    ties = _tie_groups(data)
    variance = variance_s(n, ties)
    z = (s - _sign(s)) / math.sqrt(variance) if variance > 0 and s else 0.0
    if not ties and n <= EXACT_MAX_N:
        return MannKendall(n=n, s=s, z=z, p=exact_p(n, s), exact=True)
    return MannKendall(n=n, s=s, z=z, p=normal_p(z) if variance > 0 else 1.0)


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation: sample standard deviation / |mean|.

    ``None`` below two values or when the mean is 0 (a relative spread of nothing).
    """
    data = [float(v) for v in values]
    if len(data) < 2:
        return None
    mean = statistics.fmean(data)
    if mean == 0:
        return None
    return statistics.stdev(data) / abs(mean)


def theil_sen(times_s: Sequence[float], values: Sequence[float]) -> float | None:
    """The Theil–Sen slope (value units per second): the median of all pairwise slopes.

    Pairs at the same time carry no slope and are left out; ``None`` without any pair.
    """
    if len(times_s) != len(values):
        raise ValueError(f"{len(times_s)} times but {len(values)} values")
    slopes = [
        (values[j] - values[i]) / (times_s[j] - times_s[i])
        for i in range(len(values))
        for j in range(i + 1, len(values))
        if times_s[j] != times_s[i]
    ]
    return statistics.median(slopes) if slopes else None


def relative_slope(times_s: Sequence[float], values: Sequence[float]) -> float | None:
    """The Theil–Sen slope relative to the mean, in **percent per minute**.

    +50 means the series rises by half its mean every minute.  ``None`` without two
    distinct times or when the mean is 0.
    """
    slope = theil_sen(times_s, values)
    if slope is None:
        return None
    mean = statistics.fmean(float(v) for v in values)
    if mean == 0:
        return None
    return slope / abs(mean) * 60.0 * 100.0


@dataclass(frozen=True)
class Steadiness:
    """Whether a step's series held steady, and the numbers that decided it.

    ``slope_pct_per_min`` is :func:`relative_slope`, ``p_value`` Mann–Kendall's (``None``
    when too short to test), ``cv`` :func:`cv`; ``label`` is what a summary prints:
    ``"steady"``, ``"not steady: +38 %/min"`` or ``"too short to judge (n=3)"``.
    """

    n: int
    slope_pct_per_min: float | None
    p_value: float | None
    cv: float | None
    steady: bool
    label: str


def steadiness(
    times_s: Sequence[float],
    values: Sequence[float],
    *,
    max_drift_pct_per_min: float = 5.0,
    alpha: float = 0.05,
) -> Steadiness:
    """Judge one series (e.g. per-interval throughput of a step, at its interval times).

    Not steady when the Mann–Kendall p-value is below ``alpha`` **and** the relative
    Theil–Sen slope is at least ``max_drift_pct_per_min`` in size: a significant but tiny
    drift is not flagged, nor is a large slope that could be chance.  Fewer than
    :data:`MIN_POINTS` points are steady by default, labelled "too short to judge".
    """
    if len(times_s) != len(values):
        raise ValueError(f"{len(times_s)} times but {len(values)} values")
    ordered = sorted(zip(times_s, values, strict=True), key=lambda pair: pair[0])
    times = [float(t) for t, _ in ordered]
    data = [float(v) for _, v in ordered]
    n = len(data)
    slope = relative_slope(times, data) if n >= 2 else None
    spread = cv(data)
    if n < MIN_POINTS:
        return Steadiness(n, slope, None, spread, True, f"too short to judge (n={n})")
    p = mann_kendall(data).p
    drifting = p < alpha and slope is not None and abs(slope) >= max_drift_pct_per_min
    if drifting:
        assert slope is not None
        return Steadiness(n, slope, p, spread, False, f"not steady: {slope:+.0f} %/min")
    return Steadiness(n, slope, p, spread, True, "steady")


def converged(values: Sequence[float], *, cv_limit: float = 0.05, alpha: float = 0.05) -> bool:
    """Whether warm-up rounds have settled: CV below ``cv_limit`` and no significant trend.

    The warm-up calls this with the last few rounds of a query.  With only three rounds the
    trend test can never reject (its smallest exact p-value is 1/3), so there the CV decides;
    with more rounds a steady climb keeps the warm-up going even when its CV is small.
    """
    spread = cv(values)
    if spread is None or spread >= cv_limit:
        return False
    return mann_kendall(values).p >= alpha
