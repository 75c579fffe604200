"""The paper's tables, computed from runs' ``results.json`` documents.

Every table keeps two forms of each row: display cells (text, as the paper prints them) and
a record of raw numbers (for CSV and JSON, and for tests that check the numbers against the
runs).  Every number of one measurement is the run's figure of :mod:`esdash.stats.metrics`
(the summary's, the dashboard's, ``compare``'s); this module only pools measurements:

* **Query table**, one row per configuration x step x query, repetitions pooled:
  req/s = the mean ± std of the measurements' req/s (runs and rounds; one measurement: its
  req/s ± the std of its per-interval rates); hits/s (docs/s for a bulk task) = the mean of
  the measurements'.  Latency = gmean and gstd pooled exactly from each run's count, gmean
  and gstd; p1, p50, p90, p99 and p99.9 from the runs' merged HDR histograms, the maximum
  the largest of theirs.  With one run, every number is that run's own.
* **Ingest table**, one row per configuration with an ingest (a run that reused the index
  has none): time and docs/s as mean ± std over repetitions.
* **Overhead table** (the Accumulo study's layout): for each setup other than the baseline
  and each query, median, min and max over repetitions of the run-level throughput and
  latency gmean, for the setup and for the baseline with the same cluster size, workers
  and interconnect; overhead % = (setup / baseline - 1) x 100 for median vs median, min vs
  min, max vs max.  Positive means *larger*: slower for latency and ingest time, faster for
  throughput.
"""

from __future__ import annotations

import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from esdash.rundir import hdr
from esdash.rundir.records import (
    IngestResult,
    JsonMapping,
    JsonObject,
    LatencyStats,
    OpResult,
    Results,
    Spread,
)
from esdash.stats import error_rate, geometric, metrics, supported_percentiles
from esdash.stats.metrics import OpFigures
from esdash.view import compare
from esdash.view import format as fmt
from esdash.view.inputs import (
    BASELINE,
    CONFIG_FIELDS,
    ConfigKey,
    Entry,
    MissingPoint,
    config_label,
    configurations_note,
    encryption_derived,
    op_of,
    ops_of,
    queries_of,
    query_label,
)

NA = fmt.NA


@dataclass
class Table:
    id: str
    title: str
    note: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    records: list[JsonObject] = field(default_factory=list)


# ----------------------------------------------------------------------- grouping


def setup_order(entries: Iterable[Entry], baseline: str = BASELINE) -> dict[str, int]:
    order: dict[str, int] = {baseline: 0}
    for entry in entries:
        order.setdefault(str(entry.config.get("setup")), len(order))
    return order


#: A value's place in the tables' order: numbers first, by value, then text.
_Sort = tuple[int, float, str]


def _sort_value(value: object) -> _Sort:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


def group_configs(entries: Sequence[Entry], baseline: str = BASELINE) -> list[list[Entry]]:
    """Entries grouped by configuration (repetitions together), in the tables' order.

    A configuration is a session fingerprint (:attr:`esdash.view.inputs.Entry.key`): only
    runs equal in every measured setting are pooled; the settings that tell the others
    apart label them (:func:`esdash.view.inputs.mark_differences`, the ``other`` field).
    """
    groups: dict[ConfigKey, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.key, []).append(entry)
    order = setup_order(entries, baseline)

    def key(group: list[Entry]) -> tuple[int, str, _Sort, _Sort, tuple[_Sort, ...], bool]:
        config = group[0].config
        extra = tuple(_sort_value(v) for k, v in sorted(config.items()) if k not in CONFIG_FIELDS)
        return (
            order.get(str(config.get("setup")), 99),
            str(config.get("interconnect")),
            _sort_value(config.get("nodes")),
            _sort_value(config.get("workers_per_node")),
            extra,
            group[0].source != "esdash",
        )

    return sorted(groups.values(), key=key)


