"""Reading and showing a run's ``leakage.json``: one table for the CLI, reports and dashboard.

The leakage report (:class:`esdash.rundir.records.Leakage`) is written by the orchestrator
from what the encryption mode's plugin measured; viewers only read it.  A damaged file is
shown as damaged (its one-line error), never stops a viewer.  Shares are fractions in the
file and percentages here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage, LeakageField
from esdash.view.format import NA, count

#: Columns of the per-field table, in order.
HEADERS = (
    "field",
    "scheme",
    "learns",
    "distinct",
    "domain",
    "best attack",
    "exact",
    "within 1 %",
    "verdict",
)
#: The columns that hold numbers (right-aligned).
NUMERIC = frozenset({"distinct", "domain", "exact", "within 1 %"})
#: The compact columns the dashboard shows (the verdict is a sentence).
COMPACT = ("field", "scheme", "learns", "distinct", "domain", "best attack", "exact", "within 1 %")


@dataclass(frozen=True)
class LeakageReading:
    """A run's leakage report as read: the record, or why the file could not be read."""

    path: Path
    record: Leakage | None = None
    error: str | None = None


def read_leakage(run_path: Path) -> LeakageReading | None:
    """The leakage report of the run in ``run_path``; None when the run has none."""
    run = RunDir(run_path)
    try:
        record = run.read_leakage()
    except RunFileError as exc:
        return LeakageReading(run.leakage_file, error=str(exc))
    if record is None:
        return None
    return LeakageReading(run.leakage_file, record=record)


def share(value: float | None) -> str:
    """A fraction as a percentage: ``100%``, ``37.5%``, ``<0.1%``, ``0%``; ``-`` when unknown.

    Only all or nothing is shown as ``100%`` or ``0%``: 99.97 % is ``>99.9%``.
    """
    if value is None:
        return NA
    percent = value * 100.0
    if percent in (0.0, 100.0):
        return f"{percent:.0f}%"
    if percent < 0.1:
        return "<0.1%"
    if percent > 99.9:
        return ">99.9%"
    return f"{percent:.1f}%"


def field_row(item: LeakageField) -> list[str]:
    """One field's cells under :data:`HEADERS`."""
    best = item.best_attack()
    return [
        item.field,
        item.scheme,
        item.learns,
        count(item.distinct),
        count(item.domain),
        best.name if best else NA,
        share(best.exact) if best else NA,
        share(best.within_1pct) if best else NA,
        item.verdict,
    ]


def rows(record: Leakage, columns: tuple[str, ...] = HEADERS) -> list[list[str]]:
    """Every field's cells under ``columns`` (a subset of :data:`HEADERS`, in its order)."""
    picked = [HEADERS.index(column) for column in columns]
    return [[cells[i] for i in picked] for cells in map(field_row, record.fields)]


def names_line(record: Leakage) -> str:
    """What the stored field names reveal, in one line."""
    names = record.names
    return (
        f"Field names: {names.scheme}, {count(names.declared)} declared by the schema; "
        f"the cluster learns {names.learns}"
    )


def basis_line(record: Leakage) -> str:
    """What was analysed: documents, their source, the adversary's auxiliary data, keys."""
    return (
        f"{count(record.documents)} documents ({record.source}); auxiliary data: "
        f"{record.auxiliary}; key mode: {record.key_mode}"
    )
