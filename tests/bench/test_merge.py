"""Merging payloads across ranks and intervals: the result is what one recorder would hold."""

from __future__ import annotations

import json
import math
import random

import msgspec
import pytest
from support.records import as_json

from esdash.bench.recorder import Recorder
from esdash.rundir import hdr
from esdash.rundir.records import RankPayload
from esdash.stats.merge import Merged, merge_payloads


class FakeWall:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _samples(seed: int, n: int) -> list[tuple[str, str, float, float, int]]:
    rng = random.Random(seed)
    ops, nodes = ("age", "range"), ("n0", "n1", "n2")
    return [
        (
            rng.choice(ops),
            rng.choice(nodes),
            rng.lognormvariate(math.log(0.01), 0.8),
            rng.lognormvariate(math.log(0.008), 0.8),
            rng.randrange(20),
        )
        for _ in range(n)
    ]


def assert_same(a, b, path="payload"):
    """Equal, except floats (sums added in another order) to 1e-12 relative."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{k}]")
    else:
        assert a == b, path


def _histogram_counts(series) -> list[int]:
    return series.counts.tolist()


def test_merging_ranks_equals_recording_everything_in_one_place():
    samples = _samples(3, 9000)
    single = Recorder()
    ranks = [Recorder(rank=r) for r in range(3)]
    for k, (op, node, latency, service, docs) in enumerate(samples):
        single.record(op, node, latency, service, docs, 100)
        ranks[k % 3].record(op, node, latency, service, docs, 100)
    ranks[1].record_error("age", "n1", "http_429", 429, "rejected")
    single.record_error("age", "n1", "http_429", 429, "rejected")

    merged = merge_payloads(r.drain() for r in ranks)
    whole = Merged().add(single.drain())
    assert merged.ranks == {0, 1, 2}
    assert set(merged.ops) == set(whole.ops) == {"age", "range"}
    for name in whole.ops:
        a, b = merged.ops[name], whole.ops[name]
        assert (a.requests, a.docs, a.bytes, a.errors) == (b.requests, b.docs, b.bytes, b.errors)
        for series in ("latency", "service_time"):
            sa, sb = getattr(a, series), getattr(b, series)
            assert sa.count == sb.count
            assert (sa.min, sa.max) == (sb.min, sb.max)
            assert sa.ln_sum == pytest.approx(sb.ln_sum, rel=1e-12)
            assert sa.ln_sq_sum == pytest.approx(sb.ln_sq_sum, rel=1e-12)
            assert _histogram_counts(sa) == _histogram_counts(sb)
        for node in b.nodes:
            assert a.nodes[node].requests == b.nodes[node].requests
            assert a.nodes[node].errors == b.nodes[node].errors
            assert a.nodes[node].ln_sum == pytest.approx(b.nodes[node].ln_sum, rel=1e-12)


def test_merged_data_merges_again_through_payloads_and_directly():
    payloads = []
    for seed in range(4):
        recorder = Recorder(rank=seed)
        for op, node, latency, service, docs in _samples(seed, 500):
            recorder.record(op, node, latency, service, docs)
        payloads.append(recorder.drain())
    flat = merge_payloads(payloads)
    # Cumulative from pairwise merges, once via encoded payloads and once in memory.
    left = merge_payloads(payloads[:2]).to_payload()
    right = merge_payloads(payloads[2:]).to_payload()
    via_payloads = merge_payloads([left, right])
    via_objects = merge_payloads(payloads[:2]).merge(merge_payloads(payloads[2:]))
    for other in (via_payloads, via_objects):
        assert other.ranks == {0, 1, 2, 3}
        assert_same(as_json(other.to_payload()), as_json(flat.to_payload()))


def test_merge_does_not_alias_its_input():
    recorder = Recorder(rank=0)
    recorder.record("q", "n", 0.01, 0.01)
    one = Merged().add(recorder.drain())
    copy = one.copy()
    copy.merge(one)
    assert one.ops["q"].requests == 1 and copy.ops["q"].requests == 2
    assert hdr.total(one.ops["q"].latency.counts) == 1


def test_last_errors_across_ranks_keep_the_newest():
    wall = FakeWall()
    recorders = [Recorder(rank=r, wall=wall) for r in range(2)]
    for k in range(4):
        recorders[k % 2].record_error("q", "n", "http_503", 503, f"m{k}")
    merged = merge_payloads(r.drain() for r in recorders)
    kept = merged.ops["q"].last_errors["http_503"]
    assert [item.message for item in kept] == ["m1", "m2", "m3"]
    assert merged.ops["q"].ok == 0 and merged.ops["q"].failed == 4


def test_rank_override_elapsed_and_version():
    recorder = Recorder()
    recorder.record("q", "n", 0.01, 0.01)
    payload = recorder.drain()
    payload.elapsed = 2.0
    other = msgspec.structs.replace(payload, elapsed=1.0)
    merged = Merged().add(payload, rank=5).add(other, rank=6)
    assert merged.ranks == {5, 6} and merged.elapsed == 2.0 and merged.payloads == 2
    # another payload version is refused when a payload is read
    data = {**as_json(payload), "v": 99}
    with pytest.raises(msgspec.ValidationError, match=r"\$\.v"):
        msgspec.json.decode(json.dumps(data), type=RankPayload)


def test_empty_series_are_not_decoded_and_stay_empty():
    recorder = Recorder(rank=0)
    recorder.record_error("q", "n", "timeout", None, "slow")
    payload = recorder.drain()
    merged = Merged().add(payload)
    op = merged.ops["q"]
    assert op.latency.count == 0 and op.latency.min is None
    again = merged.to_payload().ops["q"].latency
    assert again.count == 0 and again.min is None and again.max is None