def config_cells(config: JsonMapping, source: str) -> list[str]:
    """The configuration columns; settings beyond them (campaign axes, the fingerprint keys
    that tell runs apart) follow the setup, so no two configurations share a row."""
    setup = str(config.get("setup"))
    if config.get("engine"):
        setup += f" on {config['engine']}"
    if source != "esdash":
        setup += f" [{source}]"
    other = config[OTHER] if OTHER in config else _other(config)
    if other:
        setup += f" · {other}"
    return [
        setup,
        str(config.get("interconnect") or NA),
        str(config.get("nodes") if config.get("nodes") is not None else NA),
        str(config.get("workers_per_node") if config.get("workers_per_node") is not None else NA),
    ]


CONFIG_HEADERS = ["setup", "interconnect", "nodes", "workers/node"]


#: The record field holding the settings beyond the configuration columns, as text.
OTHER = "other"
#: Configuration keys the columns show (engine: in the setup column).
_SHOWN = (*CONFIG_FIELDS, "engine")


def _other(config: JsonMapping) -> str:
    """``heap=2g, track.documents=2000``: the configuration's keys beyond the columns."""
    return ", ".join(f"{k}={v}" for k, v in config.items() if k not in _SHOWN and k != OTHER)


def _config_record(group: list[Entry]) -> JsonObject:
    config = group[0].config
    return {"source": group[0].source, **config, OTHER: _other(config) or None}


# ----------------------------------------------------------------------- pooling


def pooled_spread(parts: Sequence[Spread]) -> tuple[int, float | None, float | None]:
    """Exact mean and sample std of the union of series given as ``{n, mean, std}``."""
    used = [(p.n, p.mean, p.std) for p in parts if p.n and p.mean is not None]
    total = sum(n for n, _mean, _std in used)
    if not total:
        return 0, None, None
    mean = sum(n * m for n, m, _std in used) / total
    if total < 2:
        return total, mean, None
    within = sum((n - 1) * (std or 0.0) ** 2 for n, _m, std in used)
    between = sum(n * (m - mean) ** 2 for n, m, _std in used)
    return total, mean, math.sqrt(max(within + between, 0.0) / (total - 1))


def pooled_geometric(stats: Sequence[LatencyStats]) -> tuple[float | None, float | None]:
    """gmean (ms) and gstd of the union, from each part's count, gmean and gstd."""
    count = ln_sum = ln_sq = 0.0
    for part in stats:
        n = part.count
        if not n or part.gmean is None:
            continue
        m = math.log(part.gmean)
        s = math.log(part.gstd) if part.gstd else 0.0
        count += n
        ln_sum += n * m
        ln_sq += (n - 1) * s * s + n * m * m
    return geometric(int(count), ln_sum, ln_sq)


def merged_histogram(ops: Sequence[OpResult]) -> tuple[hdr.Counts, float, float] | None:
    """The runs' latency counts added up, with the exact min and max (ms).

    None without samples, or when a run with samples has no histogram (a trimmed results
    file): a merge of part of the runs would look complete and be wrong.
    """
    merged = None
    low = math.inf
    high = -math.inf
    for op in ops:
        if not op.latency.count:
            continue
        encoded = op.histograms.latency
        if not encoded:
            return None
        counts = hdr.decode(encoded)
        merged = counts if merged is None else hdr.add(merged, counts)
        low = min(low, op.latency.min if op.latency.min is not None else low)
        high = max(high, op.latency.max if op.latency.max is not None else high)
    return None if merged is None else (merged, low, high)


def pooled_percentiles(ops: Sequence[OpResult], names: Sequence[str]) -> JsonObject:
    """Percentiles (ms) of the runs' latencies together, from their merged HDR histograms."""
    if len(ops) == 1:
        return {name: ops[0].latency.value(name) for name in names}
    found = merged_histogram(ops)
    if found is None:
        return dict.fromkeys(names)
    merged, low, high = found
    wanted = [float(n[1:]) for n in names]
    supported = set(supported_percentiles(hdr.total(merged), wanted))
    values = hdr.percentiles(merged, [p for p in wanted if p in supported])
    return {
        name: None
        if float(name[1:]) not in values
        else round(min(max(values[float(name[1:])] * 1000.0, low), high), 4)
        for name in names
    }


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    found = [v for v in values if v is not None]
    if not found:
        return None, None
    return statistics.fmean(found), statistics.stdev(found) if len(found) > 1 else None


