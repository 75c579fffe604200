"""The ABE mode in process: keys, names, values, documents, query rewriting, responses, plan.

pyope 0.2.2 is the oracle for ciphertexts; the plaintext evaluator of the track tests
(``tests/tracks/query_eval.py``) is the oracle for which documents a query selects.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.encryption.abe import AbeMode
from esdash_plugins.encryption.abe import keys as keylib
from esdash_plugins.encryption.abe.codec import AbeCodec, EncodeError, plan_fields
from esdash_plugins.encryption.abe.names import NameCipher, NameCollision
from esdash_plugins.encryption.abe.values import (
    DayGrid,
    ForeignCiphertext,
    NumberGrid,
    OffGrid,
    SecondGrid,
    parse_instant,
)
from esdash_plugins.tracks.mri import QUERIES, MriTrack, generate
from esdash_plugins.tracks.nyc_taxis import NycTaxisTrack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyope.ope import OPE, ValueRange
from support.abe import older_format

from esdash.errors import BadInput
from esdash.plugin_api import FieldSpec, QueryNotSupported
from esdash.rundir import files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracks"))
from query_eval import matches  # noqa: E402

TEXT_FIELDS = {"ismrmrdHeader", "cflHeader", "StudyTimeText", "SystemVendor"}
ES_NAME = re.compile(r"^[fk][A-Za-z0-9_-]+$")
#: Output ranges b = max(31, input bits + 16) of issue 16, written out for the oracle: 31
#: bits for domains of up to 15 bits, the day grid's 25 bits + 16, 22 bits + 16.
OUT_31 = (0, 2**31 - 1)
OUT_DAY = (0, 2**41 - 1)
OUT_22 = (0, 2**38 - 1)


# --------------------------------------------------------------------------- fixtures


def key_file(directory: Path, content: bytes, mode: int = 0o600) -> Path:
    path = directory / "abe.key"
    path.write_bytes(content)
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def keydir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def raw_key(keydir: Path) -> Path:
    return key_file(keydir, os.urandom(32))


@pytest.fixture(scope="module")
def codec(raw_key: Path) -> AbeCodec:
    return AbeMode().client_codec({"key_file": raw_key}, MriTrack(), track_options={})


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return list(generate(2000, 11))


@pytest.fixture(scope="module")
def encrypted(codec: AbeCodec, corpus) -> list[dict[str, Any]]:
    # through JSON, as the cluster stores and returns it
    return [json.loads(line) for line in codec.encode_lines([dict(d) for d in corpus])]


def small_codec(
    keydir: Path, specs: list[FieldSpec], mapping: dict | None = None, **kw
) -> AbeCodec:
    path = keydir / "small.key"
    if not path.exists():
        key_file_path = key_file(keydir, os.urandom(48))
        key_file_path.rename(path)
    body = {"mappings": {"properties": mapping or {}}}
    return AbeCodec(plan_fields(specs, body), keylib.KeySource("key_file", str(path)), **kw)


# ------------------------------------------------------------------------------- keys


def test_key_file_must_be_private(keydir: Path) -> None:
    loose = keydir / "loose.key"
    loose.write_bytes(os.urandom(32))
    loose.chmod(0o640)
    with pytest.raises(BadInput, match=r"mode 0640.*chmod 600"):
        keylib.read_key_file(loose)
    loose.chmod(0o604)
    with pytest.raises(BadInput, match="group or others"):
        keylib.read_key_file(loose)
    loose.chmod(0o600)
    assert len(keylib.read_key_file(loose)) == 32


def test_missing_and_short_key_files_say_how_to_fix(keydir: Path) -> None:
    with pytest.raises(BadInput, match=r"does not exist; create it: \(umask 077; head -c 32"):
        keylib.read_key_file(keydir / "absent.key")
    short = keydir / "short.key"
    short.write_bytes(b"x" * 16)
    short.chmod(0o600)
    with pytest.raises(BadInput, match="at least 32"):
        keylib.read_key_file(short)


def test_pyope_base64_key_text_is_used_verbatim(keydir: Path) -> None:
    text = OPE.generate_key()
    path = keydir / "pyope.key"
    path.write_bytes(text + b"\n")
    path.chmod(0o600)
    assert keylib.read_key_file(path) == text


def test_exactly_one_key_source(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="exactly one of key_file"):
        keylib.key_source({}, tmp_path)
    with pytest.raises(BadInput, match="found: key_file, passphrase_command"):
        keylib.key_source({"key_file": tmp_path / "k", "passphrase_command": "echo x"}, tmp_path)


def cheap_kdf(root: Path) -> None:
    """A salt file with a low Argon2id cost, so tests stay fast (the default takes ~0.6 s)."""
    (root / keylib.KDF_FILE).write_text(
        json.dumps(
            {"kdf": "argon2id", "salt": "00" * 16, "iterations": 1, "memory_cost": 64, "lanes": 1}
        )
    )


def test_a_salt_file_nested_too_deeply_or_a_fifo_is_refused_naming_it(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"kdf": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BadInput, match=f"^salt file {deep}: nested too deeply"):
        keylib.load_kdf(deep, create=False)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # nobody writes to it: a blocking read would hang
    with pytest.raises(BadInput, match=f"^salt file {fifo}: cannot read it"):
        keylib.load_kdf(fifo, create=True)


def test_passphrase_file_goes_through_argon2id_with_a_salt_in_the_data_root(tmp_path: Path):
    passphrase = tmp_path / "pass"
    passphrase.write_text("correct horse battery staple\n")
    passphrase.chmod(0o600)
    root = tmp_path / "data"
    source = keylib.key_source({"passphrase_file": passphrase}, root)
    kdf = json.loads((root / keylib.KDF_FILE).read_text())
    assert kdf["kdf"] == "argon2id" and kdf["memory_cost"] == 64 * 1024 and len(kdf["salt"]) == 32
    master = keylib.load_master_key(source)
    from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

    expected = Argon2id(
        salt=bytes.fromhex(kdf["salt"]), length=32, iterations=3, lanes=4, memory_cost=65536
    ).derive(b"correct horse battery staple")
    assert master.material == expected
    # the same passphrase and salt give the same key; the salt file is reused, not replaced
    again = keylib.load_master_key(keylib.key_source({"passphrase_file": passphrase}, root))
    assert again.fingerprint() == master.fingerprint()
    assert "correct horse" not in json.dumps(source.to_dict())
    assert repr(master) == "MasterKey(<hidden>)"


def test_passphrase_command_and_its_failures(tmp_path: Path) -> None:
    cheap_kdf(tmp_path)
    good = keylib.key_source({"passphrase_command": "printf 'secret words\\nignored'"}, tmp_path)
    from_command = keylib.load_master_key(good)
    passphrase = tmp_path / "pass"
    passphrase.write_text("secret words")
    passphrase.chmod(0o600)
    from_file = keylib.load_master_key(keylib.key_source({"passphrase_file": passphrase}, tmp_path))
    assert from_command.fingerprint() == from_file.fingerprint()
    failing = keylib.KeySource("passphrase_command", "sh -c 'echo leaked; exit 3'", {"x": 1})
    with pytest.raises(BadInput) as info:
        keylib.load_master_key(failing)
    assert "exited with 3" in str(info.value) and "leaked" not in str(info.value)
    with pytest.raises(BadInput, match="not found"):
        keylib.run_passphrase_command("/nonexistent/pass-tool")


def test_hkdf_subkeys_differ_per_field_and_purpose() -> None:
    master = keylib.MasterKey(os.urandom(32))
    keys = {
        master.derive(purpose, path, 32)
        for purpose in ("ope", "value")
        for path in ("PatientAge", "BrainAge", "a.b")
    }
    assert len(keys) == 6
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(master)


def test_per_field_keys_hide_equal_values_across_fields_single_mode_does_not(keydir: Path):
    specs = [FieldSpec("a", "integer", 0, 100, 1), FieldSpec("b", "integer", 0, 100, 1)]
    per_field = small_codec(keydir, specs)
    doc = per_field.encode_document({"a": 42, "b": 42})
    assert doc[per_field.plans["a"].name] != doc[per_field.plans["b"].name]
    single = small_codec(keydir, specs, key_mode="single")
    doc = single.encode_document({"a": 42, "b": 42})
    assert doc[single.plans["a"].name] == doc[single.plans["b"].name]  # pyope's leak


def test_single_key_mode_reproduces_pyope(keydir: Path) -> None:
    text = OPE.generate_key()
    path = keydir / "single.key"
    path.write_bytes(text)
    path.chmod(0o600)
    codec = AbeMode().client_codec(
        {"key_file": path, "key_mode": "single"}, MriTrack(), track_options={}
    )
    doc = codec.encode_document({"PatientAge": 55, "StudyDate": "2014-07-28", "TE": 0.003})
    age = OPE(text, ValueRange(0, 150), ValueRange(*OUT_31)).encrypt(55)
    day = OPE(text, ValueRange(0, 30_000_000), ValueRange(*OUT_DAY)).encrypt(20140728)
    te = OPE(text, ValueRange(0, 1000), ValueRange(*OUT_31)).encrypt(30)  # 0.003 / 0.0001
    assert doc[codec.plans["PatientAge"].name] == age
    assert doc[codec.plans["StudyDate"].name] == day
    assert doc[codec.plans["TE"].name] == te


def test_per_field_mode_is_pyope_with_the_hkdf_subkey(raw_key: Path, codec: AbeCodec) -> None:
    master = keylib.MasterKey(keylib.read_key_file(raw_key))
    subkey = master.derive("ope", "PatientWeight", 32)
    expected = OPE(subkey, ValueRange(0, 3_000_000), ValueRange(*OUT_22)).encrypt(1_234_567)
    assert codec.plans["PatientWeight"].encrypt_value(123.4567) == expected


def test_the_spec_carries_no_key_material(raw_key: Path, codec: AbeCodec) -> None:
    key = raw_key.read_bytes()
    text = json.dumps(codec.spec())
    for form in (key.hex(), base64.b64encode(key).decode(), key.decode("latin-1")):
        assert form not in text
    rebuilt = AbeMode().codec_from_spec(json.loads(text))
    doc = {"PatientAge": 7, "BodyPart": "Knee"}
    assert rebuilt.encode_document(doc) == codec.encode_document(doc)


def test_a_rank_with_another_key_is_refused(keydir: Path, codec: AbeCodec) -> None:
    spec = codec.spec()
    other = keydir / "other.key"
    other.write_bytes(os.urandom(32))
    other.chmod(0o600)
    spec["key"] = {"kind": "key_file", "location": str(other), "kdf": None}
    with pytest.raises(BadInput, match="differs from the one the run was planned with"):
        AbeCodec.from_spec(spec)


# ------------------------------------------------------------------------------ names


def test_names_are_valid_elasticsearch_names_and_round_trip(codec: AbeCodec) -> None:
    for path, plan in codec.plans.items():
        assert ES_NAME.match(plan.name), plan.name
        assert codec.names.decrypt_key(plan.name) == path
    names = NameCipher(os.urandom(64))
    nested = names.path("patient.address.city")
    assert all(ES_NAME.match(part) for part in nested.split("."))
    assert names.decrypt_key(nested) == "patient.address.city"
    # a segment's ciphertext depends on its parent path
    assert names.segment("city", "patient") != names.segment("city", "doctor")


def test_schema_names_are_short_prf_tokens_and_others_stay_aes_siv(codec: AbeCodec) -> None:
    # issue 16: declared names are "k" + 64 bits (12 characters), looked up from the schema
    for plan in codec.plans.values():
        assert plan.name.startswith("k") and len(plan.name) == 12, plan.name
    siv_key, prf_key = os.urandom(64), os.urandom(32)
    names = NameCipher(siv_key, prf_key, ["patient.address.city", "age"])
    nested = names.path("patient.address.city")
    assert [len(part) for part in nested.split(".")] == [12, 12, 12]
    assert names.decrypt_key(nested) == "patient.address.city"
    assert names.segment("city", "patient.address") != names.segment("city", "doctor")
    # a dynamic field keeps an AES-SIV token and still round-trips without the table
    dynamic = names.path("patient.note")
    assert dynamic.split(".")[0] == nested.split(".")[0] and dynamic.split(".")[1][0] == "f"
    fresh = NameCipher(siv_key, prf_key, ["patient.address.city"])
    assert fresh.decrypt_key(dynamic) == "patient.note"


def test_a_prf_token_outside_the_schema_is_foreign_not_a_guess() -> None:
    key = os.urandom(32)
    writer = NameCipher(os.urandom(64), key, ["age", "weight"])
    reader = NameCipher(os.urandom(64), key, ["age"])
    with pytest.raises(ForeignCiphertext, match="not a name of the track's schema"):
        reader.decrypt_key(writer.path("weight"))


def test_colliding_schema_names_are_refused_when_the_plan_is_built() -> None:
    # 64-bit tokens do not collide among a schema's names; with 8-bit tokens 300 names
    # under one parent must (pigeonhole), and the plan is refused naming two of them
    paths = [f"field{i}" for i in range(300)]
    with pytest.raises(NameCollision, match=r"schema fields 'field\d+' and 'field\d+' at the top"):
        NameCipher(os.urandom(64), os.urandom(32), paths, prf_bytes=1)


# ----------------------------------------------------------------------------- values


def test_floats_map_exactly_not_by_floating_floor() -> None:
    grid = NumberGrid(0.0, 10.0, 0.1, integral=False)
    assert int(0.3 / 0.1) == 2  # the slides' floor((x - l) / s) in floating point
    assert grid.index(0.2) == 2 and grid.index(0.3) == 3
    assert grid.value(3) == 0.3
    assert [grid.index(x) for x in (0.7, 1.1, 2.3, 9.9)] == [7, 11, 23, 99]
    fine = NumberGrid(0.0, 1.0, 0.0001, integral=False)
    assert fine.index(0.0003) == 3 and fine.index(0.9999) == 9999


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0.35, "not a multiple of the step 0.1"),
        (10.1, "outside"),
        (-0.1, "outside"),
        (True, "boolean"),
        (float("nan"), "finite"),
        ("abc", "not a number"),
        ({"a": 1}, "not a number"),
    ],
)
def test_values_off_the_grid_are_refused(value: Any, problem: str) -> None:
    with pytest.raises(OffGrid, match=problem):
        NumberGrid(0.0, 10.0, 0.1, integral=False).index(value)


def test_negative_ranges() -> None:
    grid = NumberGrid(-273.15, 100.0, 0.05, integral=False)
    assert grid.index(-273.15) == 0 and grid.value(0) == -273.15
    assert grid.index(0.0) == 5463 and grid.index(-0.05) == 5462
    assert grid.ceil_index(-0.07) == 5462 and grid.floor_index(-0.07) == 5461
    ints = NumberGrid(-10, 10, 1, integral=True)
    assert [ints.index(v) for v in (-10, -1, 0, 10)] == [0, 9, 10, 20]
    assert ints.value(0) == -10 and isinstance(ints.value(0), int)


decimals = st.sampled_from(["1", "0.5", "0.25", "0.1", "0.01", "0.001", "0.0001", "2", "0.3"])


@settings(max_examples=300, deadline=None)
@given(
    low=st.integers(-(10**6), 10**6),
    low_places=st.integers(0, 4),
    step=decimals,
    size=st.integers(0, 10**7),
    data=st.data(),
)
def test_grid_round_trip_and_order(low, low_places, step, size, data) -> None:
    lo = Decimal(low).scaleb(-low_places)
    st_ = Decimal(step)
    hi = lo + size * st_
    grid = NumberGrid(float(lo), float(hi), float(st_), integral=False)
    assert grid.top == size
    i, j = sorted(data.draw(st.lists(st.integers(0, size), min_size=2, max_size=2)))
    x, y = float(lo + i * st_), float(lo + j * st_)
    assert grid.index(x) == i and grid.value(i) == x
    assert grid.index(y) == j
    assert (x < y) == (i < j)
    # bounds: the first grid point >= b, the last <= b
    b = float(lo + i * st_ + Decimal(data.draw(st.sampled_from(["0", "0.00001", "-0.00001"]))))
    ceil, floor = grid.ceil_index(b), grid.floor_index(b)
    assert float(lo + ceil * st_) >= b > float(lo + (ceil - 1) * st_)
    assert float(lo + floor * st_) <= b < float(lo + (floor + 1) * st_)


def test_dates_and_date_times() -> None:
    day = DayGrid()
    assert day.index("2014-07-28") == 20140728 and day.value(20140728) == "2014-07-28"
    with pytest.raises(OffGrid, match="not a valid date"):
        day.index("2014-02-30")
    with pytest.raises(OffGrid):
        day.index("2014-07-28T10:00:00")
    assert day.index("1999-12-31") < day.index("2000-01-01")
    seconds = SecondGrid("space")
    assert seconds.index("2015-01-01 00:34:42") == 20150101003442
    assert seconds.value(20150101003442) == "2015-01-01 00:34:42"
    iso = SecondGrid("iso")
    assert iso.index("2015-01-01T02:34:42+02:00") == 20150101003442  # normalised to UTC
    assert iso.index("2015-01-01T00:34:42Z") == 20150101003442
    with pytest.raises(OffGrid, match="sub-second"):
        iso.index("2015-01-01T00:34:42.5Z")
    assert parse_instant("2015-01-01")[1] - parse_instant("2015-01-01")[0] == 86_400_000 - 1
    with pytest.raises(OffGrid, match="date math"):
        parse_instant("now-1d")


# -------------------------------------------------------------------------- documents


def test_the_whole_mri_corpus_round_trips(codec: AbeCodec, corpus, encrypted) -> None:
    assert len(encrypted) == 2000
    assert [codec.decode_document(doc) for doc in encrypted] == corpus
    for doc in encrypted[:50]:
        assert all(ES_NAME.match(name) for name in doc)
        plain_text = json.dumps(doc)
        assert "Siemens" not in plain_text and "PatientAge" not in plain_text


def test_batches_and_single_documents_agree(codec: AbeCodec, corpus) -> None:
    assert [codec.encode_document(dict(d)) for d in corpus[:20]] == codec.encode_documents(
        [dict(d) for d in corpus[:20]]
    )


def test_documents_outside_the_schema_or_ranges_are_refused(codec: AbeCodec) -> None:
    with pytest.raises(EncodeError, match="Unknown is not in the track's schema"):
        codec.encode_document({"Unknown": 1})
    with pytest.raises(EncodeError, match="PatientAge: 151 is outside"):
        codec.encode_document({"PatientAge": 151})
    with pytest.raises(EncodeError, match="TE: 5e-05 is not a multiple"):
        codec.encode_document({"TE": 0.00005})
    with pytest.raises(EncodeError, match="boolean"):
        codec.encode_document({"PatientAge": True})


def test_nested_objects_lists_nulls_and_booleans(keydir: Path) -> None:
    specs = [
        FieldSpec("patient.age", "integer", 0, 150, 1),
        FieldSpec("patient.name", "keyword"),
        FieldSpec("tags", "keyword"),
        FieldSpec("ok", "boolean"),
        FieldSpec("when", "date"),
    ]
    codec = small_codec(keydir, specs)
    doc = {
        "patient": {"age": 40, "name": "Ada"},
        "tags": ["a", "b", None],
        "ok": False,
        "when": "2015-01-01T10:00:00Z",
        "patient.age": None,
    }
    encoded = json.loads(json.dumps(codec.encode_document(doc)))
    assert codec.decode_document(encoded) == doc


# ---------------------------------------------------------------------------- mapping


def test_mapping_types_and_meta(codec: AbeCodec) -> None:
    body = codec.encode_index_body(MriTrack().index_body({}))
    mapping = body["mappings"]
    assert body["settings"]["number_of_shards"] == 3
    assert mapping["dynamic"] == "strict"
    types = {codec.names.decrypt_key(k): v["type"] for k, v in mapping["properties"].items()}
    # b = max(31, input bits + 16): an age (0..150) fits an integer, a day (25 bits) and a
    # flip angle (0..180 in steps of 0.0001: 21 bits) need a long.
    assert types["PatientAge"] == "integer"
    assert types["StudyDate"] == types["FlipAngle"] == "long"
    assert types["BodyPart"] == types["ismrmrdHeader"] == types["SystemVendor"] == "keyword"
    assert len(types) == 63
    assert mapping["_meta"]["esdash"]["layout"] == codec.layout()
    assert mapping["_meta"]["esdash"]["format"] == 2
    assert "PatientAge" not in json.dumps(body)


def test_layout_identifies_the_ciphertexts_not_only_key_and_schema(codec: AbeCodec) -> None:
    # Regression (paper-small campaign): an index written by an earlier string format had
    # the same key, schema and layout, so it was reused and its hits failed with InvalidTag.
    spec = codec.spec()
    older = older_format(spec)
    assert older.fingerprint == codec.fingerprint and older.fields_spec == codec.fields_spec
    assert older.layout() != codec.layout()
    assert AbeCodec.from_spec(spec).layout() == codec.layout()
    # equal ciphertexts, equal layout: the pyope backend writes what the fast core writes
    assert AbeCodec.from_spec({**spec, "ope_backend": "pyope"}).layout() == codec.layout()


def test_foreign_ciphertexts_name_the_field_and_the_fix(keydir: Path, codec: AbeCodec) -> None:
    doc = {"BodyPart": "Head", "PatientAge": 55}
    stored = json.loads(older_format(codec.spec()).encode_lines([doc])[0])
    with pytest.raises(ForeignCiphertext, match=r"field BodyPart: the stored value .*InvalidTag"):
        codec.decode_document(stored)
    with pytest.raises(ForeignCiphertext, match=r"esdash run --reingest.*fresh"):
        codec.decode_response({"hits": {"hits": [{"_source": stored}]}})
    other = small_codec(keydir, [FieldSpec("BodyPart", "keyword")])
    with pytest.raises(ForeignCiphertext, match="stored field name .* at the top level"):
        other.decode_document(codec.encode_document(doc))
    with pytest.raises(ForeignCiphertext, match="not an encrypted field name"):
        codec.decode_document({"BodyPart": "Head"})


def test_mapping_fields_missing_from_the_schema_are_refused(keydir: Path) -> None:
    codec = small_codec(keydir, [FieldSpec("a", "keyword")])
    with pytest.raises(BadInput, match="declares b, which the track's field schema lacks"):
        codec.encode_index_body({"mappings": {"properties": {"a": {}, "b": {"type": "long"}}}})


def test_schemas_abe_cannot_encrypt_are_refused_up_front() -> None:
    with pytest.raises(BadInput, match="no field schema"):
        plan_fields([])
    with pytest.raises(BadInput) as info:
        plan_fields(
            [FieldSpec("x", "float", 0, 1), FieldSpec("g", "dense_vector"), FieldSpec("n", "long")]
        )
    message = str(info.value)
    assert "x (float): the track's schema gives no step" in message
    assert "g: type dense_vector cannot be encrypted" in message
    assert "n (long): the track's schema gives no minimum, maximum" in message


# ------------------------------------------------------------------ query rewriting


def evaluate(query: dict[str, Any], doc: dict[str, Any]) -> bool:
    """Which encrypted documents an encrypted query selects (exact Elasticsearch semantics
    for the clauses the rewriter emits)."""
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return True
    if kind == "match_none":
        return False
    if kind == "bool":

        def many(key: str) -> list:
            value = spec.get(key, [])
            return value if isinstance(value, list) else [value]

        ok = all(evaluate(q, doc) for q in many("must") + many("filter"))
        should = many("should")
        if should:
            ok = ok and sum(evaluate(q, doc) for q in should) >= spec.get("minimum_should_match", 1)
        return ok and not any(evaluate(q, doc) for q in many("must_not"))
    if kind == "exists":
        return doc.get(spec["field"]) is not None
    if kind == "constant_score":
        return evaluate(spec["filter"], doc)
    ((name, value),) = ((k, v) for k, v in spec.items() if k != "boost")
    actual = doc.get(name)
    values = actual if isinstance(actual, list) else [actual]
    if kind == "term":
        value = value["value"] if isinstance(value, dict) else value
        return value in values
    if kind == "terms":
        return any(v in values for v in value)
    if kind == "range":
        ops = {"gte": int.__ge__, "gt": int.__gt__, "lte": int.__le__, "lt": int.__lt__}
        return actual is not None and all(
            ops[op](actual, b) for op, b in value.items() if op in ops
        )
    raise AssertionError(kind)


def plain_range(query: dict, doc: dict) -> bool:
    """Plaintext range semantics (Python's mixed int/float comparisons are exact)."""
    ((field, bounds),) = query["range"].items()
    value = doc.get(field)
    if value is None:
        return False
    checks = {
        "gte": lambda b: value >= b,
        "gt": lambda b: value > b,
        "lte": lambda b: value <= b,
        "lt": lambda b: value < b,
    }
    return all(checks[op](bound) for op, bound in bounds.items())


def selected(query: dict, docs: list[dict], evaluator) -> list[int]:
    return [i for i, doc in enumerate(docs) if evaluator(query, doc)]


SUPPORTED = ("body_part", "vendor", "age", "body_part_resolution", "vendor_body_part")


@pytest.mark.parametrize("name", SUPPORTED)
def test_mri_queries_select_the_same_documents(name, codec, corpus, encrypted) -> None:
    (query,) = [q for q in QUERIES if q.name == name]
    rewritten = codec.encode_query(query.body)
    plain = selected(query.body["query"], corpus, lambda q, d: matches(q, d, TEXT_FIELDS))
    assert plain, "the query selects something"
    assert selected(rewritten["query"], encrypted, evaluate) == plain


def test_the_papers_dashes_are_refused_naming_the_part(codec: AbeCodec) -> None:
    bodies = {q.name: q.body for q in QUERIES}
    with pytest.raises(QueryNotSupported) as info:
        codec.encode_query(bodies["brain_age"])
    assert info.value.part == "query.bool.filter.script"
    with pytest.raises(QueryNotSupported) as info:
        codec.encode_query(bodies["age_weight"])
    assert info.value.part == "aggs.weight.histogram"
    assert "fixed interval" in info.value.reason


number_fields = st.sampled_from(["PatientAge", "FlipAngle", "PatientWeight", "TE", "BrainAge"])
bound_values = st.one_of(
    st.integers(-10, 310),
    st.floats(-5, 305, allow_nan=False).map(lambda x: round(x, 3)),
    st.sampled_from([0.003, 0.0035, 50, 60, 49.99999, 90.1234, 150.0001]),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    field=number_fields,
    bounds=st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]), bound_values, min_size=1),
)
def test_numeric_ranges_select_the_same_documents(codec, corpus, encrypted, field, bounds):
    query = {"range": {field: bounds}}
    rewritten = codec.encode_query({"query": query})["query"]
    plain = selected(query, corpus, plain_range)
    assert selected(rewritten, encrypted, evaluate) == plain


