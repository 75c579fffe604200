"""A run's numbers under Rally's names: one entry per task, as ``op_metrics`` of ``race.json``.

Someone comparing esdash with Rally reads Rally's names: ``throughput`` (``min``, ``mean``,
``median``, ``max`` with a ``unit``), ``latency`` and ``service_time`` as percentiles keyed
``50_0``, ``90_0``, ``99_0``, ``99_9`` and ``100_0`` in ms, ``error_rate`` as a fraction and
``duration`` in ms (Rally 2.13's ``race.json``).  The values are esdash's own, with esdash's
definitions (docs/metrics.md): throughput over the step's intervals (the session's
``benchmark.interval``, 1 s by default, Rally's bucket), latency from the scheduled send,
a percentile only where the sample count supports it (absent otherwise, never a guess).
What Rally has no name for stays under ``esdash`` in each entry: the step's status (a step
that did not measure cleanly says so here too), its round and its clients.
"""

from __future__ import annotations

from collections.abc import Sequence

from esdash.rundir.records import (
    IngestResult,
    JsonObject,
    LatencyStats,
    OpResult,
    RequestResult,
    Results,
    Spread,
    StepResult,
)

#: The format of ``rally.json`` (``esdash report --format rally``).
RALLY_SCHEMA = "esdash-rally-metrics/1"
#: Rally's percentile keys and the esdash statistic each one is.
PERCENTILES = (("50_0", "p50"), ("90_0", "p90"), ("99_0", "p99"), ("99_9", "p99.9"))


def op_metrics(results: Results) -> list[JsonObject]:
    """Every task of ``results`` in run order: the track's administrative tasks before the
    ingest, the ingest's bulk operations, those after it, then each query
    of each step (a step of several queries, a Rally ``parallel`` block, gives one entry per
    query, named by the query)."""
    entries = _administrative(results.track_requests, "before-ingest")
    if results.ingest is not None:
        entries += [_bulk(name, op, results.ingest) for name, op in results.ingest.ops.items()]
    entries += _administrative(results.track_requests, "after-ingest")
    for step in results.steps:
        indexing = set(step.planned.indexing)  # a bulk task that indexed during the step
        searches = [name for name in step.queries if name not in indexing]
        for name, op in step.queries.items():
            if name in indexing:
                entries.append(_step_bulk(name, op, step))
                continue
            task = step.name if len(searches) == 1 else name
            entries.append(_search(task, name, op, step))
    return entries


def _administrative(sent: Sequence[RequestResult], when: str) -> list[JsonObject]:
    """The track's administrative tasks sent ``when`` as Rally reports them: one service-time
    sample each (all of a task's requests together, as its runner sends them in one call),
    latency the same, an error rate of 0 or 1 and no throughput (one sample has none)."""
    tasks: dict[str, list[RequestResult]] = {}
    for result in sent:
        if result.when == when:
            tasks.setdefault(result.name, []).append(result)
    entries = []
    for name, requests in tasks.items():
        ms = sum(r.seconds for r in requests) * 1000.0
        sample = {"50_0": ms, "100_0": ms, "mean": ms, "unit": "ms"}
        failed = any(r.status != "ok" for r in requests)
        entries.append(
            {
                "task": name,
                "operation": requests[0].operation,
                "throughput": {"min": None, "mean": None, "median": None, "max": None},
                "latency": dict(sample),
                "service_time": dict(sample),
                "error_rate": 1.0 if failed else 0.0,
                "duration": ms,
                "esdash": {
                    "when": when,
                    "requests": [r.request for r in requests],
                    "errors": [r.error for r in requests if r.error],
                },
            }
        )
    return entries


def _bulk(name: str, op: OpResult, ingest: IngestResult) -> JsonObject:
    return {
        "task": name,
        "operation": name,
        "throughput": _throughput(op.throughput.docs_intervals, "docs/s"),
        "latency": _times(op.latency),
        "service_time": _times(op.service_time),
        "error_rate": op.error_rate,
        "duration": _ms(ingest.duration_s),
        "esdash": {"docs": op.docs, "docs_per_s": ingest.docs_per_s},
    }


def _step_bulk(name: str, op: OpResult, step: StepResult) -> JsonObject:
    """A bulk task that indexed during a step's searches (a Rally ``parallel`` block): its
    throughput in documents indexed per second, as Rally reports a bulk task."""
    spread, unit = op.throughput.docs_intervals, "docs/s"
    extra = {"docs": op.docs, "docs_per_s": op.throughput.docs_per_s}
    return _step_entry(name, name, op, step, _throughput(spread, unit), extra)


def _search(task: str, name: str, op: OpResult, step: StepResult) -> JsonObject:
    extra = {"clients": step.planned.clients, "requests_per_s": op.throughput.requests_per_s}
    return _step_entry(task, name, op, step, _throughput(op.throughput.intervals, "ops/s"), extra)


def _step_entry(
    task: str, name: str, op: OpResult, step: StepResult, throughput: JsonObject, extra: JsonObject
) -> JsonObject:
    """One operation of a query step under Rally's names; ``extra`` joins the step's own
    facts under ``esdash``."""
    return {
        "task": task,
        "operation": name,
        "throughput": throughput,
        "latency": _times(op.latency),
        "service_time": _times(op.service_time),
        "error_rate": op.error_rate,
        "duration": _ms(step.duration_s),
        "esdash": {"step": step.name, "status": step.status, "round": step.round, **extra},
    }


def _throughput(spread: Spread, unit: str) -> JsonObject:
    return {
        "min": spread.min,
        "mean": spread.mean,
        "median": spread.median,
        "max": spread.max,
        "unit": unit,
    }


def _times(stats: LatencyStats) -> JsonObject:
    """Rally's percentile keys with esdash's values; ``100_0`` is the maximum."""
    times: JsonObject = {}
    for key, name in PERCENTILES:
        value = stats.value(name)
        if value is not None:
            times[key] = value
    if stats.max is not None:
        times["100_0"] = stats.max
    times["mean"] = stats.mean
    times["unit"] = "ms"
    return times


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def rally_document(runs: Sequence[tuple[str, Results]]) -> JsonObject:
    """``rally.json`` of a report: every run's tasks under Rally's names, in report order."""
    return {
        "schema": RALLY_SCHEMA,
        "runs": [{"run": run, "op_metrics": op_metrics(results)} for run, results in runs],
    }
