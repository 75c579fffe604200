"""Per-interval numbers from a run's stream: the time axis of a run.

``results.json`` holds each query's totals; how latency moved *during* a step (the bands and
beating patterns the paper shows) and how much it varies from interval to interval are only
in ``stream.jsonl``, whose interval records carry one HDR histogram per operation.  Figures
(latency over time) and ``compare`` (the block bootstrap of a single run's intervals, see
:mod:`esdash.view.compare`) read them through :func:`read_intervals`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from esdash.rundir import hdr
from esdash.rundir.records import Header, Interval
from esdash.rundir.stream import StreamReader
from esdash.stats import geometric
from esdash.stats.merge import Merged


@dataclass
class IntervalOp:
    """One operation in one interval record."""

    t: float  # end of the record, seconds from the run's start
    elapsed: float
    phase: str
    step: int | None
    step_name: str | None
    op: str
    ok: int
    gmean: float | None  # seconds
    counts: hdr.Counts  # empty without samples

    @property
    def rate(self) -> float | None:
        return self.ok / self.elapsed if self.elapsed > 0 else None

    def percentile(self, p: float) -> float | None:
        """Seconds; only where the interval has the samples for it (p99 needs 100)."""
        from esdash.stats import min_samples

        if not self.counts.size or self.ok < min_samples(p):
            return None
        return hdr.percentiles(self.counts, [p]).get(p)


def read_intervals(stream: Path | None) -> tuple[Header | None, list[IntervalOp]]:
    """The stream's header and every operation of every interval record, in order."""
    if stream is None or not Path(stream).is_file():
        return None, []
    header: Header | None = None
    found: list[IntervalOp] = []
    for record in StreamReader(Path(stream)).read_all():
        if isinstance(record, Header):
            header = record
        if not isinstance(record, Interval):
            continue
        merged = Merged().add_ops(record.ops)
        for name, data in merged.ops.items():
            series = data.latency
            gmean, _ = geometric(series.count, series.ln_sum, series.ln_sq_sum)
            found.append(
                IntervalOp(
                    t=record.t,
                    elapsed=record.elapsed,
                    phase=record.phase,
                    step=record.step,
                    step_name=record.step_name,
                    op=name,
                    ok=series.count,
                    gmean=gmean,
                    counts=series.counts,
                )
            )
    return header, found


def measured(ops: Sequence[IntervalOp], step: str, query: str) -> list[IntervalOp]:
    return [o for o in ops if o.phase == "measure" and o.step_name == step and o.op == query]
