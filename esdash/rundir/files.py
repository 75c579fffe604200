"""Reading and writing the record files of a run directory: typed, atomic, with clear errors.

* :func:`read` decodes a file into its record type (:mod:`esdash.rundir.records`) and turns
  any damage -- missing, unreadable, not JSON, a field of the wrong type -- into one
  :class:`RunFileError` naming the file, the JSON path and what was expected;
* :func:`write` replaces a file atomically (write a temporary file, then rename), so a
  poll-based reader on another host never sees half a record;
* :func:`edit` is read-modify-write for files several writers update (``run.json``, a node's
  ``status.json``): the record is changed by attribute, so a misspelt field fails the type
  check, and fields this esdash does not know (written by a newer one) are kept.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import msgspec

from esdash.boundary import Dir
from esdash.errors import BadInput
from esdash.rundir.records import JsonObject

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


class RunFileError(BadInput):
    """A file of a run or campaign directory is missing or damaged.

    The message names the file, the JSON path and what was expected, in one line.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


#: What decoding damaged bytes raises: msgspec's DecodeError (its ValidationError for a
#: value of the wrong type or out of a record's bounds), and two it lets through -- invalid
#: UTF-8 inside a string is a UnicodeDecodeError, nesting deeper than the interpreter allows
#: (``[[[[…``) a RecursionError.  Every reader of a run file catches all of them.
DAMAGE: tuple[type[Exception], ...] = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


#: The problem of a file nested deeper than its parser can follow (``[[[[…`` thousands of
#: levels deep: the parser recurses and hits the interpreter's limit of about 1000 frames).
TOO_DEEP = "nested too deeply (more than a few hundred levels of arrays or tables); flatten it"


def problem(exc: Exception) -> str:
    """What is wrong, in a few words, for an exception of :data:`DAMAGE`.

    A validation error keeps msgspec's text: what was expected and the JSON path
    (``Expected `float` <= 253402300799.0 - at `$.started```).
    """
    if isinstance(exc, msgspec.ValidationError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.object[exc.start]:#04x} in a string)"
    if isinstance(exc, RecursionError):
        return "not valid JSON (nested too deeply)"
    return f"not valid JSON ({exc})"


def decode(data: bytes | str, kind: type[T], path: Path) -> T:
    """``data`` (the content of ``path``) as a ``kind`` record, or a :class:`RunFileError`."""
    try:
        return msgspec.json.decode(data, type=kind)
    except DAMAGE as exc:
        raise RunFileError(path, problem(exc)) from None


def convert(data: object, kind: type[T], path: Path) -> T:
    """Already decoded JSON ``data`` (from ``path``) as a ``kind`` record."""
    try:
        return msgspec.convert(data, type=kind)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise RunFileError(path, problem(exc)) from None


@contextmanager
def open_regular(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading, if it is a regular file; OSError otherwise.

    A FIFO where a run file should be would block a plain ``open`` until someone writes to
    it -- a hung viewer; opened without blocking and checked, it is an error at once.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file (see :func:`open_regular`); OSError for anything else."""
    with open_regular(path) as handle:
        return handle.read()


def read(path: Path, kind: type[T]) -> T:
    """The record in ``path``; a missing, unreadable or damaged file is a RunFileError."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise RunFileError(path, "no such file") from None
    except OSError as exc:
        raise RunFileError(path, f"cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise RunFileError(path, "empty file (its writer stopped before writing it?)")
    return decode(data, kind, path)


def read_optional(path: Path, kind: type[T]) -> T | None:
    """Like :func:`read`, but None when the file does not exist (yet)."""
    if not path.exists():
        return None
    return read(path, kind)


def _path_as_text(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def to_builtins(record: object) -> Any:
    """A record (or a dataclass of records) as plain JSON values; paths become text.

    Untyped as msgspec's result is: a record gives a :data:`JsonObject`, a list a list.
    """
    return msgspec.to_builtins(record, enc_hook=_path_as_text)


def encode(record: object, indent: int = 2) -> bytes:
    """A record as JSON text (indented for people, ``indent=0`` for one line)."""
    data = _ENCODER.encode(record)
    return msgspec.json.format(data, indent=indent) if indent else data


def write_bytes(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` atomically with ``data`` (readers see the old or the new file).

    Private to the writer by default (0600): run files hold results and node details of
    sensitive studies.  The temporary file is created exclusively under an unpredictable
    name and renamed over ``path`` (:meth:`esdash.boundary.Dir.write`), so a link planted
    where either name is never makes the writer write elsewhere.
    """
    if not data.endswith(b"\n"):
        data += b"\n"
    with Dir.trusted(path.parent) as parent:
        parent.write(path.name, data, mode)


def write(path: Path, record: object, mode: int = 0o600) -> None:
    """Replace ``path`` atomically with ``record`` as indented JSON."""
    write_bytes(path, encode(record), mode)


@contextmanager
def edit(path: Path, kind: type[T], default: T) -> Iterator[T]:
    """Read ``path`` (or start from ``default``), yield the record, write it back changed.

    Fields of the file that ``kind`` does not declare are kept as they were.  Concurrent
    writers of one file are not coordinated (as before: every file has one writer at a
    time); the write itself is atomic.
    """
    raw: JsonObject = {}
    if path.exists():
        raw = decode(_read_bytes(path), JsonObject, path)
        record = convert(raw, kind, path)
    else:
        record = default
    yield record
    raw.update(to_builtins(record))
    write_bytes(path, msgspec.json.format(_ENCODER.encode(raw), indent=2))


def _read_bytes(path: Path) -> bytes:
    try:
        return read_regular(path)
    except OSError as exc:
        raise RunFileError(path, f"cannot read: {exc.strerror or exc}") from None


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with open_regular(path) as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
