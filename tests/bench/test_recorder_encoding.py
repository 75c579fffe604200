"""The recorder's fast histogram encoding equals recording every bucket into a new hdrh."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from esdash.bench.recorder import (
    HDR_HIGHEST_US,
    Recorder,
    encode_counts,
    hdr_index,
    new_histogram,
)


def slow_encoding(counts: dict[int, int]) -> str:
    histogram = new_histogram()
    for index, count in counts.items():
        histogram.record_value(histogram.get_value_from_index(index), count)
    return histogram.encode().decode("ascii")


microseconds = st.integers(min_value=1, max_value=HDR_HIGHEST_US)


@given(st.lists(st.tuples(microseconds, st.integers(1, 10**6)), max_size=60))
def test_encode_counts_equals_recording_into_a_new_histogram(values) -> None:
    counts: dict[int, int] = {}
    for us, count in values:
        index = hdr_index(us)
        counts[index] = counts.get(index, 0) + count
    scratch = new_histogram()
    assert encode_counts(counts, scratch) == slow_encoding(counts)
    # the scratch histogram is empty again: a second use gives the same string
    assert scratch.total_count == 0 and not any(scratch.counts)
    assert encode_counts(counts, scratch) == slow_encoding(counts)


def test_drains_reuse_one_scratch_and_stay_exact() -> None:
    recorder = Recorder(rank=1)
    for interval in range(3):
        expected: dict[int, int] = {}
        for k in range(1, 200):
            seconds = (k * (interval + 1)) / 7919.0
            recorder.record("q", "n", seconds, seconds)
            index = hdr_index(int(seconds * 1e6))
            expected[index] = expected.get(index, 0) + 1
        payload = recorder.drain()["ops"]["q"]
        assert payload["latency"]["hdr"] == slow_encoding(expected)
        assert payload["service_time"]["hdr"] == slow_encoding(expected)
    assert recorder.drain()["ops"] == {}
