"""``esdash compare BASELINE CONTENDER...``: per-query differences, with a noise check.

Each argument is one *side*: a run, a set of repetitions (a campaign directory narrowed to
one configuration with ``#key=value``), or a result file of the authors.  Queries are matched
by step and query name (the authors' unnamed queries by their request bodies, see
:func:`esdash.view.inputs.align_queries`).  For every contender, query and metric the
output has the baseline's and the contender's value, the difference and the difference in
percent of the baseline.

Metrics: throughput (successful requests per second measured, the one definition of
``results.json`` format 3; runs of older formats divided by the planned duration and are
recomputed from their stream when mixed with newer ones, or refused), latency gmean and
p99 (ms).  A side with repetitions contributes the mean of its values.

**When is a difference inside the noise?**  (The note column; ``~`` marks it.)

* If either side has repetitions (two or more runs, or rounds inside a run with
  ``benchmark.repetitions``; every run's every round is one value): the difference is
  *within the spread of repetitions* when the ranges [min, max] of the two sides' values
  overlap (a side with one value is a range of one value).  This is the Accumulo study's
  view of five iterations: what matters is whether the fastest run of one setup beats the
  slowest of the other.  The output says which repetitions each side has.
* If both sides are single runs: the spread is the interval-to-interval standard deviation
  of the metric inside the run (throughput: the per-interval request rates in
  ``results.json``; latency: the per-interval gmean or p99 from ``stream.jsonl``); the
  difference is *within interval spread* when it is no larger than the larger of the two
  sides' spreads.  Without any spread (imported files, runs shorter than two intervals)
  the note says so.

Neither rule is a statistical test; they say when a difference is too small to mean much.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from esdash.errors import BadInput
from esdash.rundir.records import JsonMapping, JsonObject, OpResult
from esdash.view import format as fmt
from esdash.view.inputs import (
    Entry,
    align_queries,
    config_label,
    load_inputs,
    op_of,
    ops_of,
    queries_of,
    query_label,
)
from esdash.view.intervals import IntervalOp, latency_spread, measured, read_intervals


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
    entries = load_inputs([spec]).entries
    if not entries:
        raise BadInput(f"{spec}: no completed runs")
    configs = {e.key: e for e in entries}
    if len(configs) > 1:
        listed = "; ".join(config_label(e.config) for e in configs.values())
        raise BadInput(
            f"{spec} holds {len(configs)} configurations ({listed}); compare one at a time, "
            f"e.g. {spec}#setup=none,nodes=1"
        )
    return Side(spec, entries)


@dataclass(frozen=True)
class Metric:
    name: str
    value: Callable[[OpResult], float | None]
    #: "throughput" (from results) or a latency statistic read per interval
    spread: str
    fmt: Callable[[float | None], str]


METRICS = (
    Metric("req/s", lambda op: op.throughput.requests_per_s, "throughput", fmt.rate),
    Metric("gmean ms", lambda op: op.latency.gmean, "gmean", lambda ms: fmt.ms(fmt.from_ms(ms))),
    Metric("p99 ms", lambda op: op.latency.p99, "p99", lambda ms: fmt.ms(fmt.from_ms(ms))),
)


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
            seconds = sum(o.elapsed for o in ops)
            if seconds > 0:
                rates.setdefault((step, query), []).append(sum(o.ok for o in ops) / seconds)
        found[entry.id] = rates
    return found


def repetitions_label(side: Side) -> str:
    """Which repetitions a side has: separate runs, rounds inside a run, or both."""
    runs = len(side.entries)
    rounds = {e.results.rounds.repetitions for e in side.entries if e.results.rounds is not None}
    inside = f" x {max(rounds)} rounds inside each run" if rounds else ""
    return f"{runs} run(s){inside}"


def _single_spread(side: Side, entry: Entry, metric: Metric, step: str, query: str) -> float | None:
    op = op_of(entry, step, query)
    if op is None:
        return None
    if metric.spread == "throughput":
        return op.throughput.intervals.std
    return latency_spread(measured(side.intervals(entry), step, query), metric.spread)


#: For each metric a viewer compares: is a higher value better?
HIGHER_IS_BETTER = {"rate": True, "req/s": True, "p50": False, "p99": False, "gmean": False}
HIGHER_IS_BETTER.update({"gmean ms": False, "p99 ms": False})

#: Changes smaller than this share of the baseline are shown as unchanged (no colour).
NEGLIGIBLE = 0.02


def relative_change(a: float | None, b: float | None) -> float | None:
    """``(b - a) / a`` (None when either is missing or ``a`` is zero)."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def better(metric: str, a: float | None, b: float | None) -> bool | None:
    """Whether ``b`` is better than ``a`` for ``metric`` (None: no change worth a verdict)."""
    change = relative_change(a, b)
    if change is None or abs(change) < NEGLIGIBLE:
        return None
    return change > 0 if HIGHER_IS_BETTER[metric] else change < 0


