"""Text renderings of results and stream records: the end-of-run summary and live views.

* :func:`render_summary` — the table ``esdash run`` prints when a run ends, one row per
  step and query as in the paper's tables: throughput ± its spread over intervals, hits/s
  (docs/s for bulk), latency gmean and gstd, p50/p99, errors;
* :func:`render_live` — a compact table of the current interval for a terminal (headless on
  a TTY), one row per operation;
* :func:`render_record_line` — one line per record for logs (headless without a TTY, sbatch
  output): greppable, no control characters.

Every figure comes from :mod:`esdash.stats.metrics` (one definition each); this module only
formats.  The live views show the *current interval's* figures and say so (``now``); the
summary shows the run's, from ``results.json``.

All output is plain ASCII (``+-`` for ±), fixed width, deterministic: batch logs on HPC
systems are read with ``less`` and ``grep`` in whatever locale the job had.
"""

from __future__ import annotations

from esdash.rundir.records import (
    Event,
    Header,
    Interval,
    Results,
    StreamRecord,
)
from esdash.stats import metrics
from esdash.stats.merge import LENIENT, Merged
from esdash.stats.metrics import OpFigures
from esdash.view import format as fmt
from esdash.view.thresholds import (  # re-exported: the summary's callers check them too
    check_thresholds,
    evaluate_thresholds,
    parse_thresholds,
)
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


def _throughput_cell(op: OpFigures) -> str:
    """req/s (the one definition), +- the spread of its per-interval rates."""
    spread = fmt.rate(op.interval_std) if op.interval_n else fmt.NA
    return f"{fmt.rate(op.requests_per_s)} +- {spread}"


def _op_row(step: str, name: str, op: OpFigures) -> list[str]:
    return [
        step,
        name,
        fmt.count(op.requests),
        _throughput_cell(op),
        fmt.rate(op.docs_per_s) if op.indexing else "",
        "" if op.indexing else fmt.rate(op.hits_per_s),
        fmt.ms(op.latency_s("gmean")),
        fmt.factor(op.latency.gstd),
        fmt.ms(op.latency_s("p50")),
        fmt.ms(op.latency_s("p99")),
        fmt.ms(op.latency_s("max")),
        fmt.errors(op.failed, op.requests),
    ]


SUMMARY_HEADERS = (
    "step",
    "query",
    "requests",
    "req/s (+- std)",
    "docs/s",
    "hits/s",
    "gmean ms",
    "gstd",
    "p50 ms",
    "p99 ms",
    "max ms",
    "errors",
)


def _documents_columns(
    headers: tuple[str, ...], rows: list[list[str]]
) -> tuple[tuple[str, ...], list[list[str]]]:
    """Without the docs/s or hits/s column when no row has one (a run without a bulk
    operation has no docs/s, one without searches no hits/s)."""
    empty = {
        k
        for k, header in enumerate(headers)
        if header.startswith(("docs/s", "hits/s")) and not any(row[k] for row in rows)
    }
    kept = [k for k in range(len(headers)) if k not in empty]
    return tuple(headers[k] for k in kept), [[row[k] for k in kept] for row in rows]


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
        figures = metrics.run_ingest(ingest)
        lines.append(
            f"ingest: {fmt.count(figures.docs)} docs in {figures.seconds or 0.0:.1f} s = "
            f"{fmt.rate(figures.docs_per_s)} docs/s, {fmt.count(figures.rejected)} rejected"
            + (
                " ("
                + ", ".join(f"{k} {v:,}" for k, v in sorted(ingest.rejected_docs.items()))
                + ")"
                if figures.rejected
                else ""
            )
        )
        if ingest.flag:
            lines.append(f"WARNING: ingest: {ingest.flag}")
    lines.extend(before_steps(results))
    rounds = results.rounds is not None and results.rounds.repetitions > 1
    rows = []
    for name, op in (metrics.ingest_ops(ingest) if ingest else {}).items():
        rows.append(_op_row("ingest", name, op))
    for step in results.steps:
        label = f"{step.index + 1} {step.name}" + (f" r{step.round + 1}" if rounds else "")
        if not step.queries:
            status = step.status
            if status.startswith(("not run", "warm-up failed")):
                status = status.split(":")[0] + ", see below"  # the reason is in the notes
            rows.append([label, f"({status})"] + [""] * (len(SUMMARY_HEADERS) - 2))
        for name, op in metrics.step_ops(step).items():
            # a bulk task indexing during the step: its docs/s are documents indexed
            shown = f"{name} (bulk)" if op.indexing else name
            rows.append(_op_row(label, shown, op))
    lines.append("")
    lines.extend(fmt.table(*_documents_columns(SUMMARY_HEADERS, rows), left=2))
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


