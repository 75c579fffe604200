"""A track's plan: its tasks, and what a distribution lacks to run them.

``esdash plan`` lists every task of a track before a cluster starts
(:meth:`esdash.plugin.api.Track.plan`): what esdash does with it, or why it cannot.  Here are
the record (:class:`PlannedTask`) and the questions asked of a distribution: which modules a
query needs (:func:`query_refusal`), which field types a mapping needs
(:func:`mapping_refusal`), and what a run adapts instead of refusing
(:func:`adapt_index_body`).  A run asks the same of the same tables
(:mod:`esdash.plugin.capabilities`, :mod:`esdash.prepare.plan`), so a plan and a run agree.

It reads the records of :mod:`esdash.plugin.values` and never the base classes of
:mod:`esdash.plugin.api`, which builds its default :meth:`~esdash.plugin.api.Track.plan` on
this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from esdash.plugin.values import Distribution, QueryStep
from esdash.rundir.records import JsonMapping, JsonObject, JsonValue

#: Why a task of a plan does not run (:attr:`PlannedTask.reason_kind`): a module the
#: distribution lacks for a query, a field type from a module it lacks (``mapper``) or one it
#: does not map at all (``field_type``), Python of the track that esdash does not run
#: (``track_py``), an operation esdash has no equivalent of, or a query the session's
#: client-side encryption mode cannot express on ciphertexts (``encryption``).
REASON_KINDS = (
    "module",
    "mapper",
    "field_type",
    "track_py",
    "unsupported_operation",
    "encryption",
)


@dataclass(frozen=True)
class CorpusStatus:
    """What a track can say of its corpus without writing a file (``Track.corpus_check``).

    ``lines`` are shown by ``esdash plan`` (where each file is, what a run joins or copies);
    ``problems`` are refusals as (session key, message) pairs, which the ``corpus``
    pre-flight check reports: files that are missing (with their sizes and the disk they
    take) or would not fit the free space of their filesystem.
    """

    lines: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()
    #: The corpus files a run reads as they are (not copies esdash writes), with whether
    #: each has action-and-meta-data lines: the ``corpus`` check reads them whole.
    files: tuple[tuple[Path, bool], ...] = ()


@dataclass(frozen=True)
class PlannedTask:
    """One task of a track's plan: what esdash does for it, or why it cannot run it.

    ``esdash plan`` prints these before any cluster starts, so nobody learns after an hour of
    benchmarking that half a track never ran.  ``operation`` is the task's operation type,
    ``clients`` and ``schedule`` are what the track asks for, as given (Rally's
    ``warmup-time-period``, ``time-period``, ``iterations``, ``target-throughput``, ...).
    ``esdash`` says in a sentence what esdash does instead; ``step`` is the query step the
    task runs as (the session resolves its timing the way a run does) and ``ingest`` marks
    the task esdash's ingest stands for.  ``parallel`` numbers the task's ``parallel`` block
    (its position in the schedule, from 1).
    """

    name: str
    operation: str
    esdash: str
    status: str = "run"
    reason_kind: str | None = None
    reason: str | None = None
    clients: int | None = None
    schedule: Mapping[str, Any] = field(default_factory=dict, hash=False)
    parallel: int | None = None
    step: QueryStep | None = field(default=None, hash=False)
    ingest: bool = False

    def __post_init__(self) -> None:
        if self.status not in ("run", "refused"):
            raise ValueError(f"task {self.name!r}: status must be run or refused")
        if (self.status == "refused") != (self.reason_kind is not None):
            raise ValueError(f"task {self.name!r}: a refused task (only) has a reason_kind")
        if self.reason_kind is not None and self.reason_kind not in REASON_KINDS:
            raise ValueError(f"task {self.name!r}: reason_kind not in {REASON_KINDS}")

    def refused(self, kind: str, reason: str, esdash: str = "not run") -> PlannedTask:
        """This task, refused for ``reason`` (of ``kind``, one of :data:`REASON_KINDS`)."""
        return replace(self, status="refused", reason_kind=kind, reason=reason, esdash=esdash)

    def to_json(self) -> JsonObject:
        """The task as ``esdash plan --json`` prints it."""
        return {
            "name": self.name,
            "operation": self.operation,
            "clients": self.clients,
            "schedule": dict(self.schedule),
            "parallel": self.parallel,
            "status": self.status,
            "reason_kind": self.reason_kind,
            "reason": self.reason,
            "esdash": self.esdash,
        }


#: Query parts that live in modules the integ-test-zip does not ship.
MODULE_PARTS = {
    "auto_date_histogram": "aggregations",
    "adjacency_matrix": "aggregations",
    "matrix_stats": "aggregations",
    "rank_feature": "mapper-extras",
}


def body_parts(body: JsonValue) -> set[str]:
    """Every key in a request body (query and aggregation types among them)."""
    if isinstance(body, dict):
        return set(body) | {k for v in body.values() for k in body_parts(v)}
    if isinstance(body, list):
        return {k for item in body for k in body_parts(item)}
    return set()


#: Script languages other than painless, and the module each needs (Elasticsearch and
#: OpenSearch ship them as separate modules; a distribution without one answers 400).
SCRIPT_LANGUAGE_MODULES = {"expression": "lang-expression", "mustache": "lang-mustache"}


def script_languages(body: JsonValue) -> set[str]:
    """The ``lang`` of every script in a request body."""
    if isinstance(body, list):
        return {lang for item in body for lang in script_languages(item)}
    if not isinstance(body, dict):
        return set()
    found = {lang for v in body.values() for lang in script_languages(v)}
    script = body.get("script")
    if isinstance(script, dict) and isinstance(script.get("lang"), str):
        found.add(script["lang"])
    return found


# ----------------------------------------------------------------- mappings (adapted)

#: Field types that need a module the integ-test-zip lacks, and the closest core type.
MODULE_TYPES = {"scaled_float": ("mapper-extras", "double")}


def adapt_index_body(body: JsonObject, distribution: Distribution) -> tuple[JsonObject, list[str]]:
    """Replace field types the distribution cannot map; say what was replaced.

    ``scaled_float`` (NYC taxis) lives in the mapper-extras module, which the integ-test-zip
    does not ship; ``double`` keeps the values and their order (only the storage differs).
    """
    notes: list[str] = []
    modules = set(distribution.modules)

    def visit(node: JsonValue, path: str) -> JsonValue:
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

    adapted = visit(body, "")
    assert isinstance(adapted, dict)  # an object is rebuilt as an object
    return adapted, notes


def adaptation_note(body: JsonMapping, distribution: Distribution | None) -> str | None:
    """What :func:`adapt_index_body` changes in ``body`` for ``distribution``, in one clause
    (None: nothing)."""
    if distribution is None or not distribution.flavor.startswith("integ-test-zip"):
        return None
    clauses = []
    for kind, (module, replacement) in MODULE_TYPES.items():
        if module in distribution.modules:
            continue
        fields = [path for path, found in field_types(body) if found == kind]
        if fields:
            more = f" and {len(fields) - 4} more" if len(fields) > 4 else ""
            clauses.append(
                f"{kind} fields ({', '.join(fields[:4])}{more}) are indexed as {replacement}, "
                f"since this {distribution.flavor} distribution lacks the {module} module"
            )
    return "; ".join(clauses) or None


# ---------------------------------------------------------------------- plan refusals

#: Query parts whose module a distribution may lack, on every engine (same module names in
#: Elasticsearch and OpenSearch); refused in a plan when the module is not installed.
PLAN_MODULE_PARTS = {
    "percolate": "percolator",
    "has_child": "parent-join",
    "has_parent": "parent-join",
    "parent_id": "parent-join",
    "rank_feature": "mapper-extras",
}
#: Field types a module adds (same names in both engines); others are in the server.
MAPPER_MODULES = {
    "scaled_float": "mapper-extras",
    "rank_feature": "mapper-extras",
    "rank_features": "mapper-extras",
    "search_as_you_type": "mapper-extras",
    "token_count": "mapper-extras",
    "match_only_text": "mapper-extras",
    "percolator": "percolator",
    "join": "parent-join",
}


#: Rally operations served by an Elasticsearch module (x-pack): a distribution without the
#: module cannot answer them at all, and OpenSearch has no such API.
OPERATION_MODULES = {
    "esql": "x-pack-esql",
    "esql-profile": "x-pack-esql",
    "sql": "x-pack-sql",
    "eql": "x-pack-eql",
}


@dataclass(frozen=True)
class Refusal:
    """Why a distribution cannot run something: a :data:`REASON_KINDS`
    kind, the reason's text and the module or field type it lacks."""

    kind: str
    reason: str
    missing: str


