"""A run's numbers under Rally's names: one entry per task, as ``op_metrics`` of ``race.json``.

Someone comparing esdash with Rally reads Rally's names: ``throughput`` (``min``, ``mean``,
``median``, ``max`` with a ``unit``), ``latency`` and ``service_time`` as percentiles keyed
``50_0``, ``90_0``, ``99_0``, ``99_9`` and ``100_0`` in ms, ``error_rate`` as a fraction and
``duration`` in ms (Rally 2.13's ``race.json``).

A figure under Rally's name is Rally's figure where esdash can compute it, and says which
definition it is either way (:mod:`esdash.stats.metrics` has both and their sources):

* ``throughput`` is **Rally's**: the min, mean, median and max of its throughput samples,
  each a running average since the task began, warm-up included
  (:func:`esdash.stats.metrics.rally_throughput`, from the run's stream), with
  ``"definition": "rally: ..."`` (its short name; the document's ``definitions`` has it
  in full).  esdash's own req/s (successful requests / seconds
  measured, the summary's) is ``esdash.requests_per_s``, and a search's hits/s
  ``esdash.hits_per_s`` (a bulk task's documents: ``esdash.docs_per_s``);
* ``latency`` and ``service_time`` are **esdash's** percentiles of its merged HDR
  histograms (Rally interpolates between raw samples, which esdash does not keep), with
  ``"definition": "esdash: ..."``; a percentile only where the sample count supports it
  (absent otherwise, never a guess), the same thresholds Rally uses;
* ``error_rate`` is the same quantity in both; ``duration`` is Rally's (from the task's
  start, warm-up included); ``definitions`` at the top of the document says so for these.

What Rally has no name for stays under ``esdash`` in each entry: the step's status (a step
that did not measure cleanly says so here too), its round and its clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from esdash.rundir.records import (
    Interval,
    JsonObject,
    LatencyStats,
    RequestResult,
    Results,
    StepResult,
)
from esdash.stats import metrics
from esdash.stats.metrics import OpFigures, RallyThroughput

#: The format of ``rally.json`` (``esdash report --format rally``); 2: figures carry their
#: definitions, ``throughput`` is Rally's running average, esdash's req/s under ``esdash``.
RALLY_SCHEMA = "esdash-rally-metrics/2"
#: Rally's percentile keys and the esdash statistic each one is.
PERCENTILES = (("50_0", "p50"), ("90_0", "p90"), ("99_0", "p99"), ("99_9", "p99.9"))
#: What each of Rally's names holds here (the document's ``definitions``).
DEFINITIONS = {
    "throughput": metrics.RALLY_THROUGHPUT,
    "latency": metrics.RALLY_LATENCY,
    "service_time": metrics.RALLY_SERVICE_TIME,
    "error_rate": metrics.RALLY_ERROR_RATE,
    "duration": metrics.RALLY_DURATION,
    "esdash.requests_per_s": metrics.REQUESTS_PER_S,
    "esdash.hits_per_s": metrics.HITS_PER_S,
    "esdash.docs_per_s": metrics.DOCS_PER_S + " (the ingest: " + metrics.INGEST_DOCS_PER_S + ")",
}


@dataclass(frozen=True)
class RallyRun:
    """One run for ``rally.json``: its results and its stream's interval records (None
    without a stream, e.g. an imported file: Rally's throughput is then not computed)."""

    run: str
    results: Results
    intervals: Sequence[Interval] | None = None


