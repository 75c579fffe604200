"""The corpus format: NDJSON documents, checked line by line, and corpora tracks generate.

A corpus is Rally's format: one JSON document per line, UTF-8, optionally every document
preceded by its bulk action line (``{"index": {...}}``).  Tracks write theirs with
:func:`generated_corpus`; :func:`check_corpus` is the fast pre-flight (the first lines, the
last line and the pairing of action lines, without reading the whole file); the line
readers and validators below are what :mod:`esdash.bench.slices` uses to read a rank's part
so that no line is sent unchecked.

Line numbers are 1-based, as editors show them.  Blank lines (empty or whitespace only) are
allowed and skipped; CRLF line ends and a missing final newline are fine.  Every problem is a
:class:`~esdash.errors.BadInput` naming the file, the line and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeGuard

from esdash.errors import BadInput
from esdash.plugin.values import Corpus
from esdash.rundir.records import JsonObject, JsonValue

#: Longest line accepted (bytes).  Longer lines are almost always a file that is not NDJSON
#: (a pretty-printed JSON array, a binary file); Elasticsearch's default ``http.max_content_
#: length`` is 100 MB too.
MAX_LINE_BYTES = 100 * 1024 * 1024
#: Bulk actions whose line is followed by a document line.
ACTIONS = ("index", "create", "update")

#: File signatures of compressed corpora: (format, how to decompress).
_COMPRESSED = {
    b"\x1f\x8b": ("gzip", "decompress it first: gunzip"),
    b"BZh": ("bzip2", "decompress it first: bunzip2 (Rally ships documents.json.bz2)"),
    b"\x28\xb5\x2f\xfd": ("zstd", "decompress it first: unzstd"),
    b"PK\x03\x04": ("zip", "unzip it first"),
    b"\xfd7zXZ\x00": ("xz", "decompress it first: unxz"),
}
_COMPACT = (",", ":")
BOM = b"\xef\xbb\xbf"
READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class CorpusCheck:
    """What :func:`check_corpus` found."""

    path: Path
    size: int
    lines_checked: int
    documents_checked: int
    includes_action_and_meta_data: bool


# ------------------------------------------------------------------- reading lines


def corpus_error(path: Path, line: int | str | None, problem: str, fix: str) -> BadInput:
    """``corpus <file>, line <n>: <problem>; <fix>``."""
    where = f"{path}, line {line}" if isinstance(line, int) else f"{path}, {line}" if line else path
    return BadInput(f"corpus {where}: {problem}; {fix}")


def _bytes_text(count: int) -> str:
    return f"{count // (1024 * 1024)} MB" if count >= 1024 * 1024 else f"{count} bytes"


def _excerpt(raw: bytes, limit: int = 60) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def open_corpus(path: Path) -> BinaryIO:
    try:
        return open(path, "rb", buffering=READ_BUFFER)
    except FileNotFoundError:
        raise BadInput(
            f"corpus {path}: no such file; check the track's corpus or documents_file option"
        ) from None
    except IsADirectoryError:
        raise BadInput(f"corpus {path}: is a directory; name the NDJSON file inside it") from None
    except OSError as exc:
        raise BadInput(
            f"corpus {path}: cannot read ({exc.strerror}); check its permissions"
        ) from None


def _check_head(path: Path, head: bytes) -> None:
    """Refuse compressed files and UTF-16/32 text before any line is parsed."""
    for magic, (name, fix) in _COMPRESSED.items():
        if head.startswith(magic):
            raise corpus_error(path, None, f"is {name}-compressed, not NDJSON", fix)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) > 1 and b"\x00" in head[:4]):
        raise corpus_error(
            path,
            1,
            "is UTF-16 or UTF-32 encoded, not UTF-8",
            f"convert it: iconv -f UTF-16 -t UTF-8 {path} > {path.name}.utf8",
        )


def read_line(handle: BinaryIO, path: Path, number: int, limit: int) -> bytes:
    """The next line (with its end), or ``b""`` at the end; a line over ``limit`` is an error."""
    line = handle.readline(limit + 1)
    if len(line) > limit and not line.endswith(b"\n"):
        raise corpus_error(
            path,
            number,
            f"line is longer than {_bytes_text(limit)} (it starts {_excerpt(line[:80])})",
            "a corpus has one JSON document per line (NDJSON); a pretty-printed JSON array "
            "must be converted, e.g. jq -c '.[]' array.json > corpus.ndjson",
        )
    return line


def is_blank(line: bytes) -> bool:
    return not line.strip()


def decode_line(path: Path, number: int | str, line: bytes) -> JsonValue:
    """Parse one line as JSON; name the line and the fix when it is not UTF-8 JSON."""
    if number == 1 and line.startswith(BOM):
        line = line[len(BOM) :]
    if b"\x00" in line:
        raise corpus_error(
            path,
            number,
            "line contains NUL bytes: the file is binary or UTF-16/UTF-32 encoded",
            "a corpus is UTF-8 NDJSON; convert it with iconv -t UTF-8",
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise corpus_error(
            path,
            number,
            f"line is not valid UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})",
            f"re-encode the file, e.g. iconv -f latin1 -t UTF-8 {path} > {path.name}.utf8",
        ) from None
    try:
        value: JsonValue = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise corpus_error(
            path,
            number,
            f"invalid JSON at column {exc.colno}: {exc.msg} (line starts {_excerpt(line)})",
            "every line must be one complete JSON document (NDJSON); fix or delete the line",
        ) from None
    except _Constant as exc:
        raise corpus_error(
            path,
            number,
            f"{exc} is not JSON (line starts {_excerpt(line)})",
            "write a number or null; Elasticsearch rejects it too",
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise corpus_error(
            path,
            number,
            f"invalid JSON: {exc} (line starts {_excerpt(line)})",
            "fix or delete the line",
        ) from None
    except RecursionError:
        raise corpus_error(
            path,
            number,
            "JSON nests too deeply",
            "flatten the document; Elasticsearch limits nesting depth too",
        ) from None
    return value


class _Constant(ValueError):
    """NaN or Infinity: Python's json accepts them, JSON and Elasticsearch do not."""


