"""Is B better than A?  An effect with its interval, a corrected verdict, and the runs it needs.

Every cell of ``esdash compare`` (a contender, a query, a metric) says:

* **the effect**, as a ratio contender / baseline of the two sides' figures;
* **its 95 % interval**, from the bootstrap (:mod:`esdash.stats.bootstrap`): the variance of
  ``log(figure)`` over the replicates of each side, times ``k / (k - 1)`` for ``k``
  independent units (the plain bootstrap variance of a mean is short by that factor),
  added over the two sides, and Student's t with Welch–Satterthwaite degrees of freedom
  (each side ``k - 1``).  On the log scale, so the interval of a ratio is a ratio interval
  (``r / f .. r * f``) and a halving is as far from 1 as a doubling.  A single run counts
  its blocks of intervals as ``k``: the batch-means view of a steady run (Law & Kelton), with
  block lengths that follow the run's autocorrelation;
* **the p-value** of "no change" from the same t statistic, so the interval excludes 1
  exactly when ``p < 0.05``;
* **the verdict** (:func:`verdict`): *equivalent within ±m %* when the whole interval lies
  inside ``[1 - m, 1 + m]`` (the change is smaller than the margin said to matter, whichever
  its direction); else *better* or *worse* when the p-value, **Holm-corrected** across the
  queries of the comparison (:func:`holm`), is below 5 % (so a comparison of 7 queries is
  wrong about some "better" or "worse" in at most 5 % of A/A comparisons, not 30 %); else
  *inconclusive*;
* **the repetitions needed** for an interval of ±x % (:func:`repetitions_needed`): each
  side's variance of one repetition, scaled by ``1/n``, with the t quantile of ``n``.

Why percentiles are merged, never averaged: a p99 is a property of all the requests, and
the average of two runs' p99s is no percentile of them.  Two runs of 1,000 requests, one
with 2 % of its requests at 100 ms and the rest at 1 ms, one without a tail at all: their
p99s are 100 ms and 1 ms, the average 50.5 ms, yet of the 2,000 requests together only 1 %
took 100 ms and their p99 is 1 ms.  ``tests/stats/test_verdicts.py`` computes this case.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt

from esdash.stats import student

#: Coverage of the intervals and significance level of the verdicts.
LEVEL = 0.95
ALPHA = 1.0 - LEVEL
#: Default margin of equivalence: a change within ±5 % is "equivalent".
MARGIN = 0.05
#: The most repetitions :func:`repetitions_needed` looks for.
MAX_REPETITIONS = 10_000

Verdict = Literal["better", "worse", "equivalent", "inconclusive"]


@dataclass(frozen=True)
class SideFigure:
    """One side's figure with what the bootstrap says about its noise.

    ``log_var`` is the variance of ``log(value)``, small-sample corrected (None: no spread
    known, e.g. one value without intervals); ``effective`` the independent units it rests
    on (runs, rounds or blocks of intervals); ``per_repetition`` the variance of ``log`` of
    one repetition's figure (for planning; None when unknown).
    """

    value: float | None
    log_var: float | None = None
    effective: float = 1.0
    per_repetition: float | None = None


def side_figure(
    value: float | None,
    replicates: npt.NDArray[np.float64],
    effective: float,
    repetitions: float,
) -> SideFigure:
    """A :class:`SideFigure` from bootstrap ``replicates`` of the figure.

    ``effective`` independent units (below 2: no spread can be known); ``repetitions``: how
    many repetitions the side's figure averages (runs or rounds; 1 for one run's intervals).
    """
    usable = replicates[np.isfinite(replicates) & (replicates > 0)]
    if value is None or not value > 0 or effective < 2 or usable.size < 2:
        return SideFigure(value, None, effective, None)
    variance = float(np.var(np.log(usable), ddof=1)) * effective / (effective - 1.0)
    return SideFigure(value, variance, effective, variance * repetitions)


@dataclass(frozen=True)
class Effect:
    """Contender / baseline, its interval at ``LEVEL``, the p-value of no change."""

    ratio: float | None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    df: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


def welch_df(var_a: float, df_a: float, var_b: float, df_b: float) -> float:
    """Welch–Satterthwaite degrees of freedom of the sum of two variances (at least 1)."""
    if var_a <= 0 and var_b <= 0:
        return max(1.0, df_a + df_b)
    denominator = var_a * var_a / df_a + var_b * var_b / df_b
    return max(1.0, (var_a + var_b) ** 2 / denominator)


def effect(base: SideFigure, other: SideFigure, level: float = LEVEL) -> Effect:
    """The ratio ``other / base`` with its interval and p-value (see the module docstring)."""
    if base.value is None or other.value is None or not base.value > 0 or other.value < 0:
        return Effect(None)
    ratio = other.value / base.value
    if base.log_var is None or other.log_var is None or ratio <= 0:
        return Effect(ratio)
    df = welch_df(base.log_var, base.effective - 1.0, other.log_var, other.effective - 1.0)
    se = math.sqrt(base.log_var + other.log_var)
    if se == 0:
        same = ratio == 1.0
        return Effect(ratio, ratio, ratio, 1.0 if same else 0.0, df)
    half = student.quantile((1.0 + level) / 2.0, df) * se
    p = student.two_sided_p(math.log(ratio) / se, df)
    return Effect(ratio, ratio * math.exp(-half), ratio * math.exp(half), p, df)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and does not count).

    The ``i``-th smallest of ``m`` p-values is multiplied by ``m - i + 1`` (1-based), made
    monotone and capped at 1.  Rejecting where the adjusted value is below ``alpha`` keeps the
    chance of any false rejection among the ``m`` at most ``alpha``, whatever their
    dependence (Holm 1979).
    """
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def verdict(
    found: Effect,
    p_adjusted: float | None,
    higher_is_better: bool,
    margin: float = MARGIN,
    alpha: float = ALPHA,
) -> Verdict:
    """Equivalent, better, worse or inconclusive, in that order (module docstring)."""
    if found.ratio is None or found.low is None or found.high is None:
        return "inconclusive"
    if 1.0 - margin <= found.low and found.high <= 1.0 + margin:
        return "equivalent"
    if p_adjusted is not None and p_adjusted < alpha and found.ratio != 1.0:
        return "better" if (found.ratio > 1.0) == higher_is_better else "worse"
    return "inconclusive"