def pm(mean: float | None, std: float | None, fmt: Callable[[float | None], str]) -> str:
    if mean is None:
        return NA
    return f"{fmt(mean)} +- {fmt(std)}" if std is not None else fmt(mean)


# --------------------------------------------------------------------- the tables


def _definition(results: Iterable[Results]) -> str:
    """req/s's definition of these runs (:func:`esdash.stats.metrics.throughput_definition`);
    runs written with different ones give each, joined."""
    return "; ".join(sorted({metrics.throughput_definition(r) for r in results}))


def _bulk_task(group: Sequence[Entry], step: str, query: str) -> bool:
    """Whether ``query`` of ``step`` is a bulk task indexing during it (docs/s, not hits/s)."""
    return any(
        s.name == step and query in s.planned.indexing for e in group for s in e.results.steps
    )


def query_rows(entries: Sequence[Entry], baseline: str = BASELINE) -> list[JsonObject]:
    """One record per configuration x query with the pooled numbers (see the docstring)."""
    records = []
    queries = queries_of(entries)
    for group in group_configs(entries, baseline):
        for step, query in queries:
            pairs = [(e, op) for e in group for op in ops_of(e, step, query)]
            if not pairs:
                continue
            ops = [op for _e, op in pairs]
            indexing = _bulk_task(group, step, query)
            figures = [metrics.run_op(op, indexing) for op in ops]
            # req/s, the one definition; several measurements (runs, rounds): their mean +-
            # std; one: +- the spread of its per-interval rates
            mean, std = _mean_std([f.requests_per_s for f in figures])
            n, basis = len(ops), "runs and rounds"
            if len(figures) == 1:
                std, n, basis = figures[0].interval_std, figures[0].interval_n, "intervals"
            documents, _ = _mean_std([f.documents_per_s for f in figures])
            if len(ops) == 1:
                gmean, gstd = ops[0].latency.gmean, ops[0].latency.gstd
            else:
                gmean, gstd = pooled_geometric([op.latency for op in ops])
                gmean = None if gmean is None else round(gmean, 4)
                gstd = None if gstd is None else round(gstd, 4)
            percentiles = pooled_percentiles(ops, list(TABLE_PERCENTILES))
            slowest = [op.latency.max for op in ops if op.latency.max is not None]
            requests = sum(f.requests for f in figures)
            failed = sum(f.failed for f in figures)
            records.append(
                {
                    **_config_record(group),
                    "step": step,
                    "query": query,
                    "runs": len({e.id for e, _op in pairs}),
                    "run_ids": list(dict.fromkeys(e.id for e, _op in pairs)),
                    "requests": requests,
                    "failed": failed,
                    "error_rate": error_rate(failed, requests),
                    "throughput_mean": mean,
                    "throughput_std": std,
                    "throughput_n": n,
                    "throughput_basis": basis,
                    "throughput_definition": _definition(e.results for e, _op in pairs),
                    "hits_per_s": None if indexing else documents,
                    "docs_per_s": documents if indexing else None,
                    "latency_gmean_ms": gmean,
                    "latency_gstd": gstd,
                    **{
                        f"latency_{name.replace('.', '_')}_ms": percentiles[name]
                        for name in TABLE_PERCENTILES
                    },
                    "latency_max_ms": max(slowest) if slowest else None,
                }
            )
    return records


#: The percentiles of the query table: the paper's p1 and p99, and what a Rally user looks
#: for (p50, p90, p99, p99.9, then the maximum, Rally's p100).
TABLE_PERCENTILES = ("p1", "p50", "p90", "p99", "p99.9")


