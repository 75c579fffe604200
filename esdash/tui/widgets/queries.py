"""The per-query table: two rows per operation, the sliding window ("now") and the whole
scope: its figure in ``results.json`` once the scope is over ("final"), the stream's until
then ("so far").  Documents are hits/s for searches, docs/s for bulk operations."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from esdash.view import format as fmt
from esdash.view.model import RUN, SO_FAR, Latency, OpRow, Snapshot

#: The label of each kind of whole-scope figure (the "now" row is labelled "now").
KIND_LABELS = {RUN: "final", SO_FAR: "so far"}

#: (label, width); the query column takes what is left.  Right-aligned in fixed widths, so
#: the spare cell on the left separates the columns.
COLUMNS = (
    ("", 7),
    ("req", 7),
    ("err", 5),
    ("req/s", 7),
    ("hits/s", 7),
    ("p50", 6),
    ("p90", 6),
    ("p99", 6),
    ("p99.9", 6),
    ("gmean", 6),
    ("gstd", 5),
)
OTHER_COLUMNS = sum(width for _, width in COLUMNS) + 1
#: The documents column's index in COLUMNS, and its label by what the operations shown do.
DOCUMENTS_COLUMN = 4


def documents_label(ops: tuple[OpRow, ...]) -> str:
    """``hits/s`` (searches), ``docs/s`` (bulk: documents indexed), or both when mixed."""
    units = {op.unit for op in ops}
    if units == {"docs/s"}:
        return "docs/s"
    return "dc|ht/s" if len(units) > 1 else "hits/s"


Cell = tuple[str, str]  # value, style


def _latency(latency: Latency) -> list[Cell]:
    return [
        (fmt.ms(latency.p(50.0)), ""),
        (fmt.ms(latency.p(90.0)), ""),
        (fmt.ms(latency.p(99.0)), ""),
        (fmt.ms(latency.p(99.9)), ""),
        (fmt.ms(latency.gmean), ""),
        (fmt.factor(latency.gstd), ""),
    ]


def _render(cells: list[Cell]) -> list[Text]:
    """The query name as is, the rest right-aligned in their columns' widths."""
    out = [Text(cells[0][0], style=cells[0][1])]
    for (value, style), (label, width) in zip(cells[1:], COLUMNS, strict=True):
        out.append(Text(value.rjust(width) if label else value.ljust(width), style=style))
    return out


class QueryTable(DataTable[Text]):
    """Queries of the current step (or ``bulk`` during ingest); latency in milliseconds."""

    DEFAULT_CSS = """
    QueryTable {
        height: auto;
        max-height: 100%;
    }
    """

    class Selected(Message):
        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, cell_padding=0, id=id)
        self._names: list[str] = []
        self._width = 0
        self._documents = ""
        self._selected: str | None = None
        self._columns: list[ColumnKey] = []
        self._cells: dict[str, list[Text]] = {}

    def _add_columns(self, name_width: int, documents: str) -> None:
        self.clear(columns=True)
        self._columns = [self.add_column("query", width=name_width)]
        for index, (label, width) in enumerate(COLUMNS):
            shown = documents if index == DOCUMENTS_COLUMN else label
            self._columns.append(self.add_column(shown.rjust(width), width=width))

    def _name_width(self, names: list[str]) -> int:
        longest = max((len(n) for n in names), default=8)
        room = self.size.width - OTHER_COLUMNS if self.size.width else 24
        return max(8, min(longest, room))

    def show(self, snap: Snapshot) -> None:
        names = [op.name for op in snap.ops]
        width = self._name_width(names)
        documents = documents_label(snap.ops)
        if names == self._names and width == self._width and documents == self._documents:
            for op in snap.ops:  # the same rows: update the cells in place
                for suffix, cells in self._rows(op, width):
                    for column, cell in zip(self._columns, cells, strict=True):
                        self.update_cell(f"{op.name}\0{suffix}", column, cell, update_width=True)
            return
        cursor_name = self._selected or snap.selected
        self._add_columns(width, documents)
        self._names, self._width, self._documents = names, width, documents
        self._cells = {}
        for op in snap.ops:
            for suffix, cells in self._rows(op, width):
                self.add_row(*cells, key=f"{op.name}\0{suffix}")
                self._cells[f"{op.name}\0{suffix}"] = cells
        if cursor_name in self._names:
            self.move_cursor(row=self._names.index(cursor_name) * 2, animate=False)

    @staticmethod
    def _rows(op: OpRow, width: int) -> list[tuple[str, list[Text]]]:
        """The two rows of one operation: its sliding window ("now") and its whole scope,
        labelled "final" (the results' figure) or "so far" (the stream's)."""
        name = op.name if len(op.name) <= width else op.name[: width - 1] + "…"
        error_style = "bold red" if op.window_errors else ""
        now: list[Cell] = [
            (name, "bold"),
            (" now", "dim"),
            (fmt.count(op.window_requests), ""),
            (fmt.count(op.window_errors), error_style),
            (fmt.rate(op.rate_now), "bold"),
            (fmt.rate(op.docs_now), ""),
            *_latency(op.now),
        ]
        total: list[Cell] = [
            ("", ""),
            (f" {KIND_LABELS.get(op.all_kind, op.all_kind)}", "dim"),
            (fmt.count(op.requests), ""),
            (fmt.count(op.errors), "red" if op.errors else ""),
            (fmt.rate(op.rate_all), ""),
            (fmt.rate(op.docs_all), ""),
            *_latency(op.all),
        ]
        return [("now", _render(now)), ("all", _render(total))]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        index = event.cursor_row // 2
        if 0 <= index < len(self._names):
            name = self._names[index]
            if name != self._selected:
                self._selected = name
                self.post_message(self.Selected(name))
