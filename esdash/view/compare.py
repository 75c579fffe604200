"""``esdash compare BASELINE CONTENDER...``: per-query effects with 95 % intervals and verdicts.

Each argument is one *side*: a run, a set of repetitions (a campaign directory narrowed to
one configuration with ``#key=value``), or a result file of the authors.  A side pools its
runs as repetitions only when they are one configuration (the same session fingerprint,
:mod:`esdash.view.fingerprint`); a side whose runs differ is refused with the keys that
differ.  Queries are matched by step and query name (the authors' unnamed queries by their
request bodies, see :func:`esdash.view.inputs.align_queries`).

For every contender, query and metric -- throughput (req/s, the run's figure of
:mod:`esdash.stats.metrics`), latency gmean and p99 (ms) -- a *cell* gives:

* both sides' figures: one run's own; several runs or rounds: the mean of their req/s
  (each run the mean of its rounds), the gmean of all their requests (exact, from the
  recorded sums), and the p99 of their **merged** HDR histograms, never an average of p99s;
* the **effect** as a ratio contender / baseline with its **95 % interval**;
* a **verdict**: *equivalent* (the whole interval within ±``margin``, 5 % unless set),
  *better* or *worse* (Holm-corrected p < 0.05 across the queries of the comparison), or
  *inconclusive*;
* the **repetitions needed** per side for an interval of ±``precision`` (default: the
  margin).

**Where the interval comes from** (the side's *basis*; :mod:`esdash.stats.bootstrap` and
:mod:`esdash.stats.verdicts` have the statistics):

* several runs: a bootstrap over the runs (each with all its rounds);
* one run with rounds (``benchmark.repetitions``): a bootstrap over its rounds;
* one run of one round: a circular *block* bootstrap over the measured intervals of its
  stream, in blocks of ``max(ceil(sqrt(n)), the autocorrelation's reach)`` intervals, so a
  slow phase spanning several intervals counts once, not as independent evidence;
* nothing of these (an authors' file, a run without a stream or with fewer than
  :data:`MIN_INTERVALS` measured intervals): the ratio without an interval, verdict
  *inconclusive*, and the note says why.

Bootstrap draws are seeded by the side and the query: the same command prints the same
numbers.
"""

from __future__ import annotations

import json
import math
import statistics
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from esdash.errors import BadInput
from esdash.rundir import hdr
from esdash.rundir.records import JsonMapping, JsonObject, OpResult
from esdash.stats import metrics, supported_percentiles
from esdash.stats.bootstrap import UnitKind, Units
from esdash.stats.verdicts import (
    LEVEL,
    MARGIN,
    Effect,
    SideFigure,
    Verdict,
    effect,
    holm,
    repetitions_needed,
    side_figure,
    verdict,
)
from esdash.view import fingerprint as fingerprints
from esdash.view import format as fmt
from esdash.view.inputs import (
    ConfigKey,
    Entry,
    align_queries,
    config_label,
    distinguishing,
    load_inputs,
    mark_differences,
    op_of,
    ops_of,
    queries_of,
    query_label,
)
from esdash.view.intervals import IntervalOp, measured, read_intervals

#: Seed of every bootstrap draw (combined with the side and the query).
SEED = 29
#: A single run needs this many measured intervals for an interval of its own.
MIN_INTERVALS = 4


