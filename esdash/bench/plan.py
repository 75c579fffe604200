"""The benchmark plan: what every bench rank needs, written once into ``bench.json``.

The orchestrator (``esdash run``) resolves the session, the track and the distribution's
capabilities into this plan; bench ranks only read it.  Queries the distribution cannot run
(a script query without the painless module) are kept in the plan with the reason, so they
are reported as unsupported instead of silently missing.

With a client-side encryption mode the plan holds what is *sent*: the encoded index body
and queries (rewritten once, here, never per request), queries the mode cannot express
marked "not possible under <mode>: <part>", and the codec's secret-free spec from which
every bench rank rebuilds the codec to encrypt documents and decode responses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from esdash.cluster.rundir import RunDir, read_json, write_json
from esdash.plugin_api import ClientCodec, Corpus, Distribution, QueryNotSupported, QueryStep, Track
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
    #: The session's encryption mode, and the client codec's spec when it has one.
    encryption: str = "none"
    client_codec: dict[str, Any] | None = None

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


#: Query parts that live in modules the integ-test-zip does not ship.
MODULE_PARTS = {
    "auto_date_histogram": "aggregations",
    "adjacency_matrix": "aggregations",
    "matrix_stats": "aggregations",
    "rank_feature": "mapper-extras",
}


def _parts(body: Any) -> set[str]:
    """Every key in a request body (query and aggregation types among them)."""
    if isinstance(body, dict):
        return set(body) | {k for v in body.values() for k in _parts(v)}
    if isinstance(body, list):
        return {k for item in body for k in _parts(item)}
    return set()


def missing_capability(
    requires: tuple[str, ...], distribution: Distribution, body: Any = None
) -> str | None:
    """Why a distribution cannot run a query that needs ``requires`` (None: it can).

    Besides what the track declares, the body is checked for parts whose module the
    distribution lacks (only known for the integ-test-zip, whose module list is complete).
    """
    for capability in requires:
        if capability == "scripting" and not distribution.scripting:
            return (
                f"needs scripting (painless), which this {distribution.flavor} "
                f"distribution {distribution.version} lacks; use an official tarball"
            )
    if body is not None and distribution.flavor.startswith("integ-test-zip"):
        for part in sorted(_parts(body) & set(MODULE_PARTS)):
            module = MODULE_PARTS[part]
            if module not in distribution.modules:
                return (
                    f"needs {part} from the {module} module, which this {distribution.flavor} "
                    f"distribution {distribution.version} lacks; use an official tarball"
                )
    return None


def planned_query(
    query: Any, index: str, distribution: Distribution, codec: ClientCodec | None = None
) -> PlannedQuery:
    """A query as it is sent: encoded by the codec, or kept with why it cannot run.

    A query the encryption mode cannot express is reported as such even where the
    distribution lacks a capability too: encryption rules it out everywhere.  Its body is
    not kept (it would put plaintext constants into the run directory).
    """
    body = dict(query.body)
    if codec is not None:
        try:
            body = codec.encode_query(body)
        except QueryNotSupported as exc:
            reason = f"not possible under {codec.label}: {exc.part} ({exc.reason})"
            return PlannedQuery(query.name, query.index or index, None, reason)
    reason = missing_capability(tuple(query.requires), distribution, query.body)
    return PlannedQuery(query.name, query.index or index, body, reason)


#: Field types that need a module the integ-test-zip lacks, and the closest core type.
MODULE_TYPES = {"scaled_float": ("mapper-extras", "double")}


def adapt_index_body(body: dict[str, Any], distribution: Distribution) -> tuple[dict, list[str]]:
    """Replace field types the distribution cannot map; say what was replaced.

    ``scaled_float`` (NYC taxis) lives in the mapper-extras module, which the integ-test-zip
    does not ship; ``double`` keeps the values and their order (only the storage differs).
    """
    notes: list[str] = []
    modules = set(distribution.modules)

    def visit(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [visit(item, path) for item in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if isinstance(kind, str) and kind in MODULE_TYPES:
            module, replacement = MODULE_TYPES[kind]
            if module not in modules and distribution.flavor.startswith("integ-test-zip"):
                notes.append(
                    f"mapping: {path} is {kind}, which needs the {module} module this "
                    f"{distribution.flavor} distribution lacks; indexed as {replacement}"
                )
                node = {k: v for k, v in node.items() if k != "scaling_factor"}
                node["type"] = replacement
        return {k: visit(v, f"{path}.{k}" if path else k) for k, v in node.items()}

    return visit(body, ""), notes


def plan_steps(
    steps: tuple[QueryStep, ...],
    session: Session,
    index: str,
    distribution: Distribution,
    codec: ClientCodec | None = None,
) -> tuple[PlannedStep, ...]:
    bench = session.benchmark
    return tuple(
        PlannedStep(
            name=step.name,
            queries=tuple(planned_query(q, index, distribution, codec) for q in step.queries),
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
    codec: ClientCodec | None = None,
) -> BenchPlan:
    options = session.track.options
    index = track.index_name(options)
    index_body, notes = adapt_index_body(track.index_body(options), distribution)
    if codec is not None:
        index_body = codec.encode_index_body(index_body)
    return BenchPlan(
        index=index,
        index_body=index_body,
        corpus_path=str(corpus.path),
        corpus_documents=corpus.documents,
        corpus_has_actions=corpus.includes_action_and_meta_data,
        bulk_size=session.benchmark.bulk_size,
        steps=plan_steps(steps, session, index, distribution, codec),
        interval=session.benchmark.interval,
        seed=seed,
        ranks=ranks,
        reingest=reingest,
        track=track.name,
        encryption=session.encryption.name,
        client_codec=codec.spec() if codec is not None else None,
        extra={"notes": notes},
    )
