"""What results.json says about trust, built by the real accumulator from real recorder payloads.

No cluster: a :class:`Recorder` with a driven clock records known requests per interval, the
payloads go through :class:`RunAccumulator` and :func:`build_results` as rank 0 feeds them.
"""

from __future__ import annotations

import random

import pytest

from esdash.bench.recorder import Recorder
from esdash.bench.results import RunAccumulator, build_results
from esdash.bench.rounds import rounds_result
from esdash.errors import BadInput
from esdash.prepare.plan import in_rounds
from esdash.references import parse_references
from esdash.rundir.records import (
    BenchInfo,
    BenchPlan,
    Header,
    PlannedQuery,
    PlannedStep,
    PlannedStepInfo,
    Topology,
)
from esdash.view.references import judge, misses, render_references

INTERVAL = 1.0


def header(steps: list[PlannedStepInfo], ranks: int = 2) -> Header:
    return Header(
        schema="esdash.stream/1",
        run_id="trust",
        session={},
        plugins={},
        topology=Topology(cluster_name="c", nodes=()),
        bench=BenchInfo(ranks=ranks),
        started=0.0,
        interval=INTERVAL,
        steps=steps,
    )


def feed(
    acc: RunAccumulator,
    step: int,
    rates: list[float],
    *,
    ranks: int = 2,
    seconds: list[float] | None = None,
    latency: float = 0.01,
    query: str = "q",
) -> None:
    """``rates[i]`` successful requests per second in interval ``i``, split over the ranks.

    ``seconds[r]`` cuts rank ``r + 1``'s measurement short (it stops reporting).
    """
    for rank in range(1, ranks + 1):
        now = [0.0]
        recorder = Recorder(rank, clock=lambda now=now: now[0])
        stop = (seconds or [len(rates)] * ranks)[rank - 1]
        for seq, rate in enumerate(rates):
            if seq >= stop:
                break
            for _ in range(round(rate / ranks)):
                recorder.record(query, "node-0", latency, latency, 1, 10)
            now[0] += INTERVAL
            acc.add_interval("measure", step, rank, recorder.drain(), seq=1000 * step + seq)


def noisy(values: list[float], seed: int) -> list[float]:
    rng = random.Random(seed)
    return [v * (1 + rng.uniform(-0.05, 0.05)) for v in values]


def test_a_ramp_of_50_percent_per_minute_is_flagged_and_a_constant_load_is_not():
    acc = RunAccumulator(INTERVAL)
    base = 200.0
    # +50 %/min of the starting rate, over a 60 s step, with 5 % noise
    feed(acc, 0, noisy([base * (1 + 0.5 * t / 60) for t in range(60)], seed=1))
    feed(acc, 1, noisy([base] * 60, seed=2))
    steps = [PlannedStepInfo(name=n, queries=["q"], duration=60.0) for n in ("ramp", "flat")]
    results = build_results(header(steps), acc)
    ramp, flat = results.steps
    assert ramp.steadiness is not None and not ramp.steadiness.steady
    assert ramp.steadiness.throughput.slope_pct_per_min is not None
    assert ramp.steadiness.throughput.slope_pct_per_min > 30  # relative to the mean
    assert ramp.steadiness.label.startswith("not steady: throughput +")
    assert flat.steadiness is not None and flat.steadiness.steady
    assert flat.steadiness.label == "steady"
    assert ramp.status == flat.status == "measured"


def test_throughput_divides_by_the_seconds_measured_and_early_ends_are_labelled():
    acc = RunAccumulator(INTERVAL)
    feed(acc, 0, [100.0] * 10)  # the whole planned 10 s
    feed(acc, 1, [100.0] * 10, seconds=[4, 4])  # both ranks stop after 4 s
    feed(acc, 2, [100.0] * 10, seconds=[10, 3])  # rank 2 is lost after 3 s
    steps = [PlannedStepInfo(name=f"s{k}", queries=["q"], duration=10.0) for k in range(3)]
    whole, short, lost = build_results(header(steps), acc).steps
    assert whole.status == "measured" and whole.duration_s == pytest.approx(10.0)
    assert whole.queries["q"].throughput.requests_per_s == pytest.approx(100.0)
    # 400 requests in the 4 s measured, not in the 10 s planned
    assert short.status == "ended early" and short.duration_s == pytest.approx(4.0)
    assert short.queries["q"].throughput.requests_per_s == pytest.approx(100.0)
    assert lost.status == "lost ranks (1 of 2 measured it all)"


