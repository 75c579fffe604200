"""Corpus slicing and reading: every line exactly once, and a clear error for every broken file.

The property tests generate corpora (blank lines, CRLF, missing final newline, action-and-
meta-data pairs) and rank counts; the broken-corpus tests inject one defect (invalid JSON, a
non-object line, bad UTF-8, a huge line, NaN, a dangling action line) and require a
``BadInput`` naming the file and the defect's line, never another exception.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from esdash.bench.slices import Batch, read_slice
from esdash.errors import BadInput
from esdash.plugin import corpus_slices as corpus_module
from esdash.plugin.corpus import check_corpus, detect_action_lines, write_atomically
from esdash.plugin.corpus_slices import OFFSETS_SUFFIX, Slice, offsets_path, plan_slices
from esdash.plugin_api import Corpus

#: A small line limit keeps "huge line" examples small.
LIMIT = 300
PROPERTY = settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def read_all(corpus: Corpus, slices: list[Slice], batch_size: int, **kw) -> list[Batch]:
    return [batch for part in slices for batch in read_slice(corpus, part, batch_size, **kw)]


def bulk_pairs(batches: list[Batch]) -> list[tuple[dict, dict]]:
    pairs = []
    for batch in batches:
        assert batch.body.endswith(b"\n")
        lines = batch.body.split(b"\n")[:-1]
        assert len(lines) == 2 * batch.docs
        pairs += [
            (json.loads(a), json.loads(d)) for a, d in zip(lines[::2], lines[1::2], strict=True)
        ]
    return pairs


# ------------------------------------------------------------------------ examples


def test_crlf_blank_lines_bom_and_no_final_newline(tmp_path):
    path = write(tmp_path, "c.ndjson", b'\xef\xbb\xbf{"a":1}\r\n\r\n  \n{"a":2}\n{"a":"\xc3\xa9"}')
    corpus = Corpus(path)
    check = check_corpus(corpus)
    assert (check.documents_checked, check.lines_checked) == (3, 5)
    (part,) = plan_slices(corpus, 1)
    assert part == Slice(0, path.stat().st_size, 1, 5, 3)
    batches = list(read_slice(corpus, part, 2, "idx"))
    assert [(b.docs, b.first_line) for b in batches] == [(2, 1), (1, 5)]
    assert batches[0].body == (
        b'{"index":{"_index":"idx"}}\n{"a":1}\n{"index":{"_index":"idx"}}\n{"a":2}\n'
    )
    assert batches[1].body == '{"index":{"_index":"idx"}}\n{"a":"é"}\n'.encode()


def test_without_an_index_the_action_names_none(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n')
    (batch,) = read_slice(Corpus(path), plan_slices(Corpus(path), 1)[0], 10)
    assert batch.body == b'{"index":{}}\n{"a":1}\n'


def test_action_lines_stay_with_their_documents(tmp_path):
    lines = [
        b'{"index":{"_id":"1"}}',
        b'{"a":1}',
        b'{"create":{"_index":"other","_id":"2"}}',
        b'{"a":2}',
        b'{"index":{}}',
        b'{"a":3}',
    ]
    path = write(tmp_path, "p.ndjson", b"\n".join(lines) + b"\n")
    assert detect_action_lines(path)
    for declared in (True, False):  # declared, or detected
        corpus = Corpus(path, includes_action_and_meta_data=declared)
        assert check_corpus(corpus).includes_action_and_meta_data
        for ranks in (1, 2, 3, 4):
            slices = plan_slices(corpus, ranks)
            assert [s.documents for s in slices] == [
                (k + 1) * 3 // ranks - k * 3 // ranks for k in range(ranks)
            ]
            pairs = bulk_pairs(read_all(corpus, slices, 2, index="idx"))
            assert pairs == [
                ({"index": {"_index": "idx", "_id": "1"}}, {"a": 1}),
                ({"create": {"_index": "other", "_id": "2"}}, {"a": 2}),
                ({"index": {"_index": "idx"}}, {"a": 3}),
            ]


def test_fewer_documents_than_ranks_gives_empty_slices(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    slices = plan_slices(Corpus(path), 5)
    assert [s.documents for s in slices] == [0, 0, 1, 0, 1]
    assert sum(len(list(read_slice(Corpus(path), s, 10))) for s in slices) == 2


# ---------------------------------------------------------------------- offset cache


def test_offsets_are_cached_next_to_the_corpus_and_reused(tmp_path, monkeypatch):
    path = write(tmp_path, "c.ndjson", b"".join(b'{"n":%d}\n' % i for i in range(100)))
    corpus = Corpus(path)
    first = plan_slices(corpus, 4)
    cache = tmp_path / ("c.ndjson" + OFFSETS_SUFFIX)
    assert offsets_path(path) == cache and cache.exists()
    data = json.loads(cache.read_text())
    assert (data["size"], data["documents"], data["lines"]) == (path.stat().st_size, 100, 100)

    def no_scan(*args):
        raise AssertionError("the corpus was scanned again")

    monkeypatch.setattr(corpus_module, "_scan", no_scan)
    assert plan_slices(corpus, 4) == first
    assert [s.documents for s in plan_slices(corpus, 3)] == [33, 33, 34]  # from checkpoints
    assert set(json.loads(cache.read_text())["slices"]) == {"4", "3"}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_changed_corpus_is_scanned_again(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    assert plan_slices(Corpus(path), 1)[0].documents == 2
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3}\n')
    os.utime(path, ns=(1, 1))
    assert plan_slices(Corpus(path), 1)[0].documents == 3
    path.write_bytes(b'{"a":1}\n\n{"b":2}\n{"a":3}\n')  # same size, other mtime
    (part,) = plan_slices(Corpus(path), 1)
    assert (part.documents, part.lines) == (3, 4)


def test_a_corrupt_cache_is_ignored_and_rewritten(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    for garbage in ("", "{", "[]", '{"version": 1}', '{"version":1,"size":"x"}'):
        offsets_path(path).write_text(garbage)
        assert [s.documents for s in plan_slices(Corpus(path), 2)] == [1, 1]
        assert json.loads(offsets_path(path).read_text())["documents"] == 2


def test_a_cache_too_deep_infinite_or_a_fifo_is_rebuilt(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    plan_slices(Corpus(path), 2)
    good = json.loads(offsets_path(path).read_text())
    for slices in ('{"2": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"2": [[-Infinity]]}'):
        offsets_path(path).write_text(json.dumps(good)[:-1] + f', "slices": {slices}}}')
        assert [s.documents for s in plan_slices(Corpus(path), 2)] == [1, 1]
    offsets_path(path).unlink()
    os.mkfifo(offsets_path(path))  # refused at once (a plain open would block), then replaced
    assert [s.documents for s in plan_slices(Corpus(path), 2)] == [1, 1]


def test_read_only_corpus_directory_caches_in_the_cache_dir(tmp_path, monkeypatch):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    cache_dir = tmp_path / "cache"
    real = corpus_module.write_atomically

    def read_only_corpus_dir(target, chunks):
        if Path(target).parent == tmp_path:
            raise PermissionError(13, "Permission denied")
        return real(target, chunks)

    monkeypatch.setattr(corpus_module, "write_atomically", read_only_corpus_dir)
    plan_slices(Corpus(path), 2, cache_dir)
    assert not offsets_path(path).exists()
    cached = offsets_path(path, cache_dir)
    assert cached.parent == cache_dir and cached.exists()
    monkeypatch.setattr(corpus_module, "_scan", lambda *a: pytest.fail("scanned again"))
    assert [s.documents for s in plan_slices(Corpus(path), 2, cache_dir)] == [1, 1]


def test_without_any_writable_place_nothing_is_cached(tmp_path, monkeypatch):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n')

    def refuse(target, chunks):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(corpus_module, "write_atomically", refuse)
    assert plan_slices(Corpus(path), 1, tmp_path / "cache")[0].documents == 1


def test_a_stale_offset_is_detected_when_reading(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    corpus = Corpus(path)
    with pytest.raises(BadInput, match=r"not at a line start: the offset cache is stale"):
        list(read_slice(corpus, Slice(3, path.stat().st_size, 1, 2, 2), 10))
    # A slice that promises more documents than its bytes hold: the file changed.
    with pytest.raises(BadInput, match="changed while esdash read it"):
        list(read_slice(corpus, Slice(0, path.stat().st_size, 1, 2, 3), 10))


def test_write_atomically_leaves_nothing_behind_on_failure(tmp_path):
    def chunks():
        yield b"partial"
        raise RuntimeError("generator failed")

    with pytest.raises(RuntimeError):
        write_atomically(tmp_path / "out.ndjson", chunks())
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ broken examples


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"", r"is empty \(0 bytes\)"),
        (b"\n \n\r\n", r"has no documents"),
        (b"\x1f\x8b\x08\x00rest", r"is gzip-compressed.*gunzip"),
        (b"BZh91AY&SY", r"is bzip2-compressed"),
        ('{"a": 1}\n'.encode("utf-16"), r"UTF-16 or UTF-32.*iconv"),
        (b'{"a": 1}\n{"name": "M\xfcller"}\n', r"line 2: line is not valid UTF-8.*iconv"),
        (b'{"a": 1}\n{"a": 2,}\n', r"line 2: invalid JSON at column 9"),
        (b'{"a": 1}\n[1, 2]\n', r"line 2: line is a JSON array, not an object"),
        (b'{"a": 1}\n\n"text"\n', r"line 3: line is a JSON string, not an object"),
        (b'{"a": NaN}\n', r"line 1: NaN is not JSON"),
        (b'{"a": 1}\n' + b"x" * (LIMIT + 5) + b"\n", rf"line 2: line is longer than {LIMIT} bytes"),
        (b'{"index": {}}\n{"a": 1}\n{"index": {}}\n', r"line 3: action line without its document"),
        (
            b'{"index": {}}\n{"a": 1}\n{"index": {}}\n{"index": {}}\n{"a": 2}\n',
            r"line 3: action line without its document",
        ),
        (b'{"delete": {"_id": "1"}}\n{"a": 1}\n', r"line 1: a delete action has no document"),
    ],
)
def test_broken_corpora_name_file_line_and_fix(tmp_path, data, pattern):
    path = write(tmp_path, "broken.ndjson", data)
    for attempt in (
        lambda: check_corpus(Corpus(path), 0, LIMIT),
        lambda: read_all(Corpus(path), plan_slices(Corpus(path), 2, None, LIMIT), 2),
    ):
        with pytest.raises(BadInput, match=pattern) as caught:
            attempt()
        assert str(caught.value).startswith(f"corpus {path}")
        assert ";" in str(caught.value), "every message ends with the fix"


def test_declared_action_lines_that_are_not_there(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a": 1}\n{"a": 2}\n')
    corpus = Corpus(path, includes_action_and_meta_data=True)
    with pytest.raises(BadInput, match=r"line 1: expected a bulk action line"):
        check_corpus(corpus)
    with pytest.raises(BadInput, match=r"line 1: expected a bulk action line"):
        plan_slices(corpus, 1)
    plan_slices(Corpus(path), 1)  # cached as unpaired: the declaration is still checked
    with pytest.raises(BadInput, match=r"line 1: expected a bulk action line"):
        plan_slices(corpus, 1)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        check_corpus(tmp_path / "nope.ndjson")
    with pytest.raises(BadInput, match="no such file"):
        plan_slices(Corpus(tmp_path / "nope.ndjson"), 1)
    with pytest.raises(BadInput, match="is a directory"):
        check_corpus(tmp_path)


def test_the_preflight_samples_the_start_and_the_last_line(tmp_path):
    good = b"".join(b'{"n":%d}\n' % i for i in range(50))
    truncated = write(tmp_path, "t.ndjson", good + b'{"n": 50, "tex')
    with pytest.raises(BadInput, match=r"last line: invalid JSON"):
        check_corpus(Corpus(truncated), sample_lines=10)
    lines = good.splitlines(keepends=True)
    middle = write(tmp_path, "m.ndjson", b"".join(lines[:11]) + b"oops\n" + b"".join(lines[11:]))
    assert check_corpus(Corpus(middle), sample_lines=5).lines_checked == 5  # not read
    with pytest.raises(BadInput, match=r"line 12: invalid JSON"):
        check_corpus(Corpus(middle), sample_lines=0)


# --------------------------------------------------------------------- properties

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
DOCUMENTS = st.dictionaries(
    st.text(alphabet="abcxyz_é", min_size=1, max_size=4), JSON_SCALARS, max_size=4
)
ACTIONS = st.sampled_from(
    [{"index": {}}, {"create": {}}, {"index": {"_id": "7"}}, {"create": {"_index": "x"}}]
)


@st.composite
def corpora(draw, paired=None):
    """(bytes, line number of each document, documents, actions)."""
    paired = draw(st.booleans()) if paired is None else paired
    docs = draw(st.lists(DOCUMENTS, min_size=1, max_size=25))
    actions = [draw(ACTIONS) for _ in docs] if paired else []
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    lines: list[bytes] = []
    doc_lines: list[int] = []
    for i, doc in enumerate(docs):
        lines += draw(st.lists(st.sampled_from([b"", b" ", b"\t"]), max_size=2))
        if paired:
            lines.append(json.dumps(actions[i]).encode())
        lines.append(json.dumps(doc, ensure_ascii=draw(st.booleans())).encode())
        doc_lines.append(len(lines))
    data = ending.join(lines)
    if draw(st.booleans()):
        data += ending
    return data, doc_lines, docs, actions


@contextmanager
def fresh_dir() -> Iterator[Path]:
    """A directory per Hypothesis example (``tmp_path`` is shared by all examples)."""
    with tempfile.TemporaryDirectory(prefix="esdash-corpus-test-") as name:
        yield Path(name)


@PROPERTY
@given(corpora(), st.integers(1, 12), st.integers(1, 7))
def test_slices_cover_every_line_exactly_once(example, ranks, batch_size):
    data, doc_lines, docs, actions = example
    with fresh_dir() as tmp:
        check_plan(tmp, data, doc_lines, docs, actions, ranks, batch_size)


def check_plan(tmp, data, doc_lines, docs, actions, ranks, batch_size):
    path = write(tmp, "c.ndjson", data)
    corpus = Corpus(path, includes_action_and_meta_data=bool(actions))
    slices = plan_slices(corpus, ranks, tmp / "cache")
    assert len(slices) == ranks
    total_lines = data.count(b"\n") + (not data.endswith(b"\n"))
    assert slices[0].start_byte == 0 and slices[0].first_line == 1
    assert slices[-1].end_byte == len(data)
    for before, after in zip(slices, slices[1:], strict=False):
        assert before.end_byte == after.start_byte
        assert before.first_line + before.lines == after.first_line
    assert sum(s.lines for s in slices) == total_lines
    counts = [s.documents for s in slices]
    assert sum(counts) == len(docs) and max(counts) - min(counts) <= 1
    # Each slice's bytes are whole lines.
    for part in slices:
        chunk = data[part.start_byte : part.end_byte]
        assert part.start_byte == 0 or data[part.start_byte - 1 : part.start_byte] == b"\n"
        assert chunk.count(b"\n") + (1 if chunk and not chunk.endswith(b"\n") else 0) == part.lines
    # Reading every slice gives every document once, in order, with the right line numbers.
    batches = read_all(corpus, slices, batch_size, index="i")
    assert all(0 < b.docs <= batch_size for b in batches)
    pairs = bulk_pairs(batches)
    assert [doc for _, doc in pairs] == docs
    if actions:
        assert [a for a, _ in pairs] == [
            {key: {"_index": "i", **meta} if "_index" not in meta else meta}
            for action in actions
            for key, meta in action.items()
        ]
    firsts = iter(b.first_line for b in batches)
    position = 0
    for batch in batches:
        line = doc_lines[position] - (1 if actions else 0)
        assert next(firsts) == line
        position += batch.docs
    # The cache gives the same plan, for this and other rank counts.
    assert plan_slices(corpus, ranks, tmp / "cache") == slices


DEFECTS = st.sampled_from(
    ["json", "array", "number", "string", "utf8", "huge", "nan", "nul", "truncated", "dangling"]
)


def _defect_line(kind: str, draw_bytes: bytes) -> bytes:
    return {
        "json": b'{"a": 1,, }',
        "array": b"[1, 2, 3]",
        "number": b"42",
        "string": b'"just a string"',
        "utf8": b'{"name": "' + draw_bytes + b'"}',
        "huge": b'{"pad": "' + b"x" * LIMIT + b'"}',
        "nan": b'{"value": Infinity}',
        "nul": b'{"a": "\x00"}',
        "truncated": b'{"a": "unterminated',
    }[kind]


@PROPERTY
@given(
    corpora(),
    DEFECTS,
    st.integers(0, 1000),
    st.sampled_from([b"\xff", b"\xc3(", b"\xe2\x82", b"\x80abc"]),
    st.integers(1, 5),
)
def test_one_defect_is_reported_with_file_and_line(example, kind, where, bad_bytes, ranks):
    data, doc_lines, docs, actions = example
    lines = data.split(b"\n")
    if kind == "dangling":
        if not actions:
            return
        # Drop one document line: its action line (the line before) dangles.
        index = doc_lines[where % len(doc_lines)] - 1
        del lines[index]
        expected = index  # 1-based number of the action line
    else:
        index = doc_lines[where % len(doc_lines)] - 1
        if actions and where % 2:
            index -= 1  # hit the action line instead of the document
        lines[index] = _defect_line(kind, bad_bytes) + (
            b"\r" if lines[index].endswith(b"\r") else b""
        )
        expected = index + 1
    with fresh_dir() as tmp:
        check_defect(tmp, b"\n".join(lines), bool(actions), kind, expected, ranks)


def check_defect(tmp, broken, paired, kind, expected, ranks):
    path = write(tmp, "broken.ndjson", broken)
    corpus = Corpus(path, includes_action_and_meta_data=paired)
    for attempt in (
        lambda: check_corpus(corpus, 0, LIMIT),
        lambda: read_all(
            corpus, plan_slices(corpus, ranks, tmp / "cache", LIMIT), 3, max_line_bytes=LIMIT
        ),
    ):
        with pytest.raises(BadInput) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"corpus {path}"), message
        if kind == "nul" and expected == 1:
            assert "line 1" in message  # reported as a UTF-16 file
        else:
            assert f"line {expected}:" in message, (kind, expected, message)


@settings(max_examples=200, deadline=2000)
@given(st.binary(max_size=400), st.integers(1, 4))
def test_arbitrary_bytes_never_raise_anything_but_bad_input(data, ranks):
    with fresh_dir() as tmp:
        for declared in (False, True):
            read_anything(tmp, data, declared, ranks)


def read_anything(tmp: Path, data: bytes, declared: bool, ranks: int) -> None:
    path = write(tmp, "any.ndjson", data)
    corpus = Corpus(path, includes_action_and_meta_data=declared)
    try:
        check_corpus(corpus, 0, LIMIT)
    except BadInput as exc:
        assert str(exc).startswith(f"corpus {path}")
    try:
        read_all(corpus, plan_slices(corpus, ranks, tmp / "c", LIMIT), 2, max_line_bytes=LIMIT)
    except BadInput as exc:
        assert str(exc).startswith(f"corpus {path}")


@settings(max_examples=100, deadline=2000)
@given(st.lists(st.text(max_size=30), max_size=8), st.integers(1, 3))
def test_arbitrary_text_lines_never_raise_anything_but_bad_input(lines, ranks):
    assume(lines)
    with fresh_dir() as tmp:
        path = write(tmp, "t.ndjson", "\n".join(lines).encode())
        try:
            corpus = Corpus(path)
            read_all(corpus, plan_slices(corpus, ranks, tmp / "c", LIMIT), 2, max_line_bytes=LIMIT)
        except BadInput as exc:
            assert str(exc).startswith(f"corpus {path}")
            assert "line" in str(exc) or "empty" in str(exc) or "no documents" in str(exc)


def test_a_document_count_that_does_not_match_is_refused(tmp_path):
    path = write(tmp_path, "c.ndjson", b'{"a":1}\n{"a":2}\n')
    assert plan_slices(Corpus(path, documents=2), 2)[0].documents == 1
    with pytest.raises(BadInput, match=r"holds 2 documents, but the track announced 3; delete"):
        plan_slices(Corpus(path, documents=3), 2)
