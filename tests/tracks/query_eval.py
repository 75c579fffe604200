"""A tiny evaluator of the query clauses the built-in tracks use, over Python documents.

It lets the tests measure a query's selectivity on a generated corpus from the query body
itself, so a body that names a wrong field or value shows up as a wrong selectivity.
Supported: match_all, term, match, match_phrase, range (numbers and dates), bool
(must/filter/should), and script queries of the form ``doc['A'].value > doc['B'].value + n``.
"""

from __future__ import annotations

import operator
import re
from datetime import datetime
from typing import Any

_SCRIPT = re.compile(r"^doc\['(\w+)'\]\.value\s*(>|<|>=|<=)\s*doc\['(\w+)'\]\.value\s*\+\s*(\d+)$")
_JAVA_TO_PY = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
#: Range operators as functions: ``operator.gt(5, 5.5)`` compares int and float exactly, where
#: ``(5).__gt__(5.5)`` returns NotImplemented, which is truthy.
_RANGE_OPS = {"gte": operator.ge, "gt": operator.gt, "lte": operator.le, "lt": operator.lt}


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _strptime(value: str, java_format: str) -> datetime:
    fmt = java_format
    for java, py in _JAVA_TO_PY.items():
        fmt = fmt.replace(java, py)
    return datetime.strptime(value, fmt)


def _range(value: Any, bounds: dict[str, Any], text_fields: set[str], field: str) -> bool:
    if isinstance(value, str):  # a date: compare as datetimes; lte of a day means its end
        doc_time = _strptime(value, "yyyy-MM-dd HH:mm:ss" if " " in value else "yyyy-MM-dd")
        fmt = bounds.get("format", "yyyy-MM-dd")
        checks = []
        for op in ("gte", "gt", "lte", "lt"):
            if op in bounds:
                bound = _strptime(bounds[op], fmt)
                day_only = "HH" not in fmt
                if op == "gte":
                    checks.append(doc_time >= bound)
                elif op == "gt":
                    checks.append(doc_time.date() > bound.date() if day_only else doc_time > bound)
                elif op == "lte":
                    checks.append(
                        doc_time.date() <= bound.date() if day_only else doc_time <= bound
                    )
                else:
                    checks.append(doc_time < bound)
        return all(checks)
    return all(
        compare(value, _number(bound, field))
        for op, compare in _RANGE_OPS.items()
        if (bound := bounds.get(op)) is not None
    )


def _number(bound: Any, field: str) -> int | float:
    """A numeric range bound; Elasticsearch also accepts numbers written as strings."""
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        return bound
    if isinstance(bound, str):
        try:
            return int(bound)
        except ValueError:
            try:
                return float(bound)
            except ValueError:
                pass
    raise AssertionError(f"range on {field}: bound {bound!r} is not a number")


def matches(query: dict[str, Any], doc: dict[str, Any], text_fields: set[str]) -> bool:
    """Whether ``doc`` matches ``query`` (the ``query`` part of a search body)."""
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return True
    if kind == "bool":
        must = [*_list(spec.get("must")), *_list(spec.get("filter"))]
        should = _list(spec.get("should"))
        ok = all(matches(q, doc, text_fields) for q in must)
        if should:
            ok = ok and any(matches(q, doc, text_fields) for q in should)
        return ok and not any(matches(q, doc, text_fields) for q in _list(spec.get("must_not")))
    if kind == "script":
        source = spec["script"]["source"] if isinstance(spec["script"], dict) else spec["script"]
        found = _SCRIPT.match(source.strip())
        assert found, f"unsupported script {source!r}"
        left, op, right, plus = found.groups()
        a, b = doc[left], doc[right] + int(plus)
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]
    ((field, value),) = spec.items()
    if isinstance(value, dict) and kind != "range":
        value = value.get("query", value.get("value"))
    actual = doc.get(field)
    if actual is None:
        return False
    if kind == "term":
        assert field not in text_fields, f"term query on the analysed text field {field}"
        return actual == value or (isinstance(actual, list) and value in actual)
    if kind == "match":
        if field in text_fields:
            return bool(set(_tokens(str(value))) & set(_tokens(str(actual))))
        return actual == value
    if kind == "match_phrase":
        want, have = _tokens(str(value)), _tokens(str(actual))
        return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))
    if kind == "range":
        return _range(actual, value, text_fields, field)
    raise AssertionError(f"unsupported query clause {kind}")


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def fields_used(body: Any) -> set[str]:
    """Field names a search body refers to (query clauses and aggregations)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("term", "match", "match_phrase", "range") and isinstance(value, dict):
                    found.update(value)
                elif key == "field" and isinstance(value, str):
                    found.add(value)
                elif key == "source" and isinstance(value, str):
                    found.update(re.findall(r"doc\['(\w+)'\]", value))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(body)
    return found
