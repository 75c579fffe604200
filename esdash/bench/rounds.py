"""Rounds inside one run: each query's median over the rounds, its interval, the position effect.

With ``benchmark.repetitions = N`` every step runs N times on the same cluster, in the order
``benchmark.order`` gives each round (:mod:`esdash.plugin.order`).  One round's figure is one
observation; the run reports per query the median over the rounds with the distribution-free
confidence interval of the median (order statistics; for N >= 6 its coverage is >= 96.9 %),
and below 6 rounds only the range, labelled ``range, n=N`` -- too few rounds for an interval.

The position effect pools every query: per position in the round, the median throughput
relative to the query's own median.  With a balanced order each query is seen in every
position equally often, so a first/last ratio far from 1 shows what the order would have
done to a single listed run.
"""

from __future__ import annotations

from esdash.rundir.records import BenchPlan, QueryRounds, Results, RoundsResult
from esdash.stats.rounds import median_interval, position_effect


def rounds_result(plan: BenchPlan, results: Results) -> RoundsResult | None:
    """The per-query summary over rounds (None for a run of one round)."""
    if plan.repetitions <= 1:
        return None
    rounds = plan.repetitions
    sequences: list[list[str]] = [[] for _ in range(rounds)]
    values: dict[tuple[str, str], list[float | None]] = {}
    p50: dict[tuple[str, str], list[float | None]] = {}
    observations: list[list[tuple[int, str, float]]] = [[] for _ in range(rounds)]
    for step in results.steps:
        if step.position < 0 or not 0 <= step.round < rounds:
            continue  # not run (nothing could run it): outside the rounds
        sequences[step.round].append(step.name)
        measured = step.status == "measured"
        for query, data in step.queries.items():
            key = (step.name, query)
            values.setdefault(key, [None] * rounds)
            p50.setdefault(key, [None] * rounds)
            rate = data.throughput.requests_per_s if measured else None
            values[key][step.round] = rate
            p50[key][step.round] = data.latency.value("p50") if measured else None
            if rate is not None:
                observations[step.round].append((step.position, f"{step.name}/{query}", rate))
    summaries = []
    for (step_name, query), series in values.items():
        seen = [v for v in series if v is not None]
        interval = median_interval(seen) if seen else None
        summaries.append(
            QueryRounds(
                step=step_name,
                query=query,
                values=series,
                p50_ms=p50[(step_name, query)],
                n=len(seen),
                median=None if interval is None else round(interval.median, 3),
                low=None if interval is None else round(interval.low, 3),
                high=None if interval is None else round(interval.high, 3),
                kind="range" if interval is None else interval.kind,
                coverage=None if interval is None or interval.kind != "ci" else interval.coverage,
            )
        )
    effect = position_effect(observations)
    return RoundsResult(
        order=plan.order,
        repetitions=rounds,
        seed=plan.seed,
        sequences=sequences,
        queries=summaries,
        position_effect=[
            None if p not in effect.by_position else round(effect.by_position[p], 4)
            for p in range(max(effect.by_position, default=-1) + 1)
        ],
        first_to_last=None if effect.first_over_last is None else round(effect.first_over_last, 4),
    )
