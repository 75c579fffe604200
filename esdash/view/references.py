"""References judged: each figure of each query within, better or worse (ReFrame-style).

A session (or a campaign's base session) may say what each query should reach
(:mod:`esdash.references` reads the table)::

    [references.age_weight]
    throughput = [300, -0.10, 0.20]   # req/s: 300, worse below -10 %, better above +20 %
    p50 = [8.0, -0.50, 0.25]          # ms: worse above +25 %, better below -50 %
    p99 = [25.0, -0.50, 0.50]
    error_rate = [0.0, 0.0, 0.01]     # fraction of requests; bounds are absolute here

Each figure is ``[value, lower, upper]`` (or a table ``{value, lower, upper}``): the
tolerances are fractions of the value (``lower`` <= 0 <= ``upper``), except for
``error_rate``, whose reference is usually 0 and whose bounds are absolute fractions.

Every figure is reported as *within* the tolerances, *better* or *worse* (higher throughput
is better, lower latency and error rate are better).  A *worse* figure is a miss: it
compiles to a threshold of :mod:`esdash.view.thresholds` (``age_weight:throughput>=270``),
so a miss makes ``esdash run`` exit with :data:`esdash.errors.EXIT_THRESHOLD` (3) and the
summary names the query, the figure and by how much it missed.  A query measured in several
rounds (``benchmark.repetitions``) is judged on its median over the rounds; otherwise on
every step that runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from esdash.references import Reference
from esdash.rundir.records import OpResult, Results
from esdash.view.thresholds import Threshold


def threshold_of(reference: Reference) -> Threshold:
    """The threshold a *worse* figure fails (the other side is only "better")."""
    low, high = reference.bounds()
    op, value = (">=", low) if reference.higher_is_better else ("<=", high)
    text = f"{reference.query}:{reference.figure}{op}{value:g} (reference {reference.value:g})"
    return Threshold(text, reference.query, reference.figure, op, value)


def verdict(reference: Reference, actual: float) -> str:
    """``worse`` exactly when the compiled threshold fails; else within or better."""
    if not threshold_of(reference).holds(actual):
        return "worse"
    low, high = reference.bounds()
    return "within" if low <= actual <= high else "better"


@dataclass(frozen=True)
class Judgement:
    reference: Reference
    where: str
    actual: float | None
    verdict: str  # within, better, worse, missing

    @property
    def message(self) -> str:
        ref = self.reference
        low, high = ref.bounds()
        figure = f"{ref.query} {ref.figure}"
        if self.actual is None:
            return f"{figure} ({self.where}): not measured; reference {ref.show(ref.value)}"
        return (
            f"{figure} ({self.where}): {ref.show(self.actual)} is {self.verdict} "
            f"(reference {ref.show(ref.value)}, {ref.deviation(self.actual)}; "
            f"tolerated {ref.show(low)} .. {ref.show(high)})"
        )


def _figure(data: OpResult, figure: str) -> float | None:
    if figure == "throughput":
        return data.throughput.requests_per_s
    if figure == "error_rate":
        return data.error_rate
    return data.latency.value(figure)


def _places(results: Results, reference: Reference) -> Iterator[tuple[str, float | None]]:
    """Where a query's figure was measured: its median over rounds, or each step."""
    rounds = results.rounds
    if rounds is not None:
        for entry in rounds.queries:
            if entry.query != reference.query:
                continue
            if reference.figure == "throughput":
                yield f"median of {entry.n} rounds", entry.median
                continue
            if reference.figure == "p50":
                seen = sorted(v for v in entry.p50_ms if v is not None)
                median = (
                    seen[len(seen) // 2]
                    if len(seen) % 2
                    else ((seen[len(seen) // 2 - 1] + seen[len(seen) // 2]) / 2 if seen else None)
                )
                yield f"median of {len(seen)} rounds", median
                continue
            break  # other figures: per step below
        else:
            return
        if reference.figure in ("throughput", "p50"):
            return
    for step in results.steps:
        data = step.queries.get(reference.query)
        if data is not None:
            yield f"step {step.index + 1} {step.name}", _figure(data, reference.figure)


def judge(results: Results, references: tuple[Reference, ...]) -> list[Judgement]:
    """Every reference figure at every place it was measured (``missing`` when nowhere)."""
    judgements = []
    for reference in references:
        places = list(_places(results, reference))
        if not places:
            judgements.append(Judgement(reference, "no step ran it", None, "missing"))
        for where, actual in places:
            found = "missing" if actual is None else verdict(reference, actual)
            judgements.append(Judgement(reference, where, actual, found))
    return judgements


def misses(judgements: list[Judgement]) -> list[Judgement]:
    """The judgements that fail a run (worse, or never measured)."""
    return [j for j in judgements if j.verdict in ("worse", "missing")]


def render_references(judgements: list[Judgement]) -> list[str]:
    """One line per judged figure, misses marked; empty without references."""
    if not judgements:
        return []
    lines = ["references:"]
    for judgement in judgements:
        mark = "MISS " if judgement.verdict in ("worse", "missing") else ""
        lines.append(f"  {mark}{judgement.message}")
    return lines
