"""`esdash compare`: ratios with 95 % intervals, verdicts, repetitions needed, merged percentiles.

The statistics themselves (bootstrap, Student's t, Holm, the verdict rule) are checked in
``tests/stats``; here: what a comparison of real runs, repetitions and imported files says,
the sides it refuses, and the output formats.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from support import synthetic
from support.cli import esdash

from esdash.errors import BadInput
from esdash.rundir import hdr
from esdash.stats import bootstrap, student
from esdash.stats.verdicts import holm, welch_df
from esdash.view.compare import compare, load_side, measure, render
from esdash.view.intervals import measured, read_intervals

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
DEV = FIXTURES / "dev-20261121-032918"
DEV2 = FIXTURES / "dev2-20261121-033750"
LAT = [2.0, 2.5, 3.0, 4.0]


def abe_df(base: list[float], other: list[float]) -> float:
    n = len(base)
    return welch_df(statistics.variance(base) / n, n - 1, statistics.variance(other) / n, n - 1)


def cell(records: list[dict], query: str, metric: str) -> dict:
    return next(r for r in records if (r["query"], r["metric"]) == (query, metric))


def test_two_single_runs_block_bootstrap_their_intervals() -> None:
    baseline, contender = load_side(str(DEV)), load_side(str(DEV2))
    records = compare(baseline, [contender])
    assert records == compare(load_side(str(DEV)), [load_side(str(DEV2))])  # seeded
    dev = json.loads((DEV / "results.json").read_text())
    dev2 = json.loads((DEV2 / "results.json").read_text())
    for index, query in enumerate(("body_part", "vendor", "age")):
        rate = cell(records, query, "req/s")
        ours = dev["steps"][index]["queries"][query]["throughput"]["requests_per_s"]
        theirs = dev2["steps"][index]["queries"][query]["throughput"]["requests_per_s"]
        assert (rate["baseline"], rate["value"]) == (ours, theirs)  # the runs' own figures
        assert rate["ratio"] == pytest.approx(theirs / ours)
        assert rate["low"] < rate["ratio"] < rate["high"]
        # 6 measured intervals, in blocks of ceil(sqrt(6)) = 3
        assert rate["baseline_basis"] == rate["contender_basis"] == "6 intervals in blocks of 3"
    # p99 of body_part: 9.15 ms against 120.8 ms, the interval far above 1: worse
    p99 = cell(records, "body_part", "p99 ms")
    assert p99["verdict"] == "worse" and p99["low"] > 1 and p99["p_holm"] < 0.05
    # Holm over the three queries of each metric
    for metric in ("req/s", "gmean ms", "p99 ms"):
        found = [r for r in records if r["metric"] == metric]
        assert [r["p_holm"] for r in found] == holm([r["p"] for r in found])
    # with two blocks of three intervals per run, a throughput ratio of 0.27 is not proof
    assert cell(records, "body_part", "req/s")["verdict"] == "inconclusive"
    assert cell(records, "body_part", "req/s")["needed"] > 6


def test_the_units_of_a_single_run_are_its_measured_intervals() -> None:
    side = load_side(str(DEV))
    found = measure(side, "age", "age")
    assert found is not None and found.units is not None
    intervals = measured(read_intervals(DEV / "stream.jsonl")[1], "age", "age")
    assert found.units.kind == "intervals" and found.units.n == len(intervals) == 6
    assert found.units.ok.tolist() == [o.ok for o in intervals]
    weights = bootstrap.np.ones((1, found.units.n))
    merged = hdr.empty()
    for o in intervals:
        merged = hdr.add(merged, o.counts)
    p99 = found.units.percentile(weights, 99.0)[0]
    assert p99 == hdr.percentiles(merged, [99.0])[99.0]


def campaign_of(tmp_path: Path, rates: dict[str, list[float]], lat=LAT) -> Path:
    points = []
    for mode, values in rates.items():
        for k, rate in enumerate(values):
            run = synthetic.write_run(
                tmp_path,
                f"{mode}{k}",
                {"s": {"q": synthetic.op(lat, requests_per_s=rate)}},
                {"mode": mode},
            )
            points.append(({"encryption.mode": mode}, k + 1, run))
    return synthetic.write_campaign(tmp_path, "camp", points)


def test_repetitions_are_resampled_as_runs(tmp_path: Path) -> None:
    campaign = campaign_of(
        tmp_path,
        {
            "none": [100, 104, 98, 101, 99, 102],
            "gocryptfs": [100, 103, 99, 101, 98, 102],
            "abe": [60, 64, 61, 63, 62, 59],
        },
    )
    result = esdash(
        "compare",
        f"{campaign}#mode=none",
        f"{campaign}#mode=gocryptfs",
        f"{campaign}#mode=abe",
        "--format",
        "json",
        env_runs=tmp_path / "runs",
    )
    document = json.loads(result.stdout)
    assert document["baseline"] == "none, loopback, 1 node, 1 worker/node (6 runs)"
    assert document["margin_pct"] == 5.0 and document["level"] == 0.95
    gocryptfs, abe = [r for r in document["comparisons"] if r["metric"] == "req/s"]
    assert gocryptfs["baseline_runs"] == [100, 104, 98, 101, 99, 102]
    assert gocryptfs["value"] == pytest.approx(603 / 6)  # the mean of the repetitions
    assert gocryptfs["ratio"] == pytest.approx((603 / 6) / (604 / 6))
    assert gocryptfs["baseline_basis"] == "6 runs"
    # 0.2 % apart, both sides within +-2 %: the interval lies within +-5 %
    assert (
        gocryptfs["verdict"] == "equivalent" and 0.95 < gocryptfs["low"] < gocryptfs["high"] < 1.05
    )
    assert abe["verdict"] == "worse" and abe["high"] < 0.7
    # a Student-t interval on the log scale with the bootstrap's variance: for a mean over
    # runs, Welch's interval of the log means, within the bootstrap's noise
    base = [math.log(v) for v in (100, 104, 98, 101, 99, 102)]
    other = [math.log(v) for v in (60, 64, 61, 63, 62, 59)]
    se = math.sqrt(statistics.variance(base) / 6 + statistics.variance(other) / 6)
    half = math.log(abe["high"] / abe["low"]) / 2
    assert half == pytest.approx(student.quantile(0.975, abe_df(base, other)) * se, rel=0.15)
    # repetitions per side for +-5 %: the smallest n whose Welch interval is that narrow
    one = statistics.variance(base) + statistics.variance(other)

    def enough(n: int) -> bool:
        df = welch_df(statistics.variance(base) / n, n - 1, statistics.variance(other) / n, n - 1)
        return student.quantile(0.975, df) * math.sqrt(one / n) <= math.log(1.05)

    assert abe["needed"] == next(n for n in range(2, 100) if enough(n)) == 4
    text = esdash("compare", f"{campaign}#mode=none", f"{campaign}#mode=abe", env_runs=tmp_path)
    assert "worse" in text.stdout and "6 runs" in text.stdout
    assert "Holm's correction over the 1 queries" in text.stdout


def test_a_side_of_two_configurations_is_refused_naming_what_differs(tmp_path: Path) -> None:
    campaign = campaign_of(tmp_path, {"none": [100], "gocryptfs": [97], "abe": [60]})
    with pytest.raises(BadInput) as refused:
        load_side(str(campaign))
    message = str(refused.value)
    assert "\n" not in message
    assert "holds 3 configurations, not repetitions of one: they differ in encryption.mode " in (
        message
    )
    assert "(none, gocryptfs, abe)" in message
    result = esdash("compare", str(campaign), str(DEV), env_runs=tmp_path, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_percentiles_of_repetitions_come_from_merged_histograms(tmp_path: Path) -> None:
    """Two runs with different tails: the side's p99 is that of all their requests."""
    quiet = [1.0] * 1000
    tailed = [1.0] * 980 + [100.0] * 20  # 2 % at 100 ms: its own p99 is 100 ms
    runs = [
        synthetic.write_run(tmp_path, name, {"s": {"q": synthetic.op(lat)}})
        for name, lat in (("quiet", quiet), ("tailed", tailed))
    ]
    campaign = synthetic.write_campaign(tmp_path, "tails", [({}, 1, runs[0]), ({}, 2, runs[1])])
    records = compare(load_side(str(campaign)), [load_side(str(runs[0]))])
    p99 = cell(records, "q", "p99 ms")
    assert p99["baseline_runs"] == [1.0, 100.0]  # each run's own p99
    assert p99["baseline"] == synthetic.percentile(quiet + tailed, 99) == 1.0  # merged
    assert sum(p99["baseline_runs"]) / 2 == 50.5  # what averaging p99s would have said