def _no_constant(name: str) -> NoReturn:
    raise _Constant(name)


def is_action(value: JsonValue) -> TypeGuard[JsonObject]:
    """True for a bulk action line: ``{"index": {...}}`` and the like."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((key, meta),) = value.items()
    return key in (*ACTIONS, "delete") and isinstance(meta, dict)


def check_document(path: Path, number: int | str, value: JsonValue) -> JsonObject:
    """``value`` when it is a document (a JSON object), else the error naming the line."""
    if not isinstance(value, dict):
        raise corpus_error(
            path,
            number,
            f"line is a JSON {_kind(value)}, not an object",
            "every document line must be a JSON object ({...}); fix or delete the line",
        )
    return value


def check_action(path: Path, number: int | str, value: JsonValue) -> JsonObject:
    if not is_action(value):
        raise corpus_error(
            path,
            number,
            f'expected a bulk action line such as {{"index": {{}}}}, found {_describe(value)}',
            "in a corpus with action-and-meta-data lines every document follows its action "
            "line; set includes_action_and_meta_data = false if the corpus has none",
        )
    ((key, meta),) = value.items()
    if key == "delete":
        raise corpus_error(
            path,
            number,
            "a delete action has no document to ingest",
            f"a benchmark corpus holds documents: use one of {', '.join(ACTIONS)}",
        )
    return value


_KINDS: dict[type, str] = {
    list: "array",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}


def _kind(value: JsonValue) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _describe(value: JsonValue) -> str:
    if isinstance(value, dict):
        keys = list(value)[:3]
        return f"an object with keys {keys}" if keys else "an empty object"
    return f"a JSON {_kind(value)}"


# ------------------------------------------------------------------------- pre-flight


def _first_two(path: Path, max_line_bytes: int) -> list[tuple[int, JsonValue]]:
    """(line number, value) of the first two non-blank lines."""
    found: list[tuple[int, JsonValue]] = []
    with open_corpus(path) as handle:
        number = 0
        while len(found) < 2:
            number += 1
            line = read_line(handle, path, number, max_line_bytes)
            if not line:
                break
            if not is_blank(line):
                found.append((number, decode_line(path, number, line)))
    return found


def detect_action_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> bool:
    """True when the corpus' first document line is preceded by a bulk action line.

    A line is an action when it is an object with one key (``index``, ``create``,
    ``update``, ``delete``) holding an object, and the next line is not one.
    """
    first = _first_two(Path(path), max_line_bytes)
    return len(first) == 2 and is_action(first[0][1]) and not is_action(first[1][1])


def has_action_lines(corpus: Corpus, max_line_bytes: int) -> bool:
    """Whether the corpus has action lines: as declared (then checked) or as detected."""
    path = Path(corpus.path)
    if not corpus.includes_action_and_meta_data:
        return detect_action_lines(path, max_line_bytes)
    first = _first_two(path, max_line_bytes)
    if not first:
        return True  # no documents at all: reported by the caller
    number, value = first[0]
    check_action(path, number, value)
    if len(first) < 2 or is_action(first[1][1]):
        raise dangling_action(path, number)
    return True


def check_corpus(
    corpus: Corpus | str | Path,
    sample_lines: int = 1000,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> CorpusCheck:
    """Validate a corpus fast: its first lines, its last line and the action-line pairing.

    Reads the first ``sample_lines`` lines (every line with ``sample_lines=0``) and the last
    line (a truncated download usually ends in half a document).  Raises :class:`BadInput`
    naming the file and line on the first problem: an empty file, a compressed or non-UTF-8
    file, invalid JSON, a line that is not an object, a line over ``max_line_bytes``, an
    action line without its document, or action lines that contradict
    ``includes_action_and_meta_data``.
    """
    if not isinstance(corpus, Corpus):
        corpus = Corpus(Path(corpus))
    path = Path(corpus.path)
    size = corpus_size(path)
    paired = has_action_lines(corpus, max_line_bytes)
    documents = number = 0
    pending: int | None = None  # line of an action line still waiting for its document
    at_end = False
    with open_corpus(path) as handle:
        while not sample_lines or number < sample_lines or pending is not None:
            line = read_line(handle, path, number + 1, max_line_bytes)
            if not line:
                at_end = True
                break
            number += 1
            if is_blank(line):
                continue
            value = decode_line(path, number, line)
            if paired and pending is None:
                check_action(path, number, value)
                pending = number
                continue
            if paired and is_action(value):
                raise dangling_action(path, pending)
            check_document(path, number, value)
            pending = None
            documents += 1
    if pending is not None:
        raise dangling_action(path, pending)
    if at_end and documents == 0:
        raise no_documents(path)
    if not at_end:
        _check_last_line(path, size, paired, max_line_bytes)
    return CorpusCheck(path, size, number, documents, paired)


def _check_last_line(path: Path, size: int, paired: bool, max_line_bytes: int) -> None:
    """Parse the corpus' last non-blank line (when it fits in the last megabyte)."""
    window = min(size, READ_BUFFER)
    with open_corpus(path) as handle:
        handle.seek(size - window)
        tail = handle.read(window)
    pieces = tail.split(b"\n")
    last = max((i for i, piece in enumerate(pieces) if not is_blank(piece)), default=None)
    if last is None or (last == 0 and window < size) or len(pieces[last]) > max_line_bytes:
        return  # the last line started before the window: nothing certain to say
    value = decode_line(path, "last line", pieces[last])
    if paired and is_action(value):
        raise dangling_action(path, "last line")
    check_document(path, "last line", value)


