"""The Textual-free model behind the dashboard: folding, windows, replay, phases, staleness.

Inputs are real streams (the canned runs) and payloads from the real recorder; expected
values come from the measurement core (``esdash.stats.summarize`` on ``Merged`` data), so
the dashboard shows the same numbers ``results.json`` and ``esdash report`` do.
"""

from __future__ import annotations

import json
import math
import random

import msgspec
import pytest
from rich.console import Console
from support.records import event as event_record
from support.records import header as header_record
from support.records import interval as interval_record
from tuihelp import FIXTURES, RUN_A, RUN_B, records, typed

from esdash.bench.recorder import Recorder
from esdash.rundir import files, hdr
from esdash.rundir.records import ClusterSample, Results, RunInfo
from esdash.stats import bucket_counts, summarize
from esdash.stats.merge import Merged, OpData
from esdash.view.compare import relative_change
from esdash.view.model import (
    RunModel,
    Update,
    ViewParams,
    op_latency,
    step_counts,
    step_queries,
)

NOW = 2_000_000_000.0


def model_of(name: str, upto: int | None = None) -> RunModel:
    """A model fed with a canned run's stream (its first ``upto`` records) and samples."""
    model = RunModel(name)
    items = typed(records(FIXTURES / name))
    samples = [
        msgspec.json.decode(line, type=ClusterSample)
        for line in (FIXTURES / name / "cluster.jsonl").read_bytes().splitlines()
    ]
    model.apply(Update(records=items if upto is None else items[:upto], cluster=samples))
    return model


def payload(rank: int, op: str, n: int, seed: int, errors: int = 0) -> dict:
    rng = random.Random(seed)
    recorder = Recorder(rank=rank)
    for _ in range(n):
        value = rng.lognormvariate(math.log(0.004), 0.8)
        recorder.record(op, f"node-{rank % 2}", value, value, docs=10, nbytes=100)
    for _ in range(errors):
        recorder.record_error(op, "node-0", "http_429", 429, "rejected execution of search")
    return recorder.drain()


def test_counts_give_the_statistics_of_the_measurement_core():
    merged = Merged()
    acc = OpData()
    for rank in range(1, 9):
        data = payload(rank, "q", 400, seed=rank)
        merged.add(data)
        acc.add_payload(data.ops["q"])
    expected = summarize(merged.ops["q"].latency)
    latency = op_latency(acc)
    assert latency.count == expected.count == 3200
    for percentile in (50.0, 90.0, 99.0, 99.9):
        assert latency.p(percentile) == expected.percentiles[percentile]
    assert latency.gmean == pytest.approx(expected.gmean)
    assert latency.gstd == pytest.approx(expected.gstd)
    assert acc.requests == merged.ops["q"].requests


def test_percentiles_the_sample_count_cannot_support_are_left_out():
    acc = OpData()
    acc.add_payload(payload(1, "q", 150, seed=3).ops["q"])
    latency = op_latency(acc)
    assert latency.p(99.0) is not None  # 150 >= 100
    assert latency.p(99.9) is None  # needs 1000


def test_bucket_counts_keep_every_sample_on_a_shared_axis():
    data = payload(1, "q", 3000, seed=11)
    counts = hdr.decode(data.ops["q"].latency.hdr)
    ours = bucket_counts(counts, 20)
    assert sum(b.count for b in ours) == 3000
    assert all(a.high == pytest.approx(b.low) for a, b in zip(ours, ours[1:], strict=False))
    # a fixed axis for two histograms: everything still counted
    wide = bucket_counts(counts, 10, lowest=1e-3, highest=1.0)
    assert sum(b.count for b in wide) == 3000
    assert wide[0].low == pytest.approx(1e-3)


def test_a_finished_run_folds_to_its_results():
    model = model_of(RUN_A)
    snap = model.snapshot(ViewParams(), NOW)
    assert snap.finished and snap.status == "ok" and snap.phase == "done"
    assert snap.stalled is False
    assert snap.count == len(model.records) and snap.following
    assert snap.elapsed == model.final.t
    # the last step's cumulative numbers are those of results.json
    model.results = None
    results = json.loads((FIXTURES / RUN_A / "results.json").read_text())
    last = results["steps"][-1]
    ((query, op),) = last["queries"].items()
    row = next(r for r in snap.ops if r.name == query)
    assert row.requests == op["requests"]
    assert row.all.p(50.0) * 1000 == pytest.approx(op["latency"]["p50"])
    assert row.all.gmean * 1000 == pytest.approx(op["latency"]["gmean"], abs=1e-3)
    assert snap.ingest is not None and snap.ingest.done
    assert snap.ingest.docs_done == snap.ingest.docs_total == 2000
    assert snap.cluster is not None and snap.cluster.status == "green"
    assert snap.ranks_all == (1,) and snap.ranks_missing == ()


