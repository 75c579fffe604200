"""The recorder's shortcuts give exactly the payloads of the straightforward way.

- ``drain`` encodes through one reused encoder (``esdash.rundir.hdr.Encoder``): the same
  string as recording every bucket into a new ``hdrh`` histogram;
- ``record`` batches requests: the same payloads as counting each request at once.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from support.records import as_json

from esdash.bench.recorder import RECORD_BATCH, Recorder
from esdash.rundir import hdr


def slow_encoding(counts: dict[int, int]) -> str:
    histogram = hdr.new_histogram()
    for index, count in counts.items():
        histogram.record_value(histogram.get_value_from_index(index), count)
    return histogram.encode().decode("ascii")


microseconds = st.integers(min_value=1, max_value=hdr.HIGHEST_US)


@given(st.lists(st.tuples(microseconds, st.integers(1, 10**6)), max_size=60))
def test_encode_counts_equals_recording_into_a_new_histogram(values) -> None:
    counts: dict[int, int] = {}
    for us, count in values:
        index = hdr.index_of(us)
        counts[index] = counts.get(index, 0) + count
    encoder = hdr.Encoder()
    assert encoder.encode(counts) == slow_encoding(counts)
    # the encoder's histogram is empty again: a second use gives the same string
    scratch = encoder._scratch
    assert scratch is not None and scratch.total_count == 0 and not any(scratch.counts)
    assert encoder.encode(counts) == slow_encoding(counts)
    assert encoder.encode(hdr.from_mapping(counts)) == slow_encoding(counts)


def test_drains_reuse_one_scratch_and_stay_exact() -> None:
    recorder = Recorder(rank=1)
    for interval in range(3):
        expected: dict[int, int] = {}
        for k in range(1, 200):
            seconds = (k * (interval + 1)) / 7919.0
            recorder.record("q", "n", seconds, seconds)
            index = hdr.index_of(int(seconds * 1e6))
            expected[index] = expected.get(index, 0) + 1
        payload = as_json(recorder.drain())["ops"]["q"]
        assert payload["latency"]["hdr"] == slow_encoding(expected)
        assert payload["service_time"]["hdr"] == slow_encoding(expected)
    assert recorder.drain().ops == {}


# ------------------------------------------------------------- batched record() calls

seconds = st.floats(min_value=1e-7, max_value=5000.0, allow_nan=False)
events = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"),
            st.sampled_from(["a", "b"]),
            st.sampled_from(["n1", "n2"]),
            seconds,
            seconds,
            st.integers(0, 100),
            st.integers(0, 10**6),
        ),
        st.tuples(
            st.just("error"),
            st.sampled_from(["a", "c"]),
            st.sampled_from(["n1", "n2"]),
            st.sampled_from(["timeout", "http_429"]),
        ),
        st.tuples(st.just("bulk"), st.sampled_from(["a", "d"]), st.integers(1, 5)),
        st.tuples(st.just("drain")),
    ),
    max_size=120,
)


def _replay(recorder: Recorder, steps) -> list:
    payloads = []
    for step in steps:
        if step[0] == "record":
            recorder.record(*step[1:])
        elif step[0] == "error":
            recorder.record_error(step[1], step[2], step[3], 429, "rejected", 0.001)
        elif step[0] == "bulk":
            recorder.record_bulk_rejections(step[1], "n1", {"mapper_parsing_exception": step[2]})
        else:
            payloads.append((recorder.pending, recorder.drain()))
    payloads.append((recorder.pending, recorder.drain()))
    return payloads


@given(events)
def test_batched_recording_gives_the_payloads_of_counting_each_request_at_once(steps) -> None:
    batched = Recorder(rank=2, clock=lambda: 0.0, wall=lambda: 0.0)
    direct = Recorder(rank=2, clock=lambda: 0.0, wall=lambda: 0.0)
    direct.record = direct._count  # count every request at once, as record() did
    # == on the payloads compares every float exactly and the operations' order
    assert _replay(batched, steps) == _replay(direct, steps)
    assert [list(p.ops) for _, p in _replay(batched, steps)] == [
        list(p.ops) for _, p in _replay(direct, steps)
    ]


def test_a_full_batch_is_counted_before_the_drain() -> None:
    recorder = Recorder(rank=1)
    for _ in range(RECORD_BATCH + 3):
        recorder.record("q", "n", 0.002, 0.001, 1, 10)
    assert recorder.pending == RECORD_BATCH + 3
    assert len(recorder._batch) == 3
    payload = as_json(recorder.drain())["ops"]["q"]
    assert payload["requests"] == payload["docs"] == RECORD_BATCH + 3
    assert payload["latency"]["count"] == payload["service_time"]["count"] == RECORD_BATCH + 3
    assert recorder.pending == 0