dates = st.dates(min_value=__import__("datetime").date(1900, 1, 1)).map(lambda d: d.isoformat())


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    field=st.sampled_from(["StudyDate", "PatientBirthday"]),
    bounds=st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]), dates, min_size=1),
)
def test_date_ranges_select_the_same_documents(codec, corpus, encrypted, field, bounds):
    query = {"range": {field: bounds}}
    rewritten = codec.encode_query({"query": query})["query"]
    plain = selected(query, corpus, lambda q, d: matches(q, d, TEXT_FIELDS))
    assert selected(rewritten, encrypted, evaluate) == plain


def test_term_terms_match_exists_and_bool(codec, corpus, encrypted) -> None:
    cases = [
        {"term": {"SystemVendor.keyword": "GE"}},
        {"term": {"PatientAge": {"value": 42}}},
        {"term": {"SystemFieldStrength": 3}},
        {"term": {"SystemFieldStrength": 3.05}},  # off the grid: nothing
        {"term": {"StudyDate": "2015-03-02"}},
        {"terms": {"BodyPart": ["Knee", "Heart", "Nose"]}},
        {"terms": {"KspaceX": [64, 512, 99999]}},
        {"terms": {"Tags": ["Tag3"]}},
        {"match": {"PatientSex": "M"}},
        {"match": {"SystemVendor": {"query": "Philips Canon", "operator": "or"}}},
        {"match_phrase": {"DataFormat": "nii.gz"}},
        {"exists": {"field": "KspaceFOVZ"}},
        {
            "bool": {
                "should": [{"term": {"BodyPart": "Knee"}}, {"range": {"TE": {"lt": 0.004}}}],
                "must_not": {"term": {"PatientSex": "F"}},
                "minimum_should_match": 1,
            }
        },
        {"constant_score": {"filter": {"range": {"PatientWeight": {"gte": 120}}}}},
    ]
    for query in cases:
        rewritten = codec.encode_query({"query": query})["query"]
        plain = [i for i, d in enumerate(corpus) if _plain(query, d)]
        assert selected(rewritten, encrypted, evaluate) == plain, query


