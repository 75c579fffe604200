"""Trend tests: Mann–Kendall (exact and approximate), Theil–Sen, CV, steadiness, warm-up.

Exact p-values are checked against brute-force enumeration of permutations and published
table values; the normal approximation against the formula computed here with numpy; the
steadiness rule on seeded series shaped like a benchmark step (60 one-second intervals).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.stats.trend import (
    converged,
    cv,
    exact_p,
    inversion_counts,
    mann_kendall,
    relative_slope,
    steadiness,
    theil_sen,
)


def brute_force_p(values: list[float]) -> float:
    """P(|S| >= |s|) over every permutation of ``values`` (no ties): the definition."""
    s = mann_kendall(values).s
    perms = list(itertools.permutations(values))
    extreme = sum(abs(mann_kendall(list(p)).s) >= abs(s) for p in perms)
    return extreme / len(perms)


@pytest.mark.parametrize(
    ("values", "s", "p"),
    [
        ([1, 2, 3], 3, 2 / 6),
        ([1, 2, 3, 4], 6, 2 / 24),
        ([4, 3, 2, 1], -6, 2 / 24),
        ([1, 2, 3, 4, 5], 10, 2 / 120),
        # n=5, S=8: one-sided 5/120 = 0.042 (Mann–Kendall tables), two-sided twice that
        ([1, 2, 3, 5, 4], 8, 10 / 120),
        # n=6, S=13: one-sided 6/720 = 0.0083 (tables)
        ([1, 2, 3, 4, 6, 5], 13, 12 / 720),
        (list(range(10)), 45, 2 / math.factorial(10)),
    ],
)
def test_exact_p_of_known_small_cases(values, s, p):
    result = mann_kendall(values)
    assert result.s == s and result.exact
    assert result.p == pytest.approx(p, rel=1e-12)


def test_mahonian_numbers():
    assert inversion_counts(4) == [1, 3, 5, 6, 5, 3, 1]
    for n in range(1, 9):
        assert sum(inversion_counts(n)) == math.factorial(n)


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(range(6))))
def test_exact_p_is_the_permutation_distribution(order):
    assert mann_kendall(order).p == pytest.approx(brute_force_p(list(order)), abs=1e-12)


def _normal_reference(values: np.ndarray) -> tuple[int, float]:
    """S and the two-sided p of the normal approximation, written out with numpy."""
    n = values.size
    signs = np.sign(values[None, :] - values[:, None])
    s = int(np.triu(signs, k=1).sum())
    _, ties = np.unique(values, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - np.sum(ties * (ties - 1) * (2 * ties + 5))) / 18
    z = (s - np.sign(s)) / math.sqrt(var) if s else 0.0
    return s, math.erfc(abs(z) / math.sqrt(2))


@settings(max_examples=40, deadline=None)
@given(st.integers(11, 80), st.integers(0, 2**32 - 1), st.booleans())
def test_normal_approximation_for_large_n(n, seed, rounded):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=n) + np.linspace(0, rng.uniform(-1, 1), n)
    if rounded:
        values = np.round(values, 1)  # ties: the variance is corrected for them
    result = mann_kendall(values.tolist())
    s, p = _normal_reference(values)
    assert not result.exact
    assert result.s == s
    assert result.p == pytest.approx(p, rel=1e-9, abs=1e-15)


def test_exact_and_normal_agree_at_the_switch():
    """At n = 10 the approximation is already close to the exact distribution."""
    for s in (5, 11, 15, 21, 27):
        z = (s - 1) / math.sqrt(10 * 9 * 25 / 18)
        assert exact_p(10, s) == pytest.approx(math.erfc(z / math.sqrt(2)), abs=0.01)


def test_ties_and_degenerate_series():
    assert mann_kendall([]).p == 1.0 and mann_kendall([3.0]).s == 0
    constant = mann_kendall([2.0] * 8)
    assert constant.s == 0 and constant.p == 1.0 and not constant.exact
    tied = mann_kendall([1, 1, 2, 2, 3])
    assert not tied.exact and tied.s == 8


def test_cv_and_slopes():
    assert cv([1.0]) is None and cv([0.0, 0.0]) is None
    assert cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)
    assert theil_sen([0, 1, 2, 3, 4, 5], [1, 3, 5, 7, 9, 100]) == pytest.approx(2.0)  # 1 outlier
    assert theil_sen([1, 1], [1, 2]) is None
    # +1 per second around a mean of 100: 60 % per minute
    times = list(range(0, 21))
    assert relative_slope(times, [90.0 + t for t in times]) == pytest.approx(60.0)
    assert relative_slope([0, 1], [-1.0, 1.0]) is None  # mean 0


def ramp_series(slope_pct_per_min: float, seed: int) -> tuple[list[float], list[float]]:
    """A 60 s step at 1 s intervals: 100 req/s ramping by ``slope`` of it, with 5 % noise."""
    rng = np.random.default_rng(seed)
    times = np.arange(1.0, 61.0)
    level = 100.0 * (1 + slope_pct_per_min / 100 * times / 60)
    values = level * (1 + 0.05 * rng.standard_normal(times.size))
    return times.tolist(), values.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_a_ramp_of_50_pct_per_minute_is_not_steady(seed):
    result = steadiness(*ramp_series(50.0, seed))
    assert not result.steady
    assert result.p_value is not None and result.p_value < 1e-6
    # relative to the mean (125), +50 per minute of the start is +40 %/min
    assert result.slope_pct_per_min == pytest.approx(40.0, abs=6.0)
    assert result.label.startswith("not steady: +") and result.label.endswith(" %/min")


@pytest.mark.parametrize("seed", range(5))
def test_a_constant_load_with_the_same_noise_is_steady(seed):
    result = steadiness(*ramp_series(0.0, seed))
    assert result.steady and result.label == "steady"
    assert result.cv == pytest.approx(0.05, abs=0.015)


def test_a_falling_series_is_labelled_with_its_sign():
    times = [float(t) for t in range(30)]
    result = steadiness(times, [200.0 - 2 * t for t in times])
    assert not result.steady and result.label.startswith("not steady: -")


def test_a_tiny_significant_drift_is_not_flagged():
    times = [float(t) for t in range(60)]
    result = steadiness(times, [100.0 + 0.01 * t for t in times])  # +0.6 %/min
    assert result.p_value is not None and result.p_value < 1e-6
    assert result.steady


def test_too_short_to_judge():
    result = steadiness([0.0, 1.0, 2.0], [1.0, 5.0, 9.0])
    assert result.steady and result.p_value is None
    assert result.label == "too short to judge (n=3)"
    with pytest.raises(ValueError):
        steadiness([0.0], [1.0, 2.0])


def test_times_need_not_arrive_sorted():
    times, values = ramp_series(50.0, 0)
    shuffled = list(zip(times, values, strict=True))[::-1]
    result = steadiness([t for t, _ in shuffled], [v for _, v in shuffled])
    assert result == steadiness(times, values)


def test_warm_up_convergence():
    assert converged([100.0, 101.0, 99.0])
    assert not converged([100.0, 120.0, 80.0])  # CV 20 %
    assert not converged([100.0, 100.5, 101.0, 101.5, 102.0, 102.5, 103.0])  # CV 1 %, a trend
    assert not converged([100.0])
