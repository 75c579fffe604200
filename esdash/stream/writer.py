"""Appending records to ``stream.jsonl``: one line per record, flushed, never rewritten.

Readers on other hosts follow the file over a shared file system, so the writer keeps three
promises: every record is one ``write`` of one complete line (a reader sees a whole line or
a prefix of one, never an interleaving); nothing already written changes (readers keep an
offset); and each line is pushed to the file server before ``write`` returns (``fsync``:
NFS clients only send data at close or sync, so an unsynced line could stay invisible to a
login-node dashboard for a long time).  At one record per interval this costs nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from esdash.stream.schema import validate_record


class StreamWriter:
    """Appends validated records to a stream file (created if missing).

    The first record of a new file must be the ``header``; nothing may follow the ``final``
    record.  An invalid record raises :class:`ValueError` listing its problems: it is a bug
    in the caller, and writing it would break every viewer.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True, validate: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.validate = validate
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        size = os.fstat(self._fd).st_size
        self._empty = size == 0
        if size and not self._ends_with_newline(size):
            # A writer died mid-line: end that line, so it is one (reported) garbage line
            # and the next record starts on a line of its own.
            os.write(self._fd, b"\n")
        self._finished = False
        self.records = 0

    def _ends_with_newline(self, size: int) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1) == b"\n"

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one JSON line."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the stream writer is closed")
        if self._finished:
            raise ValueError(f"{self.path}: the stream already has its final record")
        if self._empty and record.get("type") != "header":
            raise ValueError(f"{self.path}: the first record must be the header")
        if self.validate:
            problems = validate_record(record)
            if problems:
                raise ValueError(
                    f"invalid {record.get('type')} record for {self.path}: " + "; ".join(problems)
                )
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        data = line.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)
        self._empty = False
        self.records += 1
        if record.get("type") == "final":
            self._finished = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
