"""The ABE leakage report: the attacks on real ciphertexts, the report's shape and secrecy.

Real codecs with a key file, no cluster: the ciphertexts are the ones ingest writes, and
their lengths are measured on them (AES-SIV is not padded: length is a leak of its own).
"""

from __future__ import annotations

import json
import os
import random
import string
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from esdash_plugins.encryption.abe import AbeMode, esdash_leakage
from esdash_plugins.encryption.abe import attacks as atk
from esdash_plugins.encryption.abe.codec import AbeCodec, plan_fields
from esdash_plugins.encryption.abe.leakage import (
    MAJORITY,
    REFERENCES,
    SINGLE_KEY,
    THREAT_MODEL,
    analyse,
    build_column,
    column,
    read_documents,
)
from esdash_plugins.tracks.mri import MriTrack

from esdash.plugin.manager import load_plugins
from esdash.plugin_api import BadInput, Corpus, FieldSpec
from esdash.rundir.records import Leakage

FIELD_KEYS = {
    "field",
    "type",
    "scheme",
    "learns",
    "records",
    "distinct",
    "length_classes",
    "domain",
    "attacks",
    "baseline",
    "verdict",
}
ATTACK_KEYS = {"name", "applicable", "exact", "within_1pct", "note"}
OPE_ATTACKS = ["frequency", "sorting", "cumulative", "window", "length"]
SIV_ATTACKS = ["frequency", "length", "length+frequency"]


@pytest.fixture(scope="module")
def key_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "abe.key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return path


def small_codec(key_path: Path, specs: list[FieldSpec], **kw: Any) -> AbeCodec:
    from esdash_plugins.encryption.abe.keys import key_source

    return AbeCodec(plan_fields(specs), key_source({"key_file": key_path}, None), **kw)


def field(report: dict[str, Any], path: str) -> dict[str, Any]:
    return next(f for f in report["fields"] if f["field"] == path)


def attack(entry: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in entry["attacks"] if a["name"] == name)


def marker(rng: random.Random) -> str:
    """A value no report could contain by chance unless it copied it."""
    return "MARKER" + "".join(rng.choices(string.ascii_uppercase, k=24))


# ---------------------------------------------------------------------------- attacks


def test_attacks_on_plain_arrays() -> None:
    ciphertexts = np.array([50, 50, 50, 70, 90, 90], dtype=np.int64)  # plaintexts 0 0 0 1 2 2
    truth = np.array([0, 0, 0, 1, 2, 2], dtype=np.int64)
    assert list(atk.sorting_attack(ciphertexts, (0, 2))) == list(truth)
    with pytest.raises(atk.NotApplicable, match="not dense: 3 distinct values in a domain of 4"):
        atk.sorting_attack(ciphertexts, (0, 3))
    auxiliary = np.array([0, 0, 0, 0, 1, 2, 2, 2], dtype=np.int64)
    assert list(atk.frequency_attack(ciphertexts, auxiliary)) == list(truth)
    assert list(atk.cumulative_attack(ciphertexts, auxiliary)) == list(truth)
    # fewer auxiliary values than ciphertexts: the rest are not guessed
    guesses = atk.frequency_attack(ciphertexts, np.array([7, 7], dtype=np.int64))
    assert list(guesses) == [7, 7, 7, -1, -1, -1]
    assert atk.recovery(guesses, truth, 100.0) == (0.0, 0.5)
    assert atk.window_bound(10**6) == (
        1000,
        pytest.approx(9.97, abs=0.01),
        pytest.approx(19.93, abs=0.01),
    )


