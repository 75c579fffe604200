"""Corpus files: split an NDJSON corpus among ranks, read a slice as ``_bulk`` bodies.

A corpus is Rally's format: one JSON document per line, UTF-8, optionally every document
preceded by its bulk action line (``{"index": {...}}``).  It may be many gigabytes, so it is
never loaded whole:

- :func:`plan_slices` scans the file once, splits its documents into ``ranks`` contiguous
  ranges of equal size (they differ by at most one document) and caches the byte offsets next
  to the corpus (``<corpus>.esdash-offsets.json``, or in ``cache_dir`` when the corpus'
  directory is read-only).  The cache is keyed by the corpus' size and modification time, so
  an edited corpus is rescanned; offsets for a further rank count reuse the checkpoints of
  the first scan.
- :func:`read_slice` reads one slice and yields ready-to-send ``_bulk`` bodies, validating each
  line on the way (the load generator never sends a line it did not check).
- :func:`check_corpus` is the fast pre-flight: it validates the first lines and the pairing of
  action lines without reading the whole file.

Line numbers are 1-based, as editors show them.  Blank lines (empty or whitespace only) are
allowed and skipped; CRLF line ends and a missing final newline are fine.  Every problem is a
:class:`~esdash.errors.BadInput` naming the file, the line and the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.errors import BadInput
from esdash.plugin_api import Corpus

#: Longest line accepted (bytes).  Longer lines are almost always a file that is not NDJSON
#: (a pretty-printed JSON array, a binary file); Elasticsearch's default ``http.max_content_
#: length`` is 100 MB too.
MAX_LINE_BYTES = 100 * 1024 * 1024
#: Suffix of the offset cache written next to a corpus.
OFFSETS_SUFFIX = ".esdash-offsets.json"
#: Format version of the offset cache; other versions are ignored and rewritten.
OFFSETS_VERSION = 1
#: A checkpoint (byte offset, line number) is kept every this many documents.
CHECKPOINT_EVERY = 4096
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
_BOM = b"\xef\xbb\xbf"
_READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class Slice:
    """One rank's part of a corpus: the bytes ``[start_byte, end_byte)``.

    ``first_line`` is the 1-based number of the slice's first line and ``lines`` the number of
    lines in the range (blank lines included); ``documents`` counts the documents.  Slices of
    one plan are contiguous: together they cover every line exactly once.
    """

    start_byte: int
    end_byte: int
    first_line: int
    lines: int
    documents: int


@dataclass(frozen=True)
class Batch:
    """One ``_bulk`` request body: ``docs`` documents, the first on line ``first_line``."""

    body: bytes
    docs: int
    first_line: int


@dataclass(frozen=True)
class CorpusCheck:
    """What :func:`check_corpus` found."""

    path: Path
    size: int
    lines_checked: int
    documents_checked: int
    includes_action_and_meta_data: bool


# ------------------------------------------------------------------------------ errors


def _bad(path: Path, line: int | str | None, problem: str, fix: str) -> BadInput:
    """``corpus <file>, line <n>: <problem>; <fix>``."""
    where = f"{path}, line {line}" if isinstance(line, int) else f"{path}, {line}" if line else path
    return BadInput(f"corpus {where}: {problem}; {fix}")


def _bytes_text(count: int) -> str:
    return f"{count // (1024 * 1024)} MB" if count >= 1024 * 1024 else f"{count} bytes"


def _excerpt(raw: bytes, limit: int = 60) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _open(path: Path):
    try:
        return open(path, "rb", buffering=_READ_BUFFER)
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
            raise _bad(path, None, f"is {name}-compressed, not NDJSON", fix)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) > 1 and b"\x00" in head[:4]):
        raise _bad(
            path,
            1,
            "is UTF-16 or UTF-32 encoded, not UTF-8",
            f"convert it: iconv -f UTF-16 -t UTF-8 {path} > {path.name}.utf8",
        )


def _read_line(handle, path: Path, number: int, limit: int) -> bytes:
    """The next line (with its end), or ``b""`` at the end; a line over ``limit`` is an error."""
    line = handle.readline(limit + 1)
    if len(line) > limit and not line.endswith(b"\n"):
        raise _bad(
            path,
            number,
            f"line is longer than {_bytes_text(limit)} (it starts {_excerpt(line[:80])})",
            "a corpus has one JSON document per line (NDJSON); a pretty-printed JSON array "
            "must be converted, e.g. jq -c '.[]' array.json > corpus.ndjson",
        )
    return line


def _is_blank(line: bytes) -> bool:
    return not line.strip()


def _decode(path: Path, number: int | str, line: bytes) -> Any:
    """Parse one line as JSON; name the line and the fix when it is not UTF-8 JSON."""
    if number == 1 and line.startswith(_BOM):
        line = line[len(_BOM) :]
    if b"\x00" in line:
        raise _bad(
            path,
            number,
            "line contains NUL bytes: the file is binary or UTF-16/UTF-32 encoded",
            "a corpus is UTF-8 NDJSON; convert it with iconv -t UTF-8",
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(
            path,
            number,
            f"line is not valid UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})",
            f"re-encode the file, e.g. iconv -f latin1 -t UTF-8 {path} > {path.name}.utf8",
        ) from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _bad(
            path,
            number,
            f"invalid JSON at column {exc.colno}: {exc.msg} (line starts {_excerpt(line)})",
            "every line must be one complete JSON document (NDJSON); fix or delete the line",
        ) from None
    except _Constant as exc:
        raise _bad(
            path,
            number,
            f"{exc} is not JSON (line starts {_excerpt(line)})",
            "write a number or null; Elasticsearch rejects it too",
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise _bad(
            path,
            number,
            f"invalid JSON: {exc} (line starts {_excerpt(line)})",
            "fix or delete the line",
        ) from None
    except RecursionError:
        raise _bad(
            path,
            number,
            "JSON nests too deeply",
            "flatten the document; Elasticsearch limits nesting depth too",
        ) from None


class _Constant(ValueError):
    """NaN or Infinity: Python's json accepts them, JSON and Elasticsearch do not."""


