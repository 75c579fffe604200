"""The native ABE fast path writes exactly what the Python encoder writes, or leaves the line.

``esdash_abe_native`` (native/abe) encodes raw corpus lines; every line it returns must be
byte-identical to :meth:`AbeCodec.encode_lines` of the parsed document, and every line it
cannot encode faithfully (unknown keys, wrong types, values off the grid, zoned date-times,
duplicates, JSON Python reads differently) must come back as ``None`` so that Python
encodes or rejects it.  The oracle is a codec with the fast path switched off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.encryption.abe import keys as keylib
from esdash_plugins.encryption.abe.codec import AbeCodec, EncodeError, plan_fields
from esdash_plugins.encryption.abe.native_lines import native_module
from esdash_plugins.tracks.mri import MriTrack, generate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.prereqs import unavailable

from esdash.bench.slices import read_slice
from esdash.errors import BadInput
from esdash.plugin.corpus_slices import Slice
from esdash.plugin_api import Corpus, FieldSpec


@pytest.fixture(scope="module", autouse=True)
def native_built() -> None:
    if native_module() is None:
        unavailable(
            "the esdash_abe_native module is not built: run scripts/provision (needs cargo) "
            "or `.venv/bin/pip install ./native/abe`"
        )


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> keylib.KeySource:
    path = tmp_path_factory.mktemp("native-key") / "abe.key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return keylib.KeySource("key_file", str(path))


def mri_codecs(key: keylib.KeySource, key_mode: str) -> tuple[AbeCodec, AbeCodec]:
    """(with the fast path, without it) for the MRI track."""
    track = MriTrack()
    fields = plan_fields(track.field_specs({}), track.index_body({}))
    fast = AbeCodec(fields, key, key_mode=key_mode)
    slow = AbeCodec(fields, key, key_mode=key_mode, native=False)
    return fast, slow


@pytest.mark.parametrize("key_mode", ["per-field", "single"])
def test_mri_corpus_is_byte_identical(key: keylib.KeySource, key_mode: str) -> None:
    fast, slow = mri_codecs(key, key_mode)
    docs = list(generate(6000, 5))
    lines = [json.dumps(doc).encode() for doc in docs]
    for start in range(0, len(docs), 1000):  # batches, as the ingest ranks send them
        native = fast.encode_raw_lines(lines[start : start + 1000])
        assert None not in native, "the MRI corpus is entirely within the fast path"
        assert native == slow.encode_lines(docs[start : start + 1000])


def test_without_the_fast_path_every_line_is_left_to_python(key: keylib.KeySource) -> None:
    _, slow = mri_codecs(key, "per-field")
    assert slow.encode_raw_lines([b'{"PatientAge": 3}', b"{}"]) == [None, None]


# ------------------------------------------------------------------- generated documents

SPECS = [
    FieldSpec("name", "keyword"),
    FieldSpec("notes", "text"),
    FieldSpec("count", "integer", -50, 1000, 1),
    FieldSpec("weight", "float", 0.5, 300, 0.01),
    FieldSpec("coarse", "double", -10, 10, 2.5),
    FieldSpec("day", "date"),
    FieldSpec("seen", "date"),
    FieldSpec("flag", "boolean"),
    FieldSpec("inner.depth", "integer", 0, 100, 1),
]
MAPPING = {
    "mappings": {
        "properties": {
            "day": {"type": "date", "format": "yyyy-MM-dd"},
            "seen": {"type": "date", "format": "yyyy-MM-dd HH:mm:ss"},
        }
    }
}

texts = st.text(max_size=12)
numbers = st.one_of(
    st.integers(-100, 1100),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(0, 300, places=2).map(float),
    st.sampled_from([0.0, -0.0, 0.5, 0.3, 0.1 + 0.2, 1e-7, 2.5, -7.5, 12.5, 1e16]),
)
days = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.sampled_from(["2020-02-30", "2019-02-29", "2000-02-29", "0000-01-01", "2020-1-01"]),
    texts,
)
anything = st.one_of(st.none(), st.booleans(), numbers, texts, st.lists(texts, max_size=3))
VALUES: dict[str, Any] = {
    "name": st.one_of(texts, st.lists(st.one_of(texts, st.none()), max_size=3), anything),
    "notes": st.one_of(texts, anything),
    "count": numbers,
    "weight": st.one_of(numbers, anything),
    "coarse": numbers,
    "day": st.one_of(days, anything),
    "seen": st.one_of(
        st.datetimes().map(lambda t: t.isoformat(sep=" ", timespec="seconds")),
        st.datetimes().map(lambda t: t.isoformat(sep="T", timespec="seconds")),
        st.sampled_from(
            [
                "2021-03-04 05:06:07",
                "2021-03-04",
                "2021-03-04 24:00:00",
                "2021-03-04 23:60:00",
                "2021-03-04 23:59:60",
                "2021-02-29 10:00:00",
                "2021-03-04 05:06:07Z",
                "2021-03-04T05:06:07+02:00",
                "2021-03-04 05:06:07.000",
                "2021-03-04 05:06:07.5",
                "now",
            ]
        ),
        st.integers(0, 2**41).map(lambda ms: ms * 1000),
        anything,
    ),
    "flag": st.one_of(st.booleans(), anything),
    "inner": st.fixed_dictionaries({"depth": st.integers(0, 100)}),
    "unknown": anything,
}
documents = st.lists(st.sampled_from(sorted(VALUES)), max_size=8, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: VALUES[k] for k in keys})
)


@pytest.fixture(scope="module")
def small(key: keylib.KeySource) -> tuple[AbeCodec, AbeCodec]:
    fields = plan_fields(SPECS, MAPPING)
    return AbeCodec(fields, key), AbeCodec(fields, key, native=False)


def python_line(slow: AbeCodec, raw: bytes) -> bytes | None:
    """What the Python path makes of ``raw``; None where it refuses the document."""
    try:
        return slow.encode_lines([json.loads(raw)])[0]
    except (EncodeError, UnicodeEncodeError):
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(documents, min_size=1, max_size=6))
def test_generated_documents_match_or_are_left(small, batch: list[dict[str, Any]]) -> None:
    fast, slow = small
    lines = [json.dumps(doc).encode() for doc in batch]
    for raw, native in zip(lines, fast.encode_raw_lines(lines), strict=True):
        if native is not None:
            assert native == python_line(slow, raw), raw


@pytest.mark.parametrize(
    "raw",
    [
        b'{"weight": 1.50, "count": 1e2}',  # texts Python reads as the same numbers
        b'{"weight": 0.30000000000000004}',  # off the 0.01 grid
        b'{"count": 12345678901234567890123}',  # beyond 64 bits
        b'{"name": "caf\\u00e9 \\"q\\" \\n", "notes": "\\ud83d\\ude00"}',  # escapes
        b'{"count": 1, "count": 2}',  # duplicate keys: Python keeps the last at the first place
        b'{"count": 1, "name": "a", "count": 2}',
        b'{"name": "\\ud800"}',  # a lone surrogate
        b'{"flag": true}',
        b'{"day": "2020-02-29", "seen": "2021-03-04 05:06:07"}',
        b'{"inner": {"depth": 3}}',
        b'{"inner.depth": 3}',
        b'{"count": -0}',
        b'{"weight": -0.0}',
        b'{"count": 3.0, "coarse": -2.5e0}',
        b"[1, 2]",
        b'{"count": 1} trailing',
        b'{"count": NaN}',
        b"{}",
    ],
)
def test_edge_lines_match_or_are_left(small, raw: bytes) -> None:
    fast, slow = small
    (native,) = fast.encode_raw_lines([raw])
    if native is not None:
        assert native == python_line(slow, raw)


def test_simple_lines_take_the_fast_path(small) -> None:
    fast, slow = small
    raw = (
        b'{"name": ["a", "b"], "count": 7, "weight": 1.25, "day": "2020-02-29", "notes": null, '
        b'"seen": "2021-03-04 05:06:07"}'
    )
    (native,) = fast.encode_raw_lines([raw])
    assert native is not None and native == python_line(slow, raw)


# --------------------------------------------------------------------------- the reader


def test_reader_sends_the_same_bulk_bodies_and_names_a_bad_line(small, tmp_path: Path) -> None:
    fast, slow = small
    docs = [
        {"count": i % 900, "name": f"n{i % 7}", "weight": round(i % 500 / 100 + 0.5, 2)}
        for i in range(25)
    ]
    lines = [json.dumps(doc) for doc in docs]
    lines[13] = json.dumps({"count": 5, "unknown": 1})  # left by the fast path, refused
    path = tmp_path / "docs.json"
    path.write_text("\n".join(lines[:13] + [""] + lines[14:]) + "\n")  # a blank line too
    corpus = Corpus(path, 24, False)
    part = Slice(0, path.stat().st_size, 1, 25, 24)
    via_fast = list(
        read_slice(
            corpus, part, 10, "i", encode=fast.encode_lines, encode_raw=fast.encode_raw_lines
        )
    )
    via_python = list(read_slice(corpus, part, 10, "i", encode=slow.encode_lines))
    assert [(b.body, b.docs, b.first_line) for b in via_fast] == [
        (b.body, b.docs, b.first_line) for b in via_python
    ]
    bad = tmp_path / "bad.json"
    broken = [*lines[:5], '{"count": 3', *lines[6:]]
    bad.write_text("\n".join(broken) + "\n")
    part = Slice(0, bad.stat().st_size, 1, 25, 25)
    with pytest.raises(BadInput, match=r"bad\.json.*line 6.*invalid JSON"):
        list(
            read_slice(
                Corpus(bad, 25, False),
                part,
                10,
                "i",
                encode=fast.encode_lines,
                encode_raw=fast.encode_raw_lines,
            )
        )
    refused = tmp_path / "refused.json"
    refused.write_text("\n".join([*lines[:13], lines[13]]) + "\n")
    part = Slice(0, refused.stat().st_size, 1, 14, 14)
    with pytest.raises(EncodeError, match="unknown"):
        list(
            read_slice(
                Corpus(refused, 14, False),
                part,
                10,
                "i",
                encode=fast.encode_lines,
                encode_raw=fast.encode_raw_lines,
            )
        )
