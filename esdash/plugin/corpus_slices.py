"""Splitting a corpus among ranks: byte offsets, cached, and the corpus' identity from them.

A corpus may be many gigabytes, so it is never loaded whole: :func:`plan_slices` scans the
file once, splits its documents into ``ranks`` contiguous ranges of equal size (they differ
by at most one document) and caches the byte offsets next to the corpus
(``<corpus>.esdash-offsets.json``, or in ``cache_dir`` when the corpus' directory is
read-only).  The cache is keyed by the corpus' size and modification time, so an edited
corpus is rescanned; offsets for a further rank count reuse the checkpoints of the first
scan.  :func:`corpus_digest` names a corpus by the shape that scan found.

Both sides of a run use this, so it sits with the corpus format below them: the
preparation plans the slices up front and fingerprints the index's corpus
(:mod:`esdash.prepare.plan`), and each rank finds its slice here before it reads it as
``_bulk`` bodies (:func:`esdash.bench.slices.read_slice`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput
from esdash.plugin.corpus import (
    MAX_LINE_BYTES,
    check_corpus,
    corpus_error,
    corpus_size,
    dangling_action,
    has_action_lines,
    is_blank,
    no_documents,
    open_corpus,
    read_line,
    write_atomically,
)
from esdash.plugin.values import Corpus
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
                raise corpus_changed(path)
            if not is_blank(line):
                if todo == 0:
                    return offset, number
                todo -= 1
            offset += len(line)
            number += 1


def corpus_changed(path: Path) -> BadInput:
    """The refusal of a corpus that changed while esdash read it (planned or read)."""
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
            data: JsonObject = json.loads(read_regular(candidate))
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
            raise corpus_changed(path)
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