def _plain(query: dict, doc: dict) -> bool:
    """Plaintext semantics for the clauses query_eval lacks."""
    ((kind, spec),) = query.items()
    if kind == "term" and "." in next(iter(spec)):
        field, value = next(iter(spec.items()))
        return doc.get(field.split(".")[0]) == value
    if kind == "term" and isinstance(next(iter(spec.values())), dict):
        ((field, value),) = spec.items()
        return doc.get(field) == value["value"]
    if kind == "terms":
        ((field, values),) = spec.items()
        actual = doc.get(field)
        return any(v in (actual if isinstance(actual, list) else [actual]) for v in values)
    if kind == "exists":
        return doc.get(spec["field"]) is not None
    if kind == "match" and isinstance(next(iter(spec.values())), dict):
        ((field, value),) = spec.items()
        return matches({"match": {field: value["query"]}}, doc, TEXT_FIELDS)
    if kind == "bool":
        ok = any(_plain(q, doc) for q in spec["should"])
        return ok and not _plain(spec["must_not"], doc)
    if kind == "constant_score":
        return _plain(spec["filter"], doc)
    return matches(query, doc, TEXT_FIELDS)


@pytest.mark.parametrize(
    ("body", "part", "reason"),
    [
        ({"query": {"fuzzy": {"PatientName": "Muller"}}}, "query.fuzzy", "plaintext characters"),
        ({"query": {"wildcard": {"BodyPart": "He*"}}}, "query.wildcard", "plaintext characters"),
        ({"query": {"prefix": {"BodyPart": "He"}}}, "query.prefix", "plaintext characters"),
        ({"query": {"regexp": {"BodyPart": "H.*"}}}, "query.regexp", "plaintext characters"),
        ({"query": {"script": {"script": "1"}}}, "query.script", "scripts run in the cluster"),
        ({"query": {"query_string": {"query": "x"}}}, "query.query_string", "full-text"),
        ({"query": {"match": {"ismrmrdHeader": "abc"}}}, "query.match.ismrmrdHeader", "full-text"),
        ({"query": {"term": {"SystemVendor": "GE"}}}, "query.term.SystemVendor", "tokens"),
        (
            {
                "query": {
                    "bool": {"must": [{"match_all": {}}, {"range": {"BodyPart": {"gte": "H"}}}]}
                }
            },
            "query.bool.must[1].range.BodyPart",
            "do not keep the order",
        ),
        ({"query": {"term": {"Nope": 1}}}, "query.term.Nope", "not in the track's schema"),
        (
            {"query": {"range": {"StudyDate": {"gte": "now-1y"}}}},
            "query.range.StudyDate.gte",
            "date math",
        ),
        ({"aggs": {"s": {"sum": {"field": "PatientWeight"}}}}, "aggs.s.sum", "arithmetic"),
        ({"aggs": {"s": {"avg": {"field": "PatientWeight"}}}}, "aggs.s.avg", "arithmetic"),
        ({"aggs": {"s": {"stats": {"field": "PatientWeight"}}}}, "aggs.s.stats", "arithmetic"),
        (
            {"aggs": {"h": {"histogram": {"field": "PatientWeight", "interval": 5}}}},
            "aggs.h.histogram",
            "fixed interval",
        ),
        (
            {"aggs": {"d": {"date_histogram": {"field": "StudyDate", "calendar_interval": "1M"}}}},
            "aggs.d.date_histogram",
            "fixed interval",
        ),
        ({"aggs": {"m": {"min": {"field": "BodyPart"}}}}, "aggs.m.min", "undefined"),
        ({"sort": [{"BodyPart": "asc"}]}, "sort[0].BodyPart", "do not keep the order"),
        ({"highlight": {"fields": {}}}, "highlight", "highlighting"),
        ({"frobnicate": 1}, "frobnicate", "not supported by the ABE rewriter"),
        (
            {"query": {"term": {"BodyPart": {"value": "x", "_name": "n"}}}},
            "query.term.BodyPart._name",
            "named",
        ),
    ],
)
def test_refusals_name_the_part(codec: AbeCodec, body: dict, part: str, reason: str) -> None:
    with pytest.raises(QueryNotSupported) as info:
        codec.encode_query(body)
    assert info.value.part == part
    assert reason in info.value.reason


