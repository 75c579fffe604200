"""The one HDR module against the ``hdrhistogram`` package: same buckets, same percentiles,
same stored bytes, for generated data (hypothesis) and the edges of the range."""

from __future__ import annotations

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.rundir import hdr

values_us = st.lists(st.integers(min_value=hdr.LOWEST_US, max_value=hdr.HIGHEST_US), max_size=300)


def _recorded(values: list[int]) -> HdrHistogram:
    histogram = hdr.new_histogram()
    for value in values:
        histogram.record_value(value)
    return histogram


def _counts(values: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        index = hdr.index_of(value)
        counts[index] = counts.get(index, 0) + 1
    return counts


def test_index_of_is_the_package_index_at_every_bucket_edge():
    probe = hdr.new_histogram()
    for index in range(0, hdr.COUNTS_LEN, 7):
        low = int(hdr.LOW_US[index])
        high = int(hdr.HIGH_US[index])
        if low < hdr.LOWEST_US or high > hdr.HIGHEST_US:
            continue
        for value in (low, high):
            assert hdr.index_of(value) == probe.get_counts_array_index(value) == index


@settings(max_examples=150, deadline=None)
@given(values_us)
def test_encode_and_decode_match_recording_into_the_package(values):
    histogram = _recorded(values)
    stored = histogram.encode().decode("ascii")
    counts = hdr.decode(stored)
    assert hdr.total(counts) == len(values)
    assert hdr.encode(counts) == stored
    assert hdr.encode(_counts(values)) == stored
    if values:
        assert counts[-1] != 0  # cut after the last non-empty bucket


@settings(max_examples=150, deadline=None)
@given(values_us.filter(bool), st.lists(st.floats(0, 100), min_size=1, max_size=6))
def test_percentiles_are_the_package_s(values, wanted):
    histogram = _recorded(values)
    expected = histogram.get_percentile_to_value_dict(wanted)
    found = hdr.percentiles(hdr.decode(histogram.encode().decode()), wanted)
    assert set(found) == set(expected)
    for percentile, value in expected.items():
        assert found[percentile] == pytest.approx(value * 1e-6, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(values_us, min_size=1, max_size=6))
def test_merge_is_the_sum_of_the_parts(parts):
    encoded = [_recorded(part).encode().decode() for part in parts]
    merged = hdr.merge(encoded)
    whole = _recorded([v for part in parts for v in part])
    assert hdr.encode(merged) == whole.encode().decode()


def test_buckets_and_value_range():
    counts = hdr.from_mapping(_counts([1, 1, 2500, 2501, 1_000_000]))
    buckets = list(hdr.buckets(counts))
    assert sum(count for _low, _high, count in buckets) == 5
    assert buckets[0] == (1e-6, 1e-6, 2)
    low, high = hdr.value_range(counts)
    assert low == 1e-6
    assert high == pytest.approx(hdr.HIGH_US[hdr.index_of(1_000_000)] * 1e-6 + 1e-6)
    assert hdr.value_range(hdr.empty()) is None
    assert list(hdr.buckets(hdr.empty())) == []


def test_another_layout_is_rebinned():
    other = HdrHistogram(1, 60_000_000, 2)
    for value in (10, 2000, 3_000_000):
        other.record_value(value)
    counts = hdr.decode(other.encode().decode())
    assert hdr.total(counts) == 3


def test_add_grows_and_keeps_counts():
    a = hdr.from_mapping({2: 1})
    b = hdr.from_mapping({5: 3})
    total = hdr.add(a, b)
    assert total.tolist() == [0, 0, 1, 0, 0, 3]
    assert hdr.add(hdr.empty(), hdr.empty()).size == 0


def test_garbage_is_a_value_error():
    with pytest.raises(ValueError, match="not an encoded HDR histogram"):
        hdr.decode("HISTFAAAAnot-base64!!")
    assert np.array_equal(hdr.trim(np.array([0, 3, 0, 0], dtype=np.int64)), [0, 3])
