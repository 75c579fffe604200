"""The corpus of a loaded Rally track: finding, preparing and checking its document files.

Locating the documents in the corpus and Rally data directories, taking the first lines or
joining several files into esdash's cache, and the corpus check that says before a run which
files are missing and whether the disk has room.  It needs only the model.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from esdash.plugin_api import (
    BadInput,
    CorpusStatus,
    OptionValues,
    reuse_privately,
    write_atomically,
)

from . import template as tpl
from .model import (
    DocumentSet,
    LoadedTrack,
    rally_data_dir,
)


def locate_documents(
    doc: DocumentSet,
    directories: Sequence[Path],
    track_file: Path,
    data_dirs: Sequence[Path] = (),
    confined: bool = True,
) -> Path:
    """The uncompressed file of a document set, or a BadInput saying how to get it.

    A ``source-file`` must stay inside the directory it is looked up in (no ``..``, no
    absolute path).  In the track directory the file must also resolve (after symlinks)
    inside it or inside one of ``data_dirs`` (the user's corpus directory, Rally's data
    directory, esdash's corpus cache, which ``export-rally`` links to): a track must not make
    esdash send files that are not its own to a cluster.  Not ``confined``: the track
    directory is the user's ``corpus_dir`` too, which vouches for its links.
    """
    archive = tpl.decompress_hint(doc.source_file)
    plain = archive[0] if archive else doc.source_file
    track_dir = track_file.parent
    for directory in directories:
        candidate = directory / plain
        lexical = Path(os.path.normpath(candidate))
        if not lexical.is_relative_to(Path(os.path.normpath(directory))):
            raise BadInput(
                f"{track_file}: corpus {doc.corpus!r}: source-file {doc.source_file!r} points "
                f"outside {directory}; name a file inside the corpus directory"
            )
        try:
            candidate.stat()
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise BadInput(
                    f"{track_file}: corpus {doc.corpus!r}: the path {str(candidate)[:80]}... "
                    f"is longer than the file system allows; use a shorter directory"
                ) from None
        if confined and candidate.is_file() and directory == track_dir:
            allowed = [track_dir, *data_dirs]
            if not any(tpl.inside(candidate, root) for root in allowed):
                raise BadInput(
                    f"{track_file}: corpus {doc.corpus!r}: {candidate} resolves to "
                    f"{candidate.resolve()}, outside the track directory {track_dir}; copy the "
                    f"file into it, or set track.corpus_dir to the directory holding it (links "
                    f"there are followed)"
                )
        if candidate.is_file():
            path = candidate
            if doc.uncompressed_bytes is not None and path.stat().st_size != doc.uncompressed_bytes:
                raise BadInput(
                    f"{path}: {path.stat().st_size} bytes, but {track_file} says "
                    f"uncompressed-bytes {doc.uncompressed_bytes} (corpus {doc.corpus!r}); the "
                    f"file is incomplete or another version: replace it, or fix the count in "
                    f"track.json"
                )
            return path
    looked = ", ".join(str(d) for d in directories)
    if archive:
        for directory in directories:
            if (directory / doc.source_file).is_file():
                packed = directory / doc.source_file
                raise BadInput(
                    f"{packed}: esdash reads only uncompressed corpora; decompress it next to "
                    f"itself (cd {directory} && {archive[1]} {doc.source_file}), which gives "
                    f"{directory / plain}"
                )
    url = (
        f"; Rally downloads it from {doc.base_url.rstrip('/')}/{doc.source_file}"
        if (doc.base_url)
        else ""
    )
    raise BadInput(
        f"{track_file}: corpus {doc.corpus!r}: {plain} (or {doc.source_file}) is in none of "
        f"{looked}{url}. Put the uncompressed file in one of them or set track.corpus_dir"
    )


def _cache_name(paths: Sequence[Path], cache_dir: Path, label: str) -> Path:
    """The file esdash's cache keeps for ``paths`` (named by their paths, sizes and times)."""
    digest = hashlib.sha256()
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return cache_dir / f"rally-{label}-{digest.hexdigest()[:16]}.json"


def present_file(doc: DocumentSet, directories: Sequence[Path]) -> Path | None:
    """The uncompressed file of ``doc`` in the first of ``directories`` holding it, unchecked
    (None: in none of them); :func:`locate_documents` checks what it finds."""
    archive = tpl.decompress_hint(doc.source_file)
    plain = archive[0] if archive else doc.source_file
    return next((d / plain for d in directories if (d / plain).is_file()), None)


def take_documents(path: Path, lines: int, cache_dir: Path, label: str) -> Path:
    """The first ``lines`` lines of ``path``, written once under ``cache_dir``.

    Test mode reads a ``-1k`` file; when only the full file is at hand, esdash takes its
    first documents instead of asking for a download (Rally's ``-1k`` files are exactly that).
    The copy holds a user's documents: it is its owner's only (``write_atomically``).
    """
    target = _cache_name([path], cache_dir, f"{label}-1k")
    if target.is_file():
        reuse_privately(target)  # checked before its mode changes: it is input too
        return target
    try:
        write_atomically(target, _first_lines(path, lines))
    except OSError as exc:
        raise BadInput(
            f"{cache_dir}: cannot write the test-mode corpus: {exc.strerror or exc}"
        ) from None
    return target


def _first_lines(path: Path, lines: int) -> Iterator[bytes]:
    with path.open("rb") as source:
        for _, line in zip(range(lines), source, strict=False):
            yield line if line.endswith(b"\n") else line + b"\n"


def count_lines(path: Path) -> int:
    """Lines of a (small) NDJSON file: the documents of a ``-1k`` file are counted, since
    track.json gives the full file's count."""
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def join_documents(paths: Sequence[Path], cache_dir: Path, label: str) -> Path:
    """One NDJSON file from several, written once under ``cache_dir`` and reused after;
    its owner's only, as every copy of a user's documents (``write_atomically``)."""
    target = _cache_name(paths, cache_dir, label)
    if target.is_file():
        reuse_privately(target)  # checked before its mode changes: it is input too
        return target
    try:
        write_atomically(target, _joined(paths))
    except OSError as exc:
        raise BadInput(
            f"{cache_dir}: cannot write the joined corpus: {exc.strerror or exc}"
        ) from None
    return target


def _joined(paths: Sequence[Path]) -> Iterator[bytes]:
    """The files' bytes in order, a line end added after a file that lacks its last one."""
    for path in paths:
        with path.open("rb") as part:
            while chunk := part.read(1024 * 1024):
                yield chunk
            if part.tell() and _last_byte(path) != b"\n":
                yield b"\n"


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


# ------------------------------------------------------------------- corpus check


@dataclass(frozen=True)
class _Where:
    """Where a run looks for a track's documents (the order :meth:`RallyTrack.corpus` uses)."""

    directories: tuple[Path, ...]
    data_dirs: tuple[Path, ...]
    confined: bool

    @classmethod
    def of(cls, loaded: LoadedTrack, options: OptionValues, cache_dir: Path) -> _Where:
        if options.get("corpus_dir"):
            directories = [Path(options["corpus_dir"]).expanduser()]
        else:
            directories = [loaded.directory]
            every = [*loaded.documents, *(d for i in loaded.more for d in i.documents)]
            for corpus in dict.fromkeys([*(d.corpus for d in every), loaded.name]):
                directories.append(rally_data_dir() / corpus)
        return cls(tuple(directories), (*directories[1:], cache_dir), not options.get("corpus_dir"))

    def locate(self, doc: DocumentSet, track_file: Path) -> tuple[Path, bool]:
        """The file of ``doc`` and whether it is the full file a test-mode run cuts (its
        ``-1k`` file being absent), or the BadInput of :func:`locate_documents`."""
        full = doc.full
        if (
            full is not None
            and present_file(doc, self.directories) is None
            and present_file(full, self.directories) is not None
        ):
            # only its first documents are read: its size is not checked (Rally drops the
            # sizes in test mode too)
            unsized = replace(full, uncompressed_bytes=None)
            path = locate_documents(
                unsized, self.directories, track_file, self.data_dirs, self.confined
            )
            return path, True
        path = locate_documents(doc, self.directories, track_file, self.data_dirs, self.confined)
        return path, False


def free_bytes(path: Path) -> int:
    """Free bytes of the filesystem ``path`` is (or would be created) on."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free


def _size(count: int) -> str:
    """Bytes, exact and readable: ``4,094 bytes (4.1 kB)``."""
    value, unit = float(count), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{count:,} bytes ({value:.3g} {unit})" if unit != "B" else f"{count:,} bytes"


def _missing_line(doc: DocumentSet) -> str:
    """A missing document set with the sizes track.json gives for it."""
    archive = tpl.decompress_hint(doc.source_file)
    plain = archive[0] if archive else doc.source_file
    sizes = []
    if doc.uncompressed_bytes is not None:
        sizes.append(f"uncompressed-bytes {doc.uncompressed_bytes:,}")
    if doc.compressed_bytes is not None:
        sizes.append(f"compressed-bytes {doc.compressed_bytes:,} as {doc.source_file}")
    if doc.full is not None:  # test mode: the -1k file's size is in no track.json
        full = doc.full
        size = full.uncompressed_bytes
        given = f", uncompressed-bytes {size:,}" if size else ""
        sizes.append(
            f"test mode: or its full file {present_name(full)} ({full.documents:,} documents"
            f"{given}), whose first documents esdash takes"
        )
    given = "; ".join(sizes) if sizes else "sizes not in track.json"
    return f"{plain} of corpus {doc.corpus!r} ({doc.documents:,} documents; {given})"


def present_name(doc: DocumentSet) -> str:
    """The uncompressed file name esdash reads for ``doc``."""
    archive = tpl.decompress_hint(doc.source_file)
    return archive[0] if archive else doc.source_file


#: Missing files listed with their sizes in a finding; further ones are named only (the
#: total counts them all), so a track of a hundred files still gives a line one can read.
MISSING_LISTED = 10


def _missing_problem(
    loaded: LoadedTrack, where: _Where, missing: Sequence[DocumentSet]
) -> list[tuple[str, str]]:
    """One finding listing every missing file, its sizes and the total disk; a second one
    when that total would not fit the free space where the files go."""
    plain = sum(d.uncompressed_bytes or 0 for d in missing)
    packed = sum(d.compressed_bytes or 0 for d in missing)
    unknown = sum(1 for d in missing if d.uncompressed_bytes is None)
    total = f"total {_size(plain)} uncompressed"
    if packed:
        total += f" (+ {_size(packed)} for the archives while decompressing)"
    if unknown:
        total += f", not counting {unknown} file(s) whose size track.json does not give"
    target = where.directories[0]
    urls = sorted({d.base_url.rstrip("/") for d in missing if d.base_url})
    sources = ", ".join(f"{url}/<source-file>" for url in urls)
    download = f"; Rally downloads them from {sources}" if urls else ""
    listed = "; ".join(_missing_line(d) for d in missing[:MISSING_LISTED])
    if len(missing) > MISSING_LISTED:
        rest = ", ".join(present_name(d) for d in missing[MISSING_LISTED:])
        listed += f"; and {len(missing) - MISSING_LISTED} more: {rest}"
    problems = [
        (
            "track.corpus_dir",
            f"{len(missing)} corpus file(s) of {loaded.track_file} are missing: "
            f"{listed}; {total}; looked in "
            f"{', '.join(str(d) for d in where.directories)}. Put the uncompressed files in "
            f"{target}{download}, or set track.corpus_dir to the directory holding them",
        )
    ]
    needed = plain + packed
    free = free_bytes(target)
    if needed > free:
        problems.append(
            (
                "track.corpus_dir",
                f"the missing corpus files need {_size(needed)}, but {target} has only "
                f"{_size(free)} free; free space there or set track.corpus_dir to a "
                f"directory on a larger filesystem",
            )
        )
    return problems


def _cache_problem(needed: int, cache_dir: Path, what: str) -> tuple[str, str] | None:
    """A refusal when a copy esdash would write into its cache does not fit there."""
    free = free_bytes(cache_dir)
    if needed <= free:
        return None
    return (
        "track.corpus_dir",
        f"{what} needs {_size(needed)} in esdash's corpus cache {cache_dir}, which has only "
        f"{_size(free)} free; free space there (or set ESDASH_CACHE to a larger filesystem)",
    )


def check_corpus(loaded: LoadedTrack, where: _Where, cache_dir: Path) -> CorpusStatus:
    """The corpus of a run checked where a run reads it (see :meth:`RallyTrack.corpus_check`).

    Only stats and free space are read: the joined or test-mode copy a run writes into
    ``cache_dir`` is sized (the test-mode copy by the share of documents it takes), not made.
    """
    lines: list[str] = []
    problems: list[tuple[str, str]] = []
    missing: list[DocumentSet] = []
    found: list[tuple[DocumentSet, Path, bool]] = []
    for doc in loaded.documents:
        try:
            path, cut = where.locate(doc, loaded.track_file)
        except BadInput as exc:
            if _missing(doc, where):
                missing.append(doc)
                continue
            problems.append(("track.corpus_dir", str(exc).split("\n", 1)[0]))
            continue
        found.append((doc, path, cut))
        size = path.stat().st_size
        if cut:
            lines.append(
                f"corpus {doc.corpus!r}: test mode: no {present_name(doc)}, so the run takes "
                f"the first {doc.documents:,} documents of {path} ({_size(size)}) into {cache_dir}"
            )
        else:
            lines.append(f"corpus {doc.corpus!r}: {path} is present ({_size(size)})")
    if missing:
        problems += _missing_problem(loaded, where, missing)
    copies = 0
    for doc, path, cut in found:
        if cut and not _cache_name([path], cache_dir, f"{loaded.name}-{doc.corpus}-1k").is_file():
            full = doc.full.documents if doc.full is not None else doc.documents
            copies += path.stat().st_size * min(doc.documents, full) // max(full, 1)
    if copies:
        problem = _cache_problem(copies, cache_dir, "the test-mode corpus copy")
        if problem:
            problems.append(problem)
    if len(loaded.documents) > 1 and not missing and len(found) == len(loaded.documents):
        paths = [path for _, path, _ in found]
        joined = _cache_name(paths, cache_dir, f"{loaded.name}-{loaded.index}")
        if not joined.is_file():
            size = sum(path.stat().st_size for path in paths)
            problem = _cache_problem(size, cache_dir, f"joining {len(paths)} corpus files")
            if problem:
                problems.append(problem)
            else:
                lines.append(f"the run joins the {len(paths)} files into {joined} ({_size(size)})")
    lines += [f"REFUSED: {message}" for _, message in problems]
    files = tuple((path, doc.includes_action_and_meta_data) for doc, path, cut in found if not cut)
    return CorpusStatus(tuple(lines), tuple(problems), files)


def _missing(doc: DocumentSet, where: _Where) -> bool:
    """Whether no file of ``doc`` is anywhere a run looks: neither the uncompressed file
    (nor, in test mode, the full one) nor its archive, which the user only decompresses."""
    docs = [doc] if doc.full is None else [doc, doc.full]
    for each in docs:
        if present_file(each, where.directories) is not None:
            return False
        if tpl.decompress_hint(each.source_file) and any(
            (d / each.source_file).is_file() for d in where.directories
        ):
            return False
    return True
