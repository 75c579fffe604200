"""Synthetic run directories with known numbers, for exact checks of reports and comparisons.

Every statistic is computed here the plain way (``statistics``, ``math``, one HDR histogram
per query), independently of the code under test, and written in the ``results.json``
layout of ``docs/stream.md``.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from esdash.rundir import hdr


def histogram(latencies_ms: Sequence[float]):
    h = hdr.new_histogram()
    for value in latencies_ms:
        h.record_value(round(value * 1000))
    return h


def percentile(latencies_ms: Sequence[float], p: float) -> float:
    """What an HDR histogram of these values says (ms), as esdash reports it."""
    return histogram(latencies_ms).get_value_at_percentile(p) / 1000.0


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean": None, "std": None, "min": None, "median": None, "max": None}
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
    }


def op(
    latencies_ms: Sequence[float],
    rates: Sequence[float] = (),
    window: float = 10.0,
    docs_per_request: int = 10,
    failed: int = 0,
    requests_per_s: float | None = None,
) -> dict[str, Any]:
    logs = [math.log(v / 1000.0) for v in latencies_ms]
    n = len(latencies_ms)
    stats: dict[str, Any] = {
        "count": n,
        "min": min(latencies_ms),
        "mean": statistics.fmean(latencies_ms),
        "gmean": math.exp(statistics.fmean(logs)) * 1000.0,
        "gstd": math.exp(statistics.stdev(logs)) if n > 1 else None,
        "max": max(latencies_ms),
    }
    for p in (1.0, 50.0, 90.0, 99.0):
        if n >= math.ceil(1 / (1 - p / 100)):
            stats[f"p{p:g}"] = min(max(percentile(latencies_ms, p), stats["min"]), stats["max"])
    encoded = histogram(latencies_ms).encode().decode("ascii")
    docs = n * docs_per_request
    return {
        "requests": n + failed,
        "ok": n,
        "failed": failed,
        "errors": {"http_429": failed} if failed else {},
        "error_rate": failed / (n + failed),
        "docs": docs,
        "bytes": 0,
        "rejected_docs": {},
        "throughput": {
            "requests_per_s": requests_per_s if requests_per_s is not None else n / window,
            "docs_per_s": docs / window,
            "intervals": spread(rates),
            "docs_intervals": spread([r * docs_per_request for r in rates]),
        },
        "latency": stats,
        "service_time": dict(stats),
        "error_time_mean": None,
        "per_rank": {},
        "per_node": {},
        "last_errors": {},
        "histograms": {"latency": encoded, "service_time": encoded},
    }


def session(
    nodes: int = 1,
    workers: int = 1,
    mode: str = "none",
    interconnect: str = "loopback",
    backend: str | None = None,
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"nodes": nodes, "interconnect": interconnect}
    if backend is not None:
        cluster["backend"] = backend
    return {
        "name": "synthetic",
        "cluster": cluster,
        "encryption": {"mode": mode},
        "track": {"name": "mri", "documents": 1000},
        "benchmark": {"workers_per_node": workers},
    }


def write_run(
    directory: Path,
    run_id: str,
    queries: Mapping[str, Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    ingest: Mapping[str, Any] | None = None,
    bodies: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A run directory: ``queries`` maps step name -> {query name: op}; ``extra`` adds
    top-level results fields (``cluster``, ``rounds`` ...)."""
    path = directory / run_id
    path.mkdir(parents=True)
    steps = [
        {
            "index": k,
            "name": step,
            "planned": {"queries": list(ops)},
            "status": "measured",
            "duration_s": 10.0,
            "queries": dict(ops),
        }
        for k, (step, ops) in enumerate(queries.items())
    ]
    results = {
        "schema": "esdash.results/1",
        "run_id": run_id,
        "started": 1795000000.0,
        "ended": 1795000100.0,
        "status": "ok",
        "reason": None,
        "ranks": 2,
        "ingest": dict(ingest) if ingest else None,
        "steps": steps,
        **(extra or {}),
    }
    (path / "results.json").write_text(json.dumps(results))
    (path / "session.toml").write_text(tomli_w.dumps(session(**(config or {}))))
    (path / "run.json").write_text(json.dumps({"version": "8.19.21", "slurm_job": "4242"}))
    if bodies:
        plan = {
            "index": "mri",
            "index_body": {},
            "corpus_path": "/corpus.json",
            "corpus_documents": 1000,
            "corpus_has_actions": False,
            "bulk_size": 1000,
            "interval": 1.0,
            "seed": 7,
            "ranks": 2,
            "steps": [
                {
                    "name": step,
                    "think_time": 0.0,
                    "warmup": 1.0,
                    "duration": 10.0,
                    "target_throughput": None,
                    "queries": [{"name": q, "index": "mri", "body": bodies.get(q)} for q in ops],
                }
                for step, ops in queries.items()
            ],
        }
        (path / "bench.json").write_text(json.dumps(plan))
    return path


def ingest(duration: float, docs: int = 1000, latencies_ms: Sequence[float] = (100, 120)) -> dict:
    return {
        "duration_s": duration,
        "docs": docs,
        "docs_per_s": docs / duration,
        "rejected_docs": {},
        "ops": {"bulk": op(latencies_ms, window=duration, docs_per_request=docs)},
    }


def write_campaign(directory: Path, name: str, points: Sequence[tuple[dict, int, Path]]) -> Path:
    """A campaign directory whose points (axis values, repetition, run) all completed."""
    path = directory / name
    path.mkdir(parents=True)
    summary = {
        "schema": "esdash.campaign/1",
        "name": name,
        "dir": str(path),
        "short_names": {
            "cluster.nodes": "nodes",
            "benchmark.workers_per_node": "workers_per_node",
            "encryption.mode": "mode",
        },
        "points": [
            {
                "id": f"p{k}",
                "label": " ".join(f"{a}={v}" for a, v in values.items()) + f" #{rep}",
                "values": values,
                "repetition": rep,
                "status": "completed",
                "run": str(run),
            }
            for k, (values, rep, run) in enumerate(points)
        ],
    }
    (path / "campaign.json").write_text(json.dumps(summary))
    return path
