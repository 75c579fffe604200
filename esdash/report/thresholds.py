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

import operator
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from esdash.errors import EXIT_THRESHOLD, BadInput, EsdashError
from esdash.rundir.records import OpResult, Results
from esdash.stats import min_samples

TIME_METRICS = ("p50", "p90", "p99", "p99.9", "gmean", "mean", "max")
METRICS = TIME_METRICS + ("error_rate", "throughput", "docs_per_s")

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

_SYNTAX = re.compile(
    r"^\s*(?P<target>[^:\s][^:]*?)\s*:\s*(?P<metric>[A-Za-z0-9_.]+)\s*"
    r"(?P<op><=|>=|<|>)\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"
    r"(?P<unit>ms|s|%|/s)?\s*$"
)
_EXAMPLES = "e.g. 'search:p99<500ms', '*:error_rate<1%', 'ingest:docs_per_s>1000'"


@dataclass(frozen=True)
class Threshold:
    """A parsed threshold; ``value`` is in ms (time), a fraction (error rate) or per second."""

    text: str
    target: str
    metric: str
    op: str
    value: float

    def holds(self, actual: float) -> bool:
        return _OPERATORS[self.op](actual, self.value)

    def show(self, value: float) -> str:
        return _show(self.metric, value)


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


def _show(metric: str, value: float) -> str:
    if metric in TIME_METRICS:
        return f"{value:g} ms"
    if metric == "error_rate":
        return f"{value * 100:.4g}%"
    return f"{value:g}/s"


def _bad(text: str, why: str) -> BadInput:
    return BadInput(
        f"bad threshold {text!r}: {why}; write <query|*|ingest>:<metric><op><value><unit>, "
        f"{_EXAMPLES}"
    )


def parse_threshold(text: str) -> Threshold:
    """Parse one threshold; :class:`~esdash.errors.BadInput` names the string and the fix."""
    match = _SYNTAX.match(text)
    if match is None:
        if ":" not in text or not text.split(":", 1)[0].strip():
            raise _bad(text, "the target is missing (a query name, * or ingest, then ':')")
        if not re.search(r"<=|>=|<|>", text):
            raise _bad(text, "no operator (<, <=, > or >=)")
        raise _bad(text, "it does not parse")
    target, metric = match["target"], match["metric"].lower()
    op, unit = match["op"], match["unit"]
    value = float(match["value"])
    if metric not in METRICS:
        raise _bad(text, f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    if metric in TIME_METRICS:
        if unit not in ("ms", "s"):
            raise _bad(text, f"{metric} is a time: give the unit, ms or s (e.g. 500ms)")
        value = value * 1000.0 if unit == "s" else value
    elif metric == "error_rate":
        if unit == "%":
            value /= 100.0
        elif unit is not None:
            raise _bad(text, "error_rate takes a percentage (1%) or a fraction (0.01)")
        elif value > 1:
            raise _bad(text, f"error_rate {value:g} is above 1: did you mean {value:g}%?")
    elif unit not in (None, "/s"):
        raise _bad(text, f"{metric} is a rate per second: give a plain number or '/s'")
    if value < 0:
        raise _bad(text, "the value is negative")
    return Threshold(text.strip(), target, metric, op, value)


def parse_thresholds(texts: Iterable[str]) -> list[Threshold]:
    return [parse_threshold(text) for text in texts]


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
                yield f"step {step.index} ({step.name})/{name}", data


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