def _lacks(distribution: Distribution) -> str:
    return f"this {distribution.flavor} distribution {distribution.version} does not have"


def _lacking(kind: str, need: str, distribution: Distribution, subject: str) -> Refusal:
    """A ``kind`` refusal of ``subject``: what it needs, and that ``distribution`` lacks it
    (every refusal for a missing module reads the same way)."""
    return Refusal(kind, f"{need}, which {_lacks(distribution)}", subject)


def query_refusal(
    requires: Sequence[str], body: JsonMapping | None, distribution: Distribution | None
) -> Refusal | None:
    """Why ``distribution`` cannot run a query (None: it can, or there is no distribution).

    What a run marks unsupported (:func:`missing_capability`) is refused, with the module
    named; so are queries whose parts need a module the distribution lacks (a run would send
    them and every request would fail).
    """
    if distribution is None:
        return None
    modules = set(distribution.modules)
    if "scripting" in requires and not distribution.scripting:
        return _lacking(
            "module", "needs the lang-painless module (scripting)", distribution, "lang-painless"
        )
    for lang in sorted(script_languages(body)):
        needed = SCRIPT_LANGUAGE_MODULES.get(lang)
        if needed is not None and needed not in modules:
            need = f"its script's lang {lang!r} needs the {needed} module"
            return _lacking("module", need, distribution, needed)
    parts = body_parts(body) if body is not None else set()
    table = dict(PLAN_MODULE_PARTS)
    if distribution.flavor.startswith("integ-test-zip"):
        table.update(MODULE_PARTS)
    for part in sorted(parts & set(table)):
        module = table[part]
        if module not in modules:
            need = f"needs the {module} module ({part})"
            return _lacking("module", need, distribution, module)
    return None


