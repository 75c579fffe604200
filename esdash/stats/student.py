"""Student's t distribution: its CDF and quantiles, for any positive degrees of freedom.

A comparison of a few repetitions (or of one run's few blocks of intervals) needs Student's
t, not the normal distribution: with 6 repetitions per side a normal 95 % interval covers
about 90 %.  Welch's degrees of freedom are not whole numbers, so tables will not do, and
none of esdash's dependencies ships the distribution (scipy is not one of them), so it is
computed here from its definition.

With ``x = sqrt(df) * tan(u)`` the density ``c / sqrt(df) * (1 + x**2/df) ** -((df+1)/2)``
becomes ``c * cos(u) ** (df - 1)``, so

    F(t) = 1/2 + sign(t) * c * integral from 0 to atan(|t| / sqrt(df)) of cos(u)**(df-1) du,
    c = Gamma((df+1)/2) / (sqrt(pi) * Gamma(df/2)),

a smooth integrand on a bounded interval (for ``df >= 1``): Gauss–Legendre quadrature on
128 nodes, over the part where the integrand is above ``exp(-40)``, gives it within 1e-7
(far better except in the extreme tail of fewer than 2 degrees of freedom).  Quantiles
solve ``F(t) = p`` by Newton's method (the density is known in closed form) from the
Cornish–Fisher approximation (Abramowitz & Stegun 26.7.5), which converges in two or three
steps.  The tests check both against exact closed forms (``df = 1``: Cauchy; ``df = 2``)
and known table values.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np

#: Gauss–Legendre nodes and weights on [-1, 1] for the CDF's integral.
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(128)
#: Newton steps of a quantile, at most (it converges to 1e-12 in far fewer).
_NEWTON_STEPS = 50


def _constant(df: float) -> float:
    return math.exp(math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0)) / math.sqrt(math.pi)


def _check(df: float) -> None:
    if not df >= 1.0 or not math.isfinite(df):
        raise ValueError(f"degrees of freedom {df!r}: expected a finite number >= 1")


def cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom (``df >= 1``)."""
    _check(df)
    if math.isnan(t):
        raise ValueError("t is not a number")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    end = math.atan(abs(t) / math.sqrt(df))
    if end == 0.0:
        return 0.5
    if df > 1.0:  # beyond this the integrand is below exp(-40): integrate where it lives
        end = min(end, math.sqrt(80.0 / (df - 1.0)))
    u = (_NODES + 1.0) * (end / 2.0)
    area = float(_WEIGHTS @ np.cos(u) ** (df - 1.0)) * end / 2.0
    half = min(_constant(df) * area, 0.5)
    return 0.5 + half if t > 0 else 0.5 - half


def pdf(t: float, df: float) -> float:
    """The density of Student's t at ``t``."""
    _check(df)
    density: float = _constant(df) / math.sqrt(df) * (1.0 + t * t / df) ** (-(df + 1.0) / 2.0)
    return density


def two_sided_p(t: float, df: float) -> float:
    """``P(|T| >= |t|)``."""
    return min(1.0, 2.0 * (1.0 - cdf(abs(t), df)))


@functools.lru_cache(maxsize=4096)
def quantile(p: float, df: float) -> float:
    """The ``t`` with ``P(T <= t) = p``, for ``0 < p < 1`` (remembered: a comparison asks
    for the same few levels and degrees of freedom many times)."""
    _check(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability {p!r} is outside (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -quantile(1.0 - p, df)
    if df == 1.0:
        return math.tan(math.pi * (p - 0.5))
    z = NormalDist().inv_cdf(p)
    t = z + (z**3 + z) / (4.0 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96.0 * df * df)
    for _ in range(_NEWTON_STEPS):
        step = (cdf(t, df) - p) / pdf(t, df)
        # Newton overshoots towards 0 in the far tail of few degrees of freedom: halve instead
        t = t - step if t - step > 0 else t / 2.0
        if abs(step) <= 1e-12 * max(1.0, t):
            break
    return t


__all__ = ["cdf", "pdf", "quantile", "two_sided_p"]