def test_length_attacks_and_the_majority_guess_on_plain_arrays() -> None:
    # plaintexts 0 1 2 3 with ciphertext lengths 10 10 12 14; 0 is the most frequent
    truth = np.array([0, 0, 0, 1, 2, 2, 3], dtype=np.int64)
    length_of = {0: 10, 1: 10, 2: 12, 3: 14}
    lengths = np.array([length_of[v] for v in truth.tolist()], dtype=np.int64)
    ciphertexts = np.array([5, 5, 5, 9, 7, 7, 1], dtype=np.int64)  # any labels: equality only
    auxiliary = np.array([0, 0, 1, 1, 1, 2, 3], dtype=np.int64)  # 1 most frequent of length 10
    aux_lengths = np.array([length_of[v] for v in auxiliary.tolist()], dtype=np.int64)
    # length alone: each class guessed as its most frequent auxiliary value
    assert list(atk.length_attack(lengths, auxiliary, aux_lengths)) == [1, 1, 1, 1, 2, 2, 3]
    assert atk.recovery(atk.length_attack(lengths, auxiliary, aux_lengths), truth)[0] == 4 / 7
    # inside the class of length 10 the two ciphertexts are ranked by frequency
    both = atk.length_frequency_attack(ciphertexts, lengths, auxiliary, aux_lengths)
    assert list(both) == [1, 1, 1, 0, 2, 2, 3]  # the auxiliary sample's frequencies mislead
    # a length no auxiliary value has is not guessed
    lone = atk.length_attack(np.array([10, 99]), auxiliary, aux_lengths)
    assert list(lone) == [1, atk.NO_GUESS]
    guess = atk.majority_guess(truth)
    assert list(guess) == [0] * 7 and atk.recovery(guess, truth)[0] == 3 / 7
    assert len(atk.majority_guess(np.empty(0, dtype=np.int64))) == 0


