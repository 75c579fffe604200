"""Student's t, the bootstrap's units and blocks, the effect interval, Holm, the verdict rule,
the repetitions needed, and why percentiles are merged, never averaged.

Reference values come from closed forms (Student's t with 1 and 2 degrees of freedom), from
published tables, from numpy on raw samples, or from the definitions written out here.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from esdash.rundir import hdr
from esdash.stats import student
from esdash.stats.bootstrap import Units, block_length, block_weights, iid_weights
from esdash.stats.verdicts import (
    Effect,
    SideFigure,
    effect,
    holm,
    repetitions_needed,
    side_figure,
    verdict,
    welch_df,
)

# ------------------------------------------------------------------------ Student's t


@pytest.mark.parametrize("t", [-30.0, -2.5, -0.3, 0.0, 0.7, 4.0, 250.0])
def test_the_cdf_against_closed_forms(t: float) -> None:
    assert student.cdf(t, 1.0) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
    assert student.cdf(t, 2.0) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706204736), (2, 4.302652730), (5, 2.570581836), (10, 2.228138852), (30, 2.042272456)],
)
def test_quantiles_against_the_table(df: float, expected: float) -> None:
    assert student.quantile(0.975, df) == pytest.approx(expected, rel=1e-8)
    assert student.quantile(0.025, df) == pytest.approx(-expected, rel=1e-8)


def test_quantiles_of_fractional_and_many_degrees_of_freedom() -> None:
    low, middle, high = (student.quantile(0.975, df) for df in (3.0, 3.5, 4.0))
    assert low > middle > high
    assert student.cdf(middle, 3.5) == pytest.approx(0.975, abs=1e-10)
    assert student.quantile(0.975, 1e7) == pytest.approx(1.959963985, rel=1e-6)
    assert student.two_sided_p(2.228138852, 10) == pytest.approx(0.05, abs=1e-9)
    with pytest.raises(ValueError):
        student.quantile(0.975, 0.5)
    with pytest.raises(ValueError):
        student.quantile(1.0, 3)


# ------------------------------------------------------------------------- bootstrap


def test_block_length_follows_the_series_memory() -> None:
    rng = np.random.default_rng(1)
    noise = rng.normal(size=400)
    assert block_length(noise[:100]) == 10  # no memory: ceil(sqrt(100))
    assert block_length(noise[:3]) == 1
    slow = np.zeros(400)
    for k in range(1, 400):  # AR(1), phi = 0.97: its autocorrelation decays over ~100 lags
        slow[k] = 0.97 * slow[k - 1] + noise[k]
    found = block_length(slow)
    centred = slow - slow.mean()
    acf = [centred[:-k] @ centred[k:] / (centred @ centred) for k in range(1, found)]
    assert found > 20 and all(abs(r) >= 2 / math.sqrt(400) for r in acf)
    for series in (slow[:40], np.r_[np.zeros(20), np.ones(20)], np.arange(9.0), noise[:17]):
        assert 1 <= block_length(series) <= len(series) // 2  # two blocks at least


def test_block_weights_draw_whole_circular_blocks() -> None:
    rng = np.random.default_rng(2)
    weights = block_weights(rng, 10, 5, resamples=2000)
    assert weights.shape == (2000, 10) and (weights.sum(axis=1) == 10).all()
    # every interval is drawn once per replicate on average (the circular bootstrap)
    assert weights.mean(axis=0) == pytest.approx(np.ones(10), abs=0.1)
    # each replicate is two windows of five consecutive intervals (wrapping around)
    windows = [np.roll(np.r_[np.ones(5), np.zeros(5)], s) for s in range(10)]
    pairs = [a + b for a in windows for b in windows]
    for row in weights[:100]:
        assert any((row == pair).all() for pair in pairs)
    assert iid_weights(rng, 7).shape == (1000, 7)


def intervals_of(rng: np.random.Generator, n: int) -> Units:
    ok = rng.integers(50, 150, size=n)
    histograms = []
    for count in ok:
        latencies = rng.lognormal(math.log(2000), 0.5, size=count).astype(int)  # µs
        histograms.append(hdr.from_mapping(_indices(latencies)))
    logs = [float(np.log(rng.lognormal(math.log(0.002), 0.5, size=1))[0]) * c for c in ok]
    return Units.build(
        "intervals",
        ok=ok.tolist(),
        seconds=[1.0] * n,
        rate=ok.tolist(),
        count=ok.tolist(),
        ln_sum=logs,
        histograms=histograms,
    )


def _indices(values_us: np.ndarray) -> dict[int, int]:
    found: dict[int, int] = {}
    for value in values_us.tolist():
        index = hdr.index_of(max(1, value))
        found[index] = found.get(index, 0) + 1
    return found


def test_a_replicates_figures_are_those_of_the_drawn_units_merged() -> None:
    rng = np.random.default_rng(3)
    units = intervals_of(rng, 12)
    weights = block_weights(rng, units.n, units.block, resamples=50)
    throughput = units.throughput(weights)
    p99 = units.percentile(weights, 99.0)
    p50 = units.percentile(weights, 50.0)
    for row, w in enumerate(weights):
        assert throughput[row] == pytest.approx((w @ units.ok) / (w @ units.seconds))
        merged = hdr.empty()
        for index, times in enumerate(w.astype(int).tolist()):
            for _ in range(times):
                merged = hdr.add(merged, _row_counts(units, index))
        expected = hdr.percentiles(merged, [50.0, 99.0])
        assert (p50[row], p99[row]) == (expected[50.0], expected[99.0])


def _row_counts(units: Units, row: int) -> hdr.Counts:
    counts = np.zeros(int(units.columns.max()) + 1, dtype=np.int64)
    counts[units.columns] = units.counts[row].astype(np.int64)
    return counts


# ------------------------------------------------------------ pooled percentiles


def recorded(latencies_s: np.ndarray) -> hdr.Counts:
    """An HDR histogram of ``latencies_s`` as the recorder keeps it (µs, rounded)."""
    return hdr.from_mapping(_indices(np.maximum(np.rint(latencies_s * 1e6), 1).astype(int)))


def test_pooled_p99_is_numpys_p99_of_the_raw_samples_and_an_average_is_not() -> None:
    """Two runs of 50,000 requests with different tails: a quiet one (lognormal around 2 ms),
    and one where 1.6 % of the requests take about 80 ms.

    The merged histograms' p99 equals numpy's p99 of all raw samples within the histogram's
    precision (3 significant digits): 0.8 % of all requests are slow, so it is 4.7 ms.  The
    average of the two runs' own p99s (4.0 ms and 76 ms), what OSB's ``aggregate`` reports,
    is 40 ms: 8.5 times the p99 of the requests they measured.
    """
    rng = np.random.default_rng(4)
    quiet = rng.lognormal(math.log(0.002), 0.3, size=50_000)
    tailed = np.concatenate(
        (
            rng.lognormal(math.log(0.002), 0.3, size=49_200),
            rng.lognormal(math.log(0.08), 0.2, 800),
        )
    )
    units = Units.build(
        "runs",
        ok=[0.0, 0.0],
        seconds=[1.0, 1.0],
        rate=[1.0, 1.0],
        count=[quiet.size, tailed.size],
        ln_sum=[float(np.log(quiet).sum()), float(np.log(tailed).sum())],
        histograms=[recorded(quiet), recorded(tailed)],
    )
    pooled = float(units.percentile(np.ones((1, 2)), 99.0)[0])
    raw = float(np.percentile(np.concatenate((quiet, tailed)), 99, method="inverted_cdf"))
    assert pooled == pytest.approx(raw, rel=1e-3, abs=1e-6)
    own = [float(units.percentile(np.array([[1.0, 0.0]]), 99.0)[0])]
    own.append(float(units.percentile(np.array([[0.0, 1.0]]), 99.0)[0]))
    averaged = statistics.fmean(own)
    assert pooled == pytest.approx(0.0047, rel=0.02) and own[1] == pytest.approx(0.076, rel=0.02)
    assert averaged / pooled > 8  # the averaged p99 is no percentile of the requests
    assert units.gmean(np.ones((1, 2)))[0] == pytest.approx(
        math.exp(np.log(np.concatenate((quiet, tailed))).mean())
    )


# ---------------------------------------------------------------- effect and verdict


def test_the_effect_is_a_t_interval_of_the_log_ratio() -> None:
    base = SideFigure(100.0, 0.02**2, 6, None)
    other = SideFigure(110.0, 0.03**2, 6, None)
    found = effect(base, other)
    df = welch_df(0.02**2, 5, 0.03**2, 5)
    half = student.quantile(0.975, df) * math.sqrt(0.02**2 + 0.03**2)
    assert found.ratio == pytest.approx(1.1)
    assert (found.low, found.high) == pytest.approx((1.1 * math.exp(-half), 1.1 * math.exp(half)))
    t = math.log(1.1) / math.sqrt(0.02**2 + 0.03**2)
    assert found.p == pytest.approx(student.two_sided_p(t, df))
    assert (found.low > 1) == (found.p < 0.05)
    assert effect(SideFigure(100.0), SideFigure(90.0)) == Effect(0.9)  # no spread: no interval
    assert effect(SideFigure(None), other).ratio is None


def test_side_figure_corrects_the_bootstrap_variance() -> None:
    replicates = np.exp(np.array([0.0, 0.1, -0.1, 0.05, -0.05]))
    figure = side_figure(100.0, replicates, effective=5, repetitions=5)
    raw = statistics.variance([0.0, 0.1, -0.1, 0.05, -0.05])
    assert figure.log_var == pytest.approx(raw * 5 / 4)
    assert figure.per_repetition == pytest.approx(raw * 5 / 4 * 5)
    assert side_figure(100.0, replicates, effective=1.5, repetitions=1).log_var is None


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005, None]) == pytest.approx(
        [0.03, 0.06, 0.06, 0.02, None], nan_ok=False
    )
    assert holm([]) == [] and holm([0.7]) == [0.7] and holm([0.6, 0.9]) == [1.0, 1.0]


@pytest.mark.parametrize(
    ("found", "p", "higher", "expected"),
    [
        (Effect(1.01, 0.98, 1.04, 0.4), 0.4, True, "equivalent"),
        (Effect(1.02, 1.01, 1.03, 0.001), 0.001, True, "equivalent"),  # smaller than the margin
        (Effect(1.10, 1.04, 1.16, 0.001), 0.003, True, "better"),
        (Effect(1.10, 1.04, 1.16, 0.001), 0.003, False, "worse"),  # latency up is worse
        (Effect(0.80, 0.70, 0.91, 0.001), 0.02, False, "better"),
        (Effect(1.10, 1.01, 1.20, 0.01), 0.06, True, "inconclusive"),  # not after Holm
        (Effect(1.00, 0.80, 1.25, 0.9), 0.9, True, "inconclusive"),
        (Effect(1.10), None, True, "inconclusive"),
    ],
)
def test_the_verdict_rule(found: Effect, p: float | None, higher: bool, expected: str) -> None:
    assert verdict(found, p, higher, margin=0.05) == expected


def test_repetitions_needed_for_a_precision() -> None:
    base = SideFigure(100.0, 0.01, 6, 0.06)
    other = SideFigure(100.0, 0.01, 6, 0.06)
    needed = repetitions_needed(base, other, precision=0.05)

    def half(n: int) -> float:
        df = welch_df(0.06 / n, n - 1, 0.06 / n, n - 1)
        return student.quantile(0.975, df) * math.sqrt(0.12 / n)

    assert needed is not None and half(needed) <= math.log(1.05) < half(needed - 1)
    assert repetitions_needed(base, SideFigure(100.0), 0.05) is None
    assert repetitions_needed(SideFigure(1.0, 0, 6, 0.0), SideFigure(1.0, 0, 6, 0.0), 0.05) == 2
    assert repetitions_needed(SideFigure(1.0, 1, 6, 50.0), SideFigure(1.0, 1, 6, 50.0)) is None
