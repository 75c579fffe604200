"""The NYC taxis track: the authors' mapping and steps, the synthetic trips, the real corpus."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest
from esdash_plugins.tracks import nyc_taxis
from query_eval import fields_used, matches

from esdash.bench.slices import read_slice
from esdash.plugin.corpus import check_corpus
from esdash.plugin.corpus_slices import plan_slices

DOCS = 5000

#: The 18 fields of the real documents (the authors' documents-1k.json).
REAL_FIELDS = {
    "total_amount", "improvement_surcharge", "pickup_location", "pickup_datetime", "trip_type",
    "dropoff_datetime", "rate_code_id", "tolls_amount", "dropoff_location", "passenger_count",
    "fare_amount", "extra", "trip_distance", "tip_amount", "store_and_fwd_flag", "payment_type",
    "mta_tax", "vendor_id",
}  # fmt: skip
#: The first line of the real corpus, as in the authors' sample.
REAL_FIRST = (
    '{"total_amount": 6.3, "improvement_surcharge": 0.3, "pickup_location": '
    '[-73.92259216308594, 40.7545280456543], "pickup_datetime": "2015-01-01 00:34:42", '
    '"trip_type": "1", "dropoff_datetime": "2015-01-01 00:38:34", "rate_code_id": "1", '
    '"tolls_amount": 0.0, "dropoff_location": [-73.91363525390625, 40.76552200317383], '
    '"passenger_count": 1, "fare_amount": 5.0, "extra": 0.5, "trip_distance": 0.88, '
    '"tip_amount": 0.0, "store_and_fwd_flag": "N", "payment_type": "2", "mta_tax": 0.5, '
    '"vendor_id": "2"}'
)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return list(nyc_taxis.generate(DOCS, 3))


@pytest.fixture(scope="module")
def properties() -> dict[str, dict]:
    return nyc_taxis.mapping()["properties"]


# ----------------------------------------------------------------- mapping and steps


def test_mapping_is_the_authors_under_dynamic_strict(properties):
    assert nyc_taxis.mapping()["dynamic"] == "strict"
    assert len(properties) == 22
    by_type: dict[str, set[str]] = {}
    for name, spec in properties.items():
        by_type.setdefault(spec["type"], set()).add(name)
    assert by_type["scaled_float"] == {
        "surcharge", "mta_tax", "tolls_amount", "extra", "improvement_surcharge", "ehail_fee",
        "total_amount", "trip_distance",
    }  # fmt: skip
    assert all(properties[n]["scaling_factor"] == 100 for n in by_type["scaled_float"])
    assert by_type["double"] == {"tip_amount", "fare_amount"}
    assert by_type["integer"] == {"passenger_count"}
    assert by_type["date"] == {"pickup_datetime", "dropoff_datetime"}
    assert {properties[n]["format"] for n in by_type["date"]} == {"yyyy-MM-dd HH:mm:ss"}
    assert by_type["keyword"] == {
        "trip_type", "rate_code_id", "payment_type", "vendor_id", "store_and_fwd_flag",
        "cab_color",
    }  # fmt: skip
    assert by_type["text"] == {"vendor_name"}
    assert by_type["geo_point"] == {"pickup_location", "dropoff_location"}
    assert {spec.path for spec in nyc_taxis.FIELDS} == set(properties)


def test_index_body_takes_shards_and_replicas():
    body = nyc_taxis.NycTaxisTrack().index_body({"shards": 2, "replicas": 1})
    assert body["settings"] == {"number_of_shards": 2, "number_of_replicas": 1}
    assert body["mappings"] == nyc_taxis.mapping()


def test_the_authors_eighteen_steps():
    steps = nyc_taxis.NycTaxisTrack().query_steps({})
    assert len(steps) == 18
    assert len({s.name for s in steps}) == 18
    assert all(s.warmup is None and s.duration is None for s in steps)
    sizes = [s.queries[0].body.get("size", 10) for s in steps[:8]]
    assert sizes == [10, 100, 1000, 10000] * 2
    assert all(s.queries[0].body["query"] == {"match_all": {}} for s in steps[:4])
    range_query = {"range": {"total_amount": {"gte": 5, "lt": 15}}}
    assert all(s.queries[0].body["query"] == range_query for s in steps[4:8])
    mixed = steps[8]
    assert [q.body for q in mixed.queries] == [
        {"query": range_query, "size": 1000},
        {"query": {"match_all": {}}, "size": 1000},
    ]
    assert [s.think_time for s in steps] == [0.0] * 9 + [0.02, 0.05, 0.1, 0.2, 0.5, 1.0] + [0.0] * 3
    assert all(s.queries[0].body == {"query": {"match_all": {}}, "size": 1000} for s in steps[9:15])
    aggs = [s.queries[0].body for s in steps[15:]]
    assert all(body["size"] == 0 for body in aggs)
    assert aggs[0]["aggs"]["distance_histo"]["histogram"] == {
        "field": "trip_distance",
        "interval": 1,
    }
    assert aggs[1]["aggs"]["dropoffs_over_time"]["auto_date_histogram"]["buckets"] == 20
    assert aggs[2]["aggs"]["dropoffs_over_time"]["date_histogram"]["calendar_interval"] == "day"


def test_steps_name_mapped_fields_only(properties):
    for step in nyc_taxis.NycTaxisTrack().query_steps({}):
        for query in step.queries:
            assert fields_used(query.body) <= set(properties), step.name


def test_the_shipped_query_file_is_the_authors_plus_names():
    """Without the ``name`` keys the file is the authors' query.json (their tool ignores them)."""
    data = json.loads(nyc_taxis.QUERIES_FILE.read_text())
    for step in data:
        step.pop("name")
        for query in step["search_queries"]:
            query.pop("name")
            assert set(query) == {"body"}
    assert data[9] == {
        "search_queries": [{"body": {"query": {"match_all": {}}, "size": 1000}}],
        "sleep_between_requests_secs": 0.02,
    }
    assert data[0] == {"search_queries": [{"body": {"query": {"match_all": {}}}}]}