def test_window_guess_is_exact_integer_arithmetic() -> None:
    """c * M overflows 64 bits for date-times; the guess stays inside the domain."""
    top = 30_000_000 * 1_000_000
    out = (0, 2**53 - 1)
    ciphertexts = np.array([0, 2**52, 2**53 - 1], dtype=np.int64)
    guesses = atk.window_attack(ciphertexts, top + 1, out)
    assert list(guesses) == [0, (top + 1) // 2, top]


# -------------------------------------------------------------------- on real codecs


def test_dense_ope_field_is_recovered_completely_by_sorting(key_path: Path) -> None:
    codec = small_codec(key_path, [FieldSpec("level", "integer", 0, 100, 1)])
    rng = random.Random(1)
    docs = [{"level": i} for i in range(101)] + [
        {"level": rng.randint(0, 100)} for _ in range(2000)
    ]
    report = analyse(codec, docs, None, source="test", auxiliary_label="uniform")
    entry = field(report, "level")
    sorting = attack(entry, "sorting")
    assert entry["domain"] == entry["distinct"] == 101
    assert sorting["applicable"] and sorting["exact"] == 1.0 == sorting["within_1pct"]
    assert "dense over the declared domain of 101 values" in sorting["note"]
    assert entry["verdict"].startswith(
        "level: dense domain of 101 values, 100 % of records recovered by sorting; the majority "
        "guess alone gets "
    )
    assert [a["name"] for a in entry["attacks"]] == OPE_ATTACKS
    # the baseline: the most frequent level guessed for every record, exactly and within 1 %
    levels = [d["level"] for d in docs]
    mode, top = min(Counter(levels).items(), key=lambda item: (-item[1], item[0]))
    guess = entry["baseline"]
    assert guess["name"] == MAJORITY and guess["applicable"]
    assert guess["exact"] == top / len(levels)
    assert guess["within_1pct"] == sum(abs(v - mode) <= 1.01 for v in levels) / len(levels)
    # an OPE number's length is no attack of its own: the number itself is visible
    length = attack(entry, "length")
    assert not length["applicable"] and length["exact"] is None
    assert length["note"].startswith("not an attack of its own: the stored number is visible")
    assert entry["length_classes"] == len({len(str(c)) for c in build_column(
        codec.plans["level"], levels, None
    ).ciphertexts.tolist()})  # fmt: skip


def test_two_value_deterministic_field_with_unequal_frequencies(key_path: Path) -> None:
    codec = small_codec(key_path, [FieldSpec("flag", "keyword"), FieldSpec("ok", "boolean")])
    rng = random.Random(2)

    def docs(n: int) -> list[dict[str, Any]]:
        return [
            {"flag": "rare" if rng.random() < 0.2 else "common", "ok": rng.random() < 0.7}
            for _ in range(n)
        ]

    report = analyse(codec, docs(3000), docs(3000), source="test", auxiliary_label="sample")
    for path in ("flag", "ok"):
        entry = field(report, path)
        assert entry["scheme"] == "deterministic (AES-SIV)"
        assert entry["learns"] == "equality, length"
        assert entry["distinct"] == 2 and entry["domain"] is None
        assert [a["name"] for a in entry["attacks"]] == SIV_ATTACKS
        frequency = attack(entry, "frequency")
        assert frequency["exact"] == 1.0 and frequency["within_1pct"] is None
        # "rare"/"common", "true"/"false": two lengths, so length alone tells them apart
        assert entry["length_classes"] == 2 and attack(entry, "length")["exact"] == 1.0
        assert "100 % of records recovered by frequency analysis" in entry["verdict"]
        assert 0.6 < entry["baseline"]["exact"] < 0.9  # the majority guess: about 80 % / 70 %


def test_length_recovers_what_frequencies_hide_and_the_baseline_says_so(key_path: Path) -> None:
    """Two values of about equal frequency whose majority flips between the sample and the
    auxiliary data: frequency analysis gets 0 %, which the majority guess (about half) shows
    to be no safety; where the two values differ in length, length alone recovers all."""
    specs = [FieldSpec("short_long", "keyword"), FieldSpec("same_length", "keyword")]
    codec = small_codec(key_path, specs)

    def docs(first: int, second: int, seed: int) -> list[dict[str, Any]]:
        pairs = [("ab", "xy")] * first + [("abcdefgh", "yx")] * second
        random.Random(seed).shuffle(pairs)
        return [{"short_long": a, "same_length": b} for a, b in pairs]

    sample, auxiliary = docs(2050, 1950, 7), docs(1950, 2050, 8)
    report = analyse(codec, sample, auxiliary, source="test", auxiliary_label="sample")
    for path in ("short_long", "same_length"):
        entry = field(report, path)
        assert attack(entry, "frequency")["exact"] == 0.0  # the majorities swap places
        assert entry["baseline"]["exact"] == 2050 / 4000
        assert entry["baseline"]["note"].startswith("every record guessed as the most frequent")
    lengths = field(report, "short_long")
    assert lengths["length_classes"] == 2
    assert attack(lengths, "length")["exact"] == 1.0
    assert attack(lengths, "length+frequency")["exact"] == 1.0
    assert lengths["verdict"] == (
        "short_long: 2 distinct values in 2 length classes, 100 % of records recovered by "
        "length classes; the majority guess alone gets 51.2 %"
    )
    same = field(report, "same_length")
    assert same["length_classes"] == 1
    # one length class: length alone is the auxiliary data's majority, which is the minority
    assert attack(same, "length")["exact"] == 1950 / 4000
    assert attack(same, "length+frequency")["exact"] == 0.0
    assert same["verdict"] == (
        "same_length: 2 distinct values in 1 length class, 48.8 % of records recovered by "
        "length classes; the majority guess alone gets 51.2 %"
    )


def test_high_entropy_text_is_not_recovered(key_path: Path) -> None:
    codec = small_codec(key_path, [FieldSpec("body", "text")])
    rng = random.Random(3)

    def docs(n: int) -> list[dict[str, Any]]:
        return [{"body": "".join(rng.choices(string.ascii_letters, k=30))} for _ in range(n)]

    report = analyse(codec, docs(5000), docs(5000), source="test", auxiliary_label="sample")
    entry = field(report, "body")
    assert entry["length_classes"] == 1  # 30 letters each: one token length
    for found in entry["attacks"]:
        assert found["applicable"] and found["exact"] < 0.02
    assert entry["baseline"]["exact"] < 0.02


def test_report_never_contains_a_plaintext_value(key_path: Path) -> None:
    specs = [
        FieldSpec("name", "keyword"),
        FieldSpec("notes", "text"),
        FieldSpec("patient.city", "keyword"),
        FieldSpec("tags", "keyword"),
        FieldSpec("age", "integer", 0, 150, 1),
        FieldSpec("weight", "float", 0.0, 300.0, 0.01),
        FieldSpec("when", "date"),
    ]
    codec = small_codec(key_path, specs)
    rng = random.Random(4)
    cities = [marker(rng) for _ in range(3)]
    names = [marker(rng) for _ in range(5)]

    def docs(n: int) -> list[dict[str, Any]]:
        return [
            {
                "name": rng.choice(names),
                "notes": marker(rng),
                "patient": {"city": rng.choice(cities)},
                "tags": [rng.choice(names), None],
                "age": 37,  # a constant: in no report as a value, only as a count
                "weight": round(rng.uniform(40, 140), 2),
                "when": f"20{rng.randint(10, 24)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
            }
            for _ in range(n)
        ]

    sample = docs(800)
    for auxiliary in (None, docs(800)):
        report = analyse(codec, sample, auxiliary, source="test", auxiliary_label="aux")
        text = json.dumps(report)
        assert "MARKER" not in text
        for doc in sample:
            assert doc["when"] not in text
            weight = str(doc["weight"])
            if len(weight.partition(".")[2]) == 2:  # not "83.4", which a share may read
                assert weight not in text
        assert field(report, "patient.city")["records"] == 800
        assert field(report, "tags")["records"] == 800  # nulls in arrays skipped
        assert field(report, "age")["distinct"] == 1


def test_non_dense_ope_field_reports_sorting_as_not_applicable(key_path: Path) -> None:
    codec = small_codec(key_path, [FieldSpec("score", "integer", 0, 10_000, 1)])
    rng = random.Random(5)
    docs = [{"score": rng.randint(0, 10_000)} for _ in range(2000)]
    entry = field(analyse(codec, docs, None, source="t", auxiliary_label="u"), "score")
    sorting = attack(entry, "sorting")
    assert not sorting["applicable"] and sorting["exact"] is None
    assert sorting["within_1pct"] is None
    assert sorting["note"].startswith(f"not dense: {entry['distinct']:,} distinct values")
    assert "in a domain of 10,001" in sorting["note"]


def test_window_on_a_large_uniform_domain(key_path: Path) -> None:
    """About half the bits leak: within 1 % nearly always, exactly almost never."""
    codec = small_codec(key_path, [FieldSpec("reading", "integer", 0, 4_000_000, 1)])
    rng = random.Random(6)
    docs = [{"reading": rng.randint(0, 4_000_000)} for _ in range(3000)]
    entry = field(analyse(codec, docs, None, source="t", auxiliary_label="u"), "reading")
    window = attack(entry, "window")
    assert window["applicable"]
    assert window["within_1pct"] > 0.95
    assert window["exact"] < 0.05
    assert "sqrt(M) = 2,001 values" in window["note"]
    assert "not run" in attack(entry, "sorting")["note"]  # a domain beyond the limit


def test_columns_follow_nested_objects_dotted_keys_and_arrays(key_path: Path) -> None:
    docs = [
        {"a": {"b": 1}},
        {"a.b": 2},
        {"a": [{"b": 3}, {"b": [4, None]}]},
        {"a": None},
        {},
    ]
    assert column(docs, "a.b") == [1, 2, 3, 4]
    assert column([{"x": [1, None, 2]}, {"x": None}, {"x": {"y": 1}}], "x") == [1, 2]
    codec = small_codec(key_path, [FieldSpec("a.b", "integer", 0, 3, 1)])
    col = build_column(codec.plans["a.b"], column(docs, "a.b"), None)
    assert col.skipped == 1  # 4 is off the range: the cluster would never store it
    plan = codec.plans["a.b"]
    assert list(col.ciphertexts) == [plan.encrypt_value(v) for v in (1, 2, 3)]


def test_corpus_sample_skips_action_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.ndjson"
    lines = []
    for i in range(5):
        lines += [json.dumps({"index": {}}), json.dumps({"n": i})]
    path.write_text("\n".join(lines) + "\n")
    docs = read_documents(Corpus(path, includes_action_and_meta_data=True), 3)
    assert docs == [{"n": 0}, {"n": 1}, {"n": 2}]
    plain = tmp_path / "p.ndjson"
    plain.write_text("\n".join(json.dumps({"n": i}) for i in range(5)) + "\n")
    assert len(read_documents(Corpus(plain), 10)) == 5


def test_a_broken_corpus_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.ndjson"
    path.write_bytes(b'\xef\xbb\xbf{"n": 0}\n{"n": 1\n')  # a BOM is skipped; line 2 broken
    with pytest.raises(BadInput, match=rf"^corpus {path}, line 2: not valid JSON"):
        read_documents(Corpus(path), 10)


# ------------------------------------------------------------------------ MRI track


def test_report_for_the_mri_track(key_path: Path, tmp_path: Path) -> None:
    track = MriTrack()
    options = {"documents": 2000, "seed": 42, "shards": 3, "replicas": 0}
    session = SimpleNamespace(track=SimpleNamespace(name="mri", options=options))
    corpus = track.corpus(options, tmp_path / "corpus")
    codec = AbeMode().client_codec({"key_file": key_path}, track, track_options=options)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    hook = load_plugins().manager.hook.esdash_leakage  # as esdash calls it
    report = hook(session=session, run_dir=run_dir, track=track, corpus=corpus, codec=codec)
    assert report is not None
    assert list(run_dir.iterdir()) == []  # the scratch sample is gone
    assert report["version"] == 1 and report["references"] == REFERENCES
    assert report["documents"] == 2000
    assert report["source"] == "corpus mri (seed 42), first 2,000 documents"
    assert "seed 43" in report["auxiliary"]
    assert report["key_mode"] == "per-field"
    assert report["threat_model"] == THREAT_MODEL
    assert "the length of every AES-SIV value" in THREAT_MODEL
    assert report["names"]["declared"] == len(codec.plans) == len(report["fields"])
    # the schema's names are PRF tokens of one length, measured on the tokens themselves
    assert report["names"]["length_classes"] == 1
    assert (
        "not their length: every name is stored as a 12-character token"
        in report["names"]["learns"]
    )
    for entry in report["fields"]:
        assert set(entry) == FIELD_KEYS
        ope = entry["scheme"] == "OPE"
        assert [a["name"] for a in entry["attacks"]] == (OPE_ATTACKS if ope else SIV_ATTACKS)
        assert entry["learns"] == ("equality, order, approximate value" if ope else (
            "equality, length"
        ))  # fmt: skip
        assert (entry["domain"] is not None) == ope
        assert entry["verdict"].startswith(entry["field"] + ": ")
        assert "; the majority guess alone gets " in entry["verdict"]
        assert 1 <= entry["length_classes"] <= entry["distinct"]
        for found in [*entry["attacks"], entry["baseline"]]:
            assert set(found) == ATTACK_KEYS
            for share in (found["exact"], found["within_1pct"]):
                assert share is None or 0.0 <= share <= 1.0
        assert entry["baseline"]["name"] == MAJORITY and entry["baseline"]["applicable"]
        assert (entry["baseline"]["within_1pct"] is not None) == ope
    # SequenceType: three values, three token lengths: length alone recovers every record,
    # where frequency analysis gets nothing and the majority guess about a third
    sequence = field(report, "SequenceType")
    assert sequence["distinct"] == sequence["length_classes"] == 3
    assert attack(sequence, "length")["exact"] == 1.0
    assert attack(sequence, "frequency")["exact"] < 0.5
    assert 0.3 < sequence["baseline"]["exact"] < 0.4
    assert sequence["verdict"].startswith(
        "SequenceType: 3 distinct values in 3 length classes, 100 % of records recovered by "
        "length classes; the majority guess alone gets "
    )
    # identifiers of one length: length tells nothing
    uid = field(report, "FrameOfReferenceUID")
    assert uid["length_classes"] == 1 and attack(uid, "length")["exact"] < 0.01
    # PatientAge: ages 6 to 100 all occur, the range the auxiliary sample shows
    age = field(report, "PatientAge")
    assert age["distinct"] == 95 and age["domain"] == 151
    assert attack(age, "sorting")["exact"] == 1.0
    assert age["verdict"].startswith("PatientAge: dense domain of 95 values, 100 %")
    assert attack(field(report, "ismrmrdHeader"), "frequency")["exact"] < 0.02
    # the report is what leakage.json holds
    import msgspec

    msgspec.convert(report, Leakage)
    # another codec: not this plugin's report
    assert esdash_leakage(session, run_dir, track, corpus, object()) is None
    assert hook(session=session, run_dir=run_dir, track=track, corpus=corpus, codec=None) is None


def test_same_ciphertexts_as_ingest(key_path: Path) -> None:
    """The analysed ciphertexts are those the cluster stores (through the ingest path)."""
    track = MriTrack()
    codec = AbeMode().client_codec({"key_file": key_path}, track, track_options={})
    from esdash_plugins.tracks.mri import generate

    docs = list(generate(50, 9))
    stored = codec.encode_documents([dict(d) for d in docs])
    for path in ("PatientAge", "FlipAngle", "StudyDate", "PatientSex", "cflHeader"):
        plan = codec.plans[path]
        col = build_column(plan, column(docs, path), None)
        name = codec.names.path(path)
        if plan.kind == "ope":
            assert list(col.ciphertexts) == [d[name] for d in stored]
        else:  # tokens numbered in their sort order
            tokens = sorted({d[name] for d in stored})
            assert [tokens[i] for i in col.ciphertexts] == [d[name] for d in stored]
        # lengths are those of the stored JSON values, as the ingest path writes them
        assert list(col.lengths) == [len(json.dumps(d[name])) for d in stored]


def test_auxiliary_lengths_need_no_key(key_path: Path) -> None:
    """The attacker computes its auxiliary values' lengths under a key of its own: they are
    the lengths the field's own key gives (AES-SIV lengths do not depend on the key)."""
    codec = small_codec(key_path, [FieldSpec("word", "keyword"), FieldSpec("on", "boolean")])
    rng = random.Random(12)
    values = ["", "a", "été", "x" * 40, "two words", *("".join(rng.choices("abc", k=n)) for n in
              range(1, 30))]  # fmt: skip
    for path, sample in (("word", values), ("on", [True, False, True])):
        plan = codec.plans[path]
        col = build_column(plan, sample, sample)
        own = [len(json.dumps(plan.encrypt_value(v))) for v in sample]
        assert list(col.lengths) == own
        by_code = dict(zip(col.truth.tolist(), own, strict=True))
        assert list(col.aux_lengths) == [by_code[c] for c in col.auxiliary.tolist()]
        assert len(set(own)) == len({len(plan.text(v).encode()) for v in sample})


def test_key_mode_single_adds_its_cross_field_equality_to_the_threat_model(
    key_path: Path,
) -> None:
    """Under key_mode single two fields whose domains have one size give equal positions
    equal ciphertexts: the threat model says so; per-field keys do not."""
    specs = [FieldSpec("a", "integer", 0, 100, 1), FieldSpec("b", "integer", 100, 200, 1)]
    docs = [{"a": i, "b": 100 + i} for i in range(50)]
    single = small_codec(key_path, specs, key_mode="single")
    assert single.plans["a"].encrypt_value(5) == single.plans["b"].encrypt_value(105)
    report = analyse(single, docs, None, source="t", auxiliary_label="u")
    assert report["threat_model"] == THREAT_MODEL + SINGLE_KEY
    per_field = small_codec(key_path, specs)
    assert per_field.plans["a"].encrypt_value(5) != per_field.plans["b"].encrypt_value(105)
    report = analyse(per_field, docs, None, source="t", auxiliary_label="u")
    assert report["threat_model"] == THREAT_MODEL
