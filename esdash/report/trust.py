"""The report's account of whether each number can be trusted.

Four tables beside the numbers, from what every run recorded in ``results.json`` (the
ranks' settling, global warm-up and rounds, and steadiness per step):

* ``settling``: per run, what was done after ingest and how long it took, and the global
  warm-up (rounds, seconds, converged or not);
* ``rounds``: per run with ``benchmark.repetitions`` > 1, every query's median over the
  rounds with its interval ("range, n=N" below 6 rounds) and the position effect;
* ``flags``: every step whose numbers need a second look -- not steady, mostly served from
  a cache, ended early, lost ranks -- never averaged away;
* ``references``: every reference figure of a run's session, within / better / worse.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from esdash.errors import BadInput
from esdash.references import Reference, parse_references
from esdash.report.tables import Table
from esdash.rundir.records import INCOMPLETE_STEP, GlobalWarmup
from esdash.view import format as fmt
from esdash.view.inputs import Entry
from esdash.view.references import judge


def settling_table(entries: Sequence[Entry]) -> Table:
    table = Table(
        "settling",
        "Settling and global warm-up",
        "What each run did between ingest and its first measured step.",
        ["run", "after ingest", "settle s", "actions", "warm-up rounds", "warm-up s", "steady"],
    )
    for entry in entries:
        settle, warm = entry.results.settle, entry.results.global_warmup
        if settle is None and warm is None:
            continue
        actions = (
            ", ".join(
                f"{a.action} {a.seconds:.1f} s" + ("" if a.ok else " FAILED")
                for a in settle.actions
            )
            if settle is not None
            else ""
        )
        if settle is not None and settle.timed_out:
            actions += " (timed out)"
        unsteady = [] if warm is None else [q for q, d in warm.queries.items() if not d.converged]
        table.rows.append(
            [
                entry.id,
                settle.after_ingest if settle is not None else fmt.NA,
                f"{settle.seconds:.1f}" if settle is not None else fmt.NA,
                actions or fmt.NA,
                str(warm.rounds) if warm is not None else "none",
                f"{warm.seconds:.0f}" if warm is not None else fmt.NA,
                fmt.NA if warm is None else _warm_cell(warm, unsteady),
            ]
        )
        table.records.append(
            {
                "run": entry.id,
                "settle": None if settle is None else settle.seconds,
                "after_ingest": None if settle is None else settle.after_ingest,
                "warmup_rounds": None if warm is None else warm.rounds,
                "warmup_seconds": None if warm is None else warm.seconds,
                "warmup_converged": None if warm is None else warm.converged,
            }
        )
    return table


def rounds_table(entries: Sequence[Entry]) -> Table:
    table = Table(
        "rounds",
        "Rounds inside a run: median and interval per query",
        "Median req/s over the rounds of one run; the interval is the order-statistic "
        "confidence interval of the median (n >= 6) or the range (n < 6).",
        ["run", "order", "step", "query", "median req/s", "interval", "n"],
    )
    for entry in entries:
        rounds = entry.results.rounds
        if rounds is None:
            continue
        for q in rounds.queries:
            if q.low is None or q.high is None:
                interval = fmt.NA
            elif q.kind == "ci":
                interval = f"{fmt.rate(q.low)} .. {fmt.rate(q.high)} ({(q.coverage or 0):.1%} CI)"
            else:
                interval = f"{fmt.rate(q.low)} .. {fmt.rate(q.high)} (range, n={q.n})"
            table.rows.append(
                [entry.id, rounds.order, q.step, q.query, fmt.rate(q.median), interval, str(q.n)]
            )
            table.records.append(
                {
                    "run": entry.id,
                    "order": rounds.order,
                    "repetitions": rounds.repetitions,
                    "step": q.step,
                    "query": q.query,
                    "median": q.median,
                    "low": q.low,
                    "high": q.high,
                    "kind": q.kind,
                    "n": q.n,
                }
            )
        if rounds.first_to_last is not None:
            effect = ", ".join(fmt.NA if v is None else f"{v:.2f}" for v in rounds.position_effect)
            table.rows.append([entry.id, rounds.order, "(all)", "position effect", effect, "", ""])
    return table


def flags_table(entries: Sequence[Entry]) -> Table:
    table = Table(
        "flags",
        "Steps to look at twice",
        "Not steady (a significant trend of at least 5 %/min in throughput or latency), "
        "mostly served from a cache, ended early or measured by fewer ranks than planned.",
        ["run", "step", "flag"],
    )
    for entry in entries:
        for step in entry.results.steps:
            found = []
            if step.status.startswith(INCOMPLETE_STEP):
                found.append(step.status)
            if step.steadiness is not None and not step.steadiness.steady:
                found.append(step.steadiness.label)
            if step.caches is not None and step.caches.flag:
                found.append(step.caches.flag)
            for flag in found:
                table.rows.append([entry.id, f"{step.index + 1} {step.name}", flag])
                table.records.append({"run": entry.id, "step": step.name, "flag": flag})
    return table


def session_references(entry: Entry) -> tuple[Reference, ...]:
    """The ``[references]`` of the session a run ran with (none: it declared none)."""
    if not entry.session_text:
        return ()
    try:
        data = tomllib.loads(entry.session_text)
        return parse_references(data.get("references") or {})
    except (tomllib.TOMLDecodeError, RecursionError, BadInput):
        return ()  # the run's session was checked when it ran; a damaged copy adds nothing


def references_table(entries: Sequence[Entry]) -> Table:
    table = Table(
        "references",
        "References",
        "Each reference figure of a run's session: within the tolerances, better or worse.",
        ["run", "query", "figure", "where", "value", "reference", "verdict"],
    )
    for entry in entries:
        for judgement in judge(entry.results, session_references(entry)):
            ref = judgement.reference
            value = fmt.NA if judgement.actual is None else ref.show(judgement.actual)
            table.rows.append(
                [
                    entry.id,
                    ref.query,
                    ref.figure,
                    judgement.where,
                    value,
                    ref.show(ref.value),
                    judgement.verdict,
                ]
            )
            table.records.append(
                {
                    "run": entry.id,
                    "query": ref.query,
                    "figure": ref.figure,
                    "where": judgement.where,
                    "value": judgement.actual,
                    "reference": ref.value,
                    "verdict": judgement.verdict,
                }
            )
    return table


def trust_tables(entries: Sequence[Entry]) -> list[Table]:
    """The tables that have something to say (an empty one is left out)."""
    tables = [settling_table(entries), rounds_table(entries), flags_table(entries)]
    tables.append(references_table(entries))
    return [table for table in tables if table.rows]


def _warm_cell(warm: GlobalWarmup, unsteady: list[str]) -> str:
    """ "yes", or "no" and why: the cluster-wide verdict's reason (esdash's rule since the
    warm-up judges the cluster, ``esdash.stats.convergence``), or the unsteady queries of a
    run judged query by query."""
    if warm.converged:
        return "yes"
    if warm.criterion is not None:
        return f"no: {warm.reason}" if warm.reason else "no"
    return "no: " + ", ".join(unsteady)