def test_text_match_refuse_option(keydir: Path) -> None:
    codec = small_codec(keydir, [FieldSpec("v", "text+keyword")], text_match="refuse")
    with pytest.raises(QueryNotSupported, match="full-text analysis"):
        codec.encode_query({"query": {"match": {"v": "GE"}}})
    assert codec.encode_query({"query": {"match": {"v.keyword": "GE"}}})


def test_source_filter_and_passthrough_keys(codec: AbeCodec) -> None:
    body = codec.encode_query(
        {"size": 5, "track_total_hits": True, "_source": ["PatientAge"], "query": {"match_all": {}}}
    )
    assert body["size"] == 5 and body["_source"] == [codec.plans["PatientAge"].name]


# --------------------------------------------------------------------------- responses


def test_responses_decode_hits_sort_values_and_aggregations(codec, corpus, encrypted) -> None:
    request = codec.encode_query(
        {
            "sort": [{"PatientWeight": "asc"}, "_score"],
            "aggs": {
                "youngest": {"min": {"field": "PatientAge"}},
                "latest": {"max": {"field": "StudyDate"}},
                "parts": {
                    "terms": {"field": "BodyPart"},
                    "aggs": {"heaviest": {"max": {"field": "PatientWeight"}}},
                },
                "count": {"value_count": {"field": "PatientID"}},
            },
        }
    )
    plan = codec.plans
    order = sorted(range(len(encrypted)), key=lambda i: corpus[i]["PatientWeight"])[:3]
    hits = [
        {
            "_id": str(i),
            "_source": encrypted[i],
            "sort": [encrypted[i][plan["PatientWeight"].name], 1.0],
        }
        for i in order
    ]
    names = list(request["aggs"])
    age_ct = min(d[plan["PatientAge"].name] for d in encrypted)
    date_ct = max(d[plan["StudyDate"].name] for d in encrypted)
    knee = codec.plans["BodyPart"].encrypt_value("Knee")
    (heaviest,) = request["aggs"][names[2]]["aggs"]
    weight_ct = max(d[plan["PatientWeight"].name] for d in encrypted)
    bucket = {"key": knee, "doc_count": 3, heaviest: {"value": float(weight_ct)}}
    response = {
        "hits": {"total": {"value": 2000}, "hits": hits},
        "aggregations": {
            names[0]: {"value": float(age_ct)},
            names[1]: {"value": float(date_ct), "value_as_string": str(date_ct)},
            names[2]: {"buckets": [bucket]},
            names[3]: {"value": 2000},
        },
    }
    decoded = codec.decode_response(json.loads(json.dumps(response)), request)
    assert [h["_source"] for h in decoded["hits"]["hits"]] == [corpus[i] for i in order]
    assert [h["sort"][0] for h in decoded["hits"]["hits"]] == [
        corpus[i]["PatientWeight"] for i in order
    ]
    aggs = decoded["aggregations"]
    assert aggs["youngest"]["value"] == float(min(d["PatientAge"] for d in corpus))
    latest = max(d["StudyDate"] for d in corpus)
    assert aggs["latest"]["value_as_string"] == latest
    bucket = aggs["parts"]["buckets"][0]
    assert bucket["key"] == "Knee"
    assert bucket["heaviest"]["value"] == max(d["PatientWeight"] for d in corpus)
    assert aggs["count"]["value"] == 2000