def query_table(records: Sequence[JsonMapping]) -> Table:
    """The query table; a docs/s column only when a bulk task indexed during a step."""
    bulk = any(r.get("docs_per_s") is not None for r in records)
    defined = sorted({str(r["throughput_definition"]) for r in records}) or [metrics.REQUESTS_PER_S]
    table = Table(
        "queries",
        "Query throughput and latency",
        f"req/s: {'; or '.join(defined)}; mean +- std over runs and rounds (one "
        f"measurement: +- {metrics.INTERVAL_STD}). hits/s: {metrics.HITS_PER_S}"
        + (f"; docs/s: {metrics.DOCS_PER_S}" if bulk else "")
        + ". Latency of successful requests in ms: geometric mean, geometric std (a "
        "factor), p1, p50, p90, p99, p99.9 ('-' where the sample count cannot support the "
        "percentile) and the maximum.",
        [
            *CONFIG_HEADERS,
            "query",
            "runs",
            "requests",
            "req/s (+- std)",
            "hits/s",
            *(["docs/s"] if bulk else []),
            "gmean ms",
            "gstd",
            *(f"{name} ms" for name in TABLE_PERCENTILES),
            "max ms",
            "errors",
        ],
    )
    for r in records:
        table.rows.append(
            [
                *config_cells(r, r["source"]),
                query_label(r["step"], r["query"]),
                str(r["runs"]),
                fmt.count(r["requests"]),
                pm(r["throughput_mean"], r["throughput_std"], fmt.rate),
                NA if r["hits_per_s"] is None else fmt.rate(r["hits_per_s"]),
                *([fmt.rate(r["docs_per_s"])] if bulk else []),
                fmt.ms(fmt.from_ms(r["latency_gmean_ms"])),
                fmt.factor(r["latency_gstd"]),
                *(
                    fmt.ms(fmt.from_ms(r[f"latency_{name.replace('.', '_')}_ms"]))
                    for name in TABLE_PERCENTILES
                ),
                fmt.ms(fmt.from_ms(r["latency_max_ms"])),
                fmt.errors(r["failed"], r["requests"]),
            ]
        )
        table.records.append(dict(r))
    return table


def wide_tables(records: Sequence[JsonMapping]) -> list[Table]:
    """The paper's layout: one row per setup x cluster size, one column per query."""
    queries: list[tuple[str, str]] = []
    rows: dict[tuple[str, ...], dict[tuple[str, str], JsonMapping]] = {}
    for r in records:
        if (r["step"], r["query"]) not in queries:
            queries.append((r["step"], r["query"]))
        key = tuple(config_cells(r, r["source"]))
        rows.setdefault(key, {})[(r["step"], r["query"])] = r
    headers = [*CONFIG_HEADERS, *(query_label(s, q) for s, q in queries)]
    throughput = Table(
        "throughput_wide",
        "Throughput by setup and cluster size (req/s, mean +- std)",
        "The paper's throughput table: each cell as in the query table.",
        list(headers),
    )
    latency = Table(
        "latency_wide",
        "Latency by setup and cluster size (ms, gmean x/ gstd)",
        "The paper's latency table: geometric mean and, after 'x/', the geometric std.",
        list(headers),
    )
    for key, cells in rows.items():
        t_row, l_row = list(key), list(key)
        for query in queries:
            cell = cells.get(query)
            if cell is None:
                t_row.append(NA)
                l_row.append(NA)
                continue
            t_row.append(pm(cell["throughput_mean"], cell["throughput_std"], fmt.rate))
            gmean = fmt.ms(fmt.from_ms(cell["latency_gmean_ms"]))
            l_row.append(
                gmean
                if cell["latency_gstd"] is None
                else f"{gmean} x/ {fmt.factor(cell['latency_gstd'])}"
            )
        throughput.rows.append(t_row)
        latency.rows.append(l_row)
    return [throughput, latency]


