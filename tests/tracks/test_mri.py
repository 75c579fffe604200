"""The MRI track: the seeded generator, its schema, the seven queries and the cached corpus."""

from __future__ import annotations

import json
import math
import re
from datetime import date
from pathlib import Path

import pytest
from esdash_plugins.tracks import mri
from query_eval import fields_used, matches

from esdash.bench.slices import read_slice
from esdash.errors import BadInput
from esdash.plugin.corpus import check_corpus
from esdash.plugin.corpus_slices import plan_slices

DOCS = 6000
SEED = 11


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return list(mri.generate(DOCS, SEED))


@pytest.fixture(scope="module")
def properties() -> dict[str, dict]:
    return mri.mapping()["properties"]


# --------------------------------------------------------------------------- generator


def test_same_seed_same_documents_and_fewer_documents_are_a_prefix():
    first = list(mri.generate(300, 5))
    assert first == list(mri.generate(300, 5))
    assert first != list(mri.generate(300, 6))
    assert list(mri.generate(120, 5)) == first[:120]


def test_the_generator_uses_its_own_random_instance_only():
    import random

    random.seed(1)
    before = random.random()
    random.seed(1)
    list(mri.generate(50, 3))
    assert random.random() == before  # the global RNG was not touched


def test_sixty_three_fields_all_mapped_and_in_the_schema(docs, properties):
    assert len(properties) == 63
    assert {spec.path for spec in mri.MriTrack.fields} == set(properties)
    for doc in docs[:500]:
        assert list(doc) == list(docs[0]), "every document has the same fields in one order"
        assert set(doc) == set(properties)


def test_every_value_has_its_mapped_type_and_lies_in_the_schema_range(docs, properties):
    specs = {spec.path: spec for spec in mri.MriTrack.fields}
    for doc in docs:
        for name, value in doc.items():
            kind = properties[name]["type"]
            spec = specs[name]
            if kind == "double":
                # Always a JSON float, never an int (dynamic mapping would pick long).
                assert type(value) is float, (name, value)
                assert value == round(value, mri.ROUND_TO), (name, value)
            elif kind == "integer":
                assert type(value) is int, (name, value)
            elif kind == "date":
                assert date.fromisoformat(value).isoformat() == value
                first, last = mri.DATE_FIELDS[name]
                assert first <= value <= last, (name, value)
            elif name == "Tags":
                assert isinstance(value, list) and all(isinstance(t, str) for t in value)
                assert len(set(value)) == len(value) <= 10
            else:
                assert isinstance(value, str) and value, (name, value)
            if spec.minimum is not None:
                assert spec.minimum <= value <= spec.maximum, (name, value)


def test_the_authors_bugs_are_fixed(docs):
    addresses = dict(mri.INSTITUTIONS)
    for doc in docs:
        assert doc["InstitutionAddress"] == addresses[doc["InstitutionName"]]
        assert doc["BaseResolution"] == round(doc["ImageFOVX"] * 1000 / doc["ImageMatrixX"], 4)
        assert doc["BaseResolution"] > 0
        assert doc["Filename"] == f"{doc['StudyDate']}_{doc['MeasurementID']}.{doc['DataFormat']}"
        assert doc["ImageMatrixY"] == doc["KspacePhaseEnc1"] >= 13
        study = date.fromisoformat(doc["StudyDate"])
        assert mri.age_on(date.fromisoformat(doc["PatientBirthday"]), study) == doc["PatientAge"]
        assert doc["SliceThickness"] == round(doc["SliceThickness"], 4)
        assert doc["ImageFOVZ"] == doc["KspaceFOVZ"]
    two_d = sum(doc["KspaceFOVZ"] == 0.0 for doc in docs) / len(docs)
    assert 0.45 < two_d < 0.55
    assert all(type(doc["KspaceFOVZ"]) is float for doc in docs)


def test_dependent_fields_follow_the_model(docs):
    for doc in docs:
        vendor = mri.VENDORS.index(doc["SystemVendor"])
        assert doc["SystemModel"] == mri.MODELS[vendor]
        assert re.fullmatch(rf"{doc['SystemVendor']}[123]", doc["ProtocolName"])
        assert doc["KspaceCoils"] == doc["NumberReceiverChannels"]
        assert doc["Lamor_frequency"] == round(doc["SystemFieldStrength"] * 42, 4)
        assert doc["ImageMatrixX"] in (
            doc["KspaceReadout"],
            doc["KspaceReadout"] // 2,
            doc["KspacePhaseEnc1"],
            doc["KspaceX"],
        )
        assert doc["BrainAge"] >= 1
        assert len(doc["MeasurementID"]) == 11 and len(doc["FrameOfReferenceUID"]) == 36


def test_documents_are_utf8_json_lines(docs):
    line = json.dumps(docs[0], ensure_ascii=False)
    assert "\n" not in line
    assert any("ü" in doc["PatientName"] or "ö" in doc["InstitutionName"] for doc in docs)


