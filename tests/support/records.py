"""Stream records for tests, built from plain values the way a test reads best.

The stream's records are typed (:mod:`esdash.rundir.records`); these builders take the
loose shapes tests like to write (a topology as ``{"nodes": [{"name": ...}]}``, planned
steps as dicts, bench ranks as dicts) and fill in what a real writer would, so each test
states only what it is about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from esdash.rundir import files
from esdash.rundir.records import (
    STREAM_SCHEMA,
    BenchInfo,
    Event,
    Final,
    Header,
    IngestPlan,
    IngestProgress,
    Interval,
    NodePlan,
    OpPayload,
    PlannedStepInfo,
    RankInfo,
    RankPayload,
    Topology,
)


def _node(index: int, node: Mapping[str, Any]) -> NodePlan:
    return NodePlan(
        rank=int(node.get("rank", index)),
        name=str(node["name"]),
        host=str(node.get("host", "localhost")),
        interface=str(node.get("interface", "lo")),
        address=str(node.get("address", "127.0.0.1")),
        http_port=int(node.get("http_port", 9200 + index)),
        transport_port=int(node.get("transport_port", 9300 + index)),
        master_eligible=bool(node.get("master_eligible", index == 0)),
    )


def topology(value: Topology | Mapping[str, Any] | None) -> Topology:
    if isinstance(value, Topology):
        return value
    value = value or {"nodes": [{"name": "node-0"}]}
    nodes = tuple(_node(k, node) for k, node in enumerate(value.get("nodes") or []))
    return Topology(cluster_name=str(value.get("cluster_name", "esdash-test")), nodes=nodes)


def header(
    *,
    run_id: str = "test-run",
    session: Mapping[str, Any] | None = None,
    plugins: Mapping[str, str] | None = None,
    topology_: Topology | Mapping[str, Any] | None = None,
    bench_ranks: Sequence[Mapping[str, Any]] = ({"rank": 1, "host": "h", "target": "node-0"},),
    slurm_job_id: str | None = None,
    started: float = 0.0,
    interval: float = 1.0,
    steps: Sequence[Mapping[str, Any]] = (),
    docs_total: int | None = None,
    schema: str = STREAM_SCHEMA,
) -> Header:
    return Header(
        schema=schema,
        run_id=run_id,
        session=dict(session or {}),
        plugins=dict(plugins or {}),
        topology=topology(topology_),
        bench=BenchInfo(
            ranks=len(bench_ranks), per_rank=[msgspec.convert(r, RankInfo) for r in bench_ranks]
        ),
        slurm_job_id=slurm_job_id,
        started=started,
        interval=interval,
        steps=[msgspec.convert(step, PlannedStepInfo) for step in steps],
        ingest=IngestPlan(docs_total=docs_total),
    )


def interval(
    *,
    seq: int,
    t: float,
    wall: float,
    phase: str,
    step: int | None = None,
    step_name: str | None = None,
    elapsed: float = 1.0,
    ops: Mapping[str, OpPayload] | RankPayload | None = None,
    ranks: Sequence[int] = (),
    missing_ranks: Sequence[int] = (),
    docs_done: int | None = None,
    docs_total: int | None = None,
) -> Interval:
    if isinstance(ops, RankPayload):
        ops = ops.ops
    return Interval(
        seq=seq,
        t=t,
        wall=wall,
        phase=phase,  # type: ignore[arg-type]
        step=step,
        step_name=step_name,
        elapsed=elapsed,
        ops=dict(ops or {}),
        ranks=sorted(ranks),
        missing_ranks=sorted(missing_ranks),
        ingest=None
        if docs_done is None
        else IngestProgress(docs_done=docs_done, docs_total=docs_total),
    )


def event(
    *,
    t: float,
    wall: float,
    kind: str,
    message: str,
    level: str = "info",
    step: int | None = None,
    data: Mapping[str, Any] | None = None,
) -> Event:
    return Event(
        t=t,
        wall=wall,
        kind=kind,
        message=message,
        level=level,  # type: ignore[arg-type]
        step=step,
        data=dict(data or {}),
    )


def final(*, t: float, wall: float, status: str, reason: str | None = None) -> Final:
    return Final(t=t, wall=wall, status=status, reason=reason)  # type: ignore[arg-type]


def as_json(record: object) -> dict[str, Any]:
    """A record as the JSON object written to disk (to damage it in a test)."""
    data = files.to_builtins(record)
    assert isinstance(data, dict)
    return data