def operation_refusal(operation: str, distribution: Distribution | None) -> Refusal | None:
    """Why ``distribution`` cannot answer a Rally operation at all (None: it has the module,
    or the operation needs none, or there is no distribution): ES|QL, SQL and EQL live in
    Elasticsearch modules the integ-test-zip does not ship."""
    module = OPERATION_MODULES.get(operation)
    if distribution is None or module is None or module in distribution.modules:
        return None
    need = f"Rally's {operation!r} operation needs the {module} module (an Elasticsearch API)"
    return _lacking("module", need, distribution, module)


def field_types(body: JsonMapping) -> Iterator[tuple[str, str]]:
    """(path, type) of every field an index body maps: properties, multi-fields and the
    mappings of dynamic templates (types left to the template's placeholders are skipped)."""
    mappings = body.get("mappings")
    if not isinstance(mappings, dict):
        return
    yield from _properties(mappings, "")
    templates = mappings.get("dynamic_templates")
    for entry in templates if isinstance(templates, list) else ():
        for name, spec in entry.items() if isinstance(entry, dict) else ():
            mapping = spec.get("mapping") if isinstance(spec, dict) else None
            kind = mapping.get("type") if isinstance(mapping, dict) else None
            if isinstance(kind, str) and "{" not in kind:
                yield f"dynamic_templates.{name}", kind


def _properties(node: JsonMapping, prefix: str) -> Iterator[tuple[str, str]]:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        for key, value in node.items():  # a typed mapping of old ({"_doc": {...}})
            if key.startswith("_") and isinstance(value, dict) and "properties" in value:
                yield from _properties(value, prefix)
        return
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        path = f"{prefix}{name}"
        kind = spec.get("type", "object")
        if isinstance(kind, str):
            yield path, kind
        subfields = spec.get("fields")
        for sub, subspec in subfields.items() if isinstance(subfields, dict) else ():
            subkind = subspec.get("type") if isinstance(subspec, dict) else None
            if isinstance(subkind, str):
                yield f"{path}.{sub}", subkind
        yield from _properties(spec, f"{path}.")


