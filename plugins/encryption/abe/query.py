"""Search bodies rewritten for ciphertexts, and responses decoded back to plaintext.

The rule: a rewritten query selects exactly the documents the plaintext query selects on
the plaintext index, or it is refused with :class:`QueryNotSupported` naming the part.

- ``term``, ``terms``, ``match`` and ``match_phrase`` on keywords, numbers, dates and
  booleans become equality on ciphertexts (on a keyword field Elasticsearch itself treats
  ``match`` as one exact term).  A value that cannot occur (off the grid, out of range)
  becomes ``match_none``, as Elasticsearch does for ``term: 2.5`` on an integer field.
- ``range`` on numbers and dates: bounds map to grid indices by ceiling/floor, so
  ``gte a`` becomes ``gte E(ceil(a))``, ``lte b`` becomes ``lte E(floor(b))``, strict bounds
  alike, clamped to the domain; date strings span what Elasticsearch makes of them
  (``lte "2015-01-01"`` is the whole day).
- ``bool``, ``constant_score``, ``dis_max``, ``exists``, ``ids``, ``match_all``/``none``,
  ``sort`` on OPE fields, and the aggregations ``min``/``max`` (OPE fields: decoded on the
  client), ``value_count``, ``terms`` (bucket keys decoded) and ``filter``.
- Text fields: full-text analysis is impossible on AES-SIV ciphertexts.  For a field
  declared ``text+keyword`` (queried both ways) the option ``text_match = "words"`` keeps
  the paper's behaviour: ``match`` matches a value equal to one of the query's
  whitespace-separated words (all of them with ``operator: and``) and ``match_phrase`` a
  value equal to the phrase — identical to the analysed query when the field holds single
  words written as the queries write them (the MRI vendors); ``text_match = "refuse"``
  refuses them.  Pure ``text`` fields refuse every query but ``exists``.
- Refused, with the reason: fuzzy, wildcard, prefix, regexp, scripts, query strings,
  multi-field and span queries, sum/avg/stats/percentiles, histograms with a fixed interval,
  date histograms, and any part the rewriter does not know (never passed on unchecked).

Aggregation names are labels the client chose ("weight"); they are encrypted like field
names and decrypted in the response, so they leak nothing either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeGuard

from esdash.plugin_api import JsonMapping, JsonObject, JsonValue, QueryNotSupported

from .values import DayGrid, OffGrid, SecondGrid, parse_instant

if TYPE_CHECKING:
    from .codec import AbeCodec, FieldPlan

MATCH_NONE: JsonObject = {"match_none": {}}

#: Top-level search keys that carry no field names or values.
PASSTHROUGH = {
    "size",
    "from",
    "track_total_hits",
    "timeout",
    "terminate_after",
    "version",
    "seq_no_primary_term",
    "track_scores",
    "min_score",
    "explain",
    "profile",
    "allow_partial_search_results",
    "request_cache",
}
#: Top-level keys refused, with the reason.
REFUSED_TOP = {
    "highlight": "highlighting needs the analysed plaintext",
    "script_fields": "scripts run in the cluster, which only holds ciphertexts",
    "runtime_mappings": "runtime fields compute on plaintext values in the cluster",
    "suggest": "suggesters need the plaintext terms",
    "rescore": "rescoring needs full-text scores of the plaintext",
    "collapse": "not supported by the ABE rewriter",
    "search_after": "sort values would have to be encrypted; not supported by the ABE rewriter",
    "docvalue_fields": "not supported by the ABE rewriter",
    "stored_fields": "not supported by the ABE rewriter",
    "fields": "not supported by the ABE rewriter",
    "knn": "vector search is not possible on encrypted documents",
}
_CHARACTERS = "needs the plaintext characters; AES-SIV ciphertexts only support equality"
_FULL_TEXT = "full-text analysis needs the plaintext"
#: Query types refused, with the reason.
REFUSED_QUERIES = {
    "fuzzy": _CHARACTERS,
    "wildcard": _CHARACTERS,
    "prefix": _CHARACTERS,
    "regexp": _CHARACTERS,
    "script": "scripts run in the cluster on plaintext values; the cluster holds ciphertexts",
    "script_score": "scripts run in the cluster on plaintext values; the cluster holds ciphertexts",
    "function_score": "scoring functions compute on plaintext values",
    "query_string": _FULL_TEXT,
    "simple_query_string": _FULL_TEXT,
    "multi_match": _FULL_TEXT,
    "combined_fields": _FULL_TEXT,
    "match_phrase_prefix": _FULL_TEXT,
    "match_bool_prefix": _FULL_TEXT,
    "more_like_this": _FULL_TEXT,
    "intervals": _FULL_TEXT,
    "distance_feature": "distances need plaintext values; OPE keeps only the order",
}
_FIXED_INTERVAL = "a fixed interval needs plaintext differences; OPE keeps only the order"
_ARITHMETIC = "arithmetic on values needs the plaintext; OPE keeps only the order"
#: Aggregation types refused, with the reason.
REFUSED_AGGS = {
    "sum": _ARITHMETIC,
    "avg": _ARITHMETIC,
    "stats": _ARITHMETIC,
    "extended_stats": _ARITHMETIC,
    "weighted_avg": _ARITHMETIC,
    "percentiles": _ARITHMETIC,
    "percentile_ranks": _ARITHMETIC,
    "median_absolute_deviation": _ARITHMETIC,
    "boxplot": _ARITHMETIC,
    "histogram": _FIXED_INTERVAL,
    "date_histogram": _FIXED_INTERVAL,
    "auto_date_histogram": _FIXED_INTERVAL,
    "variable_width_histogram": _ARITHMETIC,
    "scripted_metric": "scripts run in the cluster, which only holds ciphertexts",
    "bucket_script": "scripts run in the cluster, which only holds ciphertexts",
    "top_hits": "not supported by the ABE rewriter",
}
_UTC = {"UTC", "Z", "+00:00", "Etc/UTC", "GMT", "+0000"}
_DATE_BOUND_FORMATS = {
    "yyyy-MM-dd",
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss",
    "strict_date",
    "date",
    "strict_date_optional_time",
    "date_optional_time",
}


def _at(part: str, key: str) -> str:
    return f"{part}.{key}" if part else key


def _unknown(part: str) -> QueryNotSupported:
    return QueryNotSupported(part, "not supported by the ABE rewriter")


def _refused(part: str, kind: str, reasons: Mapping[str, str]) -> QueryNotSupported:
    """The error for ``kind`` at ``part``, which the rewriter does not handle: the reason from
    one of the ``REFUSED_*`` tables when it knows why, else that it is not supported."""
    reason = reasons.get(kind)
    return _unknown(part) if reason is None else QueryNotSupported(part, reason)


class Rewriter:
    """Rewrites one search body with a codec's field plans and ciphers."""

    def __init__(self, codec: AbeCodec) -> None:
        self.codec = codec

    # ---------------------------------------------------------------------- fields

    def field(self, path: JsonValue, part: str, *, geo: bool = False) -> tuple[FieldPlan, str]:
        """(plan, view) of a field a query names: view is keyword, text, ope or boolean.

        A geo point is one opaque token: only ``exists`` (``geo=True``) can use it.
        """
        if not isinstance(path, str):
            raise QueryNotSupported(part, f"expected a field name, found {path!r}")
        plans = self.codec.plans
        plan = plans.get(path)
        if plan is not None:
            if plan.kind == "geo" and not geo:
                raise QueryNotSupported(
                    part,
                    f"the geo_point field {path} is stored as one opaque token; geo queries, "
                    "sorts and aggregations need its coordinates",
                )
            if plan.kind != "string":
                return plan, plan.kind
            return plan, "text" if plan.analysed else "keyword"
        base, _, sub = path.rpartition(".")
        if sub == "keyword" and base in plans and plans[base].type == "text+keyword":
            return plans[base], "keyword"
        raise QueryNotSupported(part, f"field {path} is not in the track's schema")

    def _ordered(self, path: JsonValue, part: str, needs: str) -> FieldPlan:
        """The plan of the field at ``path``, for what ``needs`` the order of its values (a
        range, sorting): only OPE keeps it."""
        plan, view = self.field(path, part)
        if view != "ope":
            raise QueryNotSupported(
                part,
                f"{needs} on the {plan.type} field {path}: AES-SIV ciphertexts do not keep "
                "the order of the values",
            )
        return plan

    def ope(self, plan: FieldPlan, index: int) -> int:
        return plan.encrypt_index(index)

    # ---------------------------------------------------------------------- search

    def search(self, body: JsonMapping) -> JsonObject:
        # The top-level keys that name fields, and the method that rewrites each.
        rewriters: dict[str, Callable[[JsonValue, str], JsonValue]] = {
            "query": self.query,
            "post_filter": self.query,
            "sort": self.sort,
            "aggs": self.aggs,
            "aggregations": self.aggs,
            "_source": self.source,
        }
        out: JsonObject = {}
        for key, value in body.items():
            if key in PASSTHROUGH:
                out[key] = value
            elif key in rewriters:
                out[key] = rewriters[key](value, key)
            else:
                raise _refused(key, key, REFUSED_TOP)
        return out

    def source(self, value: JsonValue, part: str) -> JsonValue:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self._source_field(value, part)
        if isinstance(value, list):
            return [self._source_field(v, f"{part}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, Mapping):
            out: JsonObject = {}
            for key, fields in value.items():
                if key not in ("includes", "excludes"):
                    raise _unknown(_at(part, key))
                out[key] = self.source(fields, _at(part, key))
            return out
        raise _unknown(part)

    def _source_field(self, path: JsonValue, part: str) -> str:
        if not isinstance(path, str) or "*" in path:
            raise QueryNotSupported(part, "source filters with wildcards need plaintext names")
        plan, _ = self.field(path, part)
        return plan.name

    # ---------------------------------------------------------------------- queries

    def query(self, node: JsonValue, part: str) -> JsonObject:
        if not isinstance(node, Mapping) or len(node) != 1:
            raise QueryNotSupported(part, "expected an object with one query type")
        ((kind, spec),) = node.items()
        where = _at(part, kind)
        if kind in ("match_all", "match_none"):
            if spec and set(spec) - {"boost"}:
                raise _unknown(where)
            return {kind: dict(spec or {})}
        if kind == "bool":
            return {"bool": self._bool(spec, where)}
        if kind == "constant_score":
            return {"constant_score": self._constant_score(spec, where)}
        if kind == "dis_max":
            return {"dis_max": self._dis_max(spec, where)}
        if kind == "ids":
            return {"ids": dict(spec)}
        if kind == "exists":
            return self._exists(spec, where)
        if kind == "term":
            return self._term(spec, where)
        if kind == "terms":
            return self._terms(spec, where)
        if kind in ("match", "match_phrase"):
            return self._match(kind, spec, where)
        if kind == "range":
            return self._range(spec, where)
        if kind.startswith("span_") or kind.startswith("geo_"):
            raise QueryNotSupported(where, "not possible on encrypted values")
        raise _refused(where, kind, REFUSED_QUERIES)

    def _check(self, spec: JsonValue, allowed: set[str], part: str) -> JsonMapping:
        if not isinstance(spec, Mapping):
            raise QueryNotSupported(part, f"expected an object, found {spec!r}")
        for key in spec:
            if key == "_name":
                raise QueryNotSupported(
                    _at(part, key), "named queries return their plaintext names; not supported"
                )
            if key not in allowed:
                raise _unknown(_at(part, key))
        return spec

    def _clauses(self, value: JsonValue, part: str) -> JsonObject | list[JsonObject]:
        if isinstance(value, list):
            return [self.query(q, f"{part}[{i}]") for i, q in enumerate(value)]
        return self.query(value, part)

    def _bool(self, spec: JsonValue, part: str) -> JsonObject:
        spec = self._check(
            spec, {"must", "filter", "should", "must_not", "minimum_should_match", "boost"}, part
        )
        out: JsonObject = {}
        for key, value in spec.items():
            if key in ("must", "filter", "should", "must_not"):
                out[key] = self._clauses(value, _at(part, key))
            else:
                out[key] = value
        return out

    def _constant_score(self, spec: JsonValue, part: str) -> JsonObject:
        spec = self._check(spec, {"filter", "boost"}, part)
        out = dict(spec)
        out["filter"] = self.query(spec.get("filter"), _at(part, "filter"))
        return out

    def _dis_max(self, spec: JsonValue, part: str) -> JsonObject:
        spec = self._check(spec, {"queries", "tie_breaker", "boost"}, part)
        out = dict(spec)
        queries = spec.get("queries")
        if not isinstance(queries, list):
            raise QueryNotSupported(_at(part, "queries"), "expected a list of queries")
        out["queries"] = self._clauses(queries, _at(part, "queries"))
        return out

    def _exists(self, spec: JsonValue, part: str) -> JsonObject:
        spec = self._check(spec, {"field", "boost"}, part)
        plan, _ = self.field(spec.get("field"), _at(part, "field"), geo=True)
        return {"exists": {**spec, "field": plan.name}}

    def _one_field(self, spec: JsonValue, part: str) -> tuple[str, JsonValue, JsonObject]:
        """(field, its value, the boost if any) of ``{field: ...}``, which may have a
        ``boost`` beside the field and nothing else."""
        if not isinstance(spec, Mapping):
            raise QueryNotSupported(part, f"expected an object, found {spec!r}")
        fields = [k for k in spec if k not in ("boost", "_name")]
        if len(fields) != 1:
            raise QueryNotSupported(part, "expected exactly one field")
        self._check({k: v for k, v in spec.items() if k not in fields}, {"boost"}, part)
        field_name = fields[0]
        return field_name, spec[field_name], {k: v for k, v in spec.items() if k == "boost"}

    def _single_field(
        self, spec: JsonValue, part: str, params: set[str]
    ) -> tuple[str, JsonValue, JsonObject]:
        """(field, value, extra) of ``{field: value}`` or ``{field: {value/query, ...}}``."""
        field_name, value, extra = self._one_field(spec, part)
        if isinstance(value, Mapping):
            where = _at(part, field_name)
            self._check(value, params, where)
            extra.update({k: v for k, v in value.items() if k == "boost"})
            return field_name, value, extra
        return field_name, value, extra

    def _term(self, spec: JsonValue, part: str) -> JsonObject:
        field_name, value, extra = self._single_field(
            spec, part, {"value", "boost", "case_insensitive"}
        )
        where = _at(part, field_name)
        if isinstance(value, Mapping):
            if value.get("case_insensitive"):
                raise QueryNotSupported(
                    _at(where, "case_insensitive"), "case folding needs the plaintext"
                )
            if "value" not in value:
                raise QueryNotSupported(where, "expected a value")
            value = value["value"]
        plan, view = self.field(field_name, where)
        if view == "text":
            raise QueryNotSupported(
                where,
                f"term on the analysed text field {field_name} matches its tokens, which ABE "
                f"does not index; query {field_name}.keyword",
            )
        return self._equals(plan, view, value, where, extra)

    def _equals(
        self, plan: FieldPlan, view: str, value: JsonValue, part: str, extra: JsonMapping
    ) -> JsonObject:
        """Exact equality of ``plan``'s field with ``value`` (one plaintext value)."""
        if isinstance(value, Mapping | list):
            raise QueryNotSupported(part, f"expected a single value, found {value!r}")
        if view == "ope":
            low, high = self._span(plan, value, part)
            if low is None or low > high:
                return dict(MATCH_NONE)
            if low == high:
                return {"term": {plan.name: {"value": self.ope(plan, low), **extra}}}
            return {
                "range": {
                    plan.name: {"gte": self.ope(plan, low), "lte": self.ope(plan, high), **extra}
                }
            }
        if view == "boolean" and value not in (True, False, "true", "false"):
            return dict(MATCH_NONE)
        if value is None:
            raise QueryNotSupported(part, "null is not a value")
        try:
            token = plan.siv.encrypt(plan.text(value))
        except Exception as exc:
            raise QueryNotSupported(part, str(exc)) from None
        return {"term": {plan.name: {"value": token, **extra}}}

    def _span(self, plan: FieldPlan, value: JsonValue, part: str) -> tuple[int | None, int]:
        """Grid indices ``[low, high]`` a term value selects (``low`` None: nothing)."""
        grid = plan.ope_grid
        if isinstance(grid, DayGrid | SecondGrid):
            first, last = self._instant(value, part)
            low, high = grid.ceil_ms(first), grid.floor_ms(last)
            return (low, high) if 0 <= low <= high <= grid.top else (None, 0)
        try:
            index = grid.index(value)
        except OffGrid:
            return None, 0
        return index, index

    def _instant(self, value: JsonValue, part: str) -> tuple[int, int]:
        if isinstance(value, int) and not isinstance(value, bool):
            return value, value  # epoch milliseconds
        try:
            return parse_instant(value)
        except OffGrid as exc:
            raise QueryNotSupported(part, str(exc)) from None

    def _terms(self, spec: JsonValue, part: str) -> JsonObject:
        field_name, values, extra = self._one_field(spec, part)
        where = _at(part, field_name)
        if not isinstance(values, list):
            raise QueryNotSupported(where, "terms lookup is not supported by the ABE rewriter")
        plan, view = self.field(field_name, where)
        if view == "text":
            raise QueryNotSupported(
                where, f"terms on the analysed text field {field_name} match its tokens"
            )
        clauses = [self._equals(plan, view, v, f"{where}[{i}]", {}) for i, v in enumerate(values)]
        tokens, others = [], []
        for clause in clauses:
            if "term" in clause:
                tokens.append(clause["term"][plan.name]["value"])
            elif "range" in clause:
                others.append(clause)
        if not others:
            if not tokens:
                return dict(MATCH_NONE)
            return {"terms": {plan.name: list(dict.fromkeys(tokens)), **extra}}
        if tokens:
            others.insert(0, {"terms": {plan.name: list(dict.fromkeys(tokens))}})
        return {"bool": {"should": others, "minimum_should_match": 1, **extra}}

    def _match(self, kind: str, spec: JsonValue, part: str) -> JsonObject:
        allowed = {"query", "boost"} | ({"operator"} if kind == "match" else {"slop"})
        field_name, value, extra = self._single_field(spec, part, allowed)
        where = _at(part, field_name)
        operator = "or"
        if isinstance(value, Mapping):
            if kind == "match_phrase" and value.get("slop", 0) != 0:
                raise QueryNotSupported(_at(where, "slop"), "phrase slop needs token positions")
            operator = str(value.get("operator", "or")).lower()
            if "query" not in value:
                raise QueryNotSupported(where, "expected a query")
            value = value["query"]
        plan, view = self.field(field_name, where)
        if view != "text":
            # keyword, number, date, boolean: Elasticsearch matches the whole value as one term
            return self._equals(plan, view, value, where, extra)
        if plan.type != "text+keyword" or self.codec.text_match != "words":
            raise QueryNotSupported(
                where, f"full-text analysis of the text field {field_name} needs the plaintext"
            )
        if not isinstance(value, str):
            value = plan.text(value)
        words = value.split()
        if not words:
            return dict(MATCH_NONE)
        if kind == "match_phrase":
            return self._equals(plan, "keyword", " ".join(words), where, extra)
        tokens = list(dict.fromkeys(plan.siv.encrypt(w) for w in words))
        if operator == "and" and len(tokens) > 1:
            return {"bool": {"filter": [{"term": {plan.name: t}} for t in tokens], **extra}}
        return {"terms": {plan.name: tokens, **extra}}

    def _range(self, spec: JsonValue, part: str) -> JsonObject:
        if not isinstance(spec, Mapping) or len(spec) != 1:
            raise QueryNotSupported(part, "expected exactly one field")
        ((field_name, bounds),) = spec.items()
        where = _at(part, field_name)
        bounds = self._check(
            bounds, {"gt", "gte", "lt", "lte", "boost", "format", "time_zone", "relation"}, where
        )
        plan = self._ordered(field_name, where, "range")
        if str(bounds.get("relation", "INTERSECTS")).upper() != "INTERSECTS":
            raise QueryNotSupported(_at(where, "relation"), "only applies to range fields")
        grid = plan.ope_grid
        dated = isinstance(grid, DayGrid | SecondGrid)
        if "time_zone" in bounds and str(bounds["time_zone"]) not in _UTC:
            raise QueryNotSupported(
                _at(where, "time_zone"), "only UTC: dates are encrypted as UTC days and seconds"
            )
        if "format" in bounds and (not dated or bounds["format"] not in _DATE_BOUND_FORMATS):
            raise QueryNotSupported(_at(where, "format"), "not supported by the ABE rewriter")
        low, high = 0, grid.top
        for op in ("gt", "gte", "lt", "lte"):
            bound = bounds.get(op)
            if bound is None:
                continue
            at = _at(where, op)
            if isinstance(grid, DayGrid | SecondGrid):
                first, last = self._instant(bound, at)
                if op == "gte":
                    index = grid.ceil_ms(first)
                elif op == "gt":
                    index = grid.ceil_ms(last + 1)
                elif op == "lte":
                    index = grid.floor_ms(last)
                else:
                    index = grid.floor_ms(first - 1)
            else:
                try:
                    index = {
                        "gte": grid.ceil_index,
                        "gt": grid.after_index,
                        "lte": grid.floor_index,
                        "lt": grid.before_index,
                    }[op](bound)
                except OffGrid as exc:
                    raise QueryNotSupported(at, str(exc)) from None
            if op in ("gt", "gte"):
                low = max(low, index)
            else:
                high = min(high, index)
        if low > high:
            return dict(MATCH_NONE)
        out: JsonObject = {}
        if any(bounds.get(op) is not None for op in ("gt", "gte")):
            out["gte"] = self.ope(plan, low)
        if any(bounds.get(op) is not None for op in ("lt", "lte")):
            out["lte"] = self.ope(plan, high)
        if not out:  # no bounds at all: every document with a value
            return {"exists": {"field": plan.name}}
        if "boost" in bounds:
            out["boost"] = bounds["boost"]
        return {"range": {plan.name: out}}

    # ------------------------------------------------------------------------ sort

    def sort(self, value: JsonValue, part: str) -> list[JsonValue]:
        if isinstance(value, list):
            return [self._sort_one(v, f"{part}[{i}]") for i, v in enumerate(value)]
        return [self._sort_one(value, part)]

    def _sort_one(self, value: JsonValue, part: str) -> JsonValue:
        if isinstance(value, str):
            if value in ("_score", "_doc"):
                return value
            return self._sort_field(value, {}, part)
        if isinstance(value, Mapping) and len(value) == 1:
            ((name, spec),) = value.items()
            if name in ("_score", "_doc"):
                return {name: spec}
            if isinstance(spec, str):
                spec = {"order": spec}
            if not isinstance(spec, Mapping):
                raise _unknown(_at(part, name))
            return self._sort_field(name, spec, _at(part, name))
        raise QueryNotSupported(part, f"expected a sort field, found {value!r}")

    def _sort_field(self, name: str, spec: JsonMapping, part: str) -> JsonValue:
        self._check(spec, {"order", "missing", "mode"}, part)
        plan = self._ordered(name, part, "sorting")
        if spec.get("missing", "_last") not in ("_last", "_first"):
            raise QueryNotSupported(_at(part, "missing"), "only _first or _last")
        if spec.get("mode", "min") not in ("min", "max"):
            raise QueryNotSupported(_at(part, "mode"), _ARITHMETIC)
        return {plan.name: dict(spec)} if spec else plan.name

    # ------------------------------------------------------------------ aggregations

    def aggs(self, value: JsonValue, part: str) -> JsonObject:
        if not isinstance(value, Mapping):
            raise QueryNotSupported(part, "expected an object of aggregations")
        out: JsonObject = {}
        for label, body in value.items():
            where = _at(part, label)
            if not isinstance(label, str) or not label or "." in label:
                raise QueryNotSupported(where, "expected an aggregation name without dots")
            if not isinstance(body, Mapping):
                raise QueryNotSupported(where, "expected a named aggregation")
            out[self.codec.names.segment(label, "\x00agg")] = self._agg(body, where)
        return out

    def _agg(self, body: JsonMapping, part: str) -> JsonObject:
        out: JsonObject = {}
        kinds = [k for k in body if k not in ("aggs", "aggregations", "meta")]
        if len(kinds) != 1:
            raise QueryNotSupported(part, "expected exactly one aggregation type")
        kind = kinds[0]
        spec = body[kind]
        where = _at(part, kind)
        if kind in ("min", "max"):
            spec = self._check(spec, {"field"}, where)
            plan, view = self.field(spec.get("field"), _at(where, "field"))
            if view != "ope":
                raise QueryNotSupported(
                    where, f"{kind} of the {plan.type} field {spec.get('field')} is undefined"
                )
            out[kind] = {"field": plan.name}
        elif kind == "value_count":
            spec = self._check(spec, {"field"}, where)
            plan, view = self.field(spec.get("field"), _at(where, "field"))
            if view == "text":
                raise QueryNotSupported(where, "text fields are not aggregatable")
            out[kind] = {"field": plan.name}
        elif kind == "terms":
            out[kind] = self._terms_agg(spec, where)
        elif kind == "filter":
            out[kind] = self.query(spec, where)
        else:
            raise _refused(where, kind, REFUSED_AGGS)
        for sub in ("aggs", "aggregations"):
            if sub in body:
                out[sub] = self.aggs(body[sub], _at(part, sub))
        if "meta" in body:
            raise QueryNotSupported(_at(part, "meta"), "metadata is returned in plaintext")
        return out

    def _terms_agg(self, spec: JsonValue, part: str) -> JsonObject:
        spec = self._check(
            spec,
            {"field", "size", "shard_size", "min_doc_count", "order", "show_term_doc_count_error"},
            part,
        )
        plan, view = self.field(spec.get("field"), _at(part, "field"))
        if view == "text":
            raise QueryNotSupported(part, "text fields are not aggregatable")
        order = spec.get("order", {"_count": "desc"})
        orders = order if isinstance(order, list) else [order]
        for entry in orders:
            if not isinstance(entry, Mapping):
                raise _unknown(_at(part, "order"))
            for key in entry:
                if key == "_key" and view != "ope":
                    raise QueryNotSupported(
                        _at(part, "order"),
                        "AES-SIV ciphertexts do not keep the order of the values",
                    )
                if key not in ("_count", "_key"):
                    raise _unknown(_at(part, "order"))
        return {**spec, "field": plan.name}


def mapping_problems(mappings: JsonMapping, plans: Mapping[str, FieldPlan]) -> list[str]:
    """Fields of a plaintext mapping the schema does not cover (every one is needed)."""
    problems: list[str] = []

    def walk(properties: JsonMapping, prefix: str) -> None:
        for name, prop in properties.items():
            path = f"{prefix}{name}"
            if isinstance(prop, Mapping) and "properties" in prop:
                walk(prop["properties"], path + ".")
            elif path not in plans:
                problems.append(f"declares {path}, which the track's field schema lacks")
            elif isinstance(prop, Mapping):
                for param in ("copy_to", "null_value"):
                    if param in prop:
                        problems.append(f"field {path}: {param} is not supported under ABE")

    walk(mappings.get("properties") or {}, "")
    return problems


# --------------------------------------------------------------------------- decode


def decode_search(codec: AbeCodec, body: JsonObject, request: JsonMapping) -> JsonObject:
    """Decrypt hits' ``_source``, sort values and the aggregations of ``request`` in place."""
    hits = (body.get("hits") or {}).get("hits")
    if hits:
        sort_plans = _sort_plans(codec, request.get("sort"))
        for hit in hits:
            source = hit.get("_source")
            if source is not None:
                hit["_source"] = codec.decode_document(source)
            if sort_plans and "sort" in hit:
                hit["sort"] = [
                    _decode_sort(plan, value) if plan is not None else value
                    for plan, value in zip(sort_plans, hit["sort"], strict=False)
                ]
    aggs = request.get("aggs") or request.get("aggregations")
    if aggs and body.get("aggregations"):
        body["aggregations"] = _decode_aggs(codec, aggs, body["aggregations"])
    return body


def _sort_plans(codec: AbeCodec, sort: JsonValue) -> list[FieldPlan | None]:
    if not sort:
        return []
    plans = []
    for entry in sort if isinstance(sort, list) else [sort]:
        # as the rewriter wrote it: a field name, or an object with one
        if isinstance(entry, str):
            plans.append(codec.by_name.get(entry))
        else:
            name = next(iter(entry)) if isinstance(entry, Mapping) else None
            plans.append(codec.by_name.get(name) if name is not None else None)
    return plans


def _in_range(value: JsonValue, plan: FieldPlan) -> TypeGuard[int | float]:
    """Whether ``value`` is a ciphertext of ``plan``'s OPE range."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and plan.out_range[0] <= value <= plan.out_range[1]
    )


def _decode_sort(plan: FieldPlan, value: JsonValue) -> JsonValue:
    if not _in_range(value, plan):  # Long.MIN/MAX for missing values
        return value
    index = plan.decrypt_index(int(value))
    grid = plan.ope_grid
    if isinstance(grid, DayGrid | SecondGrid):
        return grid.epoch_ms(index)
    return grid.value(index)


def _decode_metric(plan: FieldPlan, result: JsonObject) -> None:
    value = result.get("value")
    result.pop("value_as_string", None)
    if value is None or not _in_range(value, plan):
        return
    index = plan.decrypt_index(int(value))
    grid = plan.ope_grid
    if isinstance(grid, DayGrid | SecondGrid):
        result["value"] = float(grid.epoch_ms(index))
        result["value_as_string"] = grid.value(index)
    else:
        result["value"] = float(grid.value(index))


def _decode_aggs(codec: AbeCodec, request: JsonMapping, response: JsonObject) -> JsonObject:
    out: JsonObject = {}
    for token, result in response.items():
        body = request.get(token)
        if body is None or not isinstance(result, dict):
            out[token] = result
            continue
        label = codec.names.decrypt_segment(token, "\x00agg")
        kind = next(k for k in body if k not in ("aggs", "aggregations"))
        sub = body.get("aggs") or body.get("aggregations")
        field = body[kind].get("field") if isinstance(body[kind], Mapping) else None
        plan = codec.by_name.get(field) if field else None
        if kind in ("min", "max") and plan is not None:
            _decode_metric(plan, result)
        elif kind == "terms" and plan is not None:
            for bucket in result.get("buckets", []):
                _decode_bucket(plan, bucket)
                if sub:
                    bucket.update(_decode_aggs(codec, sub, _sub_results(bucket, sub)))
        if sub and kind != "terms":
            result.update(_decode_aggs(codec, sub, _sub_results(result, sub)))
        out[label] = result
    return out


def _sub_results(result: JsonObject, sub: JsonMapping) -> JsonObject:
    found = {}
    for token in sub:
        if token in result:
            found[token] = result.pop(token)
    return found


def _decode_bucket(plan: FieldPlan, bucket: JsonObject) -> None:
    key = bucket.get("key")
    if plan.kind == "ope":
        if not _in_range(key, plan):
            return
        index = plan.decrypt_index(int(key))
        grid = plan.ope_grid
        if isinstance(grid, DayGrid | SecondGrid):
            bucket["key"] = grid.epoch_ms(index)
            bucket["key_as_string"] = grid.value(index)
        else:
            bucket["key"] = grid.value(index)
            bucket.pop("key_as_string", None)
    else:
        bucket["key"] = plan.decrypt_value(key)