def ingest_rows(entries: Sequence[Entry], baseline: str = BASELINE) -> list[JsonObject]:
    records = []
    for group in group_configs(entries, baseline):
        runs = [
            (e, e.results.ingest)
            for e in group
            if e.results.ingest is not None
            and (e.results.ingest.duration_s or 0) > 0
            and (e.results.ingest.docs or e.source != "esdash")
        ]
        if not runs:
            continue
        figures = [metrics.run_ingest(i) for _e, i in runs]
        durations = [f.seconds for f in figures if f.seconds is not None]
        rates = [f.docs_per_s for f in figures if f.docs_per_s is not None]
        bulk = [i.ops["bulk"].latency for _e, i in runs if "bulk" in i.ops]
        gmean, _gstd = (bulk[0].gmean, None) if len(bulk) == 1 else pooled_geometric(bulk)
        time_mean, time_std = _mean_std(durations)
        rate_mean, rate_std = _mean_std(rates)
        encode = [i.encode_seconds for _e, i in runs if i.encode_seconds is not None]
        records.append(
            {
                **_config_record(group),
                "runs": len(runs),
                "run_ids": [e.id for e, _i in runs],
                "docs": runs[0][1].docs,
                "duration_s_mean": time_mean,
                "duration_s_std": time_std,
                "docs_per_s_mean": rate_mean,
                "docs_per_s_std": rate_std,
                "bulk_gmean_ms": gmean,
                "rejected_docs": sum(sum(i.rejected_docs.values()) for _e, i in runs),
                "encode_seconds_mean": _mean_std(encode)[0],
            }
        )
    return records


def ingest_table(records: Sequence[JsonMapping]) -> Table:
    table = Table(
        "ingest",
        "Ingest",
        "time: the ingest window (longest rank); docs/s = documents / time; mean +- std over "
        "repetitions. Runs that reused an existing index have no ingest and are not counted. "
        "'encode s': client-side encryption time summed over the ingest ranks.",
        [
            *CONFIG_HEADERS,
            "runs",
            "docs",
            "time s (mean +- std)",
            "docs/s (mean +- std)",
            "bulk gmean ms",
            "rejected",
            "encode s",
        ],
    )

    def seconds(value: float | None) -> str:
        return NA if value is None else f"{value:,.2f}"

    for r in records:
        table.rows.append(
            [
                *config_cells(r, r["source"]),
                str(r["runs"]),
                fmt.count(r["docs"]),
                pm(r["duration_s_mean"], r["duration_s_std"], seconds),
                pm(r["docs_per_s_mean"], r["docs_per_s_std"], fmt.rate),
                fmt.ms(fmt.from_ms(r["bulk_gmean_ms"])),
                fmt.count(r["rejected_docs"]),
                seconds(r["encode_seconds_mean"]),
            ]
        )
        table.records.append(dict(r))
    return table


# ------------------------------------------------------------------------ overhead

#: (label, unit, getter on an op or on the ingest section)
QUERY_METRICS: tuple[tuple[str, Callable[[OpResult], float | None]], ...] = (
    ("throughput req/s", lambda op: metrics.run_op(op).requests_per_s),
    ("latency gmean ms", lambda op: metrics.run_op(op).latency.gmean),
)
INGEST_METRICS: tuple[tuple[str, Callable[[IngestResult], float | None]], ...] = (
    ("ingest time s", lambda ingest: metrics.run_ingest(ingest).seconds),
    ("ingest docs/s", lambda ingest: metrics.run_ingest(ingest).docs_per_s),
)


def _spread3(values: Sequence[float]) -> JsonObject:
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "values": list(values),
    }


def _change(setup: float, base: float) -> float | None:
    return None if not base else (setup / base - 1.0) * 100.0