def test_markdown_and_settings(tmp_path: Path) -> None:
    result = esdash(
        "compare", str(DEV), str(DEV2), "--format", "md", "--margin", "10", "--precision", "2",
        env_runs=tmp_path,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert "| contender | query | metric | baseline | contender | ratio | 95 % interval | " in (
        result.stdout
    )
    assert "n for +-2% | note |" in result.stdout
    assert "- the sides differ in benchmark.workers_per_node (1 vs 2)" in lines
    assert any("equivalent when the interval lies within +-10%" in line for line in lines)
    bad = esdash("compare", str(DEV), str(DEV2), "--margin", "0", env_runs=tmp_path, check=False)
    assert bad.returncode == 2 and "--margin: expected a percentage above 0" in bad.stderr


def test_render_of_a_query_one_side_lacks(tmp_path: Path) -> None:
    only = synthetic.write_run(tmp_path, "only", {"other": {"other": synthetic.op(LAT)}})
    baseline = load_side(str(DEV))
    records = compare(baseline, [load_side(str(only))])
    missing = cell(records, "age", "req/s")
    assert missing["note"] == "not in contender" and missing["verdict"] is None
    extra = cell(records, "other", "req/s")
    assert extra["note"] == "not in baseline"
    assert "not in contender" in render(baseline, records, "text")
