"""Reading a rank's slice of a corpus as ``_bulk`` bodies.

A rank reads only its slice (:func:`esdash.plugin.corpus_slices.plan_slices` found its
bytes): :func:`read_slice` yields ready-to-send ``_bulk`` bodies, validating each line on
the way with :mod:`esdash.plugin.corpus` (the load generator never sends a line it did not
check).  A file the run's up-front whole-file check already passed is copied into the
bodies verbatim instead, unparsed: the same bytes at a fraction of the client's CPU
(``bench/ingest_cpu.py`` compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from esdash.errors import BadInput
from esdash.plugin.corpus import (
    BOM,
    MAX_LINE_BYTES,
    check_action,
    check_document,
    corpus_error,
    dangling_action,
    decode_line,
    has_action_lines,
    is_action,
    is_blank,
    open_corpus,
    read_line,
)
from esdash.plugin.corpus_scan import corpus_checked
from esdash.plugin.corpus_slices import OFFSETS_SUFFIX, Slice, corpus_changed, offsets_path
from esdash.plugin.values import Corpus
from esdash.rundir.records import JsonObject


@dataclass(frozen=True)
class Batch:
    """One ``_bulk`` request body: ``docs`` documents, the first on line ``first_line``."""

    body: bytes
    docs: int
    first_line: int


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
    node measures).  ``None`` asks :func:`esdash.plugin.corpus_scan.corpus_checked` whether
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
        checked = encode is None and max_line_bytes == MAX_LINE_BYTES and corpus_checked(corpus)
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
        raise corpus_changed(path)


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
            raise corpus_changed(path)
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
        raise corpus_changed(path)


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
    parts: list[bytes] = []
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