def overhead_rows(entries: Sequence[Entry], baseline: str = BASELINE) -> list[JsonObject]:
    groups = group_configs(entries, baseline)
    queries = queries_of(entries)
    records = []
    sides: dict[int, compare.Side] = {}

    def side(group: list[Entry]) -> compare.Side:
        """One side per group (a run's stream is read once, whatever it is compared with)."""
        return sides.setdefault(id(group), compare.Side(group[0].id, list(group)))

    for group in groups:
        config = group[0].config
        if str(config.get("setup")) == baseline:
            continue
        rest = _beside_setup(config)
        base = None
        for candidate in groups:
            if (
                str(candidate[0].config.get("setup")) == baseline
                and candidate[0].source == group[0].source
                and _beside_setup(candidate[0].config) == rest
            ):
                base = candidate
        if base is None:
            continue
        judged = _overhead_judgement(side(group), side(base), queries)
        items: list[tuple[str, str, str, list[float | None], list[float | None]]] = []
        for step, query in queries:
            for metric, get in QUERY_METRICS:
                mine = [get(op) for e in group if (op := op_of(e, step, query))]
                theirs = [get(op) for e in base if (op := op_of(e, step, query))]
                items.append((step, query, metric, theirs, mine))
        for metric, get_ingest in INGEST_METRICS:
            mine = [get_ingest(i) for e in group if (i := _ingested(e)) is not None]
            theirs = [get_ingest(i) for e in base if (i := _ingested(e)) is not None]
            items.append(("ingest", "bulk", metric, theirs, mine))
        for step, query, metric, theirs_found, mine_found in items:
            theirs_values = [v for v in theirs_found if v is not None]
            mine_values = [v for v in mine_found if v is not None]
            if not theirs_values or not mine_values:
                continue
            b, s = _spread3(theirs_values), _spread3(mine_values)
            records.append(
                {
                    **_config_record(group),
                    "baseline": baseline,
                    "step": step,
                    "query": query,
                    "metric": metric,
                    "baseline_stats": b,
                    "setup_stats": s,
                    "change_median_pct": _change(s["median"], b["median"]),
                    "change_min_pct": _change(s["min"], b["min"]),
                    "change_max_pct": _change(s["max"], b["max"]),
                    **_verdict_fields(
                        judged.get((step, query, metric))
                        if (step, query, metric) in judged
                        else compare.judge_values(
                            theirs_values,
                            mine_values,
                            metric == "ingest docs/s",
                            f"{group[0].id}/{base[0].id}/{metric}",
                        )
                    ),
                }
            )
    return records


#: The overhead table's query metrics as ``esdash compare`` names them.
_COMPARED = {"throughput req/s": "req/s", "latency gmean ms": "gmean ms"}


def _overhead_judgement(
    group: compare.Side, base: compare.Side, queries: Sequence[tuple[str, str]]
) -> dict[tuple[str, str, str], compare.Judged | None]:
    """``compare``'s cells of a setup against its baseline, per query and metric (Holm over
    the queries of each metric, as ``esdash compare`` gives them)."""
    chosen = [m for m in compare.METRICS if m.name in _COMPARED.values()]
    judged = compare.judge_sides(base, group, queries, chosen)
    return {
        (step, query, label): cell
        for label, name in _COMPARED.items()
        for (step, query), cell in zip(queries, judged.cells[name], strict=True)
    }


def _verdict_fields(cell: compare.Judged | None) -> JsonObject:
    found = cell.effect if cell is not None else None
    return {
        "ratio": found.ratio if found is not None else None,
        "low": found.low if found is not None else None,
        "high": found.high if found is not None else None,
        "p_holm": cell.p_holm if cell is not None else None,
        "verdict": cell.verdict if cell is not None and found and found.ratio else None,
    }


def _beside_setup(config: JsonMapping) -> JsonObject:
    """A configuration without its setup and what the setup implies (the mode's options
    and layout, :func:`esdash.view.inputs.encryption_derived`): the overhead's baseline is
    the run of the baseline setup that equals it in everything else."""
    return {k: v for k, v in config.items() if k != "setup" and not encryption_derived(k)}


def _ingested(entry: Entry) -> IngestResult | None:
    """The entry's ingest, when it ingested documents (a reused index did not)."""
    ingest = entry.results.ingest
    if ingest is not None and (ingest.duration_s or 0) > 0 and ingest.docs:
        return ingest
    return None


def _ratio_cell(record: JsonMapping) -> str:
    """``0.850 [0.790, 0.915]`` (the interval where one is known)."""
    if record.get("ratio") is None:
        return NA
    if record.get("low") is None:
        return f"{record['ratio']:.3f}"
    return f"{record['ratio']:.3f} [{record['low']:.3f}, {record['high']:.3f}]"


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:+.2f}%"


