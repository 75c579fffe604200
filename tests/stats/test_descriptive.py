"""Statistics against known distributions, the sample-size rule, and the dashboard buckets.

Samples are drawn with fixed seeds, so every tolerance below is checked on the same data
each run; tolerances combine sampling error (several standard errors) with the histogram's
precision (3 significant digits: 0.1 %).
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from esdash.bench.recorder import Recorder
from esdash.rundir import hdr
from esdash.stats import (
    PERCENTILES,
    Summary,
    bucket_counts,
    error_rate,
    geometric,
    min_samples,
    percentile_name,
    spread,
    summarize,
    supported_percentiles,
    throughput,
)
from esdash.stats.merge import Merged

HDR = 1e-3  # 3 significant digits


def _series(values: list[float]):
    recorder = Recorder()
    for value in values:
        recorder.record("q", "n", value, value)
    return Merged().add(recorder.drain()).op("q").latency


def _nearest_rank(sorted_values: list[float], percentile: float) -> float:
    """HDR's definition: the smallest value with at least p % of the samples at or below it."""
    rank = max(int(percentile / 100 * len(sorted_values) + 0.5), 1)
    return sorted_values[rank - 1]


# ------------------------------------------------------------------ sample-size rule


@pytest.mark.parametrize(
    ("percentile", "needed"),
    [(1.0, 2), (50.0, 2), (90.0, 10), (99.0, 100), (99.9, 1000), (99.99, 10000), (0.0, 1)],
)
def test_min_samples_rule(percentile, needed):
    assert min_samples(percentile) == needed


def test_percentiles_appear_only_when_the_sample_count_supports_them():
    assert supported_percentiles(1) == ()
    assert supported_percentiles(9) == (1.0, 50.0)
    assert supported_percentiles(10) == (1.0, 50.0, 90.0)
    assert supported_percentiles(99) == (1.0, 50.0, 90.0)
    assert supported_percentiles(100) == (1.0, 50.0, 90.0, 99.0)
    assert supported_percentiles(999) == (1.0, 50.0, 90.0, 99.0)
    assert supported_percentiles(1000) == PERCENTILES
    summary = summarize(_series([0.001 * (k + 1) for k in range(999)]))
    assert [percentile_name(p) for p in summary.percentiles] == ["p1", "p50", "p90", "p99"]
    assert summary.value("p99.9") is None
    with pytest.raises(ValueError):
        min_samples(100.0)


# -------------------------------------------------------------- known distributions


def test_log_normal_gmean_and_gstd_are_the_distribution_s_and_exact():
    """Log-normal(mu, sigma): gmean = exp(mu), gstd = exp(sigma)."""
    mu, sigma, n = math.log(0.020), 0.7, 200_000
    rng = random.Random(2026)
    values = [rng.lognormvariate(mu, sigma) for _ in range(n)]
    summary = summarize(_series(values))
    # The distribution's parameters, within ~5 standard errors of the estimators.
    assert summary.gmean == pytest.approx(math.exp(mu), rel=0.01)
    assert summary.gstd == pytest.approx(math.exp(sigma), rel=0.01)
    # Exact: the sample's own geometric mean and std (scipy.stats.gstd, ddof=1), not a
    # bucket approximation.
    logs = [math.log(v) for v in values]
    assert summary.gmean == pytest.approx(math.exp(statistics.fmean(logs)), rel=1e-9)
    assert summary.gstd == pytest.approx(math.exp(statistics.stdev(logs)), rel=1e-9)
    assert summary.mean == pytest.approx(statistics.fmean(values), rel=1e-9)
    # Mean of a log-normal: exp(mu + sigma^2 / 2).
    assert summary.mean == pytest.approx(math.exp(mu + sigma**2 / 2), rel=0.01)
    # Median exp(mu); p90 exp(mu + 1.2816 sigma); p99 exp(mu + 2.3263 sigma); within five
    # standard errors of a sample quantile (sqrt(p(1-p)/n) / density, on the log scale).
    ordered = sorted(values)
    z = {50.0: 0.0, 90.0: 1.2815516, 99.0: 2.3263479}
    for percentile, quantile in z.items():
        p = percentile / 100
        expected = math.exp(mu + quantile * sigma)
        density = math.exp(-quantile * quantile / 2) / math.sqrt(2 * math.pi)
        error = 5 * sigma * math.sqrt(p * (1 - p) / n) / density
        assert abs(math.log(summary.percentiles[percentile] / expected)) <= error + HDR
        exact = _nearest_rank(ordered, percentile)
        assert abs(summary.percentiles[percentile] - exact) <= HDR * exact + 1e-6
    assert summary.min == min(values) and summary.max == max(values)


