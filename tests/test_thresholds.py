"""Threshold parsing (with the errors a user sees) and evaluation against results."""

from __future__ import annotations

from pathlib import Path

import pytest

from esdash.errors import EXIT_THRESHOLD, BadInput
from esdash.rundir import files
from esdash.rundir.records import Results
from esdash.view.thresholds import (
    ThresholdsFailed,
    check_thresholds,
    evaluate_thresholds,
    parse_threshold,
    parse_thresholds,
)


def _op(p99, error_rate=0.0, rps=100.0, count=500, docs_ps=1000.0):
    latency = {"count": count, "gmean": 4.0, "mean": 5.0, "p50": 4.0, "p90": 8.0, "max": 90.0}
    if p99 is not None:
        latency["p99"] = p99
    return {
        "requests": count,
        "failed": round(count * error_rate),
        "error_rate": error_rate,
        "latency": latency,
        "throughput": {"requests_per_s": rps, "docs_per_s": docs_ps},
    }


RESULTS_JSON = {
    "ingest": {"docs_per_s": 1500.0, "ops": {"bulk": _op(400.0, rps=10.0)}},
    "steps": [
        {"index": 0, "name": "small", "queries": {"age": _op(12.0), "range": _op(30.0)}},
        {"index": 1, "name": "big", "queries": {"age": _op(600.0, error_rate=0.05)}},
        {"index": 2, "name": "few", "queries": {"rare": _op(None, count=20)}},
    ],
}
RESULTS = files.convert(RESULTS_JSON, Results, Path("results.json"))


@pytest.mark.parametrize(
    ("text", "target", "metric", "op", "value"),
    [
        ("age:p99<500ms", "age", "p99", "<", 500.0),
        ("age:p99 < 0.5s", "age", "p99", "<", 500.0),
        (" *:error_rate<1% ", "*", "error_rate", "<", 0.01),
        ("*:error_rate<=0.02", "*", "error_rate", "<=", 0.02),
        ("ingest:docs_per_s>1000", "ingest", "docs_per_s", ">", 1000.0),
        ("search:throughput>=250/s", "search", "throughput", ">=", 250.0),
        ("q-1.x:P99.9<2e3ms", "q-1.x", "p99.9", "<", 2000.0),
        ("a b:gmean<.5s", "a b", "gmean", "<", 500.0),
    ],
)
def test_parse(text, target, metric, op, value):
    threshold = parse_threshold(text)
    assert (threshold.target, threshold.metric, threshold.op) == (target, metric, op)
    assert threshold.value == pytest.approx(value)
    assert threshold.text == text.strip()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("p99<500ms", "the target is missing"),
        ("age:p99=500ms", "no operator"),
        ("age:p99<fast", "it does not parse"),
        ("age:p42<5ms", "unknown metric 'p42'"),
        ("age:latency<5ms", "unknown metric 'latency'"),
        ("age:p99<500", "give the unit, ms or s"),
        ("age:p99<5%", "give the unit, ms or s"),
        ("*:error_rate<5", "did you mean 5%?"),
        ("*:error_rate<5ms", "error_rate takes a percentage"),
        ("ingest:docs_per_s>10ms", "rate per second"),
        ("age:p99<-5ms", "negative"),
        (":p99<5ms", "the target is missing"),
    ],
)
def test_bad_thresholds_name_the_string_and_the_fix(text, why):
    with pytest.raises(BadInput) as caught:
        parse_threshold(text)
    message = str(caught.value)
    assert repr(text) in message and why in message
    assert "<query|*|ingest>:<metric><op><value><unit>" in message
    assert caught.value.exit_code == 2


def test_passing_thresholds():
    thresholds = parse_thresholds(
        ["range:p99<50ms", "ingest:docs_per_s>1000", "bulk:p99<1s", "*:throughput>=10"]
    )
    assert evaluate_thresholds(thresholds, RESULTS) == []
    check_thresholds(thresholds, RESULTS)  # does not raise


def test_a_query_is_checked_in_every_step_that_has_it():
    failures = evaluate_thresholds([parse_threshold("age:p99<500ms")], RESULTS)
    assert [f.where for f in failures] == ["step 2 (big)/age"]
    assert failures[0].actual == 600.0
    assert failures[0].message == (
        "age:p99<500ms: step 2 (big)/age: p99 is 600 ms, wanted < 500 ms"
    )
    assert str(failures[0]) == failures[0].message


def test_error_rate_over_every_operation():
    failures = evaluate_thresholds([parse_threshold("*:error_rate<1%")], RESULTS)
    assert [f.where for f in failures] == ["step 2 (big)/age"]
    assert "error_rate is 5%, wanted < 1%" in failures[0].message


def test_unavailable_and_unmatched_thresholds_fail():
    failures = evaluate_thresholds(
        [parse_threshold("rare:p99<1s"), parse_threshold("missing:p50<1s")], RESULTS
    )
    assert len(failures) == 2
    assert "p99 needs at least 100 samples, there were 20" in failures[0].message
    assert "no query or ingest operation named 'missing'" in failures[1].message
    no_ingest = files.convert(
        {"steps": RESULTS_JSON["steps"], "ingest": None}, Results, Path("results.json")
    )
    failures = evaluate_thresholds([parse_threshold("ingest:docs_per_s>1")], no_ingest)
    assert "no ingest phase" in failures[0].message


def test_ingest_target():
    failures = evaluate_thresholds(
        [
            parse_threshold("ingest:docs_per_s>2000"),
            parse_threshold("ingest:p99<100ms"),
            parse_threshold("ingest:error_rate<1%"),
        ],
        RESULTS,
    )
    assert [f.message for f in failures] == [
        "ingest:docs_per_s>2000: ingest: docs_per_s is 1500/s, wanted > 2000/s",
        "ingest:p99<100ms: ingest: p99 is 400 ms, wanted < 100 ms",
    ]


def test_failed_checks_exit_with_the_threshold_code():
    with pytest.raises(ThresholdsFailed) as caught:
        check_thresholds(parse_thresholds(["age:p99<500ms", "range:p50<1ms"]), RESULTS)
    assert caught.value.exit_code == EXIT_THRESHOLD == 3
    assert str(caught.value).startswith("2 threshold check(s) failed:\n  age:p99<500ms")
    assert len(caught.value.failures) == 2