def judge(
    base: Sequence[float],
    other: Sequence[float],
    base_spread: float | None,
    other_spread: float | None,
) -> tuple[bool | None, str]:
    """(significant, note) by the rules in the module docstring."""
    diff = statistics.fmean(other) - statistics.fmean(base)
    if len(base) > 1 or len(other) > 1:
        overlap = max(min(base), min(other)) <= min(max(base), max(other))
        if overlap:
            return False, "~ within the spread of repetitions (ranges overlap)"
        return True, "outside the spread of repetitions"
    spreads = [s for s in (base_spread, other_spread) if s is not None]
    if not spreads:
        return None, "no spread known"
    spread = max(spreads)
    if abs(diff) <= spread:
        return False, f"~ within interval spread (+-{spread:.3g})"
    return True, f"beyond interval spread (+-{spread:.3g})"


def compare(baseline: Side, contenders: Sequence[Side]) -> list[JsonObject]:
    """One record per contender x query x metric (see the module docstring)."""
    align_queries([e for side in (baseline, *contenders) for e in side.entries])
    recomputed = recomputed_rates([baseline, *contenders])

    def values(side: Side, metric: Metric, step: str, query: str) -> list[float]:
        """Every measurement of the side: each run's each round (``ops_of``)."""
        found = []
        for entry in side.entries:
            if metric.name == "req/s" and entry.id in recomputed:
                found += recomputed[entry.id].get((step, query), [])
                continue
            found += [v for op in ops_of(entry, step, query) if (v := metric.value(op)) is not None]
        return found

    records = []
    for contender in contenders:
        queries = queries_of(baseline.entries)
        queries += [q for q in queries_of(contender.entries) if q not in queries]
        for step, query in queries:
            for metric in METRICS:
                base = values(baseline, metric, step, query)
                other = values(contender, metric, step, query)
                record: JsonObject = {
                    "contender": contender.label,
                    "step": step,
                    "query": query,
                    "metric": metric.name,
                    "baseline": statistics.fmean(base) if base else None,
                    "value": statistics.fmean(other) if other else None,
                    "baseline_runs": base,
                    "contender_runs": other,
                    "baseline_repetitions": repetitions_label(baseline),
                    "contender_repetitions": repetitions_label(contender),
                    "recomputed": sorted(
                        e.id for e in (*baseline.entries, *contender.entries) if e.id in recomputed
                    )
                    if metric.name == "req/s"
                    else [],
                }
                if not base or not other:
                    side = "baseline" if not base else "contender"
                    entries = baseline.entries if not base else contender.entries
                    ran = any(op_of(e, step, query) for e in entries)
                    note = "too few samples" if ran else f"not in {side}"
                    record.update(diff=None, pct=None, significant=None, note=note)
                    records.append(record)
                    continue
                diff = record["value"] - record["baseline"]
                spreads = (
                    _single_spread(baseline, baseline.entries[0], metric, step, query)
                    if len(base) == 1
                    else None,
                    _single_spread(contender, contender.entries[0], metric, step, query)
                    if len(other) == 1
                    else None,
                )
                significant, note = judge(base, other, *spreads)
                record.update(
                    diff=diff,
                    pct=diff / record["baseline"] * 100.0 if record["baseline"] else None,
                    significant=significant,
                    note=note,
                )
                records.append(record)
    return records


HEADERS = ("contender", "query", "metric", "baseline", "contender", "diff", "diff %", "note")


def _cells(record: JsonMapping) -> list[str]:
    shown = next(m.fmt for m in METRICS if m.name == record["metric"])
    diff = record["diff"]
    return [
        record["contender"],
        query_label(record["step"], record["query"]),
        record["metric"],
        shown(record["baseline"]),
        shown(record["value"]),
        "-" if diff is None else ("+" if diff >= 0 else "-") + shown(abs(diff)),
        "-" if record["pct"] is None else f"{record['pct']:+.1f}%",
        record["note"],
    ]


def render(baseline: Side, records: Sequence[JsonMapping], output: str) -> str:
    """The comparison as ``text`` (aligned columns), ``md`` (a Markdown table) or ``json``."""
    if output == "json":
        return (
            json.dumps({"baseline": baseline.label, "comparisons": list(records)}, indent=2) + "\n"
        )
    rows = [_cells(r) for r in records]
    said = [f"repetitions: baseline {repetitions_label(baseline)}"]
    said += sorted({f"{r['contender']}: {r['contender_repetitions']}" for r in records})
    recomputed = sorted({run for r in records for run in r.get("recomputed", [])})
    if recomputed:
        said.append(
            "req/s of " + ", ".join(recomputed) + " recomputed from the stream (successful "
            "requests / seconds measured): their results divide by the planned duration"
        )
    if output == "md":
        lines = [f"Baseline: {baseline.label}", ""] + [f"- {line}" for line in said] + [""]
        lines.append("| " + " | ".join(HEADERS) + " |")
        lines.append("|" + "|".join("---" for _ in HEADERS) + "|")
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    lines = [f"baseline: {baseline.label}", *said, ""] + fmt.table(HEADERS, rows, left=3)
    lines += ["", "~ : the difference is inside the spread (see `esdash compare --help`)"]
    return "\n".join(lines) + "\n"