def _num(value: float | None) -> str:
    if value is None:
        return NA
    return fmt.ms(fmt.from_ms(value)) if abs(value) < 1000 else f"{value:,.0f}"


def overhead_table(records: Sequence[JsonMapping]) -> Table:
    table = Table(
        "overhead",
        "Overhead of each setup relative to the baseline",
        "As in the Accumulo security study: median, min and max over repetitions of each "
        "run's value; % change = setup / baseline - 1 for median vs median, min vs min, max "
        "vs max. Positive means larger: slower for latency and ingest time, faster for "
        "throughput. ratio: setup / baseline as esdash compare gives it (the mean over "
        "repetitions; latency: the gmean of all their requests) with its 95 % interval "
        "(bootstrap over the repetitions, or over blocks of a single run's intervals) and "
        "verdict (equivalent within +-5 %; better or worse after Holm's correction over the "
        "queries; else inconclusive).",
        [
            *CONFIG_HEADERS,
            "query",
            "metric",
            "baseline median [min, max] (n)",
            "median",
            "std",
            "min",
            "max",
            "n",
            "% median",
            "% min",
            "% max",
            "ratio [95 %]",
            "verdict",
        ],
    )
    for r in records:
        b, s = r["baseline_stats"], r["setup_stats"]
        table.rows.append(
            [
                *config_cells(r, r["source"]),
                query_label(r["step"], r["query"]),
                r["metric"],
                f"{_num(b['median'])} [{_num(b['min'])}, {_num(b['max'])}] ({b['n']})",
                _num(s["median"]),
                _num(s["std"]),
                _num(s["min"]),
                _num(s["max"]),
                str(s["n"]),
                _pct(r["change_median_pct"]),
                _pct(r["change_min_pct"]),
                _pct(r["change_max_pct"]),
                _ratio_cell(r),
                r["verdict"] or NA,
            ]
        )
        table.records.append(dict(r))
    return table


# ---------------------------------------------------------------- per run (CSV)

RUN_FIELDS = (
    "run",
    "source",
    "campaign",
    "repetition",
    *CONFIG_FIELDS,
    "step",
    "query",
    "requests",
    "ok",
    "failed",
    "error_rate",
    "requests_per_s",
    "interval_n",
    "interval_mean",
    "interval_std",
    "hits_per_s",
    "docs_per_s",
    "latency_gmean_ms",
    "latency_gstd",
    "latency_p1_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_p99_9_ms",
    "latency_max_ms",
    "service_gmean_ms",
    "service_p50_ms",
    "service_p90_ms",
    "service_p99_ms",
    "service_p99_9_ms",
    "service_max_ms",
)


def run_rows(entries: Sequence[Entry]) -> list[JsonObject]:
    """One row per run x query with that run's own figures (the CSV's rows).

    ``requests_per_s``, ``hits_per_s`` (``docs_per_s`` for a bulk task), the latency
    statistics and ``error_rate`` are the run's figures (:mod:`esdash.stats.metrics`);
    ``interval_mean`` and ``interval_std`` are the mean and spread of its per-interval
    req/s, another quantity (a mean of rates, not requests / seconds).
    """
    rows = []
    for entry in entries:
        extra = {k: v for k, v in entry.config.items() if k not in CONFIG_FIELDS}
        for step in entry.results.steps:
            for name, figures in metrics.step_ops(step).items():
                rows.append(
                    {
                        "run": entry.id,
                        "source": entry.source,
                        "campaign": entry.campaign,
                        "repetition": entry.repetition,
                        **{k: entry.config.get(k) for k in CONFIG_FIELDS},
                        "step": step.name,
                        "query": name,
                        **_run_figures(figures, step.queries[name]),
                        **extra,
                    }
                )
    return rows


