"""Text renderings of results and stream records: the end-of-run summary and live views.

* :func:`render_summary` — the table printed when a run ends (and by ``esdash report``), one
  row per step and query as in the paper's tables: throughput mean ± std over intervals,
  latency gmean and gstd, p50/p99, errors;
* :func:`render_live` — a compact table of the current interval for a terminal (headless on
  a TTY), one row per operation;
* :func:`render_record_line` — one line per record for logs (headless without a TTY, sbatch
  output): greppable, no control characters.

All output is plain ASCII (``+-`` for ±), fixed width, deterministic: batch logs on HPC
systems are read with ``less`` and ``grep`` in whatever locale the job had.
"""

from __future__ import annotations

from esdash.bench.merge import Merged, OpData
from esdash.report.thresholds import (  # re-exported: the summary's callers check them too
    check_thresholds,
    evaluate_thresholds,
    parse_thresholds,
)
from esdash.rundir.records import (
    Event,
    Header,
    Interval,
    JsonObject,
    OpResult,
    Results,
    StreamRecord,
)
from esdash.stats import summarize
from esdash.view import format as fmt
from esdash.view.trust import before_steps, definitions, rounds_lines, step_flags

__all__ = [
    "check_thresholds",
    "evaluate_thresholds",
    "parse_thresholds",
    "render_live",
    "render_record_line",
    "render_summary",
]

# ------------------------------------------------------------------------ end of run


def _throughput_cell(op: OpResult) -> str:
    """req/s as results.json defines it (successful / seconds measured), +- the spread of
    the per-interval rates (one definition of throughput everywhere)."""
    intervals = op.throughput.intervals
    spread = fmt.rate(intervals.std) if intervals.n else fmt.NA
    return f"{fmt.rate(op.throughput.requests_per_s)} +- {spread}"


def _op_row(step: str, name: str, op: OpResult) -> list[str]:
    latency = op.latency
    return [
        step,
        name,
        fmt.count(op.requests),
        _throughput_cell(op),
        fmt.rate(op.throughput.docs_per_s),
        fmt.ms(fmt.from_ms(latency.gmean)),
        fmt.factor(latency.gstd),
        fmt.ms(fmt.from_ms(latency.p50)),
        fmt.ms(fmt.from_ms(latency.p99)),
        fmt.ms(fmt.from_ms(latency.max)),
        fmt.errors(op.failed, op.requests),
    ]


SUMMARY_HEADERS = (
    "step",
    "query",
    "requests",
    "req/s (+- std)",
    "docs/s",
    "gmean ms",
    "gstd",
    "p50 ms",
    "p99 ms",
    "max ms",
    "errors",
)


def render_summary(results: Results) -> str:
    """The end-of-run summary of a ``results.json`` document, as fixed-width text.

    Latency columns are Rally's *latency* of successful requests; a percentile the sample
    count cannot support shows as ``-``.
    """
    lines = [
        f"esdash run {results.run_id}: {results.status or 'unfinished'}"
        + (f" ({results.reason})" if results.reason else "")
        + f", {results.ranks} bench ranks"
        + (f", encryption {results.encryption}" if results.encryption else "")
    ]
    ingest = results.ingest
    if ingest:
        rejected = sum(ingest.rejected_docs.values())
        lines.append(
            f"ingest: {fmt.count(ingest.docs)} docs in {ingest.duration_s or 0.0:.1f} s = "
            f"{fmt.rate(ingest.docs_per_s)} docs/s, {fmt.count(rejected)} rejected"
            + (
                " ("
                + ", ".join(f"{k} {v:,}" for k, v in sorted(ingest.rejected_docs.items()))
                + ")"
                if rejected
                else ""
            )
        )
        if ingest.flag:
            lines.append(f"WARNING: ingest: {ingest.flag}")
    lines.extend(before_steps(results))
    rounds = results.rounds is not None and results.rounds.repetitions > 1
    rows = []
    for name, op in (ingest.ops if ingest else {}).items():
        rows.append(_op_row("ingest", name, op))
    for step in results.steps:
        label = f"{step.index + 1} {step.name}" + (f" r{step.round + 1}" if rounds else "")
        if not step.queries:
            status = step.status
            if status.startswith(("not run", "warm-up failed")):
                status = status.split(":")[0] + ", see below"  # the reason is in the notes
            rows.append([label, f"({status})"] + [""] * (len(SUMMARY_HEADERS) - 2))
        for name, op in step.queries.items():
            # a bulk task indexing during the step: its docs/s are documents indexed
            shown = f"{name} (bulk)" if name in step.planned.indexing else name
            rows.append(_op_row(label, shown, op))
    lines.append("")
    lines.extend(fmt.table(SUMMARY_HEADERS, rows, left=2))
    lines.extend(definitions(results))
    lines.extend(rounds_lines(results))
    notes = step_flags(results) + _step_notes(results)
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines) + "\n"