@dataclass
class Side:
    spec: str
    entries: list[Entry]
    #: entry id -> its interval operations (read once)
    _intervals: dict[str, list[IntervalOp]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        entry = self.entries[0]
        if len(self.entries) == 1:
            return entry.id
        return f"{config_label(entry.config)} ({len(self.entries)} runs)"

    def intervals(self, entry: Entry) -> list[IntervalOp]:
        if entry.id not in self._intervals:
            self._intervals[entry.id] = read_intervals(entry.stream)[1]
        return self._intervals[entry.id]


def load_side(spec: str) -> Side:
    """One side: the runs of ``spec``, pooled as repetitions only if one configuration."""
    entries = load_inputs([spec]).entries
    if not entries:
        raise BadInput(f"{spec}: no completed runs")
    refuse_mixed(spec, entries)
    return Side(spec, entries)


def refuse_mixed(spec: str, entries: Sequence[Entry]) -> None:
    """A side is repetitions of one configuration, or it is refused in one line naming the
    settings that differ (its runs' fingerprints, or the labels an authors' file gave)."""
    groups: dict[ConfigKey, Entry] = {}
    for entry in entries:
        groups.setdefault(entry.key, entry)
    if len(groups) < 2:
        return
    found = list(groups.values())
    told = fingerprints.describe([e.fingerprint for e in found], distinguishing(found))
    if not told:  # the labels differ (campaign axes, an authors' file's #key=value)
        told = "; ".join(config_label(e.config) for e in found)
    raise BadInput(
        f"{spec} holds {len(groups)} configurations, not repetitions of one: they differ in "
        f"{told}; narrow it to one ({spec}#KEY=VALUE with a campaign axis) or give each "
        f"as a side of its own"
    )


# ------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    name: str
    value: Callable[[OpResult], float | None]
    #: the figure the bootstrap recomputes: "throughput", "gmean" or a percentile "p99"
    statistic: str
    fmt: Callable[[float | None], str]

    @property
    def higher_is_better(self) -> bool:
        return HIGHER_IS_BETTER[self.name]

    def replicates(self, units: Units, weights: np.ndarray) -> np.ndarray:
        """The figure of each bootstrap replicate (seconds for latencies: only ratios of
        replicates are used)."""
        if self.statistic == "throughput":
            return units.throughput(weights)
        if self.statistic == "gmean":
            return units.gmean(weights)
        return units.percentile(weights, float(self.statistic[1:]))


def _figure(name: str) -> Callable[[OpResult], float | None]:
    """A run's figure of one measurement (:mod:`esdash.stats.metrics`, the summary's)."""
    if name == "req/s":
        return lambda op: metrics.run_op(op).requests_per_s
    return lambda op: metrics.run_op(op).latency.value(name)


def _ms(ms: float | None) -> str:
    return fmt.ms(fmt.from_ms(ms))


METRICS = (
    Metric("req/s", _figure("req/s"), "throughput", fmt.rate),
    Metric("gmean ms", _figure("gmean"), "gmean", _ms),
    Metric("p99 ms", _figure("p99"), "p99", _ms),
)
#: The dashboard's compare screen shows p50 as well.
SCREEN_METRICS = (
    METRICS[0],
    Metric("p50 ms", _figure("p50"), "p50", _ms),
    METRICS[2],
    METRICS[1],
)

#: For each metric a viewer compares: is a higher value better?
HIGHER_IS_BETTER = {"rate": True, "req/s": True, "p50": False, "p99": False, "gmean": False}
HIGHER_IS_BETTER.update({"gmean ms": False, "p99 ms": False, "p50 ms": False})

#: Changes smaller than this share of the baseline are shown as unchanged (no colour) where
#: no verdict is known yet (a run still going).
NEGLIGIBLE = 0.02


def relative_change(a: float | None, b: float | None) -> float | None:
    """``(b - a) / a`` (None when either is missing or ``a`` is zero)."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def better(metric: str, a: float | None, b: float | None) -> bool | None:
    """Whether ``b`` is better than ``a`` for ``metric`` (None: no change worth a colour).

    Only for figures without a verdict (a run still going): a finished comparison colours
    by its verdict (:func:`compare`)."""
    change = relative_change(a, b)
    if change is None or abs(change) < NEGLIGIBLE:
        return None
    return change > 0 if HIGHER_IS_BETTER[metric] else change < 0


#: results.json formats whose req/s divides by the seconds actually measured (format 3 on).
MEASURED_SECONDS_FORMAT = 3


def _old_definition(entry: Entry) -> bool:
    """An esdash run whose req/s divided by the *planned* step duration (format < 3)."""
    return entry.results.imported_from is None and entry.results.format < MEASURED_SECONDS_FORMAT


def recomputed_rates(sides: Sequence[Side]) -> dict[str, dict[tuple[str, str], list[float]]]:
    """req/s of old-format runs recomputed from their streams, when formats are mixed.

    Throughput has one definition (successful requests / seconds actually measured); a run
    written before it (results format < 3) divided by the planned duration.  Comparing the
    two would compare definitions, so such a run's req/s is recomputed from its stream's
    measured intervals; without a stream the comparison is refused.
    """
    entries = [e for side in sides for e in side.entries if e.results.imported_from is None]
    old = [e for e in entries if _old_definition(e)]
    if not old or len(old) == len(entries):
        return {}
    found: dict[str, dict[tuple[str, str], list[float]]] = {}
    for entry in old:
        if entry.stream is None or not entry.stream.is_file():
            raise BadInput(
                f"{entry.id}: its req/s divides by the planned step duration (results format "
                f"{entry.results.format}) and it has no stream to recompute from; compare it "
                f"only with runs of the same format"
            )
        rates: dict[tuple[str, str], list[float]] = {}
        intervals = read_intervals(entry.stream)[1]  # the stream once, not once per query
        for step, query in queries_of([entry]):
            ops = measured(intervals, step, query)
            rate = metrics.stream_rate((o.elapsed, o.ok) for o in ops)
            if rate is not None:
                rates.setdefault((step, query), []).append(rate)
        found[entry.id] = rates
    return found


def repetitions_label(side: Side) -> str:
    """Which repetitions a side has: separate runs, rounds inside a run, or both."""
    runs = len(side.entries)
    rounds = {e.results.rounds.repetitions for e in side.entries if e.results.rounds is not None}
    inside = f" x {max(rounds)} rounds inside each run" if rounds else ""
    return f"{runs} run(s){inside}"


# ------------------------------------------------------------------- one side's noise


@dataclass
class Measured:
    """What one side measured of one query: its figures and the units to resample."""

    #: metric name -> the side's figure (req/s; latencies in ms)
    figures: dict[str, float | None]
    #: metric name -> every measurement's value (each run's each round)
    values: dict[str, list[float]]
    units: Units | None
    #: how the side's noise is known: "3 runs", "6 rounds", "30 intervals in blocks of 6"
    basis: str
    #: why there is no interval, if there is none
    missing: str | None = None

    def figure(self, metric: Metric, weights: np.ndarray | None) -> SideFigure:
        """The side's figure of ``metric`` with the noise its replicates (``weights``) show."""
        value = self.figures.get(metric.name)
        if self.units is None or weights is None:
            return SideFigure(value)
        repetitions = 1 if self.units.kind == "intervals" else self.units.n
        return side_figure(
            value, metric.replicates(self.units, weights), self.units.effective, repetitions
        )


def _ln_sum(op: OpResult) -> tuple[float, float]:
    """(latency samples, sum of their natural logs in seconds) of one measurement."""
    latency = op.latency
    if not latency.count or latency.gmean is None or latency.gmean <= 0:
        return 0.0, 0.0
    return float(latency.count), latency.count * math.log(latency.gmean / 1000.0)


def _histogram(ops: Sequence[OpResult]) -> hdr.Counts | None:
    """The measurements' latency histograms merged (None: one with samples has none)."""
    merged = hdr.empty()
    for op in ops:
        if not op.latency.count:
            continue
        if not op.histograms.latency:
            return None
        merged = hdr.add(merged, hdr.decode(op.histograms.latency))
    return merged


def _pooled_percentile(ops: Sequence[OpResult], percentile: float) -> float | None:
    """The percentile (ms) of the measurements' merged histograms, clipped to the exact
    extremes, where their sample count supports it (as the report's tables pool it)."""
    merged = _histogram(ops)
    if merged is None or not supported_percentiles(hdr.total(merged), [percentile]):
        return None
    value = hdr.percentiles(merged, [percentile])[percentile] * 1000.0
    lows = [op.latency.min for op in ops if op.latency.count and op.latency.min is not None]
    highs = [op.latency.max for op in ops if op.latency.count and op.latency.max is not None]
    if lows and highs:
        value = min(max(value, min(lows)), max(highs))
    return round(value, 4)


def _pooled(
    ops: Sequence[OpResult], rates: Sequence[float | None], metrics_: Sequence[Metric]
) -> dict[str, float | None]:
    """A side's figures from several measurements (see the module docstring)."""
    found: dict[str, float | None] = {}
    usable = [r for r in rates if r is not None]
    count = sum(_ln_sum(op)[0] for op in ops)
    for metric in metrics_:
        if metric.statistic == "throughput":
            found[metric.name] = statistics.fmean(usable) if usable else None
        elif metric.statistic == "gmean":
            logs = sum(_ln_sum(op)[1] for op in ops)
            found[metric.name] = round(math.exp(logs / count) * 1000.0, 4) if count else None
        else:
            found[metric.name] = _pooled_percentile(ops, float(metric.statistic[1:]))
    return found


def _units(kind: UnitKind, groups: Sequence[tuple[Sequence[OpResult], float | None]]) -> Units:
    """Units (runs or rounds) from each one's operations and rate, for :meth:`Units.build`."""
    counts: list[float] = []
    ln_sums: list[float] = []
    histograms: list[hdr.Counts] = []
    for ops, _rate in groups:
        sums = [_ln_sum(op) for op in ops]
        histogram = _histogram(ops)
        counts.append(sum(c for c, _l in sums))
        ln_sums.append(sum(s for _c, s in sums))
        histograms.append(hdr.empty() if histogram is None else histogram)
    return Units.build(
        kind,
        ok=[0.0] * len(groups),
        seconds=[1.0] * len(groups),
        rate=[rate for _ops, rate in groups],
        count=counts,
        ln_sum=ln_sums,
        histograms=histograms,
    )


def interval_units(intervals: Sequence[IntervalOp]) -> Units | None:
    """A run's measured intervals of one query as units (None: fewer than
    :data:`MIN_INTERVALS` with a length)."""
    used = [o for o in intervals if o.elapsed > 0]
    if len(used) < MIN_INTERVALS:
        return None
    return Units.build(
        "intervals",
        ok=[o.ok for o in used],
        seconds=[o.elapsed for o in used],
        rate=[o.rate for o in used],
        count=[o.ok if o.gmean else 0 for o in used],
        ln_sum=[o.ok * math.log(o.gmean) if o.gmean else 0.0 for o in used],
        histograms=[o.counts for o in used],
    )


def measure(
    side: Side,
    step: str,
    query: str,
    metrics_: Sequence[Metric] = METRICS,
    recomputed: dict[str, dict[tuple[str, str], list[float]]] | None = None,
) -> Measured | None:
    """What ``side`` measured of ``query`` in ``step`` (None: it did not run it)."""
    recomputed = recomputed or {}
    per_entry: list[tuple[Entry, list[OpResult], list[float | None]]] = []
    for entry in side.entries:
        ops = ops_of(entry, step, query)
        if not ops:
            continue
        rates: list[float | None] = [_figure("req/s")(op) for op in ops]
        if entry.id in recomputed:
            again = recomputed[entry.id].get((step, query), [])
            rates = [*again, *[None] * (len(ops) - len(again))][: len(ops)]
        per_entry.append((entry, ops, rates))
    if not per_entry:
        return None
    ops = [op for _e, found, _r in per_entry for op in found]
    rates = [r for _e, _o, found in per_entry for r in found]
    values = {
        m.name: [
            v
            for op, rate in zip(ops, rates, strict=True)
            if (v := (rate if m.statistic == "throughput" else m.value(op))) is not None
        ]
        for m in metrics_
    }
    if len(per_entry) >= 2:
        run_rates = [
            statistics.fmean(usable) if (usable := [r for r in found if r is not None]) else None
            for _e, _o, found in per_entry
        ]
        figures = _pooled(ops, run_rates, metrics_)
        units = _units(
            "runs",
            [(found, rate) for (_e, found, _r), rate in zip(per_entry, run_rates, strict=True)],
        )
        return Measured(figures, values, units, f"{len(per_entry)} runs")
    entry, found, found_rates = per_entry[0]
    if len(found) >= 2:
        figures = _pooled(found, found_rates, metrics_)
        units = _units(
            "rounds", [([op], rate) for op, rate in zip(found, found_rates, strict=True)]
        )
        return Measured(figures, values, units, f"{len(found)} rounds")
    intervals = measured(side.intervals(entry), step, query) if entry.stream else None
    found_single = single(found[0], found_rates[0], intervals, metrics_)
    if entry.source != "esdash":
        found_single.missing = "one value of an imported file"
    return found_single


def single(
    op: OpResult,
    rate: float | None,
    intervals: Sequence[IntervalOp] | None,
    metrics_: Sequence[Metric],
) -> Measured:
    """One measurement (one run, one round) with its measured intervals (None: the run has
    no stream)."""
    figures = {m.name: rate if m.statistic == "throughput" else m.value(op) for m in metrics_}
    values = {m.name: [] if (v := figures[m.name]) is None else [v] for m in metrics_}
    if intervals is None:
        return Measured(figures, values, None, "1 value", "one value, no stream")
    units = interval_units(intervals)
    if units is None:
        missing = f"fewer than {MIN_INTERVALS} measured intervals"
        return Measured(figures, values, None, "1 value", missing)
    return Measured(figures, values, units, f"{units.n} intervals in blocks of {units.block}")


def _rng(*parts: str) -> np.random.Generator:
    """A generator seeded by :data:`SEED` and ``parts``: the side's run ids, the step and the
    query, so the same comparison draws the same replicates every time, in ``compare`` and
    on the dashboard alike."""
    return np.random.default_rng([SEED, *(zlib.crc32(p.encode()) for p in parts)])


def side_figures(
    found: Measured, metrics_: Sequence[Metric], rng: np.random.Generator
) -> dict[str, SideFigure]:
    """Every metric's :class:`SideFigure`, all from the same replicates."""
    weights = found.units.weights(rng) if found.units is not None else None
    return {m.name: found.figure(m, weights) for m in metrics_}


# ------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Judged:
    """One cell's effect, its Holm-adjusted p-value, verdict and repetitions needed."""

    effect: Effect
    p_holm: float | None
    verdict: Verdict
    needed: int | None


def judge_cells(
    pairs: Sequence[tuple[SideFigure, SideFigure] | None],
    higher_is_better: bool,
    margin: float = MARGIN,
    precision: float | None = None,
) -> list[Judged | None]:
    """The cells of one metric across the queries of one comparison, Holm-corrected
    together (None: a query one side did not run)."""
    effects = [None if pair is None else effect(*pair) for pair in pairs]
    adjusted = holm([None if e is None else e.p for e in effects])
    judged: list[Judged | None] = []
    for pair, found, p in zip(pairs, effects, adjusted, strict=True):
        if pair is None or found is None:
            judged.append(None)
            continue
        judged.append(
            Judged(
                found,
                p,
                verdict(found, p, higher_is_better, margin),
                repetitions_needed(*pair, precision if precision is not None else margin),
            )
        )
    return judged


@dataclass
class Judgement:
    """A contender against the baseline over some queries: what each side measured of each
    query, and per metric the judged cells, Holm-corrected over the queries."""

    sides: list[tuple[Measured | None, Measured | None]]
    cells: dict[str, list[Judged | None]]


def _ids(side: Side) -> list[str]:
    return sorted(e.id for e in side.entries)


def judge_sides(
    baseline: Side,
    contender: Side,
    queries: Sequence[tuple[str, str]],
    metrics_: Sequence[Metric] = METRICS,
    margin: float = MARGIN,
    precision: float | None = None,
    recomputed: dict[str, dict[tuple[str, str], list[float]]] | None = None,
) -> Judgement:
    """Every cell of one contender: the comparison's core (``compare``, the report's
    overhead table)."""
    sides: list[tuple[Measured | None, Measured | None]] = []
    pairs: dict[str, list[tuple[SideFigure, SideFigure] | None]] = {m.name: [] for m in metrics_}
    for step, query in queries:
        a = measure(baseline, step, query, metrics_, recomputed)
        b = measure(contender, step, query, metrics_, recomputed)
        sides.append((a, b))
        if a is None or b is None:
            for metric in metrics_:
                pairs[metric.name].append(None)
            continue
        mine = side_figures(a, metrics_, _rng(*_ids(baseline), step, query))
        theirs = side_figures(b, metrics_, _rng(*_ids(contender), step, query))
        for metric in metrics_:
            pairs[metric.name].append((mine[metric.name], theirs[metric.name]))
    cells = {
        m.name: judge_cells(pairs[m.name], m.higher_is_better, margin, precision) for m in metrics_
    }
    return Judgement(sides, cells)


def judge_values(
    base: Sequence[float],
    other: Sequence[float],
    higher_is_better: bool,
    seed: str,
    margin: float = MARGIN,
) -> Judged | None:
    """One figure per run on each side (an ingest's time or rate): the ratio of the means,
    bootstrapped over the runs (None: a side without values)."""
    if not base or not other:
        return None
    figures = []
    for side, values in (("baseline", base), ("contender", other)):
        units = Units.build(
            "runs",
            ok=[0.0] * len(values),
            seconds=[1.0] * len(values),
            rate=list(values),
            count=[0.0] * len(values),
            ln_sum=[0.0] * len(values),
            histograms=[hdr.empty()] * len(values),
        )
        weights = units.weights(_rng(seed, side))
        mean = statistics.fmean(values)
        figures.append(side_figure(mean, units.throughput(weights), units.n, units.n))
    (cell,) = judge_cells([(figures[0], figures[1])], higher_is_better, margin)
    return cell


def compare(
    baseline: Side,
    contenders: Sequence[Side],
    margin: float = MARGIN,
    precision: float | None = None,
) -> list[JsonObject]:
    """One record per contender x query x metric (see the module docstring)."""
    every = [e for side in (baseline, *contenders) for e in side.entries]
    align_queries(every)
    mark_differences(every)
    recomputed = recomputed_rates([baseline, *contenders])
    precision = margin if precision is None else precision
    records: list[JsonObject] = []
    for contender in contenders:
        queries = queries_of(baseline.entries)
        queries += [q for q in queries_of(contender.entries) if q not in queries]
        judged = judge_sides(baseline, contender, queries, METRICS, margin, precision, recomputed)
        for k, ((step, query), (a, b)) in enumerate(zip(queries, judged.sides, strict=True)):
            for metric in METRICS:
                record = _record(baseline, contender, step, query, metric, a, b, recomputed)
                _judged(record, judged.cells[metric.name][k], a, b, metric)
                record.update(margin_pct=margin * 100.0, precision_pct=precision * 100.0)
                records.append(record)
    return records


def _record(
    baseline: Side,
    contender: Side,
    step: str,
    query: str,
    metric: Metric,
    a: Measured | None,
    b: Measured | None,
    recomputed: dict[str, dict[tuple[str, str], list[float]]],
) -> JsonObject:
    base = a.figures.get(metric.name) if a is not None else None
    value = b.figures.get(metric.name) if b is not None else None
    record: JsonObject = {
        "contender": contender.label,
        "step": step,
        "query": query,
        "metric": metric.name,
        "baseline": base,
        "value": value,
        "baseline_runs": a.values.get(metric.name, []) if a is not None else [],
        "contender_runs": b.values.get(metric.name, []) if b is not None else [],
        "baseline_repetitions": repetitions_label(baseline),
        "contender_repetitions": repetitions_label(contender),
        "baseline_basis": a.basis if a is not None else None,
        "contender_basis": b.basis if b is not None else None,
        "recomputed": sorted(
            e.id for e in (*baseline.entries, *contender.entries) if e.id in recomputed
        )
        if metric.name == "req/s"
        else [],
        "diff": None if base is None or value is None else value - base,
        "pct": None if base is None or value is None or not base else (value / base - 1) * 100,
        "ratio": None,
        "low": None,
        "high": None,
        "p": None,
        "p_holm": None,
        "verdict": None,
        "needed": None,
        "note": "",
    }
    if a is None or b is None:
        side, entries = ("baseline", baseline.entries) if a is None else ("contender", [])
        if a is not None:
            entries = contender.entries
        ran = any(op_of(e, step, query) for e in entries)
        record["note"] = "too few samples" if ran else f"not in {side}"
    return record


def _judged(
    record: JsonObject, cell: Judged | None, a: Measured | None, b: Measured | None, metric: Metric
) -> None:
    """The cell's effect, verdict and notes into its record."""
    if a is None or b is None:
        return
    if cell is not None:
        found = cell.effect
        record.update(
            ratio=found.ratio,
            low=found.low,
            high=found.high,
            p=found.p,
            p_holm=cell.p_holm,
            verdict=cell.verdict,
            needed=cell.needed,
        )
    if record["ratio"] is None:  # a side without the figure (a percentile of too few)
        record.update(verdict=None, needed=None, note="too few samples")
        return
    if record["low"] is None:
        why = [
            f"{name}: {m.missing}" for name, m in (("baseline", a), ("contender", b)) if m.missing
        ]
        record["note"] = f"no spread known ({'; '.join(why)})" if why else "no spread known"


# ------------------------------------------------------------------- the screen's cells


def screen_cells(
    a: Entry, b: Entry, margin: float = MARGIN
) -> dict[tuple[int, str], dict[str, Judged | None]]:
    """The dashboard's comparison of two finished runs, per step (each round on its own)
    and query: each side's measured intervals of that step, block-bootstrapped, every
    metric of :data:`SCREEN_METRICS` judged across the rows (Holm)."""
    intervals = {id(e): read_intervals(e.stream)[1] if e.stream else None for e in (a, b)}
    keys = sorted({(s.index, q) for e in (a, b) for s in e.results.steps for q in s.queries})

    def found(entry: Entry, index: int, query: str) -> Measured | None:
        step = next((s for s in entry.results.steps if s.index == index), None)
        if step is None or query not in step.queries:
            return None
        op = step.queries[query]
        ops = intervals[id(entry)]
        mine = None
        if ops is not None:
            mine = [o for o in ops if o.phase == "measure" and o.step == index and o.op == query]
        return single(op, _figure("req/s")(op), mine, SCREEN_METRICS)

    def name(entry: Entry, index: int) -> str:
        return next((s.name for s in entry.results.steps if s.index == index), str(index))

    figures: list[tuple[dict[str, SideFigure], dict[str, SideFigure]] | None] = []
    for index, query in keys:
        pair = (found(a, index, query), found(b, index, query))
        if pair[0] is None or pair[1] is None:
            figures.append(None)
            continue
        figures.append(
            (
                side_figures(pair[0], SCREEN_METRICS, _rng(a.id, name(a, index), query)),
                side_figures(pair[1], SCREEN_METRICS, _rng(b.id, name(b, index), query)),
            )
        )
    cells: dict[tuple[int, str], dict[str, Judged | None]] = {key: {} for key in keys}
    for metric in SCREEN_METRICS:
        pairs = [None if f is None else (f[0][metric.name], f[1][metric.name]) for f in figures]
        for key, cell in zip(
            keys, judge_cells(pairs, metric.higher_is_better, margin), strict=True
        ):
            cells[key][metric.name] = cell
    return cells


# ------------------------------------------------------------------------ rendering


def ratio_text(found: Effect | None) -> str:
    return "-" if found is None or found.ratio is None else f"{found.ratio:.3f}"


def interval_text(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def verdict_text(found: str | None, margin: float) -> str:
    if found is None:
        return "-"
    return f"equivalent +-{margin * 100:g}%" if found == "equivalent" else found


def needed_text(needed: int | None, has_interval: bool) -> str:
    if needed is not None:
        return str(needed)
    return f">{MAX_SHOWN}" if has_interval else "-"


#: Above this many repetitions the table says ">10000".
MAX_SHOWN = 10_000


def _cells(record: JsonMapping) -> list[str]:
    shown = next(m.fmt for m in METRICS if m.name == record["metric"])
    margin = record.get("margin_pct", MARGIN * 100.0) / 100.0
    return [
        record["contender"],
        query_label(record["step"], record["query"]),
        record["metric"],
        shown(record["baseline"]),
        shown(record["value"]),
        "-" if record["ratio"] is None else f"{record['ratio']:.3f}",
        interval_text(record["low"], record["high"]),
        verdict_text(record["verdict"], margin),
        needed_text(record["needed"], record["low"] is not None),
        record["note"],
    ]


def _headers(precision_pct: float) -> tuple[str, ...]:
    return (
        "contender",
        "query",
        "metric",
        "baseline",
        "contender",
        "ratio",
        f"{LEVEL * 100:g} % interval",
        "verdict",
        f"n for +-{precision_pct:g}%",
        "note",
    )


def legend(records: Sequence[JsonMapping], margin: float, precision: float) -> list[str]:
    """What the columns mean (printed under the table)."""
    queries = len({(r["step"], r["query"]) for r in records})
    return [
        "ratio: contender / baseline. interval: 95 %, bootstrap over each side's runs, or "
        "its rounds, or blocks of a single run's measured intervals (the basis above).",
        f"verdict: equivalent when the interval lies within +-{margin * 100:g}%; else better "
        f"or worse when p < 0.05 after Holm's correction over the {queries} queries of a "
        "contender and metric; else inconclusive.",
        f"n for +-{precision * 100:g}%: repetitions per side for an interval that narrow (a "
        "single run: runs of its length -- at least that, since runs vary more than the "
        "intervals of one).",
    ]


def render(
    baseline: Side,
    records: Sequence[JsonMapping],
    output: str,
    contenders: Sequence[Side] = (),
) -> str:
    """The comparison as ``text`` (aligned columns), ``md`` (a Markdown table) or ``json``."""
    margin = (records[0]["margin_pct"] if records else MARGIN * 100.0) / 100.0
    precision = (records[0]["precision_pct"] if records else margin * 100.0) / 100.0
    every = [e for side in (baseline, *contenders) for e in side.entries]
    apart = distinguishing(every)
    differ = fingerprints.describe([e.fingerprint for e in every], apart) if apart else ""
    if output == "json":
        document = {
            "baseline": baseline.label,
            "level": LEVEL,
            "margin_pct": margin * 100.0,
            "precision_pct": precision * 100.0,
            "sides_differ_in": differ,
            "comparisons": list(records),
        }
        return json.dumps(document, indent=2) + "\n"
    rows = [_cells(r) for r in records]
    said = [f"repetitions: baseline {repetitions_label(baseline)}"]
    said += sorted({f"{r['contender']}: {r['contender_repetitions']}" for r in records})
    if differ:
        said.append(f"the sides differ in {differ}")
    bases = sorted({r["baseline_basis"] for r in records if r["baseline_basis"]})
    if bases:
        said.append(f"basis of the baseline: {', '.join(bases)}")
    for name in dict.fromkeys(r["contender"] for r in records):
        found = sorted(
            {
                r["contender_basis"]
                for r in records
                if r["contender"] == name and r["contender_basis"]
            }
        )
        if found:
            said.append(f"basis of {name}: {', '.join(found)}")
    recomputed = sorted({run for r in records for run in r.get("recomputed", [])})
    if recomputed:
        said.append(
            "req/s of " + ", ".join(recomputed) + " recomputed from the stream (successful "
            "requests / seconds measured): their results divide by the planned duration"
        )
    headers = _headers(precision * 100.0)
    if output == "md":
        lines = [f"Baseline: {baseline.label}", ""] + [f"- {line}" for line in said] + [""]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        lines += [""] + [f"- {line}" for line in legend(records, margin, precision)]
        return "\n".join(lines) + "\n"
    lines = [f"baseline: {baseline.label}", *said, ""] + fmt.table(headers, rows, left=3)
    lines += ["", *legend(records, margin, precision)]
    return "\n".join(lines) + "\n"
