"""Files as the benchmark's only channel after the start: one writer per file, appended lines.

Without fault-tolerant MPI a dead peer breaks every pending point-to-point message and every
collective, so one killed load rank used to take the whole benchmark step down and with it
every per-rank figure.  After the start broadcast the bench ranks therefore exchange nothing
over MPI: each worker appends its interval payloads, heartbeats and final report to its own
file in the run directory (``ranks/<rank>.jsonl``), rank 0 appends its word to the workers
(the warm-up schedule, when the steps start) to ``ranks/coordinator.jsonl``, and each side
reads the other's file.  The run directory sits on the shared file system in an allocation,
so this works across hosts; a rank that dies leaves a file that simply stops growing.

Every record is one JSON line written with a single ``write`` on a file opened for appending
and closed again: the writer is the file's only writer, and closing hands the bytes to the
file system (NFS and Lustre clients flush on close), so a reader never sees more than one
incomplete last line, which it leaves for the next read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import msgspec

from esdash.rundir.records import JsonObject

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class ChannelWriter:
    """Appends records (dicts, msgspec structs inside are encoded) to one file.

    Thread-safe: a worker's heartbeat thread and its load loop write the same file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: JsonObject) -> None:
        line = _encoder.encode(record) + b"\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


class ChannelReader:
    """Reads the complete lines another rank appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._rest = b""
        #: Lines that were not JSON (a rank killed in the middle of a write): skipped.
        self.damaged = 0

    def read(self) -> list[dict[str, Any]]:
        """New records, in order; [] when the file does not exist yet or has not grown.

        The file is opened for every read: on a shared file system that is what makes the
        client look at the server's copy instead of its cache.
        """
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._rest + chunk
        lines = data.split(b"\n")
        self._rest = lines.pop()  # the incomplete last line (b"" after a newline)
        records = []
        for line in lines:
            if not line.strip():
                continue
            try:
                record = _decoder.decode(line)
            except msgspec.DecodeError:
                self.damaged += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                self.damaged += 1
        return records