# -------------------------------------------------------------------------- integration


def test_plan_marks_unsupported_queries_and_stores_only_what_is_sent(codec, tmp_path) -> None:
    from esdash.plugin_api import Corpus, Distribution, QueryStep
    from esdash.prepare.plan import make_plan
    from esdash.session import parse_session

    session = parse_session(
        {
            "name": "t",
            "encryption": {"mode": "abe", "key_file": "k"},
            "track": {"name": "mri", "documents": 10},
        },
        tmp_path / "s.toml",
    )
    track = MriTrack()
    dist = Distribution(tmp_path, "8.19.21", "integ-test-zip", (), scripting=False)
    steps = tuple(QueryStep(q.name, (q,)) for q in QUERIES)
    (tmp_path / "c").write_text('{"a": 1}\n')  # the plan fingerprints the corpus file
    plan = make_plan(session, track, Corpus(tmp_path / "c"), steps, dist, 1, 1, codec=codec)
    assert plan.encryption == "abe" and plan.client_codec == codec.spec()
    reasons = {q.name: q.unsupported for s in plan.steps for q in s.queries}
    assert reasons["brain_age"].startswith("not possible under ABE: query.bool.filter.script")
    assert reasons["age_weight"].startswith("not possible under ABE: aggs.weight.histogram")
    assert [n for n, r in reasons.items() if r is None] == list(SUPPORTED)
    text = files.encode(plan).decode()
    # the plan holds the schema (to rebuild the codec), never a query's plaintext constants
    for plaintext in ("Siemens", '"Head"', "painless", '"M"'):
        assert plaintext not in text


