"""Two engines side by side, and the evidence that the comparison was fair.

When a report holds runs of more than one engine (a campaign with the axis
``cluster.backend = ["elasticsearch", "opensearch"]``), two tables are added:

* ``engines``: per query, each engine's req/s (successful requests / seconds measured, mean
  over its runs and rounds), p50 and p99 latency; the ingest rate; the nodes' mean CPU and
  heap use during the run (from ``cluster.jsonl``);
* ``fairness``: what each cluster said it was, read back after settling (the ``facts`` the
  ranks write into ``results.json``): engine version, JVM, heap, and the index's shards,
  replicas, refresh interval and codec.  A row whose values differ between the engines is
  flagged, so a reader sees at once whether a difference in the numbers may come from the
  setup.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Sequence
from pathlib import Path

import msgspec

from esdash.errors import EsdashError
from esdash.report.tables import Table, pooled_percentiles
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ClusterSample
from esdash.stats import metrics
from esdash.view import format as fmt
from esdash.view.inputs import DEFAULT_ENGINE, Entry, ops_of, queries_of, query_label


def engine_of(entry: Entry) -> str:
    facts = entry.results.cluster
    if facts is not None and facts.engine:
        return facts.engine
    return str(entry.config.get("engine") or DEFAULT_ENGINE)


def by_engine_of(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """The entries grouped by the engine they ran on."""
    found: dict[str, list[Entry]] = {}
    for entry in entries:
        found.setdefault(engine_of(entry), []).append(entry)
    return found


def node_load(entry: Entry) -> tuple[float | None, float | None]:
    """Mean CPU % and heap-used % over every node and sample of the run's ``cluster.jsonl``."""
    if entry.source != "esdash":
        return None, None
    cpu: list[float] = []
    heap: list[float] = []
    with contextlib.suppress(OSError, EsdashError):
        path = RunDir(entry.path).cluster_samples_file
        cluster_run = entry.env.get("cluster_run")
        if not path.is_file() and cluster_run:
            path = RunDir(
                Path(str(cluster_run))
            ).cluster_samples_file  # --cluster runs sample there
        for line in files.read_regular(path).splitlines():
            try:
                sample = msgspec.json.decode(line, type=ClusterSample)
            except files.DAMAGE:
                continue  # a damaged sample line: the others still give the mean
            if entry.results.started and sample.time < entry.results.started:
                continue
            if entry.results.ended and sample.time > entry.results.ended:
                continue
            for node in sample.nodes.values():
                if node.cpu_percent is not None:
                    cpu.append(node.cpu_percent)
                if node.heap_used_percent is not None:
                    heap.append(node.heap_used_percent)
    return (
        statistics.fmean(cpu) if cpu else None,
        statistics.fmean(heap) if heap else None,
    )


def _mean(values: Sequence[float | None]) -> float | None:
    seen = [v for v in values if v is not None]
    return statistics.fmean(seen) if seen else None


