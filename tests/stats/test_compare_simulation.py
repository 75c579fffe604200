"""Does ``compare`` say "better" or "worse" only when something changed?  A/A simulations and
power, on resamples of recorded streams.

The streams are the measured intervals of the real (trimmed) fixture runs: three queries of
two runs, six streams of six one-second intervals each (latency histograms, successful
requests, seconds), noisy as a short run right after ingest is.  A synthetic run of ``L``
intervals draws them in blocks of three consecutive intervals (wrapping around), so it
keeps the recorded streams' autocorrelation; a side is one such run (its intervals are the
units, block-bootstrapped) or six of them (the runs are the units).  Each comparison is one
of esdash's: the six streams are its six queries, and for each metric (req/s, gmean, p99)
:func:`esdash.view.compare.judge_cells` gives the ratio, its interval and the verdicts,
Holm-corrected over the six.

* **A/A**: both sides drawn from the same streams.  Any "better" or "worse" is false.  Over
  500 comparisons the share with at least one false verdict per metric must stay within
  5 % + 1.5 points (the simulation's own noise at 500 is about 1 point).
* **Power**: the contender's throughput 10 % higher, 6 repetitions per side, each a 1-minute
  step.  No method finds a 10 % change with 6 repetitions when the repetitions themselves
  vary by much more than 5 % (for Welch's test, 80 % power needs the change to be 1.8
  standard deviations of one repetition), so the bar is checked on every stream whose
  repetitions vary by at most 5 %, and the rest are reported by ``compare`` as needing more
  repetitions (``n for +-x%``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from esdash.stats.bootstrap import Units
from esdash.stats.verdicts import SideFigure, side_figure
from esdash.view.compare import judge_cells
from esdash.view.intervals import IntervalOp, read_intervals

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUNS = ("dev-20261121-032918", "dev2-20261121-033750")
QUERIES = ("body_part", "vendor", "age")
#: metric -> higher is better
METRICS = {"req/s": True, "gmean": False, "p99": False}
COMPARISONS = 500
#: The bar: false verdicts in at most 5 % of A/A comparisons, within the simulation's noise.
FALSE_BAR = 0.05 + 0.015


class Stream:
    """One recorded stream: a query's measured intervals in one fixture run, as units."""

    def __init__(self, intervals: list[IntervalOp]) -> None:
        self.name = intervals[0].op
        self.units = Units.build(
            "intervals",
            ok=[o.ok for o in intervals],
            seconds=[o.elapsed for o in intervals],
            rate=[o.rate for o in intervals],
            count=[o.ok for o in intervals],
            ln_sum=[o.ok * math.log(o.gmean) for o in intervals],
            histograms=[o.counts for o in intervals],
        )

    def draw(self, rng: np.random.Generator, length: int, block: int = 3) -> np.ndarray:
        """The intervals of a synthetic run: ``length`` of them, in blocks of ``block``."""
        n = self.units.n
        starts = rng.integers(0, n, -(-length // block))
        return ((starts[:, None] + np.arange(block)) % n).ravel()[:length]

    def run(self, rng: np.random.Generator, length: int, scale: float = 1.0) -> Units:
        """One synthetic run whose units are its intervals (``scale``: more throughput)."""
        u, picked = self.units, self.draw(rng, length)
        return Units(
            "intervals",
            ok=u.ok[picked] * scale,
            seconds=u.seconds[picked],
            rate=u.rate[picked] * scale,
            count=u.count[picked],
            ln_sum=u.ln_sum[picked],
            counts=u.counts[picked],
            columns=u.columns,
        )

    def repetitions(
        self, rng: np.random.Generator, runs: int, length: int, scale: float = 1.0
    ) -> Units:
        """``runs`` synthetic runs whose units are the runs (their figures, merged histograms)."""
        u = self.units
        picks = [self.draw(rng, length) for _ in range(runs)]
        rates = np.array([u.ok[p].sum() / u.seconds[p].sum() for p in picks]) * scale
        return Units(
            "runs",
            ok=np.zeros(runs),
            seconds=np.ones(runs),
            rate=rates,
            count=np.array([u.count[p].sum() for p in picks]),
            ln_sum=np.array([u.ln_sum[p].sum() for p in picks]),
            counts=np.stack([u.counts[p].sum(axis=0) for p in picks]),
            columns=u.columns,
        )


@pytest.fixture(scope="module")
def streams() -> list[Stream]:
    found = []
    for run in RUNS:
        intervals = read_intervals(FIXTURES / run / "stream.jsonl")[1]
        for query in QUERIES:
            mine = [o for o in intervals if o.phase == "measure" and o.op == query]
            assert len(mine) == 6 and all(o.gmean for o in mine)
            found.append(Stream(mine))
    return found


def figures(units: Units, rng: np.random.Generator) -> dict[str, SideFigure]:
    """A side's figures as ``compare`` makes them: one set of replicates for every metric."""
    weights = units.weights(rng)
    one = np.ones((1, units.n))
    repetitions = 1 if units.kind == "intervals" else units.n
    of = {
        "req/s": units.throughput,
        "gmean": units.gmean,
        "p99": lambda w: units.percentile(w, 99.0),
    }
    return {
        name: side_figure(float(f(one)[0]), f(weights), units.effective, repetitions)
        for name, f in of.items()
    }


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of a proportion (for the messages)."""
    p, z = hits / n, 1.959964
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def false_verdicts(streams: list[Stream], side) -> dict[str, int]:
    """A/A comparisons with at least one false "better"/"worse", per metric."""
    rng = np.random.default_rng(20261129)
    found = dict.fromkeys(METRICS, 0)
    for _ in range(COMPARISONS):
        a = [figures(side(s, rng), rng) for s in streams]
        b = [figures(side(s, rng), rng) for s in streams]
        for metric, higher in METRICS.items():
            cells = judge_cells([(x[metric], y[metric]) for x, y in zip(a, b, strict=True)], higher)
            found[metric] += any(c is not None and c.verdict in ("better", "worse") for c in cells)
    return found


@pytest.mark.parametrize(
    "design",
    [
        pytest.param(lambda s, rng: s.run(rng, 30), id="single-runs-of-30-intervals"),
        pytest.param(lambda s, rng: s.run(rng, 8), id="single-runs-of-8-intervals"),
        pytest.param(lambda s, rng: s.repetitions(rng, 6, 30), id="6-repetitions-per-side"),
    ],
)
def test_aa_comparisons_rarely_say_better_or_worse(streams: list[Stream], design) -> None:
    found = false_verdicts(streams, design)
    for metric, hits in found.items():
        low, high = wilson(hits, COMPARISONS)
        rate = hits / COMPARISONS
        assert rate <= FALSE_BAR, f"{metric}: {rate:.1%} (95 % CI {low:.1%}-{high:.1%})"


def test_a_10_pct_throughput_change_is_found_at_6_repetitions(streams: list[Stream]) -> None:
    rng = np.random.default_rng(933)
    checked = []
    wrong = 0
    for stream in streams:
        rates = stream.repetitions(rng, 400, 60).rate
        cv = float(np.std(rates, ddof=1) / np.mean(rates))
        found = 0
        for _ in range(200):
            a = figures(stream.repetitions(rng, 6, 60), rng)["req/s"]
            b = figures(stream.repetitions(rng, 6, 60, scale=1.1), rng)["req/s"]
            (cell,) = judge_cells([(a, b)], higher_is_better=True)
            found += cell is not None and cell.verdict == "better"
            wrong += cell is not None and cell.verdict == "worse"
        if cv <= 0.05:
            checked.append(stream.name)
            assert found / 200 >= 0.8, f"{stream.name}: CV {cv:.1%}, power {found / 200:.0%}"
    assert len(checked) >= 3, checked
    assert wrong <= 0.01 * 200 * len(streams)  # however noisy, rarely the wrong way round