def _no_constant(name: str) -> Any:
    raise _Constant(name)


def _is_action(value: Any) -> bool:
    """True for a bulk action line: ``{"index": {...}}`` and the like."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((key, meta),) = value.items()
    return key in (*ACTIONS, "delete") and isinstance(meta, dict)


def _document(path: Path, number: int | str, value: Any) -> None:
    if not isinstance(value, dict):
        raise _bad(
            path,
            number,
            f"line is a JSON {_kind(value)}, not an object",
            "every document line must be a JSON object ({...}); fix or delete the line",
        )


def _action(path: Path, number: int | str, value: Any) -> dict[str, Any]:
    if not _is_action(value):
        raise _bad(
            path,
            number,
            f'expected a bulk action line such as {{"index": {{}}}}, found {_describe(value)}',
            "in a corpus with action-and-meta-data lines every document follows its action "
            "line; set includes_action_and_meta_data = false if the corpus has none",
        )
    ((key, meta),) = value.items()
    if key == "delete":
        raise _bad(
            path,
            number,
            "a delete action has no document to ingest",
            f"a benchmark corpus holds documents: use one of {', '.join(ACTIONS)}",
        )
    return value


def _kind(value: Any) -> str:
    return {
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = list(value)[:3]
        return f"an object with keys {keys}" if keys else "an empty object"
    return f"a JSON {_kind(value)}"


# ------------------------------------------------------------------------- pre-flight


def _first_two(path: Path, max_line_bytes: int) -> list[tuple[int, Any]]:
    """(line number, value) of the first two non-blank lines."""
    found: list[tuple[int, Any]] = []
    with _open(path) as handle:
        number = 0
        while len(found) < 2:
            number += 1
            line = _read_line(handle, path, number, max_line_bytes)
            if not line:
                break
            if not _is_blank(line):
                found.append((number, _decode(path, number, line)))
    return found


def detect_action_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> bool:
    """True when the corpus' first document line is preceded by a bulk action line.

    A line is an action when it is an object with one key (``index``, ``create``,
    ``update``, ``delete``) holding an object, and the next line is not one.
    """
    first = _first_two(Path(path), max_line_bytes)
    return len(first) == 2 and _is_action(first[0][1]) and not _is_action(first[1][1])


def _paired(corpus: Corpus, max_line_bytes: int) -> bool:
    """Whether the corpus has action lines: as declared (then checked) or as detected."""
    path = Path(corpus.path)
    if not corpus.includes_action_and_meta_data:
        return detect_action_lines(path, max_line_bytes)
    first = _first_two(path, max_line_bytes)
    if not first:
        return True  # no documents at all: reported by the caller
    number, value = first[0]
    _action(path, number, value)
    if len(first) < 2 or _is_action(first[1][1]):
        raise _dangling(path, number)
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
    size = _size(path)
    paired = _paired(corpus, max_line_bytes)
    documents = number = 0
    pending: int | None = None  # line of an action line still waiting for its document
    at_end = False
    with _open(path) as handle:
        while not sample_lines or number < sample_lines or pending is not None:
            line = _read_line(handle, path, number + 1, max_line_bytes)
            if not line:
                at_end = True
                break
            number += 1
            if _is_blank(line):
                continue
            value = _decode(path, number, line)
            if paired and pending is None:
                _action(path, number, value)
                pending = number
                continue
            if paired and _is_action(value):
                raise _dangling(path, pending)
            _document(path, number, value)
            pending = None
            documents += 1
    if pending is not None:
        raise _dangling(path, pending)
    if at_end and documents == 0:
        raise _bad(path, None, "has no documents (only blank lines)", "fill it or choose another")
    if not at_end:
        _check_last_line(path, size, paired, max_line_bytes)
    return CorpusCheck(path, size, number, documents, paired)


def _check_last_line(path: Path, size: int, paired: bool, max_line_bytes: int) -> None:
    """Parse the corpus' last non-blank line (when it fits in the last megabyte)."""
    window = min(size, _READ_BUFFER)
    with _open(path) as handle:
        handle.seek(size - window)
        tail = handle.read(window)
    pieces = tail.split(b"\n")
    last = max((i for i, piece in enumerate(pieces) if not _is_blank(piece)), default=None)
    if last is None or (last == 0 and window < size) or len(pieces[last]) > max_line_bytes:
        return  # the last line started before the window: nothing certain to say
    value = _decode(path, "last line", pieces[last])
    if paired and _is_action(value):
        raise _dangling(path, "last line")
    _document(path, "last line", value)