# --------------------------------------------------------------------------- generator


def test_same_seed_same_trips_and_fewer_trips_are_a_prefix():
    first = list(nyc_taxis.generate(200, 9))
    assert first == list(nyc_taxis.generate(200, 9))
    assert first != list(nyc_taxis.generate(200, 10))
    assert list(nyc_taxis.generate(50, 9)) == first[:50]


def test_trips_have_the_real_fields_with_mapped_types(docs, properties):
    real = json.loads(REAL_FIRST)
    assert set(real) == REAL_FIELDS
    specs = {spec.path: spec for spec in nyc_taxis.FIELDS}
    for doc in docs:
        assert list(doc) == list(real), "same fields in the same order as the real documents"
        for name, value in doc.items():
            kind = properties[name]["type"]
            if kind in ("scaled_float", "double"):
                assert type(value) is float and value == round(value, 2), (name, value)
            elif kind == "integer":
                assert type(value) is int
            elif kind == "keyword":
                assert isinstance(value, str) and value
            elif kind == "date":
                datetime.strptime(value, nyc_taxis.DATE_FORMAT)
            elif kind == "geo_point":
                lon, lat = value
                assert -74.3 <= lon <= -73.6 and 40.45 <= lat <= 41.0
            spec = specs[name]
            if spec.minimum is not None:
                assert spec.minimum <= value <= spec.maximum, (name, value)


def test_trips_are_internally_consistent(docs):
    for doc in docs:
        parts = ("fare_amount", "extra", "mta_tax", "tip_amount", "tolls_amount")
        expected = sum(doc[p] for p in parts) + doc["improvement_surcharge"]
        assert math.isclose(doc["total_amount"], expected, abs_tol=0.011)
        pickup = datetime.strptime(doc["pickup_datetime"], nyc_taxis.DATE_FORMAT)
        dropoff = datetime.strptime(doc["dropoff_datetime"], nyc_taxis.DATE_FORMAT)
        assert pickup < dropoff and pickup.year == 2015
        if doc["payment_type"] != "1":
            assert doc["tip_amount"] == 0.0
    tipped = [d for d in docs if d["payment_type"] == "1"]
    assert 0.8 < sum(d["tip_amount"] > 0 for d in tipped) / len(tipped) < 0.95


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    values = sorted(values)
    n = len(values)
    return values[n // 4], values[n // 2], values[3 * n // 4]


def test_distributions_resemble_the_real_sample(docs):
    # The authors' 1000 real trips: total_amount quartiles 8.3 / 12.3 / 19.75,
    # trip_distance 1.14 / 2.27 / 4.27 miles.
    q1, median, q3 = _quartiles([d["total_amount"] for d in docs])
    assert 7 < q1 < 10 and 10.5 < median < 14.5 and 17 < q3 < 24
    q1, median, q3 = _quartiles([d["trip_distance"] for d in docs])
    assert 0.9 < q1 < 1.4 and 1.9 < median < 2.7 and 3.6 < q3 < 5.2
    assert 0.6 < sum(d["passenger_count"] == 1 for d in docs) / len(docs) < 0.8


#: Step name -> expected share of matching trips (range 5-15 $: 57 % in the real sample;
#: distance 0-50 mi: nearly all; dropoffs 1-21 January: 21 of 365 days).
SELECTIVITY = {"range_10": 0.573, "distance_histogram": 0.999, "autohisto_agg": 21 / 365}


@pytest.mark.parametrize("name", list(SELECTIVITY))
def test_query_selectivity(name, docs, properties):
    (step,) = [s for s in nyc_taxis.NycTaxisTrack().query_steps({}) if s.name == name]
    text_fields = {f for f, p in properties.items() if p["type"] == "text"}
    share = sum(matches(step.queries[0].body["query"], d, text_fields) for d in docs) / len(docs)
    assert abs(share - SELECTIVITY[name]) < 0.05, (name, share)


# ------------------------------------------------------------------------------ corpus


def test_generated_corpus_is_written_once_and_reused(tmp_path: Path):
    track = nyc_taxis.NycTaxisTrack()
    corpus = track.corpus({"documents": 25, "seed": 2}, tmp_path)
    assert corpus.path == tmp_path / "nyc_taxis-25-2.ndjson" and corpus.documents == 25
    lines = corpus.path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == list(nyc_taxis.generate(25, 2))
    stamp = corpus.path.stat().st_mtime_ns
    assert track.corpus({"documents": 25, "seed": 2}, tmp_path) == corpus
    assert corpus.path.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [corpus.path.name]
    assert check_corpus(corpus, sample_lines=0).documents_checked == 25


def test_documents_file_is_used_as_it_is(tmp_path: Path):
    real = tmp_path / "documents.json"
    real.write_text(REAL_FIRST + "\n" + REAL_FIRST + "\n")
    cache = tmp_path / "cache"
    corpus = nyc_taxis.NycTaxisTrack().corpus({"documents_file": real, "documents": 9}, cache)
    assert corpus.path == real and corpus.documents is None
    assert not cache.exists(), "nothing is generated"
    (part,) = plan_slices(corpus, 1, cache)
    (batch,) = read_slice(corpus, part, 10, "nyc_taxis")
    assert batch.docs == 2
    assert batch.body.split(b"\n")[1] == REAL_FIRST.encode()