def test_bulk_bodies_carry_no_plaintext(codec, corpus, tmp_path) -> None:
    """The bytes a worker sends at ingest: read_slice with the codec, as the rank does."""
    from esdash.bench.slices import read_slice
    from esdash.plugin.corpus import generated_corpus
    from esdash.plugin.corpus_slices import plan_slices

    docs = [dict(d) for d in corpus[:300]]
    docs[7]["ismrmrdHeader"] = "xx QZXJMARKERTEXT77 yy"
    docs[9]["PatientName"] = "Qvxmarkername"
    docs[11]["PatientWeight"] = 123.4567
    markers = [b"QZXJMARKERTEXT77", b"Qvxmarkername", b"123.4567", b"ismrmrdHeader", b"Head"]
    corpus_file = generated_corpus(tmp_path / "c.ndjson", docs, len(docs))
    (part,) = plan_slices(corpus_file, 1)
    plain = b"".join(b.body for b in read_slice(corpus_file, part, 100, "mri"))
    assert all(marker in plain for marker in markers)  # positive control
    batches = list(read_slice(corpus_file, part, 100, "mri", encode=codec.encode_lines))
    assert [b.docs for b in batches] == [100, 100, 100]
    sent = b"".join(b.body for b in batches)
    assert not [marker for marker in markers if marker in sent]
    lines = sent.splitlines()
    assert lines[0] == b'{"index":{"_index":"mri"}}'
    assert [codec.decode_document(json.loads(line)) for line in lines[1::2]] == docs


