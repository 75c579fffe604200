"""Rank 0's side of the global warm-up: when the cluster is warm, when the warm-up ends.

Pure logic on known per-second counts (the workers' side runs in the end-to-end test).
"""

from __future__ import annotations

import random

import pytest

from esdash.bench.warmup import GAP, WarmupJudge, WarmupSchedule


def counts(rate: float, seconds: int, rng: random.Random) -> dict:
    return {"bins": [round(rate * (1 + rng.uniform(-0.02, 0.02))) for _ in range(seconds)]}


def drive(judge: WarmupJudge, rates: dict[str, list[float]], ranks: int = 2):
    """Report round after round; return the decision and the moment it was made."""
    schedule = judge.schedule
    rng = random.Random(5)
    rounds = len(next(iter(rates.values())))
    for round_ in range(rounds):
        for rank in range(1, ranks + 1):
            judge.add(
                rank,
                round_,
                {q: counts(r[round_] / ranks, int(schedule.slot), rng) for q, r in rates.items()},
            )
        moment = schedule.round_start(round_ + 1) + 0.1  # just after the round ended
        decided = judge.poll(moment, set(range(1, ranks + 1)))
        if decided is not None:
            return decided, round_
    return None, rounds


def test_steady_queries_end_the_warm_up_after_three_rounds():
    schedule = WarmupSchedule(start=0.0, queries=("a", "b"), slot=5.0, bound=300.0)
    judge = WarmupJudge(schedule)
    decided, judged = drive(judge, {"a": [400.0] * 10, "b": [200.0] * 10})
    assert decided is not None and judged == 2  # rounds 0..2 judged steady
    last_round, steps_start = decided
    assert last_round == 3  # the round running when the decision was made
    assert steps_start == schedule.round_start(4) + GAP
    result = judge.result()
    assert result.converged and all(q.converged for q in result.queries.values())


def test_the_round_after_the_decision_is_judged_and_listed_with_the_others():
    """The round running when the cluster was called warm also runs; the results' verdict is
    over it, so its trend and JIT figures are listed too (one per round that ran)."""
    schedule = WarmupSchedule(start=0.0, queries=("a", "b"), slot=5.0, bound=300.0)
    judge = WarmupJudge(schedule)
    rates = {"a": [400.0] * 4, "b": [200.0] * 4}
    (last_round, _), _ = drive(judge, rates)
    rng = random.Random(9)
    for rank in (1, 2):  # the last round's reports arrive after the decision
        judge.add(
            rank, last_round, {q: counts(r[last_round] / 2, 5, rng) for q, r in rates.items()}
        )
    result = judge.result()
    assert result.rounds == last_round + 1 == len(result.trend) == len(result.jit_cores)
    assert result.reason.startswith(f"throughput flat ({100 * result.trend[-1]:+.1f} %/min)")


def test_a_rising_query_keeps_the_warm_up_going_until_it_levels_off():
    schedule = WarmupSchedule(start=0.0, queries=("a", "b"), slot=5.0, bound=300.0)
    judge = WarmupJudge(schedule)
    rising = [100.0, 150.0, 200.0, 250.0, 300.0, 300.0, 300.0, 300.0, 300.0, 300.0]
    decided, judged = drive(judge, {"a": rising, "b": [200.0] * 10})
    assert decided is not None and judged == 6  # rounds 4, 5, 6 are the first steady three
    assert judge.result().queries["a"].rounds[:2] == pytest.approx([100.0, 150.0], rel=0.03)


def test_the_bound_ends_a_warm_up_that_never_converges_and_says_so():
    schedule = WarmupSchedule(start=0.0, queries=("a",), slot=5.0, bound=30.0)
    judge = WarmupJudge(schedule)
    decided, _ = drive(judge, {"a": [100.0 * (k + 1) for k in range(10)]})
    assert decided is not None
    last_round, _ = decided
    assert last_round == schedule.max_rounds - 1 == 5  # 30 s of 5 s rounds
    result = judge.result()
    assert not result.converged and not result.queries["a"].converged
    assert result.rounds == 6 and result.seconds == 30.0


def test_a_late_rank_is_waited_for_a_moment_then_judged_without():
    schedule = WarmupSchedule(start=0.0, queries=("a",), slot=5.0, bound=300.0)
    judge = WarmupJudge(schedule)
    judge.add(1, 0, {"a": {"bins": [10] * 5}})
    assert judge.poll(5.1, {1, 2}) is None and judge.judged == -1  # rank 2 may still come
    judge.poll(5.0 + 2.5, {1, 2})
    assert judge.judged == 0  # judged with what arrived


def test_a_query_that_fails_every_request_is_not_waited_for_and_is_named():
    schedule = WarmupSchedule(start=0.0, queries=("good", "broken"), slot=2.0, bound=300.0)
    judge = WarmupJudge(schedule)
    rng = random.Random(3)
    failing = {"bins": [0, 0], "errors": 9, "error": "HTTP 400: failed to parse date field"}
    for round_ in range(10):
        for rank in (1, 2):
            judge.add(rank, round_, {"good": counts(100.0, 2, rng), "broken": failing})
        decided = judge.poll(schedule.round_start(round_ + 1) + 0.1, {1, 2})
        if decided is not None:
            break
    # decided as soon as the cluster is warm for "good" (rounds 0..2), far from the bound;
    # the failing query is left out of the judgement and is not steady itself
    assert decided is not None and round_ == 2
    assert judge.failing == {"broken": "HTTP 400: failed to parse date field"}
    result = judge.result()
    assert result.converged and not result.queries["broken"].converged
    assert result.queries["broken"].errors == 2 * 3 * 9
