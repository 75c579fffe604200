"""Issue 28, L5: what esdash writes into its cache is its owner's only.

Generated corpora, a Rally corpus' test-mode cut and joined copy, the offsets of a corpus and
the record of a checked corpus hold or describe the documents a benchmark indexes.  They are
written 0600, directories esdash creates for them 0700, whatever the umask; a copy an older
version left 0644 is made private when it is reused, on the open file (never through a
link, never another user's file).  The real writers run here, on small files.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from esdash_plugins.tracks.rally.corpus import join_documents, take_documents

from esdash.errors import BadInput
from esdash.plugin import corpus_scan
from esdash.plugin.corpus import generated_corpus, keep_private, write_atomically
from esdash.plugin.corpus_slices import offsets_path, plan_slices
from esdash.plugin.values import Corpus

DOCS = [{"n": k, "name": f"patient {k}"} for k in range(20)]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 000: every mode below comes from esdash, not from the process' umask."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_generated_corpora_and_their_new_directories_are_private(
    tmp_path: Path, open_umask: None
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    path = cache / "corpora" / "mri" / "mri-20-seed7.json"
    corpus = generated_corpus(path, iter(DOCS), len(DOCS))
    assert corpus.path == path and path.read_text().count("\n") == 20
    assert mode(path) == 0o600
    assert mode(cache / "corpora") == 0o700 and mode(cache / "corpora" / "mri") == 0o700
    assert mode(cache) == 0o755  # an existing directory keeps the mode its owner gave it
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_copy_an_older_version_left_readable_is_made_private_on_reuse(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text('{"n":1}\n')
    path.chmod(0o644)
    generated_corpus(path, iter(()), 1)
    assert mode(path) == 0o600 and path.read_text() == '{"n":1}\n'  # reused, not rewritten
    # a link is not followed: the file behind it keeps its mode
    target = tmp_path / "target.json"
    target.write_text("{}\n")
    target.chmod(0o644)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    keep_private(link)
    assert mode(target) == 0o644


#: Cache files a crash, a full disk or a hand left damaged: empty, cut in half, a bad line
#: past the thousand lines the fast check samples.
DAMAGED = {
    "empty": b"",
    "cut": b'{"n":1}\n{"n":',
    "bad line 1500": b"".join(b"{]\n" if k == 1499 else b'{"n":%d}\n' % k for k in range(2000)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_copy_left_readable_is_refused_and_keeps_its_mode(
    tmp_path: Path, damage: str
) -> None:
    """Bad input never changes an input file: the mode is narrowed only once every line of
    the reused file passed (the fuzz campaign's damaged cached corpus, tests/fuzz)."""
    path = tmp_path / "mri-20-42.ndjson"
    path.write_bytes(DAMAGED[damage])
    path.chmod(0o644)
    with pytest.raises(BadInput, match=re.escape(str(path))):
        generated_corpus(path, iter(DOCS), len(DOCS))
    assert mode(path) == 0o644 and path.read_bytes() == DAMAGED[damage]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_is_left_alone(tmp_path: Path) -> None:
    other = pwd.getpwnam(os.environ.get("ESDASH_TEST_USER", "esdash"))
    path = tmp_path / "theirs.json"
    path.write_text("{}\n")
    path.chmod(0o644)
    os.chown(path, other.pw_uid, other.pw_gid)
    keep_private(path)
    assert mode(path) == 0o644


def test_rally_test_mode_cuts_and_joined_copies_are_private(
    tmp_path: Path, open_umask: None
) -> None:
    source = tmp_path / "rally-data"
    source.mkdir()
    parts = []
    for k in range(2):
        part = source / f"part-{k}.json"
        part.write_text("".join(f'{{"n": {k * 10 + i}}}\n' for i in range(10)).rstrip("\n"))
        part.chmod(0o644)
        parts.append(part)
    cache = tmp_path / "cache" / "corpora"
    cut = take_documents(parts[0], 3, cache, "geonames")
    joined = join_documents(parts, cache, "geonames")
    assert cut.read_text() == '{"n": 0}\n{"n": 1}\n{"n": 2}\n'
    assert joined.read_text().splitlines() == [f'{{"n": {n}}}' for n in range(20)]
    assert (mode(cut), mode(joined)) == (0o600, 0o600)
    assert mode(cache) == 0o700 and mode(cache.parent) == 0o700
    assert sorted(p.name for p in cache.iterdir()) == sorted([cut.name, joined.name])
    # a cut an older version wrote 0644 is reused and made private
    cut.chmod(0o644)
    assert take_documents(parts[0], 3, cache, "geonames") == cut and mode(cut) == 0o600


def test_offsets_and_corpus_check_records_are_private(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    corpus_dir = tmp_path / "data"
    corpus_dir.mkdir(mode=0o755)
    path = corpus_dir / "docs.json"
    write_atomically(path, [f'{{"n": {k}}}\n' for k in range(50)])
    slices = plan_slices(Corpus(path), 4)
    assert sum(s.documents for s in slices) == 50
    assert mode(offsets_path(path)) == 0o600
    corpus_scan.check_whole_corpus(Corpus(path))
    records = tmp_path / "cache" / corpus_scan.CORPUS_CHECKS
    assert [mode(r) for r in records.iterdir()] == [0o600]
    assert mode(records) == 0o700 and mode(tmp_path / "cache") == 0o700
    assert corpus_scan.corpus_checked(Corpus(path))  # the record is still read back