def test_replay_positions_show_the_run_as_it_was():
    model = model_of(RUN_A)
    first_measure = next(
        k for k, r in enumerate(model.records) if r.phase == "measure" and r.step == 0
    )
    snap = model.snapshot(ViewParams(upto=first_measure), NOW)
    assert not snap.following and snap.position == first_measure
    assert snap.phase.startswith("measuring step 1/3")
    (row,) = snap.ops
    assert row.requests == sum(op.requests for op in (model.records[first_measure].ops.values()))
    # back to an earlier point and forward again: the same answer as a fresh fold
    early = model.snapshot(ViewParams(upto=2), NOW)
    again = model.snapshot(ViewParams(upto=first_measure), NOW)
    assert again.ops == snap.ops and early.position == 2
    assert model.snapshot(ViewParams(upto=len(model.records) + 5), NOW).following


def test_the_sliding_window_covers_the_last_seconds_of_the_step():
    model = model_of(RUN_A)
    records_ = model.records
    last = len(records_) - 1
    step = records_[last].step
    snap = model.snapshot(ViewParams(window=2.0), NOW)
    (row,) = snap.ops
    t = records_[last].t
    in_window = [r for r in records_ if r.step == step and r.phase == "measure" and r.t > t - 2]
    assert row.window_requests == sum(op.requests for r in in_window for op in r.ops.values())
    assert row.window_requests < row.requests


def test_a_silent_writer_is_stalled_and_a_finished_run_never_is():
    model = model_of(RUN_A, upto=20)
    last_wall = model.records[-1].wall
    assert not model.snapshot(ViewParams(), last_wall + 1.0).stalled
    snap = model.snapshot(ViewParams(), last_wall + 60.0)
    assert snap.stalled and snap.age == pytest.approx(60.0)
    assert not model_of(RUN_A).snapshot(ViewParams(), last_wall + 3600).stalled


def test_phases_before_and_during_the_stream():
    model = RunModel("r")
    assert model.snapshot(ViewParams(), NOW).phase == "waiting for the run to start"
    model.apply(Update(run_info=RunInfo(state="queued", submitted=True, slurm_job="42")))
    model.apply(Update(slurm_state="PENDING"))
    snap = model.snapshot(ViewParams(), NOW)
    assert snap.phase_key == "queued" and snap.slurm_job == "42"
    model.apply(Update(run_info=RunInfo(state="starting"), slurm_state="RUNNING"))
    assert model.snapshot(ViewParams(), NOW).phase == "starting cluster"
    items = typed(records(FIXTURES / RUN_A))
    model.apply(Update(records=items[:1]))
    assert model.snapshot(ViewParams(), NOW).phase == "starting benchmark"
    model.apply(Update(records=items[1:5]))
    assert model.snapshot(ViewParams(), NOW).phase == "ingest"


def _header(ranks: int):
    return header_record(
        run_id="synthetic",
        session={"name": "s", "encryption": {"mode": "abe"}, "cluster": {"interconnect": "opa"}},
        plugins={},
        topology_={"nodes": [{"name": "node-0"}, {"name": "node-1"}]},
        bench_ranks=[{"rank": r, "host": "h", "target": None} for r in range(1, ranks + 1)],
        slurm_job_id="77",
        started=NOW,
        interval=1.0,
        steps=[{"name": "s0", "queries": ["q"], "warmup": 1, "duration": 10}],
        docs_total=1000,
    )


def test_missing_and_lost_ranks_and_errors_by_class():
    model = RunModel()
    merged = Merged()
    for rank in (1, 3):
        merged.add(payload(rank, "q", 50, seed=rank, errors=2))
    record = interval_record(
        seq=0,
        t=1.0,
        wall=NOW + 1,
        phase="measure",
        step=0,
        step_name="s0",
        elapsed=1.0,
        ops=merged.to_payload().ops,
        ranks=[1, 3],
        missing_ranks=[2, 4],
    )
    lost = event_record(
        t=1.0, wall=NOW + 1, kind="rank_lost", message="rank 4 lost", data={"rank": 4}
    )
    model.apply(Update(records=[_header(4), record, lost]))
    snap = model.snapshot(ViewParams(), NOW + 1.5)
    assert snap.ranks_all == (1, 2, 3, 4)
    assert snap.ranks_missing == (2, 4) and snap.ranks_lost == (4,)
    assert snap.encryption == "abe" and snap.interconnect == "opa" and snap.nodes == 2
    assert snap.errors[0].error_class == "http_429" and snap.errors[0].count == 4
    assert "rejected execution" in snap.errors[0].message
    (row,) = snap.ops
    assert row.errors == 4 and row.requests == 104
    assert snap.phase == "measuring step 1/1 s0"