#: Percentiles one interval shows (each only where its sample count supports it).
LIVE_PERCENTILES = (50.0, 99.0)


def _interval_ops(record: Interval, header: Header | None) -> dict[str, OpFigures]:
    """The record's operations, ``now``: the one definition over this interval's length,
    of the record merged the way every reader merges (a damaged histogram gives no
    percentiles)."""
    merged = Merged().add_ops(record.ops, LENIENT)
    return {
        name: metrics.op_figures(
            data,
            record.elapsed,
            indexing=metrics.indexes_documents(header, record.phase, record.step, name),
            percentiles=LIVE_PERCENTILES,
        )
        for name, data in sorted(merged.ops.items())
    }


def render_live(record: Interval, header: Header | None = None) -> str:
    """A small table of one interval record: req/s now, docs/s (bulk) or hits/s (searches)
    now, p50/p99 of the interval, errors.

    Every figure is the interval's own (the title says ``now``); p50/p99 show ``-`` when the
    interval has too few samples to support them.
    """
    title = f"t={record.t:.1f}s  {_where(record, header)}"
    progress = _ingest_progress(record)
    if progress:
        title += f"  {progress}"
    missing = record.missing_ranks
    if missing:
        title += f"  missing ranks: {','.join(map(str, missing))}"
    title += f"  (now: this {record.elapsed:.1f} s interval)"
    rows = []
    for name, op in _interval_ops(record, header).items():
        rows.append(
            [
                name,
                fmt.rate(op.requests_per_s),
                fmt.rate(op.docs_per_s) if op.indexing else "",
                "" if op.indexing else fmt.rate(op.hits_per_s),
                fmt.ms(op.latency_s("p50")),
                fmt.ms(op.latency_s("p99")),
                fmt.errors(op.failed, op.requests),
            ]
        )
    headers = ("op", "req/s now", "docs/s now", "hits/s now", "p50 ms", "p99 ms", "errors")
    return "\n".join([title] + fmt.table(*_documents_columns(headers, rows))) + "\n"


def _interval_line(record: Interval, header: Header | None) -> str:
    parts = []
    progress = _ingest_progress(record)
    if progress:
        parts.append(progress)
    ops = _interval_ops(record, header)
    for name, op in ops.items():
        text = f"{name} now {fmt.rate(op.requests_per_s)} req/s"
        text += f" {fmt.rate(op.documents_per_s)} {op.unit}"
        text += f" p50 {fmt.ms(op.latency_s('p50'))} p99 {fmt.ms(op.latency_s('p99'))} ms"
        text += f" err {fmt.errors(op.failed, op.requests)}"
        parts.append(text)
    if not ops and not progress:
        parts.append("no requests")
    missing = record.missing_ranks
    if missing:
        parts.append(f"missing ranks {','.join(map(str, missing))}")
    return f"{_where(record, header)}: " + "; ".join(parts)


def render_record_line(record: StreamRecord, header: Header | None = None) -> str:
    """One log line for any stream record (header, interval, event, final).

    An interval's figures are the interval's own, each marked ``now``: the run's figures
    are the summary's, printed when the run ends.
    """
    if isinstance(record, Header):
        job = record.slurm_job_id
        return (
            f"[{0.0:8.1f}s] run {record.run_id}: {fmt.counted(record.bench.ranks, 'bench rank')}, "
            f"{fmt.counted(len(record.topology.nodes), 'node')}, "
            f"{fmt.counted(len(record.steps), 'step')}, interval "
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
