"""JSON Lines files of a run directory: the one writer and the poll readers.

``stream.jsonl`` is the live contract between rank 0 (its only writer) and every viewer
(dashboard, headless printer, ``esdash report``); ``cluster.jsonl`` holds the cluster
monitor's samples.  Both are followed by polling, by readers that may run on another host
over a shared file system.

**Writing** (:class:`StreamWriter`) keeps three promises: every record is one ``write`` of
one complete line (a reader sees a whole line or a prefix of one, never an interleaving);
nothing already written changes (readers keep an offset); each line is pushed to the file
server before ``write`` returns (``fsync``: NFS clients only send data at close or sync).
The first record is the header, nothing follows the final record.

**Reading** (:class:`JsonlFollower`, :class:`StreamReader`) polls: each poll opens the file,
reads from its last offset and closes it (re-opening makes an NFS client revalidate its
cache; inotify does not fire on network file systems).  What it tolerates, and how:

* **no file yet** (the run has not started): nothing, ``exists`` is False;
* **a truncated last line** (the writer is mid-write): kept back until its newline arrives;
  ``read_all`` (for finished runs) reports it as a problem instead;
* **garbage** (not UTF-8, not JSON, not a valid record): skipped and reported in
  ``problems`` with its line number, never raised;
* **a file that shrank** (replaced by hand): reported, then read again from the start.

:meth:`StreamReader.age` tells how long ago the last record was written (its ``wall`` time,
by the writer's clock); :meth:`StreamReader.idle` measures on the reader's own clock how long
the file has not grown, which clock skew between hosts cannot affect.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

import msgspec

from esdash.rundir import files
from esdash.rundir.records import Final, Header, StreamRecord

T = TypeVar("T")

#: At most this many bytes are read per poll, so a viewer replaying a long run stays live.
MAX_READ = 16 * 1024 * 1024

_ENCODER = msgspec.json.Encoder()


class JsonlWriter(Generic[T]):
    """Appends records to a JSON Lines file (created if missing), one line per ``write``."""

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        size = os.fstat(self._fd).st_size
        self._empty = size == 0
        if size and not self._ends_with_newline(size):
            # A writer died mid-line: end that line, so it is one (reported) garbage line
            # and the next record starts on a line of its own.
            os.write(self._fd, b"\n")
        self.records = 0

    def _ends_with_newline(self, size: int) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1) == b"\n"

    def _check(self, record: T) -> None:
        """Order rules of the file (a subclass raises ValueError for a record out of place)."""

    def write(self, record: T) -> None:
        """Append ``record`` as one JSON line."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the writer is closed")
        self._check(record)
        data = _ENCODER.encode(record) + b"\n"
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)
        self._empty = False
        self.records += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlWriter[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class StreamWriter(JsonlWriter[StreamRecord]):
    """Appends records to ``stream.jsonl``, each fsynced (see the module docstring).

    Records are typed (:data:`esdash.rundir.records.StreamRecord`), so they are valid by
    construction; the order rules are checked here: the first record of a new file must be
    the header, and nothing may follow the final record (both raise :class:`ValueError`:
    a bug in the caller, which would break every viewer).
    """

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        super().__init__(path, fsync=fsync)
        self._finished = False

    def _check(self, record: StreamRecord) -> None:
        if self._finished:
            raise ValueError(f"{self.path}: the stream already has its final record")
        if self._empty and not isinstance(record, Header):
            raise ValueError(f"{self.path}: the first record must be the header")
        if isinstance(record, Final):
            self._finished = True

    def __enter__(self) -> StreamWriter:
        return self


@dataclass(frozen=True)
class Problem:
    """A line a reader skipped: where it was and why."""

    line: int
    message: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} ({self.text!r})"


