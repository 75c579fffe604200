"""Headless progress for ``esdash run``: follow the run stream like any other viewer.

On a terminal a compact table of the latest interval is redrawn in place about once a
second; in a batch log (stdout is not a terminal) every record becomes one line, so an
sbatch output file reads as a time line.  Either way an interval's figures are that
interval's own and say so (``now``): the run's figures are the summary's, which ``esdash
run`` prints when the run ends (:mod:`esdash.view.summary`, from :mod:`esdash.stats.metrics`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from esdash.rundir.records import Header, Interval, StreamRecord
from esdash.rundir.stream import StreamReader
from esdash.view.summary import render_live, render_record_line

#: Minimum seconds between redraws of the terminal table.
REDRAW_SECONDS = 1.0


class LivePrinter:
    def __init__(self, path: Path, out: TextIO, tty: bool) -> None:
        self.reader = StreamReader(path)
        self.out = out
        self.tty = tty
        self.header: Header | None = None
        self.latest: Interval | None = None
        self.drawn_lines = 0
        self.last_draw = 0.0

    def poll(self) -> list[StreamRecord]:
        """Read what is new and print it (lines) or redraw the table (terminal).

        Returns the new records, so the orchestrator can hand them on (observer hooks).
        """
        records = list(self.reader.poll())
        for record in records:
            if isinstance(record, Header):
                self.header = record
            if isinstance(record, Interval):
                self.latest = record
                if not self.tty:
                    self._line(render_record_line(record, self.header))
                continue
            self._clear()
            self._line(render_record_line(record, self.header))
        for problem in self.reader.new_problems():
            self._clear()
            self._line(f"warning: {problem}")
        if self.tty and self.latest and time.monotonic() - self.last_draw >= REDRAW_SECONDS:
            self._draw(render_live(self.latest, self.header))
        return records

    def note(self, text: str) -> None:
        """A line of the orchestrator's own (what a quiet stream awaits), above the table."""
        self._clear()
        self._line(text)
        if self.tty and self.latest:
            self._draw(render_live(self.latest, self.header))

    def _line(self, text: str) -> None:
        self.out.write(text.rstrip("\n") + "\n")
        self.out.flush()

    def _clear(self) -> None:
        if self.drawn_lines:
            self.out.write(f"\x1b[{self.drawn_lines}F\x1b[J")
            self.drawn_lines = 0

    def _draw(self, table: str) -> None:
        self._clear()
        self.out.write(table)
        self.out.flush()
        self.drawn_lines = table.count("\n")
        self.last_draw = time.monotonic()

    def close(self) -> list[StreamRecord]:
        """Leave the last table on screen (it is the last state) and end cleanly."""
        records = self.poll()
        self.drawn_lines = 0
        return records
