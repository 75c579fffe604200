"""Reading and showing a run's ``leakage.json``: one table for the CLI, reports and dashboard.

The leakage report (:class:`esdash.rundir.records.Leakage`) is written by the orchestrator
from what the encryption mode's plugin measured; viewers only read it.  A damaged file is
shown as damaged (its one-line error), never stops a viewer.  Shares are fractions in the
file and percentages here.

Every field's best attack is shown beside its majority guess (the baseline: every record
guessed as the most frequent value), so that "0 %" on a field with two values is not read as
safety.  Files written before lengths and the baseline were measured show ``-`` there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage, LeakageAttack, LeakageField
from esdash.view.format import NA, count

#: Columns of the per-field table, in order.
HEADERS = (
    "field",
    "scheme",
    "learns",
    "distinct",
    "lengths",
    "domain",
    "best attack",
    "exact",
    "within 1 %",
    "majority guess",
    "majority within 1 %",
    "verdict",
)
#: The columns that hold numbers (right-aligned).
NUMERIC = frozenset(
    {
        "distinct",
        "lengths",
        "domain",
        "exact",
        "within 1 %",
        "majority guess",
        "majority within 1 %",
    }
)
#: The compact columns the dashboard and ``esdash leakage`` show (the verdict is a sentence).
COMPACT = (
    "field",
    "scheme",
    "learns",
    "distinct",
    "domain",
    "best attack",
    "exact",
    "within 1 %",
    "majority guess",
)
#: Columns of ``leakage.csv``: one row per run, field and attack, the baseline on each row.
CSV_FIELDS = (
    "run",
    "field",
    "type",
    "scheme",
    "learns",
    "records",
    "distinct",
    "length_classes",
    "domain",
    "attack",
    "applicable",
    "exact",
    "within_1pct",
    "baseline_exact",
    "baseline_within_1pct",
    "note",
    "error",
)


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
    guess = item.baseline if item.baseline is not None and item.baseline.applicable else None
    return [
        item.field,
        item.scheme,
        item.learns,
        count(item.distinct),
        count(item.length_classes),
        count(item.domain),
        best.name if best else NA,
        share(best.exact) if best else NA,
        share(best.within_1pct) if best else NA,
        share(guess.exact) if guess else NA,
        share(guess.within_1pct) if guess else NA,
        item.verdict,
    ]


def rows(record: Leakage, columns: tuple[str, ...] = HEADERS) -> list[list[str]]:
    """Every field's cells under ``columns`` (a subset of :data:`HEADERS`, in its order)."""
    picked = [HEADERS.index(column) for column in columns]
    return [[cells[i] for i in picked] for cells in map(field_row, record.fields)]


def _csv_row(run: str, item: LeakageField, attack: LeakageAttack | None) -> dict[str, object]:
    guess = item.baseline
    return {
        "run": run,
        "field": item.field,
        "type": item.type,
        "scheme": item.scheme,
        "learns": item.learns,
        "records": item.records,
        "distinct": item.distinct,
        "length_classes": item.length_classes,
        "domain": item.domain,
        "attack": attack.name if attack else None,
        "applicable": attack.applicable if attack else None,
        "exact": attack.exact if attack else None,
        "within_1pct": attack.within_1pct if attack else None,
        "baseline_exact": guess.exact if guess else None,
        "baseline_within_1pct": guess.within_1pct if guess else None,
        "note": attack.note if attack else None,
        "error": None,
    }


def csv_rows(run: str, reading: LeakageReading) -> list[dict[str, object]]:
    """``leakage.csv``'s rows of one run (:data:`CSV_FIELDS`; shares as fractions, as in
    the file): one per field and attack, each with the field's baseline beside it; a damaged
    file is one row with its ``error``."""
    record = reading.record
    if record is None:
        return [{"run": run, "error": reading.error or f"{reading.path}: unreadable"}]
    out: list[dict[str, object]] = []
    for item in record.fields:
        found: list[LeakageAttack | None] = [*item.attacks] or [None]  # one row at least
        out += [_csv_row(run, item, attack) for attack in found]
    return out


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