def corpus_size(path: Path) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise BadInput(
            f"corpus {path}: no such file; check the track's corpus or documents_file option"
        ) from None
    if size == 0:
        raise corpus_error(
            path, None, "is empty (0 bytes)", "generate or download the corpus again"
        )
    with open_corpus(path) as handle:
        _check_head(path, handle.read(8))
    return size


def no_documents(path: Path) -> BadInput:
    return corpus_error(
        path, None, "has no documents (only blank lines)", "fill it or choose another"
    )


def dangling_action(path: Path, line: int | str | None) -> BadInput:
    return corpus_error(
        path,
        line,
        "action line without its document (the next line is missing or another action)",
        "every action line must be followed by the document it indexes; add it or delete "
        "the action line",
    )


# ------------------------------------------------------------------------ generators


#: Modes of what esdash writes into its cache: corpora (generated, test-mode cuts, joined
#: copies of a user's Rally corpus), their offsets and check records hold or describe the
#: documents a benchmark indexes, so only their owner may read them.
PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700


def make_private_directories(directory: Path) -> None:
    """Create ``directory`` and every missing parent with mode 0700; existing ones are left
    as they are (a shared cache root keeps the modes its owner gave it)."""
    missing: list[Path] = []
    current = Path(directory)
    while not os.path.lexists(current):
        missing.append(current)
        current = current.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent writer made it
            os.mkdir(created, PRIVATE_DIRECTORY)
    if not Path(directory).is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")


