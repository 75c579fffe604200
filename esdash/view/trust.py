"""Whether a run's numbers can be trusted, as text: shared by the summary and the dashboard.

From ``results.json`` (format >= 3): what was done to settle the cluster and how the global
warm-up ended, each query's median over rounds with its interval, and every step whose
numbers need a second look (not steady, mostly cached, ended early, lost ranks).  Plain
ASCII, one finding per line, so batch logs and the dashboard say the same thing.
"""

from __future__ import annotations

from esdash.rundir.records import INCOMPLETE_STEP, QueryRounds, Results
from esdash.stats import metrics
from esdash.view import format as fmt


def before_steps(results: Results) -> list[str]:
    """What happened around the ingest before the first step: settling, the track's
    administrative requests (one line each) and the global warm-up."""
    lines = []
    settle = results.settle
    if settle is not None:
        done = ", ".join(
            f"{a.action} {a.seconds:.1f} s" + ("" if a.ok else f" FAILED ({a.detail})")
            for a in settle.actions
        )
        lines.append(
            f"settle ({settle.after_ingest} after ingest): {done or 'nothing to do'}"
            + (" -- TIMED OUT: the cluster was still busy" if settle.timed_out else "")
        )
    for sent in results.track_requests:  # the track's administrative requests, once each
        lines.append(
            f"track task {sent.name} ({sent.operation}, {sent.when}): {sent.request}: "
            f"{sent.status} in {sent.seconds:.3f} s" + (f" ({sent.error})" if sent.error else "")
        )
    warm = results.global_warmup
    if warm is not None:
        line = (
            f"global warm-up: {warm.rounds} round(s) of {warm.round_seconds:g} s "
            f"= {warm.seconds:.0f} s (bound {warm.bound_seconds:.0f} s), "
        )
        if warm.converged:
            line += "converged"
        elif warm.criterion is None:  # a run of an older esdash: judged query by query
            unsteady = [
                f"{name} (cv {fmt.percent(None if q.cv is None else q.cv * 100)})"
                for name, q in warm.queries.items()
                if not q.converged
            ]
            line += "NOT converged: " + ", ".join(unsteady)
        else:
            line += "NOT converged"
        if warm.reason:
            line += f": {warm.reason}"
        lines.append(line)
    return lines


def definitions(results: Results) -> list[str]:
    """What the summary's columns mean (:mod:`esdash.stats.metrics`, one definition each)."""
    measured = [s for s in results.steps if s.queries]
    lines = []
    if measured:
        lines += [
            f"  req/s = {metrics.throughput_definition(results)}",
            f"  +- = {metrics.INTERVAL_STD}",
        ]
    indexing = [name for s in measured for name in s.queries if name in s.planned.indexing]
    if any(name not in s.planned.indexing for s in measured for name in s.queries):
        lines.append(f"  hits/s = {metrics.HITS_PER_S}")
    if indexing:
        lines.append(f"  docs/s = {metrics.DOCS_PER_S}")
    if results.ingest is not None:
        lines.append(f"  ingest docs/s = {metrics.INGEST_DOCS_PER_S}")
    closed = [s.name for s in measured if not s.planned.target_throughput]
    if closed:
        lines.append("  closed loop (no target throughput): latency percentiles are service times")
    return lines


def interval_cell(entry: QueryRounds) -> str:
    if entry.low is None or entry.high is None:
        return fmt.NA
    if entry.kind == "ci":
        coverage = f"{entry.coverage * 100:.1f} %" if entry.coverage else ""
        return f"{fmt.rate(entry.low)} .. {fmt.rate(entry.high)} (CI {coverage})"
    return f"{fmt.rate(entry.low)} .. {fmt.rate(entry.high)} (range, n={entry.n})"


def rounds_lines(results: Results) -> list[str]:
    """Per query: the median over rounds and its interval; the position effect."""
    rounds = results.rounds
    if rounds is None:
        return []
    how = (
        "mirrored order (as listed, then reversed)"
        if rounds.order == "mirrored"
        else f"{rounds.order} order (seed {rounds.seed})"
    )
    lines = ["", f"rounds: {rounds.repetitions} in {how}, per query the median over rounds"]
    rows = [
        [entry.step, entry.query, fmt.rate(entry.median), interval_cell(entry), str(entry.n)]
        for entry in rounds.queries
    ]
    lines.extend(
        fmt.table(("step", "query", "median req/s", "interval of the median", "n"), rows, left=2)
    )
    if rounds.position_effect:
        cells = ", ".join(
            f"{k + 1}: {fmt.NA if v is None else f'{v:.2f}'}"
            for k, v in enumerate(rounds.position_effect)
        )
        lines.append(f"  position effect (throughput / query median, by position): {cells}")
        if rounds.first_to_last is not None:
            lines.append(f"  first / last position: {rounds.first_to_last:.2f}")
    return lines


def step_flags(results: Results) -> list[str]:
    """Steps whose numbers need a second look: unsteady, cached, ended early, lost ranks."""
    flags = []
    for step in results.steps:
        label = f"  {step.index + 1} {step.name}"
        if step.status.startswith(INCOMPLETE_STEP):
            flags.append(f"{label}: {step.status}")
        if step.steadiness is not None and not step.steadiness.steady:
            flags.append(f"{label}: {step.steadiness.label}")
        if step.caches is not None and step.caches.flag:
            flags.append(f"{label}: {step.caches.flag}")
    return flags


def trust_lines(results: Results) -> list[str]:
    """Everything above, for a panel: settling, warm-up, flags, then the rounds' medians."""
    return (
        before_steps(results)
        + [line.strip() for line in step_flags(results)]
        + [line for line in rounds_lines(results) if line]
    )