def planned(name: str, runnable: bool = True) -> PlannedStep:
    query = PlannedQuery(
        name=name, index="i", body={}, unsupported=None if runnable else "needs painless"
    )
    return PlannedStep(
        name=name, queries=(query,), warmup=0.0, duration=1.0, target_throughput=None
    )


def test_rounds_follow_a_balanced_design_and_unsupported_steps_come_once_at_the_end():
    steps = (planned("a"), planned("b"), planned("x", runnable=False), planned("c"))
    sequence = in_rounds(steps, "balanced", 6, seed=3)
    measured = [s for s in sequence if s.runnable]
    assert len(measured) == 18 and sequence[-1].name == "x" and sequence[-1].position == -1
    for name in "abc":  # every step in every position equally often
        positions = sorted(s.position for s in measured if s.name == name)
        assert positions == [0, 0, 1, 1, 2, 2]
    assert in_rounds(steps, "balanced", 6, seed=3) == sequence  # reproducible from the seed
    assert in_rounds(steps, "listed", 1, seed=3) == steps  # as listed, unchanged
    with pytest.raises(BadInput, match="benchmark.repetitions"):
        in_rounds(steps, "balanced", 4, seed=3)  # 3 steps: multiples of 6


def test_the_median_over_rounds_has_an_interval_and_the_position_effect_shows_the_order():
    names = ["a", "b"]
    steps = tuple(planned(n) for n in names)
    sequence = in_rounds(steps, "balanced", 6, seed=1)
    acc = RunAccumulator(INTERVAL)
    for k, step in enumerate(sequence):
        rate = 100.0 if step.name == "a" else 50.0
        rate *= 1.2 if step.position == 0 else 1.0  # the first slot is faster
        feed(acc, k, [rate] * 4, query=step.name)
    infos = [
        PlannedStepInfo(
            name=s.name, queries=[s.name], duration=4.0, round=s.round, position=s.position
        )
        for s in sequence
    ]
    results = build_results(header(infos), acc)
    plan = BenchPlan(
        index="i",
        index_body={},
        corpus_path="",
        corpus_documents=None,
        corpus_has_actions=False,
        bulk_size=1,
        steps=sequence,
        interval=INTERVAL,
        seed=1,
        ranks=2,
        order="balanced",
        repetitions=6,
    )
    rounds = rounds_result(plan, results)
    assert rounds is not None and len(rounds.sequences) == 6
    by_query = {q.query: q for q in rounds.queries}
    a = by_query["a"]
    assert a.n == 6 and a.kind == "ci" and a.coverage == pytest.approx(0.96875)
    assert a.low == pytest.approx(100.0) and a.high == pytest.approx(120.0)
    assert rounds.first_to_last == pytest.approx(1.2, rel=0.01)


def test_references_are_within_better_or_worse_and_a_miss_names_the_figure():
    acc = RunAccumulator(INTERVAL)
    feed(acc, 0, [100.0] * 10, latency=0.008)
    steps = [PlannedStepInfo(name="s", queries=["q"], duration=10.0)]
    results = build_results(header(steps), acc)
    references = parse_references(
        {
            "q": {
                "throughput": [200, -0.1, 0.1],  # 100/s: worse by 50 %
                "p50": [8.0, -0.2, 0.2],  # 8 ms: within
                "error_rate": [0.0, 0.0, 0.01],  # none failed: within
            }
        }
    )
    judged = judge(results, references)
    verdicts = {j.reference.figure: j.verdict for j in judged}
    assert verdicts == {"throughput": "worse", "p50": "within", "error_rate": "within"}
    (miss,) = misses(judged)
    assert "q throughput" in miss.message and "-50.0 %" in miss.message
    assert any(line.startswith("  MISS q throughput") for line in render_references(judged))
    better = judge(results, parse_references({"q": {"throughput": [50, -0.1, 0.1]}}))
    assert [j.verdict for j in better] == ["better"]
    nowhere = judge(results, parse_references({"nope": {"p99": [1, -0.1, 0.1]}}))
    assert [j.verdict for j in nowhere] == ["missing"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"q": {"throughput": [1, 2]}}, "references.q.throughput: expected three numbers"),
        ({"q": {"speed": [1, 0, 0]}}, "references.q.speed: unknown figure"),
        ({"q": {"p50": [1, 0.1, 0.2]}}, "lower must be <= 0 <= upper"),
        ({"q": 3}, "references.q: expected a table of figures"),
    ],
)
def test_bad_references_name_the_key_and_the_fix(table, message):
    with pytest.raises(BadInput, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse_references(table)
