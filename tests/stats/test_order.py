"""Step orders: the Williams design's balance, and reproducible rounds from a seed."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.plugin.order import minimum_repetitions, resolve, step_orders, williams_design


def assert_balanced(rounds: list[list[int]], k: int) -> None:
    """Every item in every position equally often, every ordered neighbour pair too."""
    assert all(sorted(order) == list(range(k)) for order in rounds)
    positions = Counter((position, item) for order in rounds for position, item in enumerate(order))
    assert len(positions) == k * k and len(set(positions.values())) == 1
    pairs = Counter(pair for order in rounds for pair in zip(order[:-1], order[1:], strict=True))
    assert all(a != b for a, b in pairs)
    if k > 1:
        assert len(pairs) == k * (k - 1) and len(set(pairs.values())) == 1


@given(st.integers(1, 9))
def test_williams_design_is_balanced(k):
    design = williams_design(k)
    assert len(design) == (k if k % 2 == 0 else 2 * k)
    assert_balanced(design, k)


def test_williams_design_of_four():
    assert williams_design(4) == [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]


@pytest.mark.parametrize(
    ("k", "order", "minimum"),
    [
        (4, "balanced", 4),
        (5, "balanced", 10),
        (1, "balanced", 2),
        (5, "listed", 1),
        (5, "random", 1),
    ],
)
def test_minimum_repetitions(k, order, minimum):
    assert minimum_repetitions(k, order) == minimum


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 3), st.integers(0, 2**32))
def test_balanced_rounds_stay_balanced_and_follow_the_seed(k, blocks, seed):
    minimum = minimum_repetitions(k, "balanced")
    rounds = step_orders(k, "balanced", blocks * minimum, seed)
    assert len(rounds) == blocks * minimum
    for start in range(0, len(rounds), minimum):
        assert_balanced(rounds[start : start + minimum], k)
    assert step_orders(k, "balanced", blocks * minimum, seed) == rounds


def test_the_seed_changes_the_balanced_rounds():
    orders = {tuple(map(tuple, step_orders(6, "balanced", 6, seed))) for seed in range(10)}
    assert len(orders) > 1


@given(st.integers(2, 9), st.integers(1, 12), st.integers(0, 2**32))
def test_random_rounds_are_seeded_permutations(k, repetitions, seed):
    rounds = step_orders(k, "random", repetitions, seed)
    assert len(rounds) == repetitions
    assert all(sorted(order) == list(range(k)) for order in rounds)
    assert step_orders(k, "random", repetitions, seed) == rounds


def test_listed_rounds():
    assert step_orders(3, "listed", 2, seed=7) == [[0, 1, 2], [0, 1, 2]]


def test_balanced_needs_a_multiple_of_the_minimum():
    with pytest.raises(ValueError, match="multiple of 6"):
        step_orders(3, "balanced", 4, seed=1)
    with pytest.raises(ValueError, match="multiple of 4"):
        step_orders(4, "balanced", 6, seed=1)
    with pytest.raises(ValueError):
        step_orders(3, "listed", 0, seed=1)
    with pytest.raises(ValueError):
        williams_design(0)
    with pytest.raises(ValueError, match="unknown order"):
        minimum_repetitions(3, "sorted")  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [1, 2, 6, 7])
def test_mirrored_rounds_alternate_the_listed_order_and_its_reverse(k):
    rounds = step_orders(k, "mirrored", 4, seed=3)
    listed, reverse = list(range(k)), list(range(k - 1, -1, -1))
    assert rounds == [listed, reverse, listed, reverse]
    # every step's positions add up to the same sum: a linear drift moves each step alike
    sums = Counter()
    for order in rounds:
        for position, item in enumerate(order):
            sums[item] += position
    assert len(set(sums.values())) == 1
    assert step_orders(k, "mirrored", 4, seed=99) == rounds  # the seed plays no part


def test_mirrored_rounds_come_in_pairs():
    assert minimum_repetitions(5, "mirrored") == 2
    with pytest.raises(ValueError, match="even number of rounds"):
        step_orders(5, "mirrored", 3, seed=0)


@pytest.mark.parametrize(
    ("order", "repetitions", "fixed", "expected"),
    [
        ("auto", None, False, ("mirrored", 2)),
        ("auto", None, True, ("listed", 1)),
        ("auto", 4, False, ("mirrored", 4)),
        ("auto", 3, True, ("listed", 3)),
        ("listed", None, False, ("listed", 1)),
        ("mirrored", None, True, ("mirrored", 2)),
        ("random", None, False, ("random", 1)),
        ("balanced", 6, False, ("balanced", 6)),
    ],
)
def test_resolve_says_what_a_sessions_order_means(order, repetitions, fixed, expected):
    assert resolve(order, repetitions, fixed) == expected


def test_resolve_refuses_an_unknown_order():
    with pytest.raises(ValueError, match="unknown order 'sorted': use one of auto, listed"):
        resolve("sorted", None, False)