def engines_table(entries: Sequence[Entry]) -> Table | None:
    """Per query and engine: req/s, p50, p99; ingest and node load (None: one engine only)."""
    by_engine = by_engine_of(entries)
    if len(by_engine) < 2:
        return None
    engines = sorted(by_engine)
    headers = ["query"]
    for engine in engines:
        headers += [f"{engine} req/s", f"{engine} p50 ms", f"{engine} p99 ms"]
    table = Table(
        "engines",
        "Engines side by side",
        "Per query each engine's req/s (the runs' figure, mean over runs and rounds), p50 and "
        "p99 latency (of the runs' merged histograms); then ingest docs/s (mean over runs) "
        "and the nodes' mean CPU and heap use.",
        headers,
    )
    for step, query in queries_of(entries):
        row = [query_label(step, query)]
        record: dict[str, object] = {"step": step, "query": query}
        for engine in engines:
            ops = [op for e in by_engine[engine] for op in ops_of(e, step, query)]
            rate = _mean([metrics.run_op(op).requests_per_s for op in ops])
            pooled = pooled_percentiles(ops, ["p50", "p99"]) if ops else {}
            p50, p99 = pooled.get("p50"), pooled.get("p99")
            row += [fmt.rate(rate), fmt.ms(fmt.from_ms(p50)), fmt.ms(fmt.from_ms(p99))]
            record[engine] = {"requests_per_s": rate, "p50_ms": p50, "p99_ms": p99}
        table.rows.append(row)
        table.records.append(record)
    ingest_row, cpu_row, heap_row = ["ingest docs/s"], ["node CPU %"], ["node heap %"]
    for engine in engines:
        runs = by_engine[engine]
        ingest = _mean(
            [metrics.run_ingest(e.results.ingest).docs_per_s for e in runs if e.results.ingest]
        )
        loads = [node_load(e) for e in runs]
        cpu, heap = _mean([c for c, _ in loads]), _mean([h for _, h in loads])
        ingest_row += [fmt.rate(ingest), "", ""]
        cpu_row += [fmt.NA if cpu is None else f"{cpu:.0f}", "", ""]
        heap_row += [fmt.NA if heap is None else f"{heap:.0f}", "", ""]
        table.records.append(
            {"engine": engine, "ingest_docs_per_s": ingest, "node_cpu": cpu, "node_heap": heap}
        )
    table.rows += [ingest_row, cpu_row, heap_row]
    return table


FAIRNESS_ROWS = (
    ("version", lambda f: f.version),
    ("JVM", lambda f: ", ".join(sorted({n.jvm or "?" for n in f.nodes.values()})) or None),
    (
        "heap per node",
        lambda f: (
            ", ".join(
                sorted(
                    {fmt.count((n.heap_max_bytes or 0) // 2**20) + " MiB" for n in f.nodes.values()}
                )
            )
            or None
        ),
    ),
    (
        "JVM flags",
        lambda f: " | ".join(sorted({" ".join(n.jvm_flags) for n in f.nodes.values()})) or None,
    ),
    ("nodes", lambda f: str(len(f.nodes)) if f.nodes else None),
    ("shards", lambda f: f.index.get("index.number_of_shards")),
    ("replicas", lambda f: f.index.get("index.number_of_replicas")),
    ("refresh interval", lambda f: f.index.get("index.refresh_interval")),
    ("codec", lambda f: f.index.get("index.codec")),
)
#: Rows that are expected to differ between engines (they are what is compared).
EXPECTED_TO_DIFFER = {"version", "JVM"}


def fairness_table(entries: Sequence[Entry]) -> Table | None:
    """What each engine's cluster reported, with differences flagged (None: one engine)."""
    by_engine = by_engine_of(entries)
    if len(by_engine) < 2:
        return None
    engines = sorted(by_engine)
    table = Table(
        "fairness",
        "Is the comparison fair?",
        "Read back from each cluster after settling. 'DIFFERS' marks a setting that is not "
        "the same on every engine (version and JVM are expected to).",
        ["setting", *engines, "same?"],
    )
    for name, read in FAIRNESS_ROWS:
        cells = []
        for engine in engines:
            facts = [e.results.cluster for e in by_engine[engine] if e.results.cluster]
            values = sorted({str(v) for f in facts if (v := read(f)) is not None})
            cells.append(" / ".join(values) if values else fmt.NA)
        same = len(set(cells)) == 1 and fmt.NA not in cells
        verdict = "yes" if same else ("differs" if name in EXPECTED_TO_DIFFER else "DIFFERS")
        if fmt.NA in cells:
            verdict = "unknown (not recorded)"
        table.rows.append([name, *cells, verdict])
        table.records.append({"setting": name, **dict(zip(engines, cells, strict=True))})
    return table


def engine_tables(entries: Sequence[Entry]) -> list[Table]:
    return [t for t in (engines_table(entries), fairness_table(entries)) if t is not None]