def repetitions_needed(
    base: SideFigure,
    other: SideFigure,
    precision: float = MARGIN,
    level: float = LEVEL,
) -> int | None:
    """Repetitions per side for an interval of ±``precision`` around the ratio.

    Each side's variance of one repetition over ``n``, Student's t of Welch's degrees of
    freedom for ``n - 1`` on each side; the smallest ``n >= 2`` whose half-width on the
    log scale is at most ``log(1 + precision)``.  None when a side's noise is unknown or
    more than :data:`MAX_REPETITIONS` would be needed.
    """
    mine, theirs = base.per_repetition, other.per_repetition
    if mine is None or theirs is None or precision <= 0:
        return None
    one = mine + theirs
    target = math.log1p(precision)

    def enough(n: int) -> bool:
        df = welch_df(mine / n, n - 1.0, theirs / n, n - 1.0)
        return student.quantile((1.0 + level) / 2.0, df) * math.sqrt(one / n) <= target

    if one == 0 or enough(2):
        return 2
    # Student's t is wider than the normal: the normal's n is a lower bound to start from
    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    low = max(2, min(MAX_REPETITIONS, math.ceil(one * (z / target) ** 2)) - 1)
    if low >= MAX_REPETITIONS:
        return None
    step = 1
    high = low + step
    while not enough(high):
        if high >= MAX_REPETITIONS:
            return None
        low, step = high, step * 2
        high = min(high + step, MAX_REPETITIONS)
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


__all__ = [
    "ALPHA",
    "LEVEL",
    "MARGIN",
    "MAX_REPETITIONS",
    "Effect",
    "SideFigure",
    "Verdict",
    "effect",
    "holm",
    "repetitions_needed",
    "side_figure",
    "verdict",
    "welch_df",
]