def write_atomically(path: Path, chunks: Iterable[bytes | str]) -> Path:
    """Write ``chunks`` to ``path`` via a temporary file in its directory and a rename.

    Readers never see a half-written file, and concurrent writers of the same content are
    safe (the last rename wins).  The temporary file is removed when writing fails.  The
    file is its owner's only (mode 0600, set on the open file, before any byte is written),
    and directories created for it are 0700: what esdash writes this way holds or describes
    a user's documents.
    """
    path = Path(path)
    make_private_directories(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=READ_BUFFER) as out:
            os.fchmod(out.fileno(), PRIVATE_FILE)
            for chunk in chunks:
                out.write(chunk.encode() if isinstance(chunk, str) else chunk)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def keep_private(path: Path) -> None:
    """Take group and other bits off ``path`` when it is the caller's own regular file.

    Cache files an older esdash wrote were 0644; they are reused, not rewritten.  The mode
    is changed on the open file (never through a link), and a file of another owner is
    left alone (it is not esdash's to change).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if _readable_by_others(info):
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~0o077)
    finally:
        os.close(fd)


def _readable_by_others(info: os.stat_result) -> bool:
    """Whether :func:`keep_private` changes the file of ``info``: the caller's own regular
    file with group or other bits."""
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and bool(info.st_mode & 0o077)


def reuse_privately(path: Path) -> None:
    """Make a corpus found in esdash's cache private (:func:`keep_private`), once every line
    of it is known to be good.

    Bad input never changes an input file, mode included, and a cache file is input: a
    crash, a full disk or a hand can leave it empty, truncated or not NDJSON at all.  So a
    file whose mode would change is read in full first (:func:`check_corpus`, every line;
    once, since it is private afterwards) and a damaged one is refused with the file named,
    left exactly as it is.  A file that is already private, or not the caller's regular
    file, is not read here: its mode does not change, and whoever ingests it checks it.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return  # gone meanwhile: whoever reads it reports it
    if _readable_by_others(info):
        check_corpus(path, sample_lines=0)
        keep_private(path)


def generated_corpus(
    path: Path,
    documents: Iterable[JsonObject],
    count: int | None = None,
    origin: Mapping[str, Any] | None = None,
) -> Corpus:
    """The corpus at ``path``, written from ``documents`` (one JSON line each) if absent.

    Track generators use this: the first call writes the file atomically, later calls (with
    the same file name, i.e. the same options) reuse it (:func:`reuse_privately`: a file an
    older esdash left readable by others is checked before its mode is narrowed, a damaged
    one refused and left as it is).  ``origin`` (the generator and its seed) becomes
    :attr:`Corpus.origin`, part of the index's fingerprint.
    """
    path = Path(path)
    if path.is_symlink() and not path.exists():
        # Someone put a link there (a loop, or to a file gone): replacing it would change a
        # file esdash did not write; the user decides.
        raise corpus_error(
            path,
            None,
            "is a symbolic link to itself or to a missing file",
            "delete the link so that the corpus is generated again, or point it at a corpus",
        )
    if not path.exists():
        write_atomically(
            path,
            (
                json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
                for doc in documents
            ),
        )
    else:
        reuse_privately(path)  # an older esdash left it readable; a damaged one is refused
    return Corpus(path, documents=count, origin=origin)
