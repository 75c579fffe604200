"""The one definition of each figure (esdash.stats.metrics): against the measurement core,
against Rally's own worked examples, and the stream's seconds of a part of the run."""

from __future__ import annotations

import math
import random

import pytest
from support.records import header as header_record
from support.records import interval as interval_record

from esdash.bench.recorder import Recorder
from esdash.rundir.records import OpPayload, Results
from esdash.stats import metrics, summarize
from esdash.stats.merge import Merged
from esdash.stats.metrics import StreamSeconds, rally_throughput


def _bulk(docs: int, requests: int = 1, failed: int = 0) -> OpPayload:
    recorder = Recorder(rank=1)
    for _ in range(requests):
        recorder.record("bulk", "node-0", 0.2, 0.2, docs // max(requests, 1), 100)
    for _ in range(failed):
        recorder.record_error("bulk", "node-0", "http_429", 429, "rejected")
    return recorder.drain().ops["bulk"]


def _record(seq: int, phase: str, elapsed: float, op: OpPayload | None, step: int | None = 0):
    return interval_record(
        seq=seq,
        t=float(seq + 1),
        wall=1000.0 + seq,
        phase=phase,
        step=step,
        elapsed=elapsed,
        ops={} if op is None else {"bulk": op},
    )


def test_rally_counts_the_warm_up_in_its_running_average():
    """Rally's own example (its driver test ``test_different_sample_types``): 3,000 docs in
    the warm-up's first second, then 2,500 in the next half second of the measurement give
    one measurement sample of 5,500 / 1.5 s = 3,666.7 docs/s; the warm-up's sample is not
    one of the task's measurement samples."""
    records = [
        _record(0, "warmup", 1.0, _bulk(3000)),
        _record(1, "measure", 0.5, _bulk(2500)),
    ]
    found = rally_throughput(records, 0, "bulk", indexing=True)
    assert found.samples == pytest.approx((5500 / 1.5,))
    assert found.summary()["mean"] == pytest.approx(3666.6666666666665)
    assert found.seconds == pytest.approx(1.5)


def test_rally_samples_are_running_averages_from_the_first_request():
    """Rally's ``test_single_metrics_aggregation`` for one client: 5,000 docs a second, each
    sample 5,000 docs/s; idle records before the first request are not the task's time, and a
    failed request weighs nothing (Rally counts 0 operations for an error)."""
    records = [_record(0, "measure", 1.0, None)]  # ranks starting: no request yet
    records += [_record(k, "measure", 1.0, _bulk(5000)) for k in range(1, 7)]
    assert rally_throughput(records, 0, "bulk", True).samples == pytest.approx((5000.0,) * 6)
    searches = [
        _record(0, "measure", 1.0, _bulk(10, requests=10)),
        _record(1, "measure", 1.0, _bulk(0, requests=0, failed=10)),
    ]
    samples = rally_throughput(searches, 0, "bulk", indexing=False).samples
    assert samples == pytest.approx((10.0, 10.0 / 2.0))
    assert rally_throughput(searches, 1, "bulk").samples == ()  # another step: none


def test_stream_seconds_leave_out_idle_records_at_either_end():
    seconds = StreamSeconds()
    for elapsed, requests in ((1.0, 0), (1.0, 0), (0.8, 5), (1.0, 7), (1.0, 0), (1.0, 0)):
        seconds.add(elapsed, requests)
    assert seconds.seconds(ended=True) == pytest.approx(1.8)  # from the first to the last
    assert seconds.seconds(ended=False) == pytest.approx(3.8)  # still going: a stall counts
    assert metrics.stream_rate([(1.0, 0), (0.5, 50), (1.0, 100), (1.0, 0)]) == pytest.approx(100)
    assert metrics.stream_rate([(1.0, 0)]) is None


def test_figures_of_a_stream_record_are_the_measurement_cores():
    """One record's figures: the recorder's counts over the record's length, statistics as
    ``esdash.stats.summarize`` gives them (in ms, rounded as results.json keeps them)."""
    rng = random.Random(3)
    recorders = [Recorder(rank=r) for r in (1, 2)]
    for k in range(600):
        value = rng.lognormvariate(math.log(0.004), 0.6)
        recorders[k % 2].record("q", "node-0", value, value * 0.9, 7, 100)
    recorders[0].record_error("q", "node-0", "http_500", 500, "boom")
    merged = Merged()
    for recorder in recorders:
        merged.add(recorder.drain())
    payload = merged.to_payload().ops["q"]
    figures = metrics.payload_figures(payload, 2.0)
    assert (figures.requests, figures.failed, figures.ok) == (601, 1, 600)
    assert figures.requests_per_s == pytest.approx(300.0)
    assert figures.hits_per_s == pytest.approx(600 * 7 / 2.0) and figures.docs_per_s is None
    assert figures.unit == "hits/s" and figures.kind == metrics.NOW
    assert figures.error_rate == pytest.approx(1 / 601)
    expected = summarize(merged.ops["q"].latency)
    for p in (50.0, 90.0, 99.0):
        assert figures.latency_s(f"p{p:g}") == pytest.approx(expected.percentiles[p], abs=1e-7)
    assert figures.latency.p99_9 is None  # 600 samples cannot support p99.9
    assert figures.latency_s("gmean") == pytest.approx(expected.gmean, abs=1e-7)
    service = summarize(merged.ops["q"].service_time)
    assert figures.service_time.p50 == pytest.approx(service.percentiles[50.0] * 1000, abs=1e-4)
    bulk = metrics.payload_figures(payload, 2.0, indexing=True)
    assert bulk.unit == "docs/s" and bulk.docs_per_s == pytest.approx(2100.0)
    assert metrics.payload_figures(payload, 0.0).requests_per_s is None


def test_which_documents_are_indexed():
    """The ingest's operations and a step's bulk tasks index documents; a search returns
    hits."""
    head = header_record(
        steps=[{"name": "mixed", "queries": ["q", "load"], "indexing": ["load"]}],
    )
    assert metrics.indexes_documents(head, "ingest", None, "bulk")
    assert metrics.indexes_documents(head, "measure", 0, "load")
    assert not metrics.indexes_documents(head, "measure", 0, "q")
    assert not metrics.indexes_documents(head, "measure", 7, "load")  # no such step
    assert not metrics.indexes_documents(None, "measure", 0, "load")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"format": 3}, metrics.REQUESTS_PER_S),
        ({"format": 3, "throughput_definition": "as written"}, "as written"),
        ({"format": 2}, "successful requests / the planned step duration (results format 2"),
        ({}, "successful requests / the planned step duration (results format 1"),
        ({"format": 3, "imported_from": {"format": "authors-queries"}}, "imported file"),
    ],
)
def test_each_results_file_names_its_req_per_s_definition(document, expected):
    results = Results(**document)
    assert expected in metrics.throughput_definition(results)