def mapping_refusal(body: JsonObject, distribution: Distribution | None) -> Refusal | None:
    """Why ``distribution`` cannot create an index with ``body`` (None: it can, as far as
    the backend reports, or there is no distribution).

    Types a run adapts (:func:`adapt_index_body`) are not refused.  A type from a module the
    distribution lacks is a ``mapper`` refusal naming the module; a type outside the field
    types the backend reports (:attr:`Distribution.mappers`) is a ``field_type`` refusal.
    """
    if distribution is None:
        return None
    adapted, _ = adapt_index_body(body, distribution)
    mappers = set(distribution.mappers)
    modules = set(distribution.modules)
    for path, kind in field_types(adapted):
        if kind in ("object", "nested") or (mappers and kind in mappers):
            continue
        module = MAPPER_MODULES.get(kind)
        if module is not None and module not in modules:
            need = f"field {path} is of type {kind}, from the {module} module"
            return _lacking("mapper", need, distribution, kind)
        if mappers:
            return Refusal(
                "field_type",
                f"field {path} is of type {kind}, which {_lacks(distribution)} among the "
                f"{len(mappers)} field types its backend reports",
                kind,
            )
    return None


def plan_of_steps(
    index_body: JsonObject, steps: Sequence[QueryStep], distribution: Distribution | None
) -> tuple[PlannedTask, ...]:
    """esdash's own model as a plan: one ingest, then every query step, checked against
    ``distribution``.  A mapping it cannot hold refuses every task (the run stops when it
    creates the index); a step runs when one of its queries can."""
    mapping = mapping_refusal(index_body, distribution)
    note = adaptation_note(index_body, distribution)
    ingest = PlannedTask(
        "ingest",
        "bulk",
        "esdash ingests the track's corpus once, split over its bench ranks, in bulk "
        "requests of benchmark.bulk_size documents (an index already holding them with the "
        "planned fingerprint is reused instead)" + (f"; {note}" if note else ""),
        ingest=True,
    )
    tasks = [ingest]
    for step in steps:
        schedule: JsonObject = {
            key: value
            for key, value in (
                ("warmup-time-period", step.warmup),
                ("time-period", step.duration),
                ("warmup-iterations", step.warmup_iterations),
                ("iterations", step.iterations),
                ("ramp-up-time-period", step.ramp_up or None),
                ("target-throughput", step.target_throughput),
                ("think-time", step.think_time or None),
            )
            if value is not None
        }
        names = ", ".join(q.name for q in step.queries)
        refusals = [query_refusal(q.requires, q.body, distribution) for q in step.queries]
        pairs = zip(step.queries, refusals, strict=True)
        reasons = [f"{q.name}: {r.reason}" for q, r in pairs if r]
        count = len(step.queries)
        what = f"query step with {count} quer{'y' if count == 1 else 'ies'} ({names})"
        task = PlannedTask(step.name, "search", what, schedule=schedule, step=step)
        first = next((r for r in refusals if r is not None), None)
        if first is not None and all(refusals):
            task = task.refused(first.kind, "; ".join(reasons))
        elif first is not None:
            task = PlannedTask(
                step.name,
                "search",
                f"{what}; not run: {'; '.join(reasons)}",
                schedule=schedule,
                step=step,
            )
        tasks.append(task)
    if mapping is not None:
        tasks = [_cannot_index(t, mapping) for t in tasks]
    return tuple(tasks)


def _cannot_index(task: PlannedTask, refusal: Refusal) -> PlannedTask:
    """A task of a run that stops when it creates its index."""
    if task.status == "refused":
        return task
    reason = refusal.reason if task.ingest else f"its index cannot be created: {refusal.reason}"
    return task.refused(refusal.kind, reason)