def op_metrics(results: Results, intervals: Sequence[Interval] | None = None) -> list[JsonObject]:
    """Every task of ``results`` in run order: the track's administrative tasks before the
    ingest, the ingest's bulk operations, those after it, then each query
    of each step (a step of several queries, a Rally ``parallel`` block, gives one entry per
    query, named by the query)."""
    entries = _administrative(results.track_requests, "before-ingest")
    if results.ingest is not None:
        ingest = results.ingest
        figures = metrics.run_ingest(ingest)
        for name, op in metrics.ingest_ops(ingest).items():
            rally = _rally(intervals, None, name, indexing=True)
            entries.append(
                _entry(
                    name,
                    name,
                    op,
                    rally,
                    "docs/s",
                    figures.seconds,
                    {"docs": op.docs, "docs_per_s": figures.docs_per_s},
                )
            )
    entries += _administrative(results.track_requests, "after-ingest")
    definition = metrics.throughput_definition(results)
    for step in results.steps:
        ops = metrics.step_ops(step)
        searches = [name for name, op in ops.items() if not op.indexing]
        for name, op in ops.items():
            rally = _rally(intervals, step.index, name, op.indexing)
            if op.indexing:  # a bulk task that indexed during the step: docs/s, as Rally
                extra: JsonObject = {"docs": op.docs, "docs_per_s": op.docs_per_s}
                task, unit = name, "docs/s"
            else:
                extra = {"clients": step.planned.clients, "hits_per_s": op.hits_per_s}
                task, unit = (step.name if len(searches) == 1 else name), "ops/s"
            extra = {
                **_step_facts(step),
                "requests_per_s": op.requests_per_s,
                "requests_per_s_definition": definition,
                **extra,
            }
            entries.append(_entry(task, name, op, rally, unit, step.duration_s, extra))
    return entries


def _rally(
    intervals: Sequence[Interval] | None, step: int | None, name: str, indexing: bool
) -> RallyThroughput | None:
    if intervals is None:
        return None
    return metrics.rally_throughput(intervals, step, name, indexing)


def _step_facts(step: StepResult) -> JsonObject:
    return {"step": step.name, "status": step.status, "round": step.round}


def _entry(
    task: str,
    name: str,
    op: OpFigures,
    rally: RallyThroughput | None,
    unit: str,
    seconds: float | None,
    extra: JsonObject,
) -> JsonObject:
    """One operation under Rally's names; ``extra`` joins esdash's own facts under
    ``esdash``."""
    duration = rally.seconds if rally is not None and rally.seconds is not None else seconds
    return {
        "task": task,
        "operation": name,
        "throughput": _throughput(rally, unit),
        "latency": _times(op.latency),
        "service_time": _times(op.service_time),
        "error_rate": op.error_rate,
        "duration": _ms(duration),
        "esdash": extra,
    }


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
        sample = {
            "50_0": ms,
            "100_0": ms,
            "mean": ms,
            "unit": "ms",
            "definition": "esdash: the one call's time (all of the task's requests)",
        }
        failed = any(r.status != "ok" for r in requests)
        entries.append(
            {
                "task": name,
                "operation": requests[0].operation,
                "throughput": {
                    "min": None,
                    "mean": None,
                    "median": None,
                    "max": None,
                    "definition": "one request: no throughput",
                },
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


def _throughput(rally: RallyThroughput | None, unit: str) -> JsonObject:
    """Rally's throughput statistics, or none (no stream to compute them from)."""
    if rally is None:
        found: JsonObject = {"min": None, "mean": None, "median": None, "max": None}
        definition = metrics.RALLY_THROUGHPUT_NAME + " (not computed: the run has no stream)"
    else:
        found, definition = dict(rally.summary()), metrics.RALLY_THROUGHPUT_NAME
    samples = 0 if rally is None else len(rally.samples)
    return {**found, "unit": unit, "samples": samples, "definition": definition}


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
    times["definition"] = metrics.RALLY_PERCENTILES_NAME
    return times


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def rally_document(runs: Sequence[RallyRun]) -> JsonObject:
    """``rally.json`` of a report: every run's tasks under Rally's names, in report order."""
    return {
        "schema": RALLY_SCHEMA,
        "definitions": dict(DEFINITIONS),
        "runs": [{"run": r.run, "op_metrics": op_metrics(r.results, r.intervals)} for r in runs],
    }
