"""Pass/fail thresholds on results: ``--threshold "search:p99<500ms"``.

Syntax: ``<target>:<metric><operator><value>[unit]``

* **target**: a query name (matched in every step that has it, and among the ingest
  operations, e.g. ``bulk``), ``*`` (every query of every step and every ingest operation), or
  ``ingest`` (the ingest phase as a whole);
* **metric** (latency metrics are of successful requests, Rally's *latency*):

  ============  =============================================  ===============
  metric        meaning                                        value unit
  ============  =============================================  ===============
  p50 p90 p99   latency percentile (needs enough samples:      ``ms`` or ``s``
  p99.9         p99 100, p99.9 1000; see esdash.stats)
  gmean         geometric mean latency                         ``ms`` or ``s``
  mean, max     arithmetic mean, maximum latency               ``ms`` or ``s``
  error_rate    failed / all requests                          ``%`` or fraction
  throughput    successful requests per second                 none or ``/s``
  docs_per_s    documents per second                           none or ``/s``
  ============  =============================================  ===============

* **operator**: ``<``, ``<=``, ``>``, ``>=`` — the condition that must *hold*.

A threshold that matches nothing, or whose metric is not available (a p99.9 of 200
requests), fails: a check that silently passes is worse than none.  A run with failed
thresholds exits with :data:`esdash.errors.EXIT_THRESHOLD` (3).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from esdash.errors import EXIT_THRESHOLD, EsdashError
from esdash.rundir.records import OpResult, Results
from esdash.stats import min_samples
from esdash.thresholds import (  # the grammar; re-exported for the report's callers
    METRICS,
    TIME_METRICS,
    Threshold,
    parse_threshold,
    parse_thresholds,
)

__all__ = [
    "METRICS",
    "TIME_METRICS",
    "Threshold",
    "ThresholdFailure",
    "ThresholdsFailed",
    "check_thresholds",
    "evaluate_thresholds",
    "parse_threshold",
    "parse_thresholds",
]


@dataclass(frozen=True)
class ThresholdFailure:
    """One threshold not met at one place (``where``), with a message for the user."""

    threshold: Threshold
    where: str
    actual: float | None
    message: str

    def __str__(self) -> str:
        return self.message


class ThresholdsFailed(EsdashError):
    """Some thresholds were not met; the message lists them."""

    exit_code = EXIT_THRESHOLD

    def __init__(self, failures: list[ThresholdFailure]) -> None:
        lines = "\n".join(f"  {failure.message}" for failure in failures)
        super().__init__(f"{len(failures)} threshold check(s) failed:\n{lines}")
        self.failures = failures


# ------------------------------------------------------------------------ evaluation


def _places(results: Results, target: str) -> Iterator[tuple[str, OpResult]]:
    """``(where, op result)`` for every operation ``target`` names."""
    ingest_ops = results.ingest.ops if results.ingest is not None else {}
    for name, data in ingest_ops.items():
        if target in ("*", name):
            yield f"ingest/{name}", data
    for step in results.steps:
        for name, data in step.queries.items():
            if target in ("*", name):
                yield f"step {step.index + 1} ({step.name})/{name}", data


def _op_value(data: OpResult, metric: str) -> tuple[float | None, str]:
    """The metric's value in threshold units, or ``None`` and why it is missing."""
    if metric in TIME_METRICS:
        value = data.latency.value(metric)
        if value is None:
            count = data.latency.count
            if metric.startswith("p") and count:
                need = min_samples(float(metric[1:]))
                return None, f"{metric} needs at least {need} samples, there were {count}"
            return None, "no successful requests"
        return float(value), ""
    if metric == "error_rate":
        value = data.error_rate
        return (None, "no requests") if value is None else (float(value), "")
    throughput = data.throughput
    value = throughput.requests_per_s if metric == "throughput" else throughput.docs_per_s
    return (None, "no measured window") if value is None else (float(value), "")


def _ingest_value(results: Results, metric: str) -> tuple[float | None, str]:
    ingest = results.ingest
    if not ingest:
        return None, "the run had no ingest phase"
    ops = ingest.ops
    if metric == "docs_per_s":
        value = ingest.docs_per_s
        return (None, "no measured window") if value is None else (float(value), "")
    if metric == "error_rate":
        requests = sum(op.requests for op in ops.values())
        failed = sum(op.failed for op in ops.values())
        return (failed / requests, "") if requests else (None, "no requests")
    if len(ops) != 1:
        return None, f"ingest has {len(ops)} operations; name one instead of 'ingest'"
    return _op_value(next(iter(ops.values())), metric)


def evaluate_thresholds(
    thresholds: Iterable[Threshold], results: Results
) -> list[ThresholdFailure]:
    """Every (threshold, place) that does not hold; empty when all pass."""
    failures = []
    for threshold in thresholds:
        if threshold.target == "ingest":
            checks = [("ingest", _ingest_value(results, threshold.metric))]
        else:
            checks = [
                (where, _op_value(data, threshold.metric))
                for where, data in _places(results, threshold.target)
            ]
        if not checks:
            failures.append(
                ThresholdFailure(
                    threshold,
                    threshold.target,
                    None,
                    f"{threshold.text}: no query or ingest operation named "
                    f"{threshold.target!r} in the results",
                )
            )
            continue
        for where, (actual, why) in checks:
            if actual is None:
                message = f"{threshold.text}: {where}: not available ({why})"
            elif threshold.holds(actual):
                continue
            else:
                message = (
                    f"{threshold.text}: {where}: {threshold.metric} is "
                    f"{threshold.show(actual)}, wanted {threshold.op} "
                    f"{threshold.show(threshold.value)}"
                )
            failures.append(ThresholdFailure(threshold, where, actual, message))
    return failures


def check_thresholds(thresholds: Iterable[Threshold], results: Results) -> None:
    """Raise :class:`ThresholdsFailed` (exit code 3) if any threshold does not hold."""
    failures = evaluate_thresholds(thresholds, results)
    if failures:
        raise ThresholdsFailed(failures)