def test_uniform_percentiles_match_the_distribution_and_the_sample():
    low, high, n = 0.010, 0.110, 100_000
    rng = random.Random(11)
    values = [rng.uniform(low, high) for _ in range(n)]
    summary = summarize(_series(values))
    ordered = sorted(values)
    for percentile in PERCENTILES:
        value = summary.percentiles[percentile]
        expected = low + percentile / 100 * (high - low)
        p = percentile / 100
        sampling = 5 * math.sqrt(p * (1 - p) / n) * (high - low)
        assert abs(value - expected) <= sampling + HDR * expected, percentile
        # Against the sample itself: only the histogram's precision separates them
        # (recording truncates to whole microseconds: 1e-6 more).
        exact = _nearest_rank(ordered, percentile)
        assert abs(value - exact) <= HDR * exact + 1e-6, percentile
    assert summary.mean == pytest.approx((low + high) / 2, rel=0.005)


def test_small_exact_sample():
    values = [0.001, 0.002, 0.003, 0.004, 0.005]
    summary = summarize(_series(values))
    assert summary.count == 5
    assert set(summary.percentiles) == {1.0, 50.0}
    assert summary.percentiles[50.0] == pytest.approx(0.003, rel=HDR)
    assert summary.percentiles[1.0] == pytest.approx(0.001, rel=HDR)
    assert summary.mean == pytest.approx(0.003, rel=1e-12)
    assert summary.gmean == pytest.approx((0.001 * 0.002 * 0.003 * 0.004 * 0.005) ** 0.2)


def test_percentiles_never_leave_the_exact_range():
    summary = summarize(_series([0.0123456] * 50))
    assert summary.percentiles[50.0] == 0.0123456  # the bucket's top is clipped to the max
    assert summary.gstd == pytest.approx(1.0)


def test_geometric_edge_cases():
    assert geometric(0, 0.0, 0.0) == (None, None)
    gmean, gstd = geometric(1, math.log(0.5), math.log(0.5) ** 2)
    assert gmean == pytest.approx(0.5) and gstd is None
    assert summarize(_series([])).count == 0
    assert Summary(count=0).to_dict()["gmean"] is None


def test_summary_dict_scales_times_but_not_gstd():
    summary = summarize(_series([0.010, 0.020, 0.040]))
    data = summary.to_dict(scale=1000.0)
    assert list(data) == ["count", "min", "mean", "gmean", "gstd", "p1", "p50", "max"]
    assert data["gmean"] == pytest.approx(20.0)
    assert data["gstd"] == pytest.approx(2.0, rel=1e-4)
    assert data["max"] == pytest.approx(40.0)
    assert summary.value("gstd") == pytest.approx(2.0)
    with pytest.raises(KeyError):
        summary.value("median")


# ------------------------------------------------------------- rates and spreads


def test_throughput_error_rate_and_spread():
    assert throughput(500, 2.0) == 250.0
    assert throughput(5, 0.0) is None
    assert error_rate(3, 300) == 0.01
    assert error_rate(0, 0) is None
    s = spread([10.0, 12.0, 14.0])
    assert (s.n, s.mean, s.std, s.min, s.median, s.max) == (3, 12.0, 2.0, 10.0, 12.0, 14.0)
    assert spread([5.0]).std is None
    assert spread([]).to_dict() == {
        "n": 0,
        "mean": None,
        "std": None,
        "min": None,
        "median": None,
        "max": None,
    }


# --------------------------------------------------------------- dashboard buckets


def test_bucket_counts_are_log_spaced_and_add_up():
    rng = random.Random(5)
    values = [rng.lognormvariate(math.log(0.01), 1.0) for _ in range(50_000)]
    series = _series(values)
    buckets = bucket_counts(series.counts, log_buckets=20)
    assert len(buckets) == 20
    assert sum(b.count for b in buckets) == 50_000
    ratios = [b.high / b.low for b in buckets]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)  # equal width on a log axis
    for a, b in zip(buckets, buckets[1:], strict=False):
        assert a.high == pytest.approx(b.low)
    # Log-normal on a log axis is symmetric: the fullest bucket holds the median (10 ms).
    fullest = max(buckets, key=lambda b: b.count)
    assert fullest.low <= 0.01 * 1.5 and fullest.high >= 0.01 / 1.5


def test_bucket_counts_with_a_fixed_axis_clamp_outliers_into_the_ends():
    recorded = ((50, 10), (1_000, 20), (100_000, 30), (10_000_000, 5))
    counts = hdr.from_mapping({hdr.index_of(us): count for us, count in recorded})
    buckets = bucket_counts(counts, log_buckets=2, lowest=0.001, highest=0.1)
    assert buckets[0].low == pytest.approx(0.001) and buckets[-1].high == pytest.approx(0.1)
    # 50 us and 1 ms fall in the first half of the axis (1..10 ms), 100 ms and 10 s at the end.
    assert [b.count for b in buckets] == [30, 35]


def test_bucket_counts_of_an_empty_histogram():
    assert bucket_counts(hdr.empty(), log_buckets=3) == []
    with pytest.raises(ValueError):
        bucket_counts(hdr.empty(), log_buckets=0)
