"""The benchmark plan: what every bench rank needs, written once into ``bench.json``.

The orchestrator (``esdash run``) resolves the session, the track and the distribution's
capabilities into this plan; bench ranks only read it.  Queries the distribution cannot run
(a script query without the painless module) are kept in the plan with the reason, so they
are reported as unsupported instead of silently missing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from esdash.cluster.rundir import RunDir, read_json, write_json
from esdash.plugin_api import Corpus, Distribution, QueryStep, Track
from esdash.session import Session

SCHEMA = "esdash.bench/1"


@dataclass(frozen=True)
class PlannedQuery:
    name: str
    index: str
    body: Any
    unsupported: str | None = None


@dataclass(frozen=True)
class PlannedStep:
    name: str
    queries: tuple[PlannedQuery, ...]
    warmup: float
    duration: float
    target_throughput: float | None
    think_time: float = 0.0

    @property
    def runnable(self) -> tuple[PlannedQuery, ...]:
        return tuple(q for q in self.queries if q.unsupported is None)


@dataclass(frozen=True)
class BenchPlan:
    index: str
    index_body: dict[str, Any]
    corpus_path: str
    corpus_documents: int | None
    corpus_has_actions: bool
    bulk_size: int
    steps: tuple[PlannedStep, ...]
    interval: float
    seed: int
    ranks: int
    reingest: bool = False
    track: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchPlan:
        data = {k: v for k, v in data.items() if k != "schema"}
        steps = tuple(
            PlannedStep(
                **{
                    **step,
                    "queries": tuple(PlannedQuery(**q) for q in step["queries"]),
                }
            )
            for step in data.pop("steps")
        )
        return cls(steps=steps, **data)

    def write(self, run: RunDir) -> Path:
        path = run.path / "bench.json"
        write_json(path, self.to_dict())
        return path

    @classmethod
    def read(cls, run: RunDir) -> BenchPlan:
        return cls.from_dict(read_json(run.path / "bench.json"))


def missing_capability(requires: tuple[str, ...], distribution: Distribution) -> str | None:
    """Why a distribution cannot run a query that needs ``requires`` (None: it can)."""
    for capability in requires:
        if capability == "scripting" and not distribution.scripting:
            return (
                f"needs scripting (painless), which this {distribution.flavor} "
                f"distribution {distribution.version} lacks; use an official tarball"
            )
    return None


def plan_steps(
    steps: tuple[QueryStep, ...], session: Session, index: str, distribution: Distribution
) -> tuple[PlannedStep, ...]:
    bench = session.benchmark
    return tuple(
        PlannedStep(
            name=step.name,
            queries=tuple(
                PlannedQuery(
                    q.name,
                    q.index or index,
                    dict(q.body),
                    missing_capability(tuple(q.requires), distribution),
                )
                for q in step.queries
            ),
            warmup=bench.warmup if step.warmup is None else step.warmup,
            duration=bench.duration if step.duration is None else step.duration,
            # a step with think time is a closed loop: the session's rate does not apply
            target_throughput=(
                step.target_throughput
                if step.target_throughput is not None or step.think_time
                else bench.target_throughput
            ),
            think_time=step.think_time,
        )
        for step in steps
    )


def make_plan(
    session: Session,
    track: Track,
    corpus: Corpus,
    steps: tuple[QueryStep, ...],
    distribution: Distribution,
    ranks: int,
    seed: int,
    reingest: bool = False,
) -> BenchPlan:
    options = session.track.options
    index = track.index_name(options)
    return BenchPlan(
        index=index,
        index_body=track.index_body(options),
        corpus_path=str(corpus.path),
        corpus_documents=corpus.documents,
        corpus_has_actions=corpus.includes_action_and_meta_data,
        bulk_size=session.benchmark.bulk_size,
        steps=plan_steps(steps, session, index, distribution),
        interval=session.benchmark.interval,
        seed=seed,
        ranks=ranks,
        reingest=reingest,
        track=track.name,
    )