# ----------------------------------------------------------------------------- queries


def _normal_tail(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2))


#: Expected share of matching documents per query, from the model's distributions.
EXPECTED = {
    "body_part": 1 / 3,
    "vendor": 1 / 6,
    "age": 11 / 95,
    # Head, ImageMatrixX = 256 and ImageMatrixY (= Enc1) = 256: 1/3 * 1/24 * 7/16.
    "body_part_resolution": 1 / 3 * 1 / 24 * 7 / 16,
    # round(N(0, 5)) > 5  <=>  N(0, 5) >= 5.5.
    "brain_age": _normal_tail(5.5 / mri.BRAIN_AGE_SD),
    "vendor_body_part": 1 / 3 * 2 / 6,
    "age_weight": 1 / 2 * 64 / 95,
}


def test_seven_steps_one_query_each_in_the_papers_order():
    steps = mri.MriTrack().query_steps({})
    assert [s.name for s in steps] == list(EXPECTED)
    for step in steps:
        assert [q.name for q in step.queries] == [step.name]
        assert step.warmup is None and step.duration is None and step.target_throughput is None
    requires = {s.name: s.queries[0].requires for s in steps}
    assert requires.pop("brain_age") == ("scripting",)
    assert set(requires.values()) == {()}


def test_queries_name_mapped_fields_only(properties):
    for step in mri.MriTrack().query_steps({}):
        used = fields_used(step.queries[0].body)
        assert used and used <= set(properties), (step.name, used - set(properties))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_query_selectivity_matches_the_model(name, docs, properties):
    (step,) = [s for s in mri.MriTrack().query_steps({}) if s.name == name]
    body = step.queries[0].body
    text_fields = {f for f, p in properties.items() if p["type"] == "text"}
    share = sum(matches(body["query"], doc, text_fields) for doc in docs) / len(docs)
    p = EXPECTED[name]
    tolerance = 4 * math.sqrt(p * (1 - p) / len(docs)) + 0.002
    assert abs(share - p) < tolerance, (name, share, p)
    assert share > 0, "a query that matches nothing measures nothing"


def test_age_weight_histogram_spans_the_weights():
    (step,) = [s for s in mri.MriTrack().query_steps({}) if s.name == "age_weight"]
    body = step.queries[0].body
    assert body["size"] == 0
    assert body["aggs"]["weight"]["histogram"] == {"field": "PatientWeight", "interval": 5}


# ------------------------------------------------------------------- index and corpus


def test_index_body_is_strict_and_takes_the_options():
    body = mri.MriTrack().index_body({"shards": 5, "replicas": 1})
    assert body["settings"] == {"number_of_shards": 5, "number_of_replicas": 1}
    assert body["mappings"]["dynamic"] == "strict"
    assert body["mappings"]["properties"]["KspaceFOVZ"] == {"type": "double"}
    assert body["mappings"]["properties"]["SystemVendor"]["type"] == "text"
    assert mri.MriTrack().index_body({})["settings"]["number_of_shards"] == 3


def test_corpus_is_generated_once_and_reused(tmp_path: Path):
    track = mri.MriTrack()
    corpus = track.corpus({"documents": 40, "seed": 3}, tmp_path)
    assert corpus.path == tmp_path / "mri-40-3.ndjson"
    assert corpus.documents == 40 and not corpus.includes_action_and_meta_data
    lines = corpus.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == list(mri.generate(40, 3))
    stat = corpus.path.stat()
    again = track.corpus({"documents": 40, "seed": 3}, tmp_path)
    assert again == corpus
    assert (corpus.path.stat().st_ino, corpus.path.stat().st_mtime_ns) == (
        stat.st_ino,
        stat.st_mtime_ns,
    )
    other = track.corpus({"documents": 40, "seed": 4}, tmp_path)
    assert other.path.name == "mri-40-4.ndjson"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mri-40-3.ndjson", "mri-40-4.ndjson"]


def test_a_cached_corpus_that_is_a_looping_link_is_refused_not_replaced(tmp_path: Path):
    link = tmp_path / "mri-40-3.ndjson"
    link.symlink_to(link.name)  # a link to itself
    with pytest.raises(BadInput, match=f"^corpus {link}: is a symbolic link to itself"):
        mri.MriTrack().corpus({"documents": 40, "seed": 3}, tmp_path)
    assert link.is_symlink()


def test_generated_corpus_passes_the_corpus_checks(tmp_path: Path):
    corpus = mri.MriTrack().corpus({"documents": 30, "seed": 1}, tmp_path)
    assert check_corpus(corpus, sample_lines=0).documents_checked == 30
    slices = plan_slices(corpus, 4, tmp_path / "cache")
    assert sum(s.documents for s in slices) == 30
    docs = [
        json.loads(line)
        for part in slices
        for batch in read_slice(corpus, part, 7, "mri")
        for line in batch.body.splitlines()[1::2]
    ]
    assert docs == list(mri.generate(30, 1))