def _size(path: Path) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise BadInput(
            f"corpus {path}: no such file; check the track's corpus or documents_file option"
        ) from None
    if size == 0:
        raise _bad(path, None, "is empty (0 bytes)", "generate or download the corpus again")
    with _open(path) as handle:
        _check_head(path, handle.read(8))
    return size


def _dangling(path: Path, line: int | str | None) -> BadInput:
    return _bad(
        path,
        line,
        "action line without its document (the next line is missing or another action)",
        "every action line must be followed by the document it indexes; add it or delete "
        "the action line",
    )


# ----------------------------------------------------------------------------- slices


@dataclass
class _Index:
    """One scan of a corpus: counts and a checkpoint every ``CHECKPOINT_EVERY`` documents."""

    size: int
    mtime_ns: int
    paired: bool
    documents: int
    lines: int
    #: (byte offset, line number) of document 0, CHECKPOINT_EVERY, 2 * CHECKPOINT_EVERY, ...
    checkpoints: list[tuple[int, int]]


def _scan(path: Path, paired: bool, max_line_bytes: int) -> _Index:
    stat = path.stat()
    per = 2 if paired else 1
    checkpoints: list[tuple[int, int]] = []
    nonblank = lines = offset = 0
    last_action: int | None = None
    with _open(path) as handle:
        while True:
            line = _read_line(handle, path, lines + 1, max_line_bytes)
            if not line:
                break
            lines += 1
            if not _is_blank(line):
                if nonblank % per == 0:
                    if (nonblank // per) % CHECKPOINT_EVERY == 0:
                        checkpoints.append((offset, lines))
                    last_action = lines
                nonblank += 1
            offset += len(line)
    if paired and nonblank % 2:
        # An action line lacks its document somewhere: find the first one.
        check_corpus(Corpus(path, includes_action_and_meta_data=True), 0, max_line_bytes)
        raise _dangling(path, last_action)
    if nonblank == 0:
        raise _bad(path, None, "has no documents (only blank lines)", "fill it or choose another")
    return _Index(stat.st_size, stat.st_mtime_ns, paired, nonblank // per, lines, checkpoints)


def _boundary(path: Path, index: _Index, document: int, max_line_bytes: int) -> tuple[int, int]:
    """(byte offset, line number) of the line starting document ``document``."""
    if document >= index.documents:
        return index.size, index.lines + 1
    per = 2 if index.paired else 1
    offset, number = index.checkpoints[document // CHECKPOINT_EVERY]
    todo = (document % CHECKPOINT_EVERY) * per  # non-blank lines to skip
    with _open(path) as handle:
        handle.seek(offset)
        while True:
            line = _read_line(handle, path, number, max_line_bytes)
            if not line:  # the file shrank since the scan
                raise _changed(path)
            if not _is_blank(line):
                if todo == 0:
                    return offset, number
                todo -= 1
            offset += len(line)
            number += 1


def _changed(path: Path) -> BadInput:
    return _bad(
        path,
        None,
        "the file changed while esdash read it",
        "do not modify a corpus during a run; start the run again",
    )


def _split(path: Path, index: _Index, ranks: int, max_line_bytes: int) -> list[Slice]:
    bounds = [(0, 1)]
    for k in range(1, ranks):
        bounds.append(_boundary(path, index, k * index.documents // ranks, max_line_bytes))
    bounds.append((index.size, index.lines + 1))
    slices = []
    for k in range(ranks):
        (start, line), (end, next_line) = bounds[k], bounds[k + 1]
        documents = (k + 1) * index.documents // ranks - k * index.documents // ranks
        slices.append(Slice(start, end, line, next_line - line, documents))
    return slices


def offsets_path(corpus_path: Path, cache_dir: Path | None = None) -> Path:
    """Where the offset cache of ``corpus_path`` lives: next to it, or in ``cache_dir``."""
    corpus_path = Path(corpus_path)
    if cache_dir is None:
        return corpus_path.with_name(corpus_path.name + OFFSETS_SUFFIX)
    digest = hashlib.sha256(str(corpus_path.resolve()).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{corpus_path.name}-{digest}{OFFSETS_SUFFIX}"


def _load_cache(candidates: Iterable[Path], stat: os.stat_result) -> dict[str, Any] | None:
    """The first cache among ``candidates`` that is well-formed and matches the corpus."""
    for candidate in candidates:
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
            if (
                data["version"] == OFFSETS_VERSION
                and data["size"] == stat.st_size
                and data["mtime_ns"] == stat.st_mtime_ns
                and data["checkpoint_every"] == CHECKPOINT_EVERY
                and isinstance(data["slices"], dict)
            ):
                _index_from(data)
                return data
        except (OSError, ValueError, KeyError, TypeError):
            continue  # missing, unreadable, stale or from another version: scan again
    return None


def _write_cache(candidates: list[Path], data: dict[str, Any]) -> None:
    text = json.dumps(data, separators=(",", ":"))
    for candidate in candidates:
        try:
            write_atomically(candidate, [text.encode()])
            return
        except OSError:
            continue  # read-only directory: try the next place, else compute again next time


def _index_from(data: dict[str, Any]) -> _Index:
    index = _Index(
        int(data["size"]),
        int(data["mtime_ns"]),
        bool(data["paired"]),
        int(data["documents"]),
        int(data["lines"]),
        [(int(offset), int(line)) for offset, line in data["checkpoints"]],
    )
    if len(index.checkpoints) != -(-index.documents // CHECKPOINT_EVERY):
        raise ValueError("checkpoints do not match the document count")
    return index


def _cached_slices(data: dict[str, Any], ranks: int) -> list[Slice] | None:
    try:
        slices = [Slice(*map(int, entry)) for entry in data["slices"][str(ranks)]]
    except (KeyError, TypeError, ValueError):
        return None
    return slices if len(slices) == ranks else None


def plan_slices(
    corpus: Corpus,
    ranks: int,
    cache_dir: Path | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> list[Slice]:
    """Split ``corpus`` into ``ranks`` contiguous slices of (nearly) equal document counts.

    The first call scans the corpus and caches the offsets next to it
    (``<corpus>.esdash-offsets.json``), or in ``cache_dir`` when the corpus' directory is not
    writable; without a writable place nothing is cached.  Later calls read the cache while
    the corpus' size and modification time are unchanged; another rank count reuses the
    scan's checkpoints.  With fewer documents than ranks some slices are empty.  Any rank may
    call this concurrently: the cache is written atomically.

    Only the pairing of action lines and the line lengths are checked here; the documents are
    validated by :func:`read_slice` as they are read (and up front by :func:`check_corpus`).
    """
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, not {ranks}")
    path = Path(corpus.path)
    _size(path)
    stat = path.stat()
    candidates = [offsets_path(path)]
    if cache_dir is not None:
        candidates.append(offsets_path(path, cache_dir))
    data = _load_cache(candidates, stat)
    if data is None:
        paired = _paired(corpus, max_line_bytes)
        index = _scan(path, paired, max_line_bytes)
        if (index.size, index.mtime_ns) != (stat.st_size, stat.st_mtime_ns):
            raise _changed(path)
        data = {
            "version": OFFSETS_VERSION,
            "corpus": str(path.resolve()),
            "size": index.size,
            "mtime_ns": index.mtime_ns,
            "paired": index.paired,
            "documents": index.documents,
            "lines": index.lines,
            "checkpoint_every": CHECKPOINT_EVERY,
            "checkpoints": index.checkpoints,
            "slices": {},
        }
    else:
        index = _index_from(data)
        if corpus.includes_action_and_meta_data and not index.paired:
            _paired(corpus, max_line_bytes)  # raises: declared, but the corpus has none
        cached = _cached_slices(data, ranks)
        if cached is not None and corpus.documents in (None, index.documents):
            return cached
    if corpus.documents is not None and corpus.documents != index.documents:
        raise _bad(
            path,
            None,
            f"holds {index.documents} documents, but the track announced {corpus.documents}",
            "delete the file so that it is generated again, or fix the document count",
        )
    slices = _split(path, index, ranks, max_line_bytes)
    data["slices"][str(ranks)] = [
        [s.start_byte, s.end_byte, s.first_line, s.lines, s.documents] for s in slices
    ]
    _write_cache(candidates, data)
    return slices


# ----------------------------------------------------------------------------- reading


def read_slice(
    corpus: Corpus,
    part: Slice,
    batch_size: int,
    index: str | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    encode: Callable[[list[dict[str, Any]]], list[bytes]] | None = None,
    encode_raw: Callable[[list[bytes]], list[bytes | None]] | None = None,
) -> Iterator[Batch]:
    """Yield the ``_bulk`` bodies of one slice, ``batch_size`` documents each (the last fewer).

    Each document gets the action line ``{"index":{"_index":<index>}}`` (``{"index":{}}``
    without an index: then post to ``/<index>/_bulk``).  A corpus with its own action lines
    keeps them, with ``_index`` added where an action names none.  Every line is validated on
    the way (UTF-8, JSON, an object, the pairing); the first bad one raises
    :class:`BadInput` naming the file and line, before its batch is yielded.  Bodies end with
    a newline, whatever the corpus' line ends are; blank lines are skipped.

    ``encode`` (a client-side encryption codec's ``encode_lines``) turns each batch's parsed
    documents into the JSON lines that are sent instead of the corpus lines; it runs in the
    generator, i.e. inside the ingesting rank and its measured ingest time.  Without it the
    corpus bytes are sent as they are, at no extra cost.

    ``encode_raw`` (with ``encode``, for corpora without action lines) is a codec's fast
    path: it gets the batch's raw lines and returns the encoded line, or ``None`` for each
    line it leaves to Python.  Only those lines are then parsed, checked and passed to
    ``encode``, so a line the fast path encodes is parsed once, natively, and a bad line
    still raises :class:`BadInput` naming its file and line.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    path = Path(corpus.path)
    if part.documents == 0:
        return
    paired = _paired(corpus, max_line_bytes)
    meta = {"_index": index} if index else {}
    default_action = json.dumps({"index": meta}, separators=(",", ":")).encode() + b"\n"
    with _open(path) as handle:
        if part.start_byte:
            handle.seek(part.start_byte - 1)
            if handle.read(1) != b"\n":
                raise _stale(path, part)
        offset, number = part.start_byte, part.first_line - 1
        body: list[bytes] = []
        values: list[dict[str, Any]] = []  # parsed documents, when they are encoded
        numbered: list[tuple[int, bytes]] = []  # (line number, raw line) for encode_raw
        fast = encode is not None and encode_raw is not None and not paired
        docs = total = first = 0
        action: bytes | None = None  # the pending action line of a paired corpus
        action_line = 0
        while offset < part.end_byte:
            line = _read_line(handle, path, number + 1, max_line_bytes)
            if not line:
                break
            number += 1
            offset += len(line)
            if _is_blank(line):
                continue
            raw = line.rstrip(b"\r\n")
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if fast:
                if not body:
                    first = number
                body.append(default_action)
                numbered.append((number, raw))
                docs += 1
                if docs == batch_size:
                    yield Batch(_encoded_raw(path, body, numbered, encode_raw, encode), docs, first)
                    total += docs
                    body, numbered, docs = [], [], 0
                continue
            value = _decode(path, number, line)
            if paired and action is None:
                action = _with_index(_action(path, number, value), index, raw)
                action_line = number
                continue
            if paired and _is_action(value):
                raise _dangling(path, action_line)
            _document(path, number, value)
            if not body:
                first = action_line if paired else number
            body.append(action if paired else default_action)  # type: ignore[arg-type]
            if encode is None:
                body.append(raw + b"\n")
            else:
                values.append(value)
            action = None
            docs += 1
            if docs == batch_size:
                yield Batch(_joined(body, values, encode), docs, first)
                total += docs
                body, values, docs = [], [], 0
        if action is not None:
            raise _dangling(path, action_line)
        if body:
            total += docs
            if fast:
                yield Batch(_encoded_raw(path, body, numbered, encode_raw, encode), docs, first)
            else:
                yield Batch(_joined(body, values, encode), docs, first)
    if total != part.documents or offset != part.end_byte:
        raise _changed(path)


def _encoded_raw(
    path: Path,
    actions: list[bytes],
    numbered: list[tuple[int, bytes]],
    encode_raw: Callable[[list[bytes]], list[bytes | None]] | None,
    encode: Callable[[list[dict[str, Any]]], list[bytes]] | None,
) -> bytes:
    """A batch's body through the fast path; the lines it leaves go through Python."""
    assert encode_raw is not None and encode is not None
    encoded = encode_raw([raw for _, raw in numbered])
    left = [position for position, line in enumerate(encoded) if line is None]
    if left:
        docs = []
        for position in left:  # in line order: the first bad line is the one reported
            number, raw = numbered[position]
            value = _decode(path, number, raw)
            _document(path, number, value)
            docs.append(value)
        for position, line in zip(left, encode(docs), strict=True):
            encoded[position] = line
    return _interleaved(actions, encoded)  # type: ignore[arg-type]


def _joined(
    body: list[bytes],
    values: list[dict[str, Any]],
    encode: Callable[[list[dict[str, Any]]], list[bytes]] | None,
) -> bytes:
    """A batch's body: the collected lines, or action lines interleaved with encoded docs."""
    if encode is None:
        return b"".join(body)
    return _interleaved(body, encode(values))


def _interleaved(actions: list[bytes], lines: list[bytes]) -> bytes:
    """``action line \\n`` per document, in one join (bodies are megabytes: no per-document
    concatenation, which would copy every encrypted line twice more)."""
    if len(actions) != len(lines):
        raise ValueError(f"{len(lines)} encoded lines for {len(actions)} documents")
    first = actions[0] if actions else b""
    if all(action is first for action in actions):  # one shared action line (no corpus actions)
        return first + (b"\n" + first).join(lines) + b"\n" if lines else b""
    parts = []
    for action, line in zip(actions, lines, strict=True):
        parts += (action, line, b"\n")
    return b"".join(parts)


def _stale(path: Path, part: Slice) -> BadInput:
    return _bad(
        path,
        part.first_line,
        f"the slice offset {part.start_byte} is not at a line start: the offset cache is stale",
        f"delete {offsets_path(path)} (and *{OFFSETS_SUFFIX} in the cache directory)",
    )


def _with_index(meta: dict[str, Any], index: str | None, raw: bytes) -> bytes:
    ((key, fields),) = meta.items()
    if index is None or "_index" in fields:
        return raw + b"\n"
    return json.dumps({key: {"_index": index, **fields}}, separators=(",", ":")).encode() + b"\n"


# ------------------------------------------------------------------------ generators


def write_atomically(path: Path, chunks: Iterable[bytes | str]) -> Path:
    """Write ``chunks`` to ``path`` via a temporary file in its directory and a rename.

    Readers never see a half-written file, and concurrent writers of the same content are
    safe (the last rename wins).  The temporary file is removed when writing fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=_READ_BUFFER) as out:
            for chunk in chunks:
                out.write(chunk.encode() if isinstance(chunk, str) else chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def generated_corpus(
    path: Path, documents: Iterable[dict[str, Any]], count: int | None = None
) -> Corpus:
    """The corpus at ``path``, written from ``documents`` (one JSON line each) if absent.

    Track generators use this: the first call writes the file atomically, later calls (with
    the same file name, i.e. the same options) reuse it.
    """
    path = Path(path)
    if not path.exists():
        write_atomically(
            path,
            (
                json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
                for doc in documents
            ),
        )
    return Corpus(path, documents=count)
