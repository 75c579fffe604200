"""A counted step's schedule and status, without a cluster: the windows rank 0 follows, its
word to the workers once every one is done, and the status the ranks' reports give.

The run itself (real ranks, a real cluster) is tests/bench/test_rally_iterations.py; these
pin the decisions a real run rarely reaches: a step that hits its time limit, a rank lost
during it, a decision that comes after the limit.
"""

from __future__ import annotations

from esdash.bench.conductor import STEP_LEAD, Conductor, step_end_kind, step_windows
from esdash.bench.sink import counted_status
from esdash.rundir.records import BenchPlan, JsonObject, PlannedQuery, PlannedStep

QUERY = (PlannedQuery(name="q", index="i", body={"query": {"match_all": {}}}),)


def step(name: str, **timing: object) -> PlannedStep:
    fields: dict = {"warmup": 0.0, "duration": 10.0, "target_throughput": None, **timing}
    return PlannedStep(name=name, queries=QUERY, **fields)


def plan(*steps: PlannedStep) -> BenchPlan:
    return BenchPlan(
        index="i",
        index_body={},
        corpus_path="",
        corpus_documents=0,
        corpus_has_actions=False,
        bulk_size=10,
        steps=steps,
        interval=1.0,
        seed=1,
        ranks=3,
    )


STEPS = plan(
    step("timed", warmup=2.0, duration=5.0, pause=1.0),
    step("counted", warmup=60.0, duration=300.0, warmup_iterations=3, iterations=10),
    step("after", duration=5.0, pause=1.0),
)


def test_a_counted_window_spans_its_warm_up_and_ends_at_its_limit_until_rank_0_knows():
    windows = step_windows(STEPS, 100.0)
    # timed: pause 1, warm-up 2, measured 103..108; counted: the reading starts with its
    # warm-up (its end is not known) and ends at the limits; the next step follows those
    assert [(w.index, w.start, w.end) for w in windows] == [
        (0, 103.0, 108.0),
        (1, 108.0, 468.0),
        (2, 469.0, 474.0),
    ]
    assert step_windows(STEPS, 200.0, first=2)[0].start == 201.0


def conductor() -> tuple[Conductor, list[JsonObject]]:
    posted: list[JsonObject] = []
    # the sink and control client are not used by the decision
    made = Conductor(posted.append, 2, STEPS, None, None, False)  # type: ignore[arg-type]
    made.phase, made.windows = "steps", step_windows(STEPS, 100.0)
    return made, posted


def test_rank_0_announces_the_end_once_every_expected_worker_is_done():
    made, posted = conductor()
    made.add_step_done({"rank": 1, "step": 1})
    made._end_counted_step(120.0, {1, 2})
    assert posted == []  # rank 2 is still counting
    made.add_step_done({"rank": 2, "step": 1})
    made._end_counted_step(121.0, {1, 2})
    assert posted == [
        {"kind": step_end_kind(1), "step": 1, "ended": 121.0, "next": 121.0 + STEP_LEAD}
    ]
    # the counted window ends now, the next step's moves up to the announced start
    assert [(w.index, w.start, w.end) for w in made.windows] == [
        (0, 103.0, 108.0),
        (1, 108.0, 121.0),
        (2, 121.0 + STEP_LEAD + 1.0, 121.0 + STEP_LEAD + 6.0),
    ]
    made._end_counted_step(122.0, {1, 2})
    assert len(posted) == 1  # said once


def test_a_lost_worker_is_not_waited_for_and_a_late_decision_keeps_the_limit():
    made, posted = conductor()
    made.add_step_done({"rank": 1, "step": 1})
    made._end_counted_step(500.0, {1})  # rank 2 lost; the limit (468) has passed
    assert posted[0]["ended"] == 468.0 and posted[0]["next"] == 468.0  # as workers went on


def final(*steps: JsonObject) -> JsonObject:
    return {"steps": list(steps)}


def test_the_status_says_when_clients_stopped_at_the_limit_or_ranks_did_not_report():
    counted = STEPS.steps[1]  # 10 iterations per client, one client per rank (2 ranks)

    def report(planned: int, sent: int) -> JsonObject:
        return {"index": 1, "iterations": {"planned": planned, "sent": sent}}

    assert counted_status(1, counted, {1: final(report(10, 10)), 2: final(report(10, 10))}, 2) == (
        "measured"
    )
    assert counted_status(1, counted, {1: final(report(10, 10)), 2: final(report(10, 7))}, 2) == (
        "ended early (time limit of 300 s: 17 of 20 iterations sent)"
    )
    assert counted_status(1, counted, {1: final(report(10, 10))}, 2) == (
        "lost ranks (1 of 2 reported their iterations)"
    )
