"""The run stream's record format, ``esdash.stream/1``: one JSON object per line.

``stream.jsonl`` in the run directory is the live contract between rank 0 (the only writer)
and every viewer (dashboard, headless printer, ``esdash report``).  Its first record is a
``header``; then come ``interval`` and ``event`` records in time order; a ``final`` record
closes it.  ``docs/stream.md`` documents every field; this module is the executable version:
TypedDicts for type checkers, builders that fill in the constant fields, and
:func:`validate_record`, which the writer runs before writing and the reader after reading.

Compatibility rule: a reader accepts any ``esdash.stream/1.x`` header and ignores fields it
does not know, so adding an optional field is not a version change; removing or renaming a
field, or changing its meaning or unit, is (``esdash.stream/2``).

Units: times are seconds (``t`` since the header's ``started``, ``wall`` since the epoch),
histograms are microseconds (see :mod:`esdash.bench.recorder`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from esdash.bench.recorder import ERROR_CLASS_RE

SCHEMA = "esdash.stream/1"
SCHEMA_FAMILY = "esdash.stream/"

PHASES = ("ingest", "warmup", "measure")
STATUSES = ("ok", "failed", "aborted")
LEVELS = ("info", "warning", "error")
#: Event kinds esdash writes today; viewers show unknown kinds as plain messages.
EVENT_KINDS = (
    "phase",  # a phase or step began: data {"phase", "step", "step_name"}
    "warmup_failed",  # a step's warm-up failed; the step is skipped: data {"query", "rank"}
    "node_lost",  # a cluster node stopped answering: data {"node"}
    "rank_lost",  # a bench rank stopped reporting: data {"rank"}
    "error",  # an error worth showing that fits no other kind
    "note",  # anything informational
)

_ERROR_CLASS = ERROR_CLASS_RE
_KIND = re.compile(r"^[a-z][a-z0-9_]*$")


# ----------------------------------------------------------------------------- records


class PlannedStep(TypedDict):
    name: str
    queries: list[str]
    warmup: float
    duration: float
    target_throughput: float | None


class RankInfo(TypedDict):
    rank: int
    host: str | None
    target: str | None


class BenchInfo(TypedDict):
    ranks: int
    per_rank: list[RankInfo]


class HeaderRecord(TypedDict):
    type: Literal["header"]
    schema: str
    run_id: str
    session: dict[str, Any]
    plugins: dict[str, str]
    topology: dict[str, Any]
    bench: BenchInfo
    slurm_job_id: str | None
    started: float
    interval: float
    steps: list[PlannedStep]
    ingest: dict[str, Any] | None


class IngestProgress(TypedDict):
    docs_done: int
    docs_total: int | None


class IntervalRecord(TypedDict):
    type: Literal["interval"]
    seq: int
    t: float
    wall: float
    phase: str
    step: int | None
    step_name: str | None
    elapsed: float
    ops: dict[str, dict[str, Any]]
    ranks: list[int]
    missing_ranks: list[int]
    ingest: IngestProgress | None


class EventRecord(TypedDict):
    type: Literal["event"]
    t: float
    wall: float
    kind: str
    level: str
    message: str
    step: int | None
    data: dict[str, Any]


class FinalRecord(TypedDict):
    type: Literal["final"]
    t: float
    wall: float
    status: str
    reason: str | None


def header_record(
    *,
    run_id: str,
    session: Mapping[str, Any],
    plugins: Mapping[str, str],
    topology: Mapping[str, Any],
    bench_ranks: Sequence[Mapping[str, Any]],
    slurm_job_id: str | None,
    started: float,
    interval: float,
    steps: Sequence[Mapping[str, Any]],
    docs_total: int | None = None,
) -> HeaderRecord:
    """The first record of a stream.  ``bench_ranks``: one ``{rank, host, target}`` per rank."""
    return {
        "type": "header",
        "schema": SCHEMA,
        "run_id": run_id,
        "session": dict(session),
        "plugins": dict(plugins),
        "topology": dict(topology),
        "bench": {"ranks": len(bench_ranks), "per_rank": [dict(r) for r in bench_ranks]},  # type: ignore[misc]
        "slurm_job_id": slurm_job_id,
        "started": started,
        "interval": interval,
        "steps": [
            {
                "name": step["name"],
                "queries": list(step["queries"]),
                "warmup": step["warmup"],
                "duration": step["duration"],
                "target_throughput": step.get("target_throughput"),
            }
            for step in steps
        ],
        "ingest": {"docs_total": docs_total},
    }


def interval_record(
    *,
    seq: int,
    t: float,
    wall: float,
    phase: str,
    step: int | None,
    step_name: str | None,
    elapsed: float,
    ops: Mapping[str, Mapping[str, Any]],
    ranks: Sequence[int],
    missing_ranks: Sequence[int] = (),
    docs_done: int | None = None,
    docs_total: int | None = None,
) -> IntervalRecord:
    """One interval (or one phase's part of it): merged per-op payloads of the ranks.

    ``ops`` is ``Merged.to_payload()["ops"]``.  Ingest progress is included when
    ``docs_done`` is given (cumulative over the run, all ranks).
    """
    return {
        "type": "interval",
        "seq": seq,
        "t": t,
        "wall": wall,
        "phase": phase,
        "step": step,
        "step_name": step_name,
        "elapsed": elapsed,
        "ops": {name: dict(data) for name, data in ops.items()},
        "ranks": sorted(ranks),
        "missing_ranks": sorted(missing_ranks),
        "ingest": None if docs_done is None else {"docs_done": docs_done, "docs_total": docs_total},
    }


def event_record(
    *,
    t: float,
    wall: float,
    kind: str,
    message: str,
    level: str = "info",
    step: int | None = None,
    data: Mapping[str, Any] | None = None,
) -> EventRecord:
    """Something a viewer should show once: a phase change, a failed warm-up, a lost node."""
    return {
        "type": "event",
        "t": t,
        "wall": wall,
        "kind": kind,
        "level": level,
        "message": message,
        "step": step,
        "data": dict(data or {}),
    }


def final_record(*, t: float, wall: float, status: str, reason: str | None = None) -> FinalRecord:
    """The last record: how the run ended (``wall`` is when it ended)."""
    return {"type": "final", "t": t, "wall": wall, "status": status, "reason": reason}


# -------------------------------------------------------------------------- validation

_Check = Callable[[Any], bool]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and value == value


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


_TYPE_NAMES = {
    _is_int: "an integer",
    _is_number: "a number",
    _is_str: "a string",
    _is_dict: "an object",
    _is_list: "a list",
}


def _require(
    problems: list[str], record: Mapping[str, Any], where: str, fields: Mapping[str, Any]
) -> None:
    """Check that every field exists and passes its check: ``(check, nullable)``."""
    for name, (check, nullable) in fields.items():
        if name not in record:
            problems.append(f"{where}{name}: missing")
            continue
        value = record[name]
        if value is None and nullable:
            continue
        if not check(value):
            kind = _TYPE_NAMES.get(check, "valid")
            null = " or null" if nullable else ""
            problems.append(f"{where}{name}: expected {kind}{null}, got {value!r:.60}")


def _counts(problems: list[str], value: Any, where: str, classes: bool) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where}: expected an object of counts")
        return
    for key, count in value.items():
        if classes and not _ERROR_CLASS.match(str(key)):
            problems.append(f"{where}.{key}: not an error class")
        if not _is_int(count) or count < 0:
            problems.append(f"{where}.{key}: expected a count, got {count!r:.40}")


_SERIES_FIELDS = {
    "hdr": (_is_str, False),
    "count": (_is_int, False),
    "min": (_is_number, True),
    "max": (_is_number, True),
    "sum": (_is_number, False),
    "ln_sum": (_is_number, False),
    "ln_sq_sum": (_is_number, False),
}

_OP_FIELDS = {
    "requests": (_is_int, False),
    "docs": (_is_int, False),
    "bytes": (_is_int, False),
    "errors": (_is_dict, False),
    "latency": (_is_dict, False),
    "service_time": (_is_dict, False),
    "nodes": (_is_dict, False),
}


def validate_op_payload(data: Any, where: str = "") -> list[str]:
    """Problems of one operation's payload (the recorder's and merge's per-op shape)."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"{where}: expected an object"]
    _require(problems, data, f"{where}.", _OP_FIELDS)
    if problems:
        return problems
    _counts(problems, data["errors"], f"{where}.errors", classes=True)
    _counts(problems, data.get("doc_errors", {}), f"{where}.doc_errors", classes=True)
    for series in ("latency", "service_time"):
        _require(problems, data[series], f"{where}.{series}.", _SERIES_FIELDS)
        hdr = data[series].get("hdr")
        if isinstance(hdr, str) and not hdr.startswith("HISTF"):
            problems.append(f"{where}.{series}.hdr: not an encoded HDR histogram")
    for node, counters in data["nodes"].items():
        if not isinstance(counters, dict):
            problems.append(f"{where}.nodes.{node}: expected an object")
            continue
        _require(
            problems,
            counters,
            f"{where}.nodes.{node}.",
            {"requests": (_is_int, False), "docs": (_is_int, False)},
        )
        _counts(problems, counters.get("errors", {}), f"{where}.nodes.{node}.errors", True)
    failed = sum(v for v in data["errors"].values() if _is_int(v))
    ok = data["requests"] - failed
    if ok < 0:
        problems.append(f"{where}: more errors ({failed}) than requests ({data['requests']})")
    return problems


def _validate_header(record: Mapping[str, Any], problems: list[str]) -> None:
    _require(
        problems,
        record,
        "",
        {
            "schema": (_is_str, False),
            "run_id": (_is_str, False),
            "session": (_is_dict, False),
            "plugins": (_is_dict, False),
            "topology": (_is_dict, False),
            "bench": (_is_dict, False),
            "slurm_job_id": (_is_str, True),
            "started": (_is_number, False),
            "interval": (_is_number, False),
            "steps": (_is_list, False),
        },
    )
    schema = record.get("schema")
    if isinstance(schema, str) and not (schema == SCHEMA or schema.startswith(SCHEMA + ".")):
        problems.append(f"schema: {schema!r} is not {SCHEMA} (this esdash reads only that)")
    interval = record.get("interval")
    if _is_number(interval) and interval <= 0:
        problems.append("interval: must be positive")
    bench = record.get("bench")
    if isinstance(bench, dict):
        _require(
            problems, bench, "bench.", {"ranks": (_is_int, False), "per_rank": (_is_list, False)}
        )
        for k, rank in enumerate(bench.get("per_rank") or []):
            if not isinstance(rank, dict):
                problems.append(f"bench.per_rank[{k}]: expected an object")
                continue
            _require(
                problems,
                rank,
                f"bench.per_rank[{k}].",
                {"rank": (_is_int, False), "host": (_is_str, True), "target": (_is_str, True)},
            )
    topology = record.get("topology")
    if isinstance(topology, dict):
        nodes = topology.get("nodes")
        if not isinstance(nodes, list):
            problems.append("topology.nodes: expected a list")
        else:
            for k, node in enumerate(nodes):
                if not isinstance(node, dict) or not isinstance(node.get("name"), str):
                    problems.append(f"topology.nodes[{k}]: expected an object with a name")
    for name, version in (record.get("plugins") or {}).items():
        if not isinstance(version, str):
            problems.append(f"plugins.{name}: expected a version string")
    for k, step in enumerate(record.get("steps") or []):
        if not isinstance(step, dict):
            problems.append(f"steps[{k}]: expected an object")
            continue
        _require(
            problems,
            step,
            f"steps[{k}].",
            {
                "name": (_is_str, False),
                "queries": (_is_list, False),
                "warmup": (_is_number, False),
                "duration": (_is_number, False),
                "target_throughput": (_is_number, True),
            },
        )


def _validate_interval(record: Mapping[str, Any], problems: list[str]) -> None:
    _require(
        problems,
        record,
        "",
        {
            "seq": (_is_int, False),
            "t": (_is_number, False),
            "wall": (_is_number, False),
            "phase": (_is_str, False),
            "step": (_is_int, True),
            "step_name": (_is_str, True),
            "elapsed": (_is_number, False),
            "ops": (_is_dict, False),
            "ranks": (_is_list, False),
            "missing_ranks": (_is_list, False),
        },
    )
    phase = record.get("phase")
    if isinstance(phase, str) and phase not in PHASES:
        problems.append(f"phase: {phase!r} is not one of {', '.join(PHASES)}")
    if phase in ("warmup", "measure") and not _is_int(record.get("step")):
        problems.append(f"step: a {phase} interval needs a step index")
    for name in ("ranks", "missing_ranks"):
        value = record.get(name)
        if isinstance(value, list) and not all(_is_int(r) for r in value):
            problems.append(f"{name}: expected a list of rank numbers")
    ops = record.get("ops")
    if isinstance(ops, dict):
        for name, data in ops.items():
            problems.extend(validate_op_payload(data, f"ops.{name}"))
    ingest = record.get("ingest")
    if ingest is not None:
        if not isinstance(ingest, dict):
            problems.append("ingest: expected an object or null")
        else:
            _require(
                problems,
                ingest,
                "ingest.",
                {"docs_done": (_is_int, False), "docs_total": (_is_int, True)},
            )


def _validate_event(record: Mapping[str, Any], problems: list[str]) -> None:
    _require(
        problems,
        record,
        "",
        {
            "t": (_is_number, False),
            "wall": (_is_number, False),
            "kind": (_is_str, False),
            "level": (_is_str, False),
            "message": (_is_str, False),
        },
    )
    kind = record.get("kind")
    if isinstance(kind, str) and not _KIND.match(kind):
        problems.append(f"kind: {kind!r} is not a lower-case name")
    level = record.get("level")
    if isinstance(level, str) and level not in LEVELS:
        problems.append(f"level: {level!r} is not one of {', '.join(LEVELS)}")
    if "step" in record and record["step"] is not None and not _is_int(record["step"]):
        problems.append("step: expected an integer or null")
    if "data" in record and not isinstance(record["data"], dict):
        problems.append("data: expected an object")


def _validate_final(record: Mapping[str, Any], problems: list[str]) -> None:
    _require(
        problems,
        record,
        "",
        {
            "t": (_is_number, False),
            "wall": (_is_number, False),
            "status": (_is_str, False),
            "reason": (_is_str, True),
        },
    )
    status = record.get("status")
    if isinstance(status, str) and status not in STATUSES:
        problems.append(f"status: {status!r} is not one of {', '.join(STATUSES)}")


_VALIDATORS = {
    "header": _validate_header,
    "interval": _validate_interval,
    "event": _validate_event,
    "final": _validate_final,
}

RECORD_TYPES = tuple(_VALIDATORS)


def validate_record(record: Any) -> list[str]:
    """What is wrong with ``record`` as an ``esdash.stream/1`` record (empty when valid).

    Each problem names the field path (``ops.search.latency.count: missing``).  Unknown
    fields are allowed (see the compatibility rule above).
    """
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {type(record).__name__}"]
    kind = record.get("type")
    validator = _VALIDATORS.get(kind) if isinstance(kind, str) else None
    if validator is None:
        return [f"type: {kind!r} is not one of {', '.join(RECORD_TYPES)}"]
    problems: list[str] = []
    validator(record, problems)
    return problems
