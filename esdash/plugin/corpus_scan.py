"""The whole-corpus check: every line of a corpus file read once, remembered by identity.

:func:`esdash.plugin.corpus.check_corpus` samples a corpus' first thousand lines and its
last; a bad line further in would stop the ingest after the cluster started.  The run's
preparation (the ``corpus`` pre-flight check, :func:`esdash.run.job.prepare_workload`)
therefore reads every line up front, and remembers a file that passed in esdash's cache.
The ranks only ask whether this very file passed (:func:`corpus_checked`), to send its
lines without parsing them again (:func:`esdash.bench.slices.read_slice`).  Both sides use
it and it needs nothing of a session, only the file, so it lives with the corpus format
below them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from contextlib import suppress
from pathlib import Path

from esdash.paths import cache_dir
from esdash.plugin import corpus as ndjson
from esdash.plugin.values import Corpus

#: Where checked corpora are remembered, under esdash's cache directory.
CORPUS_CHECKS = "corpus-checks"
#: Bytes between two progress updates on a terminal.
_PROGRESS_BYTES = 64 * 1024 * 1024


#: What identifies a checked corpus file (see :func:`check_whole_corpus`).
JsonIdentity = dict[str, "str | int | bool"]


def _identity(path: Path, paired: bool) -> tuple[str, JsonIdentity]:
    """The cache key of a corpus file: what changes whenever its content may have changed."""
    info = path.stat()
    identity: JsonIdentity = {
        "path": str(path.resolve()),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "inode": info.st_ino,
        "device": info.st_dev,
        "paired": paired,
        "max_line_bytes": ndjson.MAX_LINE_BYTES,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return digest[:32], identity


def _remembered(record: Path, identity: JsonIdentity) -> bool:
    try:
        return bool(json.loads(record.read_text())["identity"] == identity)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _remember(record: Path, identity: JsonIdentity, documents: int) -> None:
    """Record a corpus that passed (atomically; a cache that cannot be written is skipped)."""
    # 0600, in a 0700 directory when it creates one: the record names a user's corpus
    with suppress(OSError):
        ndjson.write_atomically(
            record, [json.dumps({"identity": identity, "documents": documents}) + "\n"]
        )


def check_whole_corpus(corpus: Corpus) -> None:
    """Every line of the corpus file is a document (or its action line), or :class:`BadInput`.

    :func:`esdash.plugin.corpus.check_corpus` samples the first 1,000 lines and the last
    one; a bad line further in would stop the ingest after the cluster started.  This reads
    the whole file, streamed (progress on a terminal), once per file identity (path, size,
    mtime_ns, inode, device): a file that passed is remembered in esdash's cache directory,
    so ``session check`` and the run that follows read it once.  The one file a check
    writes, and only there.
    """
    path = Path(corpus.path)
    ndjson.corpus_size(path)  # missing, empty, compressed or UTF-16: the fast refusals
    key, identity = _identity(path, corpus.includes_action_and_meta_data)
    record = cache_dir() / CORPUS_CHECKS / f"{key}.json"
    if _remembered(record, identity):
        return
    documents = _scan(corpus, int(identity["size"]))
    _remember(record, identity, documents)


def corpus_checked(corpus: Corpus) -> bool:
    """Whether :func:`check_whole_corpus` passed this very file and remembers it.

    The ingest then sends the lines without parsing them again
    (:func:`esdash.bench.slices.read_slice`): the identity (size, modification time, inode)
    is that of the file as it is now, so an edited or replaced file is read checking.
    """
    path = Path(corpus.path)
    try:
        key, identity = _identity(path, corpus.includes_action_and_meta_data)
    except OSError:
        return False
    return _remembered(cache_dir() / CORPUS_CHECKS / f"{key}.json", identity)


def _scan(corpus: Corpus, size: int) -> int:
    """Check every line (the rules of :func:`esdash.plugin.corpus.check_corpus`); documents."""
    path = Path(corpus.path)
    limit = ndjson.MAX_LINE_BYTES
    paired = ndjson.has_action_lines(corpus, limit)
    progress = _Progress(path, size)
    documents = number = position = 0
    pending: int | None = None  # line of an action line still waiting for its document
    with ndjson.open_corpus(path) as handle:
        while True:
            line = ndjson.read_line(handle, path, number + 1, limit)
            if not line:
                break
            number += 1
            position += len(line)
            progress.update(position)
            if ndjson.is_blank(line):
                continue
            value = ndjson.decode_line(path, number, line)
            if paired and pending is None:
                ndjson.check_action(path, number, value)
                pending = number
                continue
            if paired and ndjson.is_action(value):
                raise ndjson.dangling_action(path, pending)
            ndjson.check_document(path, number, value)
            pending = None
            documents += 1
    progress.done()
    if pending is not None:
        raise ndjson.dangling_action(path, pending)
    if documents == 0:
        raise ndjson.no_documents(path)
    return documents


class _Progress:
    """``checking <file>: 42% of 1.2 GB`` on standard error, only when it is a terminal.

    Redirected output (a batch job's log, ``session check`` in a script) gets nothing: its
    lines are one per problem.  The line is erased when the scan ends.
    """

    def __init__(self, path: Path, size: int) -> None:
        self.path, self.size = path, size
        self.shown = sys.stderr.isatty() and size > _PROGRESS_BYTES
        self.next = _PROGRESS_BYTES
        self.started = time.monotonic()

    def update(self, position: int) -> None:
        if not self.shown or position < self.next:
            return
        self.next = position + _PROGRESS_BYTES
        share = 100 * position // max(self.size, 1)
        text = f"checking {self.path.name}: {share}% of {self.size / 1e9:.1f} GB"
        print(f"\r{text}", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
