"""The reference evaluator itself: range edges where integers meet floats.

``query_eval`` is the oracle other tests (the tracks' selectivities, ABE's result sets) trust,
so a wrong answer there hides wrong answers everywhere else.
"""

from __future__ import annotations

import pytest
from query_eval import matches


def in_range(value: object, **bounds: object) -> bool:
    return matches({"range": {"x": bounds}}, {"x": value}, set())


@pytest.mark.parametrize(
    ("value", "bounds", "expected"),
    [
        # float bounds over an integer value: int.__gt__(float) is NotImplemented (truthy)
        (5, {"gt": 5.5}, False),
        (5, {"gte": 5.5}, False),
        (5, {"lt": 4.5}, False),
        (5, {"lte": 4.5}, False),
        (5, {"gt": 4.5}, True),
        (5, {"lt": 5.5}, True),
        (5, {"gt": 5.0}, False),
        (5, {"gte": 5.0}, True),
        (5, {"lt": 5.0}, False),
        (5, {"lte": 5.0}, True),
        (5, {"gte": 5.5, "lt": 6.5}, False),
        # integer bounds over a float value
        (5.5, {"gte": 5, "lt": 6}, True),
        (5.0, {"gt": 5}, False),
        (5.0, {"lt": 5}, False),
        (5.0, {"gte": 5, "lte": 5}, True),
        (4.999, {"gte": 5}, False),
        # exact at the edge of a float's integers (no float rounding of the int)
        (2**53 + 1, {"gt": float(2**53)}, True),
        (2**53, {"gt": float(2**53)}, False),
        # numbers given as strings, as Elasticsearch accepts them
        (5, {"gt": "4.5"}, True),
        (5, {"gt": "5"}, False),
    ],
)
def test_numeric_range_edges(value: object, bounds: dict, expected: bool) -> None:
    assert in_range(value, **bounds) is expected


def test_a_range_inside_bool_uses_the_same_comparison() -> None:
    query = {"bool": {"filter": [{"range": {"age": {"gt": 30.5}}}]}}
    assert not matches(query, {"age": 30}, set())
    assert matches(query, {"age": 31}, set())
    assert not matches(
        {"bool": {"must_not": [{"range": {"age": {"lt": 29.5}}}]}}, {"age": 29}, set()
    )


def test_date_ranges_still_compare_as_dates() -> None:
    day = {"gte": "2020-01-01", "lte": "2020-01-31", "format": "yyyy-MM-dd"}
    assert in_range("2020-01-31 23:59:59", **day)
    assert not in_range("2020-02-01", **day)
    assert not in_range("2020-01-01", gt="2020-01-01")