def _run_figures(figures: OpFigures, op: OpResult) -> JsonObject:
    latency, service = figures.latency, figures.service_time
    intervals = op.throughput.intervals
    return {
        "requests": figures.requests,
        "ok": figures.ok,
        "failed": figures.failed,
        "error_rate": figures.error_rate,
        "requests_per_s": figures.requests_per_s,
        "interval_n": intervals.n,
        "interval_mean": intervals.mean,
        "interval_std": intervals.std,
        "hits_per_s": figures.hits_per_s,
        "docs_per_s": figures.docs_per_s,
        "latency_gmean_ms": latency.gmean,
        "latency_gstd": latency.gstd,
        "latency_p1_ms": latency.p1,
        "latency_p50_ms": latency.p50,
        "latency_p90_ms": latency.p90,
        "latency_p99_ms": latency.p99,
        "latency_p99_9_ms": latency.p99_9,
        "latency_max_ms": latency.max,
        "service_gmean_ms": service.gmean,
        "service_p50_ms": service.p50,
        "service_p90_ms": service.p90,
        "service_p99_ms": service.p99,
        "service_p99_9_ms": service.p99_9,
        "service_max_ms": service.max,
    }


# --------------------------------------------------------------------- environment


def environment(entries: Sequence[Entry]) -> JsonObject:
    """What a reader needs to reproduce the report: versions, machines, jobs, sessions."""
    from esdash import __version__

    runs = []
    for entry in entries:
        env = dict(entry.env)
        runs.append(
            {
                "id": entry.id,
                "source": entry.source,
                "config": config_label(entry.config),
                "repetition": entry.repetition,
                **env,
                "started_utc": _utc(env.get("started")),
                "session": entry.session_text,
            }
        )
    return {
        "generated_utc": _utc(time.time()),
        "esdash": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "runs": runs,
    }


def _utc(epoch: float | None) -> str | None:
    """The time in the environment table; None where it has no date (the records bound
    their times: this guards against a value that came from elsewhere)."""
    if not epoch:
        return None
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch)))
    except (OverflowError, OSError, ValueError):
        return None


def environment_table(env: JsonMapping) -> Table:
    table = Table(
        "environment",
        "Environment",
        f"Report made {env['generated_utc']} by esdash {env['esdash']} (Python "
        f"{env['python']}, {env['platform']}). Plugins as recorded by each run.",
        [
            "run",
            "configuration",
            "status",
            "started",
            "distribution",
            "plugins",
            "hosts",
            "bench ranks",
            "slurm job",
        ],
    )
    for run in env["runs"]:
        plugins = run.get("plugins") or {}
        table.rows.append(
            [
                run["id"],
                run["config"],
                str(run.get("status") or run.get("imported") or NA),
                run.get("started_utc") or NA,
                str(run.get("distribution") or NA),
                ", ".join(f"{k} {v}" for k, v in sorted(plugins.items())) or NA,
                ", ".join(run.get("hosts") or []) or NA,
                str(run.get("bench_ranks") or NA),
                str(run.get("slurm_job") or NA),
            ]
        )
        table.records.append({k: v for k, v in run.items() if k != "session"})
    return table


def notes(entries: Sequence[Entry], missing: Sequence[MissingPoint]) -> list[str]:
    """What a reader must know: runs that are not one configuration, points without a run,
    runs not ok, queries not run."""
    found = []
    apart = configurations_note(entries)
    if apart:
        found.append(apart)
    for campaign, label, point_status, reason in missing:
        found.append(
            f"campaign {campaign}: point {label} has no completed run ({point_status}"
            + (f": {reason}" if reason else "")
            + ")"
        )
    for entry in entries:
        status = entry.results.status
        if status not in (None, "ok"):
            found.append(f"{entry.id}: status {status}: {entry.results.reason}")
        orphaned = entry.env.get("orphaned")
        if orphaned:
            found.append(f"{entry.id}: ended without its owner ({orphaned}); its ranks stopped")
        for step in entry.results.steps:
            for query, reason in sorted(step.unsupported.items()):
                found.append(f"{entry.id}: {step.name}/{query} not run: {reason}")
            for rank, error in sorted((step.warmup_failed or {}).items()):
                found.append(f"{entry.id}: {step.name}: warm-up failed on rank {rank}: {error}")
    return found
