"""Splitting a corpus among ranks and reading a rank's slice as ``_bulk`` bodies.

A corpus may be many gigabytes, so it is never loaded whole:

- :func:`plan_slices` scans the file once, splits its documents into ``ranks`` contiguous
  ranges of equal size (they differ by at most one document) and caches the byte offsets next
  to the corpus (``<corpus>.esdash-offsets.json``, or in ``cache_dir`` when the corpus'
  directory is read-only).  The cache is keyed by the corpus' size and modification time, so
  an edited corpus is rescanned; offsets for a further rank count reuse the checkpoints of
  the first scan.
- :func:`read_slice` reads one slice and yields ready-to-send ``_bulk`` bodies, validating each
  line on the way with :mod:`esdash.plugin.corpus` (the load generator never sends a line it
  did not check).  A file the run's up-front whole-file check already passed is copied into
  the bodies verbatim instead, unparsed: the same bytes at a fraction of the client's CPU
  (``bench/ingest_cpu.py`` compares the two).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from esdash.errors import BadInput
from esdash.plugin.api import Corpus
from esdash.plugin.corpus import (
    BOM,
    MAX_LINE_BYTES,
    check_action,
    check_corpus,
    check_document,
    corpus_error,
    corpus_size,
    dangling_action,
    decode_line,
    has_action_lines,
    is_action,
    is_blank,
    no_documents,
    open_corpus,
    read_line,
    write_atomically,
)
from esdash.rundir.files import read_regular
from esdash.rundir.records import JsonObject

#: Suffix of the offset cache written next to a corpus.
OFFSETS_SUFFIX = ".esdash-offsets.json"
#: Format version of the offset cache; other versions are ignored and rewritten.
OFFSETS_VERSION = 1
#: A checkpoint (byte offset, line number) is kept every this many documents.
CHECKPOINT_EVERY = 4096


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
    with open_corpus(path) as handle:
        while True:
            line = read_line(handle, path, lines + 1, max_line_bytes)
            if not line:
                break
            lines += 1
            if not is_blank(line):
                if nonblank % per == 0:
                    if (nonblank // per) % CHECKPOINT_EVERY == 0:
                        checkpoints.append((offset, lines))
                    last_action = lines
                nonblank += 1
            offset += len(line)
    if paired and nonblank % 2:
        # An action line lacks its document somewhere: find the first one.
        check_corpus(Corpus(path, includes_action_and_meta_data=True), 0, max_line_bytes)
        raise dangling_action(path, last_action)
    if nonblank == 0:
        raise no_documents(path)
    return _Index(stat.st_size, stat.st_mtime_ns, paired, nonblank // per, lines, checkpoints)


def _boundary(path: Path, index: _Index, document: int, max_line_bytes: int) -> tuple[int, int]:
    """(byte offset, line number) of the line starting document ``document``."""
    if document >= index.documents:
        return index.size, index.lines + 1
    per = 2 if index.paired else 1
    offset, number = index.checkpoints[document // CHECKPOINT_EVERY]
    todo = (document % CHECKPOINT_EVERY) * per  # non-blank lines to skip
    with open_corpus(path) as handle:
        handle.seek(offset)
        while True:
            line = read_line(handle, path, number, max_line_bytes)
            if not line:  # the file shrank since the scan
                raise _changed(path)
            if not is_blank(line):
                if todo == 0:
                    return offset, number
                todo -= 1
            offset += len(line)
            number += 1


def _changed(path: Path) -> BadInput:
    return corpus_error(
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


def _load_cache(candidates: Iterable[Path], stat: os.stat_result) -> JsonObject | None:
    """The first cache among ``candidates`` that is well-formed and matches the corpus."""
    for candidate in candidates:
        try:
            data = json.loads(read_regular(candidate))
            if (
                data["version"] == OFFSETS_VERSION
                and data["size"] == stat.st_size
                and data["mtime_ns"] == stat.st_mtime_ns
                and data["checkpoint_every"] == CHECKPOINT_EVERY
                and isinstance(data["slices"], dict)
            ):
                _index_from(data)
                return data
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
            # Missing, unreadable (a FIFO is refused, not waited on), stale, from another
            # version or damaged (nested too deeply, an infinite number): esdash's own file,
            # so scan again and rewrite it.
            continue
    return None


def _write_cache(candidates: list[Path], data: JsonObject) -> None:
    text = json.dumps(data, separators=(",", ":"))
    for candidate in candidates:
        try:
            write_atomically(candidate, [text.encode()])
            return
        except OSError:
            continue  # read-only directory: try the next place, else compute again next time


def _index_from(data: JsonObject) -> _Index:
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


def _cached_slices(data: JsonObject, ranks: int) -> list[Slice] | None:
    try:
        slices = [Slice(*map(int, entry)) for entry in data["slices"][str(ranks)]]
    except (KeyError, TypeError, ValueError, OverflowError):
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
    corpus_size(path)
    stat = path.stat()
    candidates = [offsets_path(path)]
    if cache_dir is not None:
        candidates.append(offsets_path(path, cache_dir))
    data = _load_cache(candidates, stat)
    if data is None:
        paired = has_action_lines(corpus, max_line_bytes)
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
            has_action_lines(corpus, max_line_bytes)  # raises: declared, but the corpus has none
        cached = _cached_slices(data, ranks)
        if cached is not None and corpus.documents in (None, index.documents):
            return cached
    if corpus.documents is not None and corpus.documents != index.documents:
        raise corpus_error(
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


def corpus_digest(
    corpus: Corpus, cache_dir: Path | None = None, max_line_bytes: int = MAX_LINE_BYTES
) -> JsonObject:
    """The corpus' identity without reading it again: size, counts and a hash of its offsets.

    Index reuse compares this with what an index was ingested from (``_meta.esdash``).
    Hashing a corpus of many gigabytes would take minutes on every run; the offsets cache
    already describes its shape (document and line counts, whether it has action lines, the
    byte offset of every ``CHECKPOINT_EVERY``-th document), so its hash, with the size, tells
    one corpus from another at no cost.  Only the shape is hashed -- not the cache's path,
    modification time or slices for other rank counts -- so a copied or re-generated file
    with the same bytes keeps its identity.  Offsets alone miss an edit that keeps every
    line's length (a value changed in place), so ``SAMPLE_BLOCKS`` blocks spread evenly over
    the file (all of a small one) are hashed too: a few reads, whatever the corpus' size.
    """
    plan_slices(corpus, 1, cache_dir, max_line_bytes)  # scans once, later reads the cache
    path = Path(corpus.path)
    candidates = [offsets_path(path)]
    if cache_dir is not None:
        candidates.append(offsets_path(path, cache_dir))
    data = _load_cache(candidates, path.stat())
    if data is not None:
        index = _index_from(data)
    else:  # nowhere writable to cache the scan: scan again
        index = _scan(path, has_action_lines(corpus, max_line_bytes), max_line_bytes)
    shape = {
        "paired": index.paired,
        "documents": index.documents,
        "lines": index.lines,
        "checkpoint_every": CHECKPOINT_EVERY,
        "checkpoints": index.checkpoints,
    }
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return {
        "size": index.size,
        "documents": index.documents,
        "offsets": hashlib.sha256(text.encode()).hexdigest()[:32],
        "sample": _sample_digest(path, index.size),
    }


#: Blocks of ``SAMPLE_BLOCK`` bytes a corpus' sample hash reads (first and last included).
SAMPLE_BLOCKS = 16
SAMPLE_BLOCK = 4096


def _sample_digest(path: Path, size: int) -> str:
    """SHA-256 of ``SAMPLE_BLOCKS`` blocks at evenly spaced offsets (the whole small file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK:
            digest.update(handle.read(size))
        else:
            step = (size - SAMPLE_BLOCK) / (SAMPLE_BLOCKS - 1)
            for k in range(SAMPLE_BLOCKS):
                handle.seek(int(k * step))
                digest.update(handle.read(SAMPLE_BLOCK))
    return digest.hexdigest()[:32]


# ----------------------------------------------------------------------------- reading


def read_slice(
    corpus: Corpus,
    part: Slice,
    batch_size: int,
    index: str | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    encode: Callable[[list[JsonObject]], list[bytes]] | None = None,
    encode_raw: Callable[[list[bytes]], list[bytes | None]] | None = None,
    op_type: str = "index",
    checked: bool | None = None,
) -> Iterator[Batch]:
    """Yield the ``_bulk`` bodies of one slice, ``batch_size`` documents each (the last fewer).

    ``op_type`` is the action of documents without their own action line: ``create`` for
    a data stream, which refuses ``index``.

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

    ``checked`` says whether every line of the file is already known to be valid: then,
    without ``encode``, the lines go into the bodies verbatim, unparsed (a JSON decode per
    document was most of the client's CPU at ingest, and that CPU is part of what a 2-core
    node measures).  ``None`` asks :func:`esdash.cluster.preflight.corpus_checked` whether
    the whole-file check of the run's preparation passed this very file (same size,
    modification time, inode).  The bodies are the same bytes either way.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    path = Path(corpus.path)
    if part.documents == 0:
        return
    paired = has_action_lines(corpus, max_line_bytes)
    meta = {"_index": index} if index else {}
    default_action = json.dumps({op_type: meta}, separators=(",", ":")).encode() + b"\n"
    if checked is None:
        checked = encode is None and max_line_bytes == MAX_LINE_BYTES and _checked(corpus)
    with open_corpus(path) as handle:
        if part.start_byte:
            handle.seek(part.start_byte - 1)
            if handle.read(1) != b"\n":
                raise _stale(path, part)
        if checked and encode is None:
            yield from _verbatim(handle, path, part, batch_size, index, default_action, paired)
            return
        offset, number = part.start_byte, part.first_line - 1
        body: list[bytes] = []
        values: list[JsonObject] = []  # parsed documents, when they are encoded
        numbered: list[tuple[int, bytes]] = []  # (line number, raw line) for encode_raw
        fast = encode is not None and encode_raw is not None and not paired
        docs = total = first = 0
        action: bytes | None = None  # the pending action line of a paired corpus
        action_line = 0
        while offset < part.end_byte:
            line = read_line(handle, path, number + 1, max_line_bytes)
            if not line:
                break
            number += 1
            offset += len(line)
            if is_blank(line):
                continue
            raw = line.rstrip(b"\r\n")
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
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
            value = decode_line(path, number, line)
            if paired and action is None:
                action = _with_index(check_action(path, number, value), index, raw)
                action_line = number
                continue
            if paired and is_action(value):
                raise dangling_action(path, action_line)
            document = check_document(path, number, value)
            if not body:
                first = action_line if paired else number
            body.append(action if paired else default_action)  # type: ignore[arg-type]
            if encode is None:
                body.append(raw + b"\n")
            else:
                values.append(document)
            action = None
            docs += 1
            if docs == batch_size:
                yield Batch(_joined(body, values, encode), docs, first)
                total += docs
                body, values, docs = [], [], 0
        if action is not None:
            raise dangling_action(path, action_line)
        if body:
            total += docs
            if fast:
                yield Batch(_encoded_raw(path, body, numbered, encode_raw, encode), docs, first)
            else:
                yield Batch(_joined(body, values, encode), docs, first)
    if total != part.documents or offset != part.end_byte:
        raise _changed(path)


def _checked(corpus: Corpus) -> bool:
    """Whether the run's up-front whole-file check passed this very file (see ``checked``)."""
    from esdash.cluster.preflight import corpus_checked  # the one use: keep slices light

    return corpus_checked(corpus)


#: Bytes read at once by the verbatim path (a longer line is joined from several reads).
VERBATIM_CHUNK = 4 * 1024 * 1024


def _chunk_lines(handle: BinaryIO, path: Path, part: Slice) -> Iterator[list[bytes]]:
    """The lines of ``part`` without their ``\\n``, a list per read of ``VERBATIM_CHUNK``.

    Splitting a block in C and looping over the pieces costs a fraction of a ``readline``
    per line.  A line spanning several reads is joined once (its pieces are kept in a list,
    so a 100 MB line is not copied once per read).
    """
    remaining = part.end_byte - part.start_byte
    pieces: list[bytes] = []  # the start of a line the last read did not finish
    while remaining > 0:
        data = handle.read(min(VERBATIM_CHUNK, remaining))
        if not data:  # the file shrank since it was planned
            raise _changed(path)
        remaining -= len(data)
        lines = data.split(b"\n")
        if len(lines) == 1:
            pieces.append(data)
            continue
        if pieces:
            pieces.append(lines[0])
            lines[0] = b"".join(pieces)
            pieces = []
        tail = lines.pop()
        if tail:
            pieces.append(tail)
        yield lines
    if pieces:  # the slice's (and the file's) last line has no line end
        yield [b"".join(pieces)]


def _verbatim(
    handle: BinaryIO,
    path: Path,
    part: Slice,
    batch_size: int,
    index: str | None,
    default_action: bytes,
    paired: bool,
) -> Iterator[Batch]:
    """The bodies of a checked corpus: its lines copied as they are, none parsed.

    The same bytes as the checking path: blank lines skipped, line ends (``\\r\\n`` too)
    made ``\\n``, a leading BOM dropped, and each document after its action line -- the
    shared one, or the corpus' own with ``_index`` added where it names none (action lines
    are parsed for that, documents never are).
    """
    number = part.first_line - 1
    docs: list[bytes] = []  # a batch's documents (after their actions, if paired)
    actions: list[bytes] = []  # their action lines, in a paired corpus
    action: bytes | None = None
    action_line = first = total = 0
    for lines in _chunk_lines(handle, path, part):
        for line in lines:
            number += 1
            if line[-1:] == b"\r":
                line = line.rstrip(b"\r")
            if line[:1] != b"{" and not line.strip():
                continue
            if number == 1 and line.startswith(BOM):
                line = line[len(BOM) :]
            if paired:
                if action is None:
                    action = (
                        line + b"\n"
                        if index is None
                        else _with_index(json.loads(line), index, line)
                    )
                    action_line = number
                    continue
                actions.append(action)
                action = None
                if not docs:
                    first = action_line
            elif not docs:
                first = number
            docs.append(line)
            if len(docs) == batch_size:
                yield Batch(_verbatim_body(docs, actions, default_action), batch_size, first)
                total += batch_size
                docs, actions = [], []
    if action is not None:
        raise dangling_action(path, action_line)
    if docs:
        yield Batch(_verbatim_body(docs, actions, default_action), len(docs), first)
        total += len(docs)
    if total != part.documents:
        raise _changed(path)


def _verbatim_body(docs: list[bytes], actions: list[bytes], default_action: bytes) -> bytes:
    """``action \\n document \\n`` per document, in one join."""
    if not actions:
        return default_action + (b"\n" + default_action).join(docs) + b"\n"
    parts: list[bytes] = []
    for action, doc in zip(actions, docs, strict=True):
        parts += (action, doc, b"\n")
    return b"".join(parts)


def _encoded_raw(
    path: Path,
    actions: list[bytes],
    numbered: list[tuple[int, bytes]],
    encode_raw: Callable[[list[bytes]], list[bytes | None]] | None,
    encode: Callable[[list[JsonObject]], list[bytes]] | None,
) -> bytes:
    """A batch's body through the fast path; the lines it leaves go through Python."""
    assert encode_raw is not None and encode is not None
    encoded = encode_raw([raw for _, raw in numbered])
    left = [position for position, line in enumerate(encoded) if line is None]
    if left:
        docs: list[JsonObject] = []
        for position in left:  # in line order: the first bad line is the one reported
            number, raw = numbered[position]
            docs.append(check_document(path, number, decode_line(path, number, raw)))
        for position, line in zip(left, encode(docs), strict=True):
            encoded[position] = line
    return _interleaved(actions, encoded)  # type: ignore[arg-type]


def _joined(
    body: list[bytes],
    values: list[JsonObject],
    encode: Callable[[list[JsonObject]], list[bytes]] | None,
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
    return corpus_error(
        path,
        part.first_line,
        f"the slice offset {part.start_byte} is not at a line start: the offset cache is stale",
        f"delete {offsets_path(path)} (and *{OFFSETS_SUFFIX} in the cache directory)",
    )


def _with_index(meta: JsonObject, index: str | None, raw: bytes) -> bytes:
    ((key, fields),) = meta.items()
    if index is None or "_index" in fields:
        return raw + b"\n"
    return json.dumps({key: {"_index": index, **fields}}, separators=(",", ":")).encode() + b"\n"
