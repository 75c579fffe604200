"""Tables refilled from whole lists of rows: the home screen's lists and the campaign's points.

Screens compute every row from a snapshot (simple, and testable without a terminal); these
helpers turn that into as little work for the ``DataTable`` as they can.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

Cell = Text | str
Rows = Sequence[tuple[str, Sequence[Cell]]]


def fill_table(table: DataTable[Cell], headers: tuple[str, ...], rows: Rows) -> None:
    """Replace a table's rows; columns sized to their content (fixed widths: no stale cache)."""
    widths = [len(h) for h in headers]
    for _, cells in rows:
        widths = [max(w, cell_len(str(c))) for w, c in zip(widths, cells, strict=True)]
    table.clear(columns=True)
    for header, width in zip(headers, widths, strict=True):
        table.add_column(header, width=width, key=header)
    for key, cells in rows:
        table.add_row(*cells, key=key)


class SyncedTable(DataTable[Cell]):
    """A ``DataTable`` shown from whole row lists, changing only the cells that changed.

    A campaign of a thousand points rewrites its ``campaign.json`` after every point; most
    rows stay the same.  When the rows (keys and order) are the same as before and every new
    cell fits its column, only the changed cells are updated, so the cursor and the scroll
    position stay where the user left them.  Otherwise the table is refilled and the cursor
    goes back to the row with the same key.
    """

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = False) -> None:
        super().__init__(id=id, zebra_stripes=zebra_stripes, cursor_type="row")
        self._headers: tuple[str, ...] = ()
        self._shown: dict[str, tuple[str, ...]] = {}
        self._order: list[str] = []

    @property
    def keys(self) -> list[str]:
        """The row keys in display order."""
        return list(self._order)

    @property
    def cursor_key(self) -> str | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    def move_to(self, key: str) -> None:
        if key in self._order:
            self.move_cursor(row=self._order.index(key), animate=False)

    def on_resize(self) -> None:
        """Keep the cursor row in view when the table gets smaller (a table above it grew)."""
        if self.row_count:
            self.move_cursor(row=self.cursor_row, animate=False)

    def show(self, headers: tuple[str, ...], rows: Rows) -> None:
        plain = {key: tuple(str(c) for c in cells) for key, cells in rows}
        order = [key for key, _ in rows]
        if headers == self._headers and order == self._order and self._fits(headers, plain):
            for key, cells in rows:
                if plain[key] == self._shown.get(key):
                    continue
                for header, cell in zip(headers, cells, strict=True):
                    self.update_cell(key, header, cell)
        else:
            selected = self.cursor_key
            fill_table(self, headers, rows)
            self._headers, self._order = headers, order
            if selected is not None:
                self.move_to(selected)
        self._shown = plain

    def _fits(self, headers: tuple[str, ...], plain: dict[str, tuple[str, ...]]) -> bool:
        found = (self.columns.get(ColumnKey(header)) for header in headers)
        widths = [column.width for column in found if column is not None]
        if len(widths) != len(headers):
            return False
        return all(
            cell_len(cell) <= width
            for cells in plain.values()
            for cell, width in zip(cells, widths, strict=True)
        )
