"""Following ``stream.jsonl`` by polling: complete lines only, never crashing on bad input.

Viewers run on login nodes while the writer runs on a compute node; between them is a shared
file system where inotify does not fire.  So the reader polls: each :meth:`StreamReader.poll`
opens the file, reads from its last offset to the end and closes it again (re-opening is what
makes an NFS client revalidate its cache, so new data shows up).

What it tolerates, and how:

* **no file yet** (the run has not started): ``poll`` returns nothing, ``exists`` is False;
* **a truncated last line** (the writer is mid-write): kept back until its newline arrives;
  :meth:`StreamReader.read_all` (for finished runs) reports it as a problem instead;
* **garbage** (not UTF-8, not JSON, not an object, not a valid record): skipped and reported
  in :attr:`StreamReader.problems` with its line number, never raised;
* **a file that shrank** (replaced by hand): reported, then read again from the start.

:meth:`StreamReader.age` tells how long ago the last record was written (its ``wall`` time;
compare against a threshold such as 3 intervals to show STALLED).  It uses the writer's
clock, so it works for a viewer started long after the writer died; clock skew between the
hosts adds to it.  :meth:`StreamReader.idle` measures on the reader's own clock how long the
file has not grown, which skew cannot affect.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.stream.schema import validate_record

#: At most this many bytes are read per poll, so a viewer replaying a long run stays live.
MAX_READ = 16 * 1024 * 1024


@dataclass(frozen=True)
class Problem:
    """A line the reader skipped: where it was and why."""

    line: int
    message: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} ({self.text!r})"


class StreamReader:
    """Reads new records of a stream file on every :meth:`poll`."""

    def __init__(
        self,
        path: str | Path,
        *,
        validate: bool = True,
        clock: Callable[[], float] = time.monotonic,
        max_read: int = MAX_READ,
    ) -> None:
        self.path = Path(path)
        self.validate = validate
        self.max_read = max_read
        self._clock = clock
        self._offset = 0
        self._partial = b""
        self._line = 0
        self._grew_at: float | None = None
        self.exists = False
        self.header: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None
        self.last_record: dict[str, Any] | None = None
        self.records = 0
        self.problems: list[Problem] = []
        self._reported = 0

    # ------------------------------------------------------------------------ reading
    def poll(self) -> list[dict[str, Any]]:
        """Records completed since the last poll (possibly none), in file order."""
        try:
            with self.path.open("rb") as handle:
                self.exists = True
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:
                    self._restart(size)
                handle.seek(self._offset)
                data = handle.read(self.max_read)
        except FileNotFoundError:
            self.exists = False
            return []
        except OSError as exc:  # e.g. a stale NFS handle: try again next poll
            self._problem(self._line, f"cannot read the stream: {exc}", b"")
            return []
        if not data:
            return []
        self._offset += len(data)
        self._grew_at = self._clock()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        records = []
        for raw in lines:
            self._line += 1
            record = self._parse(raw)
            if record is not None:
                records.append(record)
        return records

    def read_all(self) -> list[dict[str, Any]]:
        """Every record not read yet, for a run that is over (replay, ``esdash report``).

        A last line without its newline is reported as truncated instead of waited for.
        """
        records: list[dict[str, Any]] = []
        while True:
            batch = self.poll()
            records.extend(batch)
            if not batch and not self._more_to_read():
                break
        if self._partial.strip():
            self._problem(
                self._line + 1, "truncated line (the writer stopped mid-write)", self._partial
            )
            self._line += 1
            self._partial = b""
        return records

    def _more_to_read(self) -> bool:
        try:
            return self.path.stat().st_size > self._offset
        except OSError:
            return False

    def _restart(self, size: int) -> None:
        self._problem(
            self._line,
            f"the stream shrank from {self._offset} to {size} bytes (replaced?); "
            f"reading it again from the start",
            b"",
        )
        self._offset = 0
        self._partial = b""
        self._line = 0
        self.header = self.final = self.last_record = None

    def _parse(self, raw: bytes) -> dict[str, Any] | None:
        if not raw.strip():
            return None
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            self._problem(self._line, "not UTF-8 text", raw)
            return None
        except ValueError as exc:
            self._problem(self._line, f"not JSON ({exc})", raw)
            return None
        if self.validate:
            problems = validate_record(record)
            if problems:
                self._problem(self._line, "invalid record: " + "; ".join(problems[:5]), raw)
                return None
        elif not isinstance(record, dict):
            self._problem(self._line, "not a JSON object", raw)
            return None
        kind = record.get("type")
        if kind == "header":
            if self.header is not None:
                self._problem(self._line, "a second header (ignored)", raw)
                return None
            self.header = record
        elif self.header is None:
            self._problem(self._line, f"a {kind} record before the header", raw)
        if kind == "final":
            self.final = record
        self.last_record = record
        self.records += 1
        return record

    def _problem(self, line: int, message: str, raw: bytes) -> None:
        text = raw[:80].decode("utf-8", "replace")
        self.problems.append(Problem(line, message, text))

    def new_problems(self) -> list[Problem]:
        """Problems found since the last call (for a viewer's notifications)."""
        fresh = self.problems[self._reported :]
        self._reported = len(self.problems)
        return fresh

    # ------------------------------------------------------------------------- status
    @property
    def finished(self) -> bool:
        """The final record has been read."""
        return self.final is not None

    @property
    def partial_bytes(self) -> int:
        """Bytes of an incomplete last line held back (a writer mid-write, or one that died)."""
        return len(self._partial)

    def last_wall(self) -> float | None:
        """The writer's wall time of the newest record (the header's ``started`` at first)."""
        record = self.last_record
        if record is None:
            return None
        if record.get("type") == "header":
            return record.get("started")
        return record.get("wall")

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the newest record was written, by the writer's clock (None: none)."""
        wall = self.last_wall()
        if wall is None:
            return None
        return (time.time() if now is None else now) - wall

    def idle(self) -> float | None:
        """Seconds (reader's monotonic clock) since the file last grew; None before it did."""
        if self._grew_at is None:
            return None
        return self._clock() - self._grew_at