def test_workers_decode_inside_the_measured_time_and_count_failures(codec) -> None:
    from esdash.bench import loadgen
    from esdash.bench.recorder import Recorder

    class Fake:
        class target:  # noqa: N801
            name = "n0"

        timeout = 60.0

        def __init__(self, body: bytes) -> None:
            self.body = body

        def request(self, method, path, body=None, content_type=None, timeout=None):
            return 200, self.body

    request = codec.encode_query({"query": {"match_all": {}}})
    good = {"hits": {"hits": [{"_id": "1", "_source": codec.encode_document({"PatientAge": 3})}]}}
    query = loadgen.PreparedQuery.of("q", "mri", request)
    decoded: list[dict] = []

    def decode(q, body: bytes) -> None:
        try:
            decoded.append(codec.decode_response(json.loads(body), request))
        except Exception as exc:
            raise loadgen.DecodeFailed(str(exc)) from exc

    import time

    recorder = Recorder(1)
    sent = loadgen.measure(
        Fake(json.dumps(good).encode()),
        [query],
        time.time() + 0.05,
        recorder,
        lambda: None,
        decode=decode,
    )
    assert sent > 0 and decoded[0]["hits"]["hits"][0]["_source"] == {"PatientAge": 3}
    bad = {"hits": {"hits": [{"_id": "1", "_source": {"fnope": 1}}]}}
    recorder = Recorder(1)
    loadgen.measure(
        Fake(json.dumps(bad).encode()),
        [query],
        time.time() + 0.05,
        recorder,
        lambda: None,
        decode=decode,
    )
    payload = files.encode(recorder.drain()).decode()
    assert "decoding failed" in payload


