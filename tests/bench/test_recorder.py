"""The per-rank recorder: HDR bucket arithmetic, exact sums, errors, and the drained payload."""

from __future__ import annotations

import json
import math
import pickle
import random

import msgspec
import pytest
from hdrh.histogram import HdrHistogram
from support.records import as_json

from esdash.bench.recorder import (
    MESSAGE_LIMIT,
    Recorder,
    bulk_item_class,
    error_class_of_status,
    error_family,
)
from esdash.rundir import hdr
from esdash.rundir.records import PAYLOAD_VERSION, RankPayload
from esdash.stats.merge import LAST_ERRORS


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_fast_bucket_index_is_hdrh_s_index():
    """The hot path's inlined index must put every value in the bucket hdrh would."""
    histogram = hdr.new_histogram()
    rng = random.Random(7)
    values = list(range(0, 5000))
    values += [2**k + d for k in range(11, 32) for d in (-1, 0, 1)]
    values += [rng.randrange(1, hdr.HIGHEST_US) for _ in range(20000)]
    values += [hdr.HIGHEST_US]
    for value in values:
        assert hdr.index_of(value) == histogram._counts_index_for(value), value


def test_recorded_histogram_equals_one_recorded_directly():
    rng = random.Random(1)
    recorder = Recorder(rank=2)
    direct = hdr.new_histogram()
    for _ in range(20000):
        seconds = rng.lognormvariate(math.log(0.01), 1.0)
        recorder.record("search", "node-0", seconds, seconds / 2)
        direct.record_value(int(seconds * 1e6))
    payload = as_json(recorder.drain())
    decoded = HdrHistogram.decode(payload["ops"]["search"]["latency"]["hdr"])
    assert decoded.get_total_count() == 20000
    for index in range(direct.counts_len):
        assert decoded.get_count_at_index(index) == direct.get_count_at_index(index)


def test_exact_counts_extremes_and_log_sums():
    recorder = Recorder()
    samples = [(0.010, 0.008), (0.020, 0.020), (0.040, 0.030)]
    for latency, service in samples:
        recorder.record("q", "n1", latency, service, docs=10, nbytes=100)
    op = as_json(recorder.drain())["ops"]["q"]
    assert op["requests"] == 3 and op["docs"] == 30 and op["bytes"] == 300
    assert op["errors"] == {}
    lat, svc = op["latency"], op["service_time"]
    assert lat["count"] == svc["count"] == 3
    assert lat["min"] == 0.010 and lat["max"] == 0.040
    assert svc["min"] == 0.008 and svc["max"] == 0.030
    assert lat["sum"] == pytest.approx(0.070, rel=1e-12)
    logs = [math.log(x) for x, _ in samples]
    assert lat["ln_sum"] == pytest.approx(sum(logs), rel=1e-12)
    assert lat["ln_sq_sum"] == pytest.approx(sum(v * v for v in logs), rel=1e-12)
    assert math.exp(lat["ln_sum"] / 3) == pytest.approx(0.02, rel=1e-12)  # gmean(10,20,40)
    node = op["nodes"]["n1"]
    assert node["requests"] == 3 and node["docs"] == 30
    assert node["ln_sum"] == pytest.approx(sum(logs), rel=1e-12)


def test_drain_resets_and_measures_the_interval():
    clock = FakeClock(100.0)
    recorder = Recorder(rank=1, clock=clock)
    recorder.record("q", "n", 0.001, 0.001)
    assert recorder.pending == 1
    clock.now = 101.5
    first = as_json(recorder.drain())
    assert first["v"] == PAYLOAD_VERSION and first["rank"] == 1
    assert first["elapsed"] == pytest.approx(1.5)
    assert recorder.pending == 0
    clock.now = 102.0
    second = as_json(recorder.drain())
    assert second["ops"] == {} and second["elapsed"] == pytest.approx(0.5)


def test_payload_is_json_and_pickle_friendly_and_valid():
    recorder = Recorder(rank=0)
    recorder.record("q", "n", 0.002, 0.001, 3, 10)
    recorder.record_error("q", "n", "http_429", 429, "rejected", 0.0005)
    recorder.record_bulk_rejections("bulk", "n", {"mapper_parsing_exception": 2})
    drained = recorder.drain()
    payload = as_json(drained)
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload
    assert pickle.loads(pickle.dumps(drained)) == drained
    assert all(isinstance(op["latency"]["hdr"], str) for op in payload["ops"].values())
    # what it holds passes the stream's own validation
    assert msgspec.json.decode(json.dumps(payload), type=RankPayload) == drained