class JsonlFollower(Generic[T]):
    """New complete records of a JSON Lines file on every :meth:`poll` (bad lines skipped)."""

    def __init__(
        self,
        path: str | Path,
        kind: type[T],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_read: int = MAX_READ,
    ) -> None:
        self.path = Path(path)
        self.max_read = max_read
        self._decoder = msgspec.json.Decoder(kind)
        self._clock = clock
        self._offset = 0
        self._partial = b""
        self._line = 0
        self._grew_at: float | None = None
        self.exists = False
        self.records = 0
        self.problems: list[Problem] = []
        self._reported = 0

    def poll(self) -> list[T]:
        """Records completed since the last poll (possibly none), in file order."""
        try:
            with files.open_regular(self.path) as handle:
                self.exists = True
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:
                    self._restart(size)
                handle.seek(self._offset)
                data = handle.read(self.max_read)
        except FileNotFoundError:
            self.exists = False
            return []
        except OSError as exc:  # e.g. a stale NFS handle, a FIFO: try again next poll
            message = f"cannot read: {exc}"
            if not self.problems or self.problems[-1].message != message:  # said once
                self._problem(self._line, message, b"")
            return []
        if not data:
            return []
        self._offset += len(data)
        self._grew_at = self._clock()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        found = []
        for raw in lines:
            self._line += 1
            record = self._parse(raw)
            if record is not None:
                found.append(record)
        return found

    def read_all(self) -> list[T]:
        """Every record not read yet, for a file that is complete (replay, reports).

        A last line without its newline is reported as truncated instead of waited for.
        """
        found: list[T] = []
        while True:
            batch = self.poll()
            found.extend(batch)
            if not batch and not self._more_to_read():
                break
        if self._partial.strip():
            self._problem(
                self._line + 1, "truncated line (the writer stopped mid-write)", self._partial
            )
            self._line += 1
            self._partial = b""
        return found

    def _more_to_read(self) -> bool:
        try:
            return self.path.stat().st_size > self._offset
        except OSError:
            return False

    def _restart(self, size: int) -> None:
        self._problem(
            self._line,
            f"the file shrank from {self._offset} to {size} bytes (replaced?); "
            f"reading it again from the start",
            b"",
        )
        self._offset = 0
        self._partial = b""
        self._line = 0
        self._reset()

    def _reset(self) -> None:
        """Forget what was derived from the records (the file is read again)."""

    def _parse(self, raw: bytes) -> T | None:
        if not raw.strip():
            return None
        try:
            record = self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            self._problem(self._line, f"invalid record: {exc}", raw)
            return None
        except files.DAMAGE as exc:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                self._problem(self._line, "not UTF-8 text", raw)
                return None
            self._problem(self._line, files.problem(exc).replace("valid JSON", "JSON"), raw)
            return None
        if not self._accept(record, raw):
            return None
        self.records += 1
        return record

    def _accept(self, record: T, raw: bytes) -> bool:
        """Whether a decoded record is kept (subclasses check order rules)."""
        return True

    def _problem(self, line: int, message: str, raw: bytes) -> None:
        text = raw[:80].decode("utf-8", "replace")
        self.problems.append(Problem(line, message, text))

    def new_problems(self) -> list[Problem]:
        """Problems found since the last call (for a viewer's notifications)."""
        fresh = self.problems[self._reported :]
        self._reported = len(self.problems)
        return fresh

    @property
    def partial_bytes(self) -> int:
        """Bytes of an incomplete last line held back (a writer mid-write, or one that died)."""
        return len(self._partial)

    def idle(self) -> float | None:
        """Seconds (reader's monotonic clock) since the file last grew; None before it did."""
        if self._grew_at is None:
            return None
        return self._clock() - self._grew_at


class StreamReader(JsonlFollower[StreamRecord]):
    """Follows ``stream.jsonl``: typed records, the header and final record remembered."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_read: int = MAX_READ,
    ) -> None:
        super().__init__(path, StreamRecord, clock=clock, max_read=max_read)  # type: ignore[arg-type]
        self.header: Header | None = None
        self.final: Final | None = None
        self.last_record: StreamRecord | None = None

    def _reset(self) -> None:
        self.header = self.final = self.last_record = None

    def _accept(self, record: StreamRecord, raw: bytes) -> bool:
        if isinstance(record, Header):
            if self.header is not None:
                self._problem(self._line, "a second header (ignored)", raw)
                return False
            self.header = record
        elif self.header is None:
            kind = type(record).__name__.lower()
            self._problem(self._line, f"a {kind} record before the header", raw)
        if isinstance(record, Final):
            self.final = record
        self.last_record = record
        return True

    @property
    def finished(self) -> bool:
        """The final record has been read."""
        return self.final is not None

    def last_wall(self) -> float | None:
        """The writer's wall time of the newest record (the header's ``started`` at first)."""
        record = self.last_record
        if record is None:
            return None
        if isinstance(record, Header):
            return record.started
        return record.wall

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the newest record was written, by the writer's clock (None: none)."""
        wall = self.last_wall()
        if wall is None:
            return None
        return (time.time() if now is None else now) - wall


def read_header(path: Path) -> Header | None:
    """The header of a stream file (its first line), or None when it has none readable."""
    try:
        with files.open_regular(path) as handle:
            first = handle.readline(16 * 1024 * 1024)
        record: StreamRecord = msgspec.json.decode(first, type=StreamRecord)
    except OSError:
        return None
    except files.DAMAGE:
        return None
    return record if isinstance(record, Header) else None


def read_last(path: Path, chunk: int = 256 * 1024) -> StreamRecord | None:
    """The last complete, valid record of a stream file (None if there is none)."""
    try:
        with files.open_regular(path) as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chunk))
            data = handle.read()
    except OSError:
        return None
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a line being written
    for raw in reversed(lines):
        if raw.strip():
            try:
                # msgspec leaves a decode into a union alias untyped: the annotation types it.
                record: StreamRecord = msgspec.json.decode(raw, type=StreamRecord)
                return record
            except files.DAMAGE:
                return None
    return None