def test_lost_nodes_and_ranks_follow_their_lost_and_back_events():
    """The cluster panel marks a node lost between ``node_lost`` and ``node_back``."""
    from esdash.tui.widgets.panels import ClusterPanel

    def event(t: float, kind: str, data: dict):
        return event_record(t=t, wall=NOW + t, kind=kind, message=kind, data=data)

    model = RunModel()
    model.apply(
        Update(
            records=[
                _header(2),
                event(1.0, "node_lost", {"node": "node-1", "cause": "its process ended"}),
                event(1.5, "rank_lost", {"rank": 2}),
            ]
        )
    )
    snap = model.snapshot(ViewParams(), NOW + 2)
    assert snap.nodes_lost == ("node-1",) and snap.ranks_lost == (2,)
    text = Console(width=120, record=True)
    text.print(ClusterPanel.renderable_for(snap))
    assert "lost: node-1" in text.export_text()
    model.apply(
        Update(
            records=[
                event(3.0, "node_back", {"node": "node-1", "cause": "answering again"}),
                event(3.0, "rank_back", {"rank": 2}),
            ]
        )
    )
    snap = model.snapshot(ViewParams(), NOW + 4)
    assert snap.nodes_lost == () and snap.ranks_lost == ()


def test_snapshots_are_cached_until_the_data_or_the_view_changes():
    model = model_of(RUN_A, upto=10)
    params = ViewParams()
    first = model.snapshot(params, NOW)
    assert model.snapshot(params, NOW) is first
    clock_only = model.snapshot(params, NOW + 5)
    assert clock_only.ops is first.ops and clock_only.age == first.age + 5
    model.apply(Update(records=typed(records(FIXTURES / RUN_A)[10:12])))
    assert model.snapshot(params, NOW).version > first.version


def test_step_queries_and_histograms_from_results_and_from_the_stream():
    from_stream = model_of(RUN_B)
    with_results = model_of(RUN_B)
    with_results.results = files.read(FIXTURES / RUN_B / "results.json", Results)
    a = {(r.step, r.query): r for r in step_queries(from_stream)}
    b = {(r.step, r.query): r for r in step_queries(with_results)}
    assert a.keys() == b.keys() and len(a) == 3
    for key in a:
        assert a[key].requests == b[key].requests
        assert a[key].p50 == pytest.approx(b[key].p50, rel=1e-3)
        assert step_counts(from_stream, *key).sum() == step_counts(with_results, *key).sum()
    assert relative_change(100.0, 110.0) == pytest.approx(0.1)
    assert relative_change(None, 1.0) is None and relative_change(0.0, 1.0) is None


def test_a_finished_runs_trust_findings_reach_the_dashboard():
    """Unsteady steps, the warm-up's outcome and the medians over rounds are in the snapshot
    and in the panel that shows events (the same lines the summary prints)."""
    from esdash.rundir.records import (
        GlobalWarmup,
        QueryRounds,
        RoundsResult,
        Steadiness,
        Trend,
        WarmupQuery,
    )
    from esdash.tui.widgets.panels import ProgressPanel

    model = model_of(RUN_B)
    results = files.read(FIXTURES / RUN_B / "results.json", Results)
    results.steps[0].steadiness = Steadiness(
        steady=False,
        label="not steady: throughput +38 %/min",
        throughput=Trend(n=30, slope_pct_per_min=38.0, p_value=0.001, steady=False),
    )
    results.global_warmup = GlobalWarmup(
        rounds=4,
        round_seconds=30.0,
        seconds=120.0,
        bound_seconds=300.0,
        converged=False,
        queries={"age": WarmupQuery(rounds=[1.0, 2.0], converged=False, cv=0.2)},
    )
    results.rounds = RoundsResult(
        order="balanced",
        repetitions=6,
        seed=7,
        queries=[
            QueryRounds(
                step="age",
                query="age",
                median=412.0,
                low=398.0,
                high=431.0,
                n=6,
                kind="ci",
                coverage=0.96875,
            )
        ],
    )
    model.results = results
    snap = model.snapshot(ViewParams(), NOW)
    text = "\n".join(snap.trust)
    assert f"{results.steps[0].name}: not steady: throughput +38 %/min" in text
    assert "global warm-up: 4 round(s)" in text and "NOT converged: age" in text
    assert "rounds: 6 in balanced order (seed 7)" in text
    assert "398.0 .. 431.0 (CI 96.9 %)" in text
    shown = ProgressPanel.renderable_for(snap).plain
    assert "not steady: throughput +38 %/min" in shown and "CI 96.9 %" in shown