def test_out_of_range_values_are_clamped_not_dropped():
    recorder = Recorder()
    recorder.record("q", "n", 0.0, 0.0)
    recorder.record("q", "n", 7200.0, 7200.0)
    lat = as_json(recorder.drain())["ops"]["q"]["latency"]
    assert lat["count"] == 2 and lat["clamped"] == 2
    assert lat["min"] == 1e-6 and lat["max"] == 3600.0
    assert HdrHistogram.decode(lat["hdr"]).get_total_count() == 2
    assert math.isfinite(lat["ln_sum"])


def test_errors_count_as_requests_but_stay_out_of_the_histograms():
    recorder = Recorder()
    recorder.record("q", "a", 0.010, 0.010)
    recorder.record_error("q", "a", "http_429", 429, "es_rejected_execution_exception", 0.001)
    recorder.record_error("q", "b", "timeout", None, "no response within 60 s", 60.0)
    recorder.record_error("q", "b", "connection", None, "ConnectionRefusedError")
    op = as_json(recorder.drain())["ops"]["q"]
    assert op["requests"] == 4
    assert op["errors"] == {"http_429": 1, "timeout": 1, "connection": 1}
    assert op["latency"]["count"] == 1 and op["latency"]["max"] == 0.010
    assert op["error_time"] == {"count": 2, "sum": pytest.approx(60.001), "max": 60.0}
    assert op["nodes"]["a"]["requests"] == 2 and op["nodes"]["a"]["errors"] == {"http_429": 1}
    assert op["nodes"]["b"]["errors"] == {"timeout": 1, "connection": 1}
    assert op["last_errors"]["http_429"][0]["status"] == 429


@pytest.mark.parametrize("bad", ["http_5xx", "HTTP_429", "rejected", "bulk_item_x", "http_42"])
def test_unknown_request_error_classes_are_refused(bad):
    with pytest.raises(ValueError, match="unknown request error class"):
        Recorder().record_error("q", "n", bad, None, "x")


def test_last_errors_keep_the_newest_three_truncated():
    wall = FakeClock(0.0)
    recorder = Recorder(wall=wall)
    for k in range(5):
        wall.now = float(k)
        recorder.record_error("q", "n", "http_503", 503, f"{k}" + "x" * 1000)
    kept = as_json(recorder.drain())["ops"]["q"]["last_errors"]["http_503"]
    assert len(kept) == LAST_ERRORS
    assert [item["message"][0] for item in kept] == ["2", "3", "4"]
    assert all(len(item["message"]) == MESSAGE_LIMIT for item in kept)
    assert [item["wall"] for item in kept] == [2.0, 3.0, 4.0]


def test_bulk_rejections_count_documents_by_reason():
    recorder = Recorder()
    recorder.record("bulk", "n", 0.2, 0.2, docs=995, nbytes=10_000)
    recorder.record_bulk_rejections(
        "bulk",
        "n",
        {"mapper_parsing_exception": 3, "es_rejected_execution_exception": 2, "x": 0},
        {"mapper_parsing_exception": "failed to parse field [age]"},
    )
    recorder.record_error("bulk", "n", "http_429", 429, "too many requests", 0.01)
    recorder.record_bulk_rejections("bulk", "n", {"http_429": 1000})
    op = as_json(recorder.drain())["ops"]["bulk"]
    assert op["requests"] == 2 and op["docs"] == 995
    assert op["doc_errors"] == {
        "bulk_item_mapper_parsing_exception": 3,
        "bulk_item_es_rejected_execution_exception": 2,
        "http_429": 1000,
    }
    assert op["nodes"]["n"]["doc_errors"] == op["doc_errors"]
    example = op["last_errors"]["bulk_item_mapper_parsing_exception"][0]
    assert example["message"] == "failed to parse field [age]" and example["status"] is None


def test_error_class_helpers():
    assert error_class_of_status(429) == "http_429"
    assert bulk_item_class("Mapper Parsing-Exception") == "bulk_item_mapper_parsing_exception"
    assert bulk_item_class("timeout") == "timeout"
    assert bulk_item_class("???") == "bulk_item_unknown"
    assert error_family("http_503") == "http_5xx"
    assert error_family("http_429") == "http_4xx"
    assert error_family("bulk_item_foo") == "bulk_item"
    assert error_family("timeout") == "timeout"