def _step_notes(results: Results) -> list[str]:
    """Why a query has no numbers: not supported by the distribution, or a failed warm-up."""
    notes = []
    for step in results.steps:
        for query, reason in sorted(step.unsupported.items()):
            notes.append(f"  {step.name}/{query}: not run: {reason}")
        for rank, error in sorted((step.warmup_failed or {}).items()):
            notes.append(f"  {step.name}: rank {rank}: {error}")
    return notes


# ----------------------------------------------------------------------- live views


def _decode_ops(record: Interval) -> Merged:
    return Merged().add_ops(record.ops)


def _op_live(data: OpData, elapsed: float) -> JsonObject:
    summary = summarize(data.latency)
    rate = data.ok / elapsed if elapsed > 0 else None
    docs = data.docs / elapsed if elapsed > 0 else None
    return {
        "rate": rate,
        "docs": docs,
        "p50": summary.value("p50"),
        "p99": summary.value("p99"),
        "failed": data.failed,
        "requests": data.requests,
    }


def _where(record: Interval, header: Header | None) -> str:
    phase = record.phase
    step = record.step
    if step is None:
        return phase
    steps = len(header.steps) if header is not None else None
    name = record.step_name or ""
    of = f"/{steps}" if steps else ""
    return f"{phase} step {step + 1}{of} {name}".rstrip()


def _ingest_progress(record: Interval) -> str:
    if record.ingest is None:
        return ""
    done, total = record.ingest.docs_done, record.ingest.docs_total
    if total:
        return f"{done / total * 100:.1f}% ({done:,}/{total:,} docs)"
    return f"{done:,} docs"


def render_live(record: Interval, header: Header | None = None) -> str:
    """A small table of one interval record: req/s now, p50/p99 of the interval, errors.

    p50/p99 show ``-`` when the interval has too few samples to support them.
    """
    elapsed = record.elapsed
    merged = _decode_ops(record)
    title = f"t={record.t:.1f}s  {_where(record, header)}"
    progress = _ingest_progress(record)
    if progress:
        title += f"  {progress}"
    missing = record.missing_ranks
    if missing:
        title += f"  missing ranks: {','.join(map(str, missing))}"
    rows = []
    for name, data in sorted(merged.ops.items()):
        live = _op_live(data, elapsed)
        rows.append(
            [
                name,
                fmt.rate(live["rate"]),
                fmt.rate(live["docs"]),
                fmt.ms(live["p50"]),
                fmt.ms(live["p99"]),
                fmt.errors(live["failed"], live["requests"]),
            ]
        )
    headers = ("op", "req/s", "docs/s", "p50 ms", "p99 ms", "errors")
    return "\n".join([title] + fmt.table(headers, rows)) + "\n"


def _interval_line(record: Interval, header: Header | None) -> str:
    elapsed = record.elapsed
    merged = _decode_ops(record)
    parts = []
    progress = _ingest_progress(record)
    if progress:
        parts.append(progress)
    for name, data in sorted(merged.ops.items()):
        live = _op_live(data, elapsed)
        text = f"{name} {fmt.rate(live['rate'])} req/s"
        if record.phase == "ingest":
            text += f" {fmt.rate(live['docs'])} docs/s"
        text += f" p50 {fmt.ms(live['p50'])} p99 {fmt.ms(live['p99'])} ms"
        text += f" err {fmt.errors(live['failed'], live['requests'])}"
        parts.append(text)
    if not merged.ops and not progress:
        parts.append("no requests")
    missing = record.missing_ranks
    if missing:
        parts.append(f"missing ranks {','.join(map(str, missing))}")
    return f"{_where(record, header)}: " + "; ".join(parts)


def render_record_line(record: StreamRecord, header: Header | None = None) -> str:
    """One log line for any stream record (header, interval, event, final)."""
    if isinstance(record, Header):
        job = record.slurm_job_id
        return (
            f"[{0.0:8.1f}s] run {record.run_id}: {record.bench.ranks} bench ranks, "
            f"{len(record.topology.nodes)} nodes, {len(record.steps)} steps, interval "
            f"{record.interval:g} s" + (f", slurm job {job}" if job else "")
        )
    stamp = f"[{record.t:8.1f}s]"
    if isinstance(record, Interval):
        return f"{stamp} {_interval_line(record, header)}"
    if isinstance(record, Event):
        tag = "" if record.level == "info" else f"{record.level.upper()} "
        return f"{stamp} {tag}{record.kind}: {record.message}"
    reason = f" ({record.reason})" if record.reason else ""
    return f"{stamp} run ended: {record.status}{reason}"
