"""The verbatim read path: a checked corpus gives the same bulk bodies, unparsed.

Issue 18: parsing every document line was most of the client's CPU at ingest.  A corpus the
run's whole-file check passed (``esdash.plugin.corpus_scan.check_whole_corpus``) is copied
into the bodies as it is.  These tests hold the two paths to the same bytes over generated
corpora (blank lines, CRLF, a BOM, no final newline, action lines with and without
``_index``, any rank count and batch size, lines spanning the path's read blocks), and check
that only a file the check remembers, unchanged, skips the parsing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esdash.bench import slices as slices_module
from esdash.bench.slices import Batch, read_slice
from esdash.errors import BadInput
from esdash.plugin.corpus_scan import check_whole_corpus, corpus_checked
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin_api import Corpus

PROPERTY = settings(
    max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

documents = st.dictionaries(
    st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.text(max_size=20)), max_size=3
)
actions = st.sampled_from(
    [b'{"index":{}}', b'{"index":{"_id":"7"}}', b'{"create":{"_index":"own","_id":"1"}}']
)
blanks = st.sampled_from([b"", b"  ", b"\t", b"\r"])
line_ends = st.sampled_from([b"\n", b"\r\n"])


@st.composite
def corpora(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(file bytes, has action lines): valid corpora in every shape a reader must handle."""
    paired = draw(st.booleans())
    lines: list[bytes] = []
    for doc in draw(st.lists(documents, min_size=1, max_size=25)):
        lines += [draw(blanks) for _ in range(draw(st.integers(0, 1)))]
        if paired:
            lines.append(draw(actions))
        text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
        lines.append(text.encode())
    data = b"".join(line + draw(line_ends) for line in lines)
    if draw(st.booleans()):
        data = data.rstrip(b"\r\n")  # no final line end
    if data.startswith(b"{") and draw(st.booleans()):  # a BOM before a blank line is bad
        data = b"\xef\xbb\xbf" + data
    return data, paired


def read(corpus: Corpus, ranks: int, batch: int, index: str | None, checked: bool) -> list[Batch]:
    return [
        b
        for part in plan_slices(corpus, ranks)
        for b in read_slice(corpus, part, batch, index, checked=checked)
    ]


@PROPERTY
@given(
    corpus=corpora(),
    ranks=st.integers(1, 5),
    batch=st.integers(1, 7),
    index=st.sampled_from([None, "idx"]),
    block=st.sampled_from([7, 64, 4 * 1024 * 1024]),
)
def test_verbatim_bodies_are_the_checking_bodies(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    corpus: tuple[bytes, bool],
    ranks: int,
    batch: int,
    index: str | None,
    block: int,
) -> None:
    data, paired = corpus
    path = tmp_path / "c.ndjson"
    path.write_bytes(data)
    os.utime(path, ns=(1, 1))  # a fresh offsets cache for each example (other mtime: 1 s)
    for stale in tmp_path.glob("*.esdash-offsets.json"):
        stale.unlink()
    monkeypatch.setattr(slices_module, "VERBATIM_CHUNK", block)  # lines across reads
    declared = Corpus(path, includes_action_and_meta_data=paired)
    checking = read(declared, ranks, batch, index, checked=False)
    verbatim = read(declared, ranks, batch, index, checked=True)
    assert [(b.body, b.docs, b.first_line) for b in verbatim] == [
        (b.body, b.docs, b.first_line) for b in checking
    ]


def test_shared_actions_and_own_actions_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "p.ndjson"
    path.write_bytes(b'{"index":{"_id":"1"}}\r\n{"a":1}\r\n\n{"create":{"_index":"own"}}\n{"a":2}')
    corpus = Corpus(path, includes_action_and_meta_data=True)
    (part,) = plan_slices(corpus, 1)
    (batch,) = read_slice(corpus, part, 10, "idx", checked=True)
    assert batch.body == (
        b'{"index":{"_index":"idx","_id":"1"}}\n{"a":1}\n{"create":{"_index":"own"}}\n{"a":2}\n'
    )
    assert (batch.docs, batch.first_line) == (2, 1)
    plain = tmp_path / "d.ndjson"
    plain.write_bytes(b'\n{"a":1}\n{"a":2}\n')
    (part,) = plan_slices(Corpus(plain), 1)
    batches = list(read_slice(Corpus(plain), part, 1, "idx", op_type="create", checked=True))
    assert [(b.body, b.first_line) for b in batches] == [
        (b'{"create":{"_index":"idx"}}\n{"a":1}\n', 2),
        (b'{"create":{"_index":"idx"}}\n{"a":2}\n', 3),
    ]


def test_a_file_that_shrank_since_planning_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.ndjson"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3}\n')
    (part,) = plan_slices(Corpus(path), 1)
    path.write_bytes(b'{"a":1}\n')
    with pytest.raises(BadInput, match="changed while esdash read it"):
        list(read_slice(Corpus(path), part, 10, checked=True))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """esdash's cache directory (where whole-file checks are remembered), empty."""
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line numbers read_slice parses from now on (the real parser still runs)."""
    parsed: list[int] = []
    real = slices_module.decode_line

    def counting(path: Path, number: int | str, line: bytes) -> object:
        parsed.append(int(number))
        return real(path, number, line)

    monkeypatch.setattr(slices_module, "decode_line", counting)
    return parsed


def test_a_corpus_the_whole_file_check_passed_is_not_parsed_again(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.ndjson"
    path.write_bytes(b"".join(b'{"n":%d}\n' % n for n in range(50)))
    corpus = Corpus(path)
    (part,) = plan_slices(corpus, 1)
    parsed = _parses(monkeypatch)
    assert not corpus_checked(corpus)
    unchecked = list(read_slice(corpus, part, 20, "i"))
    assert parsed == list(range(1, 51))  # not checked up front: every line parsed

    check_whole_corpus(corpus)
    assert corpus_checked(corpus)
    parsed.clear()
    assert list(read_slice(corpus, part, 20, "i")) == unchecked
    assert parsed == []

    # A codec rewrites documents from their parsed form: the checking path, always.
    encoded = list(read_slice(corpus, part, 20, "i", encode=lambda docs: [b"{}" for _ in docs]))
    assert parsed == list(range(1, 51)) and sum(b.docs for b in encoded) == 50


def test_a_changed_file_is_parsed_and_its_bad_line_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.ndjson"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3}\n{"a":4}\n')
    check_whole_corpus(Corpus(path))
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3}\n{"a":}\n\n')  # same size, a new mtime
    os.utime(path, ns=(10**18, 10**18))
    assert not corpus_checked(Corpus(path))
    (part,) = plan_slices(Corpus(path), 1)
    with pytest.raises(BadInput, match=r"c\.ndjson, line 4: invalid JSON"):
        list(read_slice(Corpus(path), part, 10))
    # the same file with action lines declared is another check (its pairing differs)
    path.write_bytes(b'{"a":1}\n{"a":2}\n')
    check_whole_corpus(Corpus(path))
    assert not corpus_checked(Corpus(path, includes_action_and_meta_data=True))
