"""The threshold grammar: ``--threshold "search:p99<500ms"`` parsed and checked before a run.

On the floor of the session (as :mod:`esdash.references`), so the pre-flight checks
(:mod:`esdash.prepare.checks`) refuse a threshold that does not parse, or whose target
names no query the session runs, before anything starts; :mod:`esdash.view.thresholds`
evaluates parsed thresholds against results.  The syntax is documented there.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from esdash.errors import BadInput

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


#: The operations an ingest records (:mod:`esdash.bench.loadgen`); a target may name them.
INGEST_OPERATIONS = ("bulk",)
#: Targets that name no single operation: every one, and the ingest phase as a whole.
WILDCARD_TARGETS = ("*", "ingest")


def target_problem(threshold: Threshold, queries: Sequence[str]) -> str | None:
    """Why ``threshold``'s target matches nothing a run with ``queries`` records, or None.

    A typo in the target would otherwise be found only after the whole benchmark, as a
    failed threshold (exit code 3); here it is bad input, with the names it may take.
    """
    target = threshold.target
    known = [*WILDCARD_TARGETS, *INGEST_OPERATIONS, *sorted(set(queries))]
    if target in known:
        return None
    close = _closest(target, known)
    hint = f' (did you mean "{close}"?)' if close else ""
    return (
        f"bad threshold {threshold.text!r}: no query or ingest operation named {target!r} in "
        f"the session's steps{hint}; targets: {', '.join(known)}"
    )


def _closest(name: str, known: Sequence[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None
