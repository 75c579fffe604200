"""The median over rounds with its order-statistic interval, and the position effect.

Coverage is recomputed here from Pascal's triangle in exact fractions (not with the
module's binomial sum), and checked by simulation against a known median.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.plugin.order import step_orders
from esdash.stats.rounds import median_interval, position_effect


def coverage_of(n: int, j: int) -> Fraction:
    """P(x_(j) <= median <= x_(n+1-j)): 1 - 2 P(Bin(n, 1/2) <= j-1), from Pascal's triangle."""
    row = [1]
    for _ in range(n):
        row = [a + b for a, b in zip([0, *row], [*row, 0], strict=True)]
    below = sum(row[:j])
    return 1 - Fraction(2 * below, 2**n)


def test_six_rounds_give_min_max_at_96_875_pct():
    result = median_interval([5.0, 1.0, 4.0, 2.0, 6.0, 3.0])
    assert (result.low, result.median, result.high) == (1.0, 3.5, 6.0)
    assert result.kind == "ci" and result.coverage == 0.96875
    assert result.label == "96.9 % CI"


@pytest.mark.parametrize("n", [1, 2, 5])
def test_fewer_than_six_rounds_give_the_range(n):
    values = [float(v) for v in range(n, 0, -1)]
    result = median_interval(values)
    assert result.kind == "range" and result.label == f"range, n={n}"
    assert (result.low, result.high) == (1.0, float(n))


def test_bad_input():
    with pytest.raises(ValueError):
        median_interval([])
    with pytest.raises(ValueError):
        median_interval([1.0] * 6, coverage=1.0)


def test_a_coverage_min_max_cannot_reach_is_a_range():
    result = median_interval([float(v) for v in range(6)], coverage=0.99)
    assert result.kind == "range" and result.coverage == 0.96875


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=6, max_size=80, unique=True),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_the_interval_is_the_narrowest_reaching_the_coverage(values, coverage):
    result = median_interval(values, coverage)
    data = sorted(values)
    n = len(data)
    j = data.index(result.low) + 1
    assert result.high == data[n - j]
    assert result.n == n and result.median == pytest.approx(float(np.median(data)))
    achieved = coverage_of(n, j)
    assert result.coverage == pytest.approx(float(achieved), rel=1e-12)
    if result.kind == "ci":
        assert achieved >= Fraction(coverage)
        # one step narrower would fall short of the requested coverage
        assert j == n // 2 or coverage_of(n, j + 1) < Fraction(coverage)
    else:
        assert j == 1 and achieved < Fraction(coverage)


@pytest.mark.parametrize("n", [6, 9, 15])
def test_simulated_coverage_reaches_the_stated_one(n):
    rng = np.random.default_rng(n)
    trials = 4000
    samples = rng.lognormal(0.0, 1.0, size=(trials, n))  # true median 1.0
    hits = 0
    stated = None
    for row in samples:
        result = median_interval(row.tolist())
        hits += result.low <= 1.0 <= result.high
        stated = result.coverage
    assert stated is not None
    # 4 standard errors of a proportion below the stated coverage at most
    se = (stated * (1 - stated) / trials) ** 0.5
    assert hits / trials >= stated - 4 * se


def test_position_effect_finds_a_fast_first_slot():
    base = {"a": 100.0, "b": 40.0, "c": 250.0, "d": 10.0}
    names = sorted(base)
    rounds = []
    for order in step_orders(4, "balanced", 8, seed=3):
        rounds.append(
            [
                (position, names[step], base[names[step]] * (1.10 if position == 0 else 1.0))
                for position, step in enumerate(order)
            ]
        )
    effect = position_effect(rounds)
    assert effect.by_position == pytest.approx({0: 1.10, 1: 1.0, 2: 1.0, 3: 1.0})
    assert effect.first_over_last == pytest.approx(1.10)


def test_position_effect_edge_cases():
    assert position_effect([]).by_position == {}
    single = position_effect([[(0, "a", 5.0)], [(0, "a", 7.0)]])
    assert single.first_over_last is None
    never = position_effect([[(0, "a", 0.0), (1, "b", 2.0)], [(0, "b", 2.0), (1, "a", 0.0)]])
    assert never.by_position == {0: 1.0, 1: 1.0}  # "a" never succeeded: left out