def test_read_ahead_keeps_order_raises_in_order_and_stops_early() -> None:
    import threading

    from esdash.bench.worker import _read_ahead

    assert list(_read_ahead(iter(range(50)))) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise EncodeError("field X: bad")

    seen = []
    with pytest.raises(EncodeError, match="field X"):
        for item in _read_ahead(failing()):
            seen.append(item)
    assert seen == [1, 2]
    before = threading.active_count()
    reader = _read_ahead(iter(range(10**6)))
    assert next(reader) == 0
    reader.close()
    assert threading.active_count() == before


def test_line_encoder_writes_the_json_of_encode_documents(codec: AbeCodec, corpus) -> None:
    docs = [dict(d) for d in corpus[:400]]
    docs[3]["PatientAge"] = None
    docs[4]["Tags"] = []
    first = codec.encode_lines(docs[:200])  # cold caches
    second = codec.encode_lines(docs)  # warm for the first half
    expected = codec.encode_documents(docs)
    assert [json.loads(line) for line in first] == expected[:200]
    assert [json.loads(line) for line in second] == expected
    with pytest.raises(EncodeError, match="boolean"):
        codec.encode_lines([{"PatientAge": True}])
    with pytest.raises(EncodeError, match="not a value"):
        codec.encode_lines([{"PatientAge": {"a": 1}}])


def test_pyope_backend_gives_the_same_ciphertexts_without_caching(raw_key, codec) -> None:
    slow = AbeMode().client_codec(
        {"key_file": raw_key, "ope_backend": "pyope"}, MriTrack(), track_options={}
    )
    assert not slow.cache_numbers and codec.cache_numbers
    docs = [{"PatientAge": 33, "FlipAngle": 12.3456, "StudyDate": "2011-02-03"}] * 2
    assert slow.encode_lines([dict(d) for d in docs]) == codec.encode_lines([dict(d) for d in docs])


# --------------------------------------------------------------------------- geo points


def test_geo_points_are_one_token_each_round_trip_and_refuse_geo_queries(raw_key: Path) -> None:
    # The NYC taxis track has two geo_point fields; before, ABE refused the whole track.
    track = NycTaxisTrack()
    codec = AbeMode().client_codec({"key_file": raw_key}, track, track_options={})
    body = codec.encode_index_body(track.index_body({}))
    pickup = codec.plans["pickup_location"]
    assert body["mappings"]["properties"][pickup.name] == {"type": "keyword", "doc_values": False}
    points = [[-73.99, 40.75], {"lat": 40.75, "lon": -73.99}, "40.75,-73.99", None]
    for point in points:
        doc = {"pickup_location": point, "passenger_count": 2}
        for line in (codec.encode_lines([dict(doc)])[0], json.dumps(codec.encode_document(doc))):
            stored = json.loads(line)
            assert isinstance(stored[pickup.name], str | type(None))  # one token, not a list
            assert codec.decode_document(stored) == doc
    # equal points in one notation are equal tokens (deterministic, like keywords)
    assert pickup.encrypt_value([-73.99, 40.75]) == pickup.encrypt_value([-73.99, 40.75])
    with pytest.raises(EncodeError, match="is not a geo point"):
        codec.encode_document({"pickup_location": [1, 2, 3, 4]})
    exists = codec.encode_query({"query": {"exists": {"field": "pickup_location"}}})
    assert exists["query"] == {"exists": {"field": pickup.name}}
    with pytest.raises(QueryNotSupported, match="geo_point field pickup_location"):
        codec.encode_query({"sort": [{"pickup_location": "asc"}]})
