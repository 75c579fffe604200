"""The chosen challenge's schedule in esdash's terms: ingest, query steps and their timing.

The constants naming the tasks esdash does itself (:data:`BY_ESDASH`), Rally's operation types,
schedule and timing keys and the test-mode limits belong here, with the code that uses them.

:class:`_ScheduleMapper` sorts the tasks of a challenge into the ingest, query steps, what
esdash does itself and what it does not support; :func:`_timing` converts Rally's timing; the
test-mode rules change tasks and document sets as Rally's ``--test-mode`` does; and
:func:`_ingest_documents` picks the document sets the ingest sends.  Used by the loader.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

from esdash.plugin_api import (
    JsonMapping,
    JsonObject,
    JsonValue,
    PlannedTask,
    Query,
    QueryStep,
    StepIndexing,
)

from . import requests as rr
from . import runners, trackcode, trackpy
from . import template as tpl
from .model import (
    DocumentSet,
    RallyTask,
    TrackPy,
    _describe,
    _index_matches,
    _needs_scripting,
)
from .reader import (
    Spot,
    _operation,
    _Reader,
)

#: Tasks esdash does itself around its ingest and query steps, with what it does instead.
BY_ESDASH = {
    "delete-index": "done by esdash itself (before the ingest it re-creates an index it made "
    "for another fingerprint, and keeps one with the planned fingerprint; it never deletes an "
    "index it did not make)",
    "create-index": "done by esdash itself (it creates every index of the track; the task's "
    "settings are merged into the bodies of the indices it names)",
    "refresh": "done by esdash itself (it refreshes and flushes the indices once, after the "
    "ingest)",
    "cluster-health": "done by esdash itself (it waits for a green cluster before the benchmark)",
}
#: Properties of a search that change what Rally sends, which esdash does not reproduce.
SEARCH_IGNORED = (
    "request-params",
    "headers",
    "request-timeout",
    "opaque-id",
    "response-compression-enabled",
    "detailed-results",
    "assertions",
)
TASK_IGNORED = ("schedule",)
#: Rally's search operations esdash maps to query steps (``paginated-search`` is refused
#: with its reason by :func:`trackpy.pages_of`).
SEARCH_TYPES = ("search", "scroll-search", "paginated-search")
#: Rally operations that are one timed request each, run as esdash query steps like searches:
#: the request Rally 2.13's runner sends (``IndexStats``, ``NodeStats``, ``RawRequest``).
REQUEST_OPERATIONS = ("index-stats", "node-stats", "raw-request")
_HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD")
#: A task's scheduling properties, shown in a plan as the track gives them.
SCHEDULE_KEYS = (
    "warmup-time-period",
    "time-period",
    "warmup-iterations",
    "iterations",
    "target-throughput",
    "target-interval",
    "ramp-up-time-period",
    "schedule",
    "completed-by",
)
#: Rally's own operation types (``OperationType`` of Rally 2.13); any other type needs a
#: runner registered by the track's ``track.py``.
RALLY_OPERATIONS = frozenset(
    (
        "bulk", "close-ml-job", "close-point-in-time", "cluster-health", "composite",
        "composite-agg",
        "create-component-template", "create-composable-template", "create-data-stream",
        "create-ilm-policy", "create-index", "create-index-template", "create-ml-datafeed",
        "create-ml-job", "create-snapshot", "create-snapshot-repository", "create-transform",
        "delete-async-search", "delete-component-template", "delete-composable-template",
        "delete-data-stream", "delete-ilm-policy", "delete-index", "delete-index-template",
        "delete-ml-datafeed", "delete-ml-job", "delete-snapshot-repository", "delete-transform",
        "downsample", "enrich-policy", "esql", "esql-profile", "field-caps", "force-merge",
        "get-async-search", "index-stats", "node-stats", "open-ml-job", "open-point-in-time",
        "paginated-search", "put-pipeline", "put-settings", "raw-request", "refresh",
        "restore-snapshot", "run-until", "scroll-search", "search", "shrink-index", "sleep", "sql",
        "start-ml-datafeed", "start-transform", "stop-ml-datafeed", "submit-async-search",
        "transform-stats", "wait-for-current-snapshots-create", "wait-for-recovery",
        "wait-for-snapshot-create", "wait-for-transform",
    )
)  # fmt: skip
TIMING_KEYS = (
    "warmup-time-period",
    "time-period",
    "warmup-iterations",
    "iterations",
    "ramp-up-time-period",
    "clients",
)
_THROUGHPUT = re.compile(r"^\s*(\d*\.?\d+)\s+(\w+/s)\s*$")
#: Rally's ``--test-mode`` (``TestModeTrackProcessor`` in esrally/track/loader.py of Rally
#: 2.13): every bulk document set is cut to 1,000 documents read from its ``-1k`` file, and
#: measured time periods are capped at 10 s.
TEST_MODE_DOCUMENTS = 1000
TEST_MODE_TIME_PERIOD = 10.0


def test_mode_name(source_file: str) -> str:
    """The ``-1k`` file Rally's test mode reads instead of ``source_file``.

    Rally inserts ``-1k`` before the document file's extension and keeps an archive's
    suffix: ``documents.json.bz2`` -> ``documents-1k.json.bz2``, ``docs.json`` ->
    ``docs-1k.json``.
    """
    archive = tpl.decompress_hint(source_file)
    plain = archive[0] if archive else source_file
    stem, ext = os.path.splitext(plain)
    return f"{stem}-1k{ext}{source_file[len(plain) :]}"


def _test_mode_documents(doc: DocumentSet) -> DocumentSet:
    """``doc`` as Rally's test mode reads it: the ``-1k`` file, 1,000 documents, sizes not
    checked (Rally drops them, since the ``-1k`` file's sizes are not in track.json)."""
    return replace(
        doc,
        source_file=test_mode_name(doc.source_file),
        documents=min(doc.documents, TEST_MODE_DOCUMENTS),
        uncompressed_bytes=None,
        compressed_bytes=None,
        full=doc,
    )


def _apply_test_mode(task: RallyTask) -> None:
    """Change ``task``'s schedule as Rally's ``--test-mode`` does, remembering what changed.

    Rally 2.13 (``TestModeTrackProcessor.on_after_load_track``): warm-up and measured
    iterations above the task's client count become the client count, a warm-up time period
    becomes 0, a time period above 10 s becomes 10 s, and a target throughput is replaced by
    ``sys.maxsize`` ops/s, which lifts it (esdash runs the task unthrottled).
    """
    changes = []
    if task.warmup_iterations is not None and task.warmup_iterations > task.clients:
        changes.append(f"warmup-iterations {task.warmup_iterations} -> {task.clients}")
        task.warmup_iterations = task.clients
    if task.iterations is not None and task.iterations > task.clients:
        changes.append(f"iterations {task.iterations} -> {task.clients}")
        task.iterations = task.clients
    if task.warmup_time is not None and task.warmup_time > 0:
        changes.append(f"warmup-time-period {task.warmup_time:g} -> 0")
        task.warmup_time = 0
    if task.time is not None and task.time > TEST_MODE_TIME_PERIOD:
        changes.append(f"time-period {task.time:g} -> {TEST_MODE_TIME_PERIOD:g}")
        task.time = TEST_MODE_TIME_PERIOD
    if task.throughput:
        changes.append(f"target-throughput {task.throughput:g} ops/s lifted (unthrottled)")
        task.throughput = None
    if task.ramp_up:  # with no warm-up left, the clients would start during the measurement
        changes.append(f"ramp-up-time-period {task.ramp_up:g} -> 0")
        task.ramp_up = 0
    task.test_mode = tuple(changes)


#: Why Rally refuses a task that counts iterations in one phase and times the other.
_MIXED = "Rally does not allow mixing iterations and time periods: keep one kind"


def _timing_problem(task: RallyTask, defaults: JsonMapping) -> str | None:
    """What Rally 2.13's track loader refuses in ``task``'s timing, or None: time periods
    mixed with iterations, and a ramp-up without a warm-up time at least as long, or set on a
    task of a ``parallel`` block (whose ``defaults`` are given) rather than on the block."""
    if task.warmup_iterations is not None and task.time is not None:
        return f"sets 'warmup-iterations' and 'time-period'; {_MIXED}"
    if task.warmup_time is not None and task.iterations is not None:
        return f"sets 'warmup-time-period' and 'iterations'; {_MIXED}"
    if task.ramp_up is None:
        return None
    if defaults and task.ramp_up != defaults.get("ramp-up-time-period"):
        return (
            "sets its own 'ramp-up-time-period' in a parallel block; Rally allows it only "
            "on the 'parallel' element: move it there"
        )
    if task.warmup_iterations is not None or task.iterations is not None:
        return (
            "sets 'ramp-up-time-period' with iterations; a ramp-up needs a "
            "'warmup-time-period' instead"
        )
    if task.warmup_time is None or task.warmup_time < task.ramp_up:
        return (
            f"sets 'ramp-up-time-period' {task.ramp_up:g} without a 'warmup-time-period' "
            f"at least as long; Rally needs one, so the clients have all started when "
            f"the measurement begins"
        )
    return None


# ---------------------------------------------------------------- schedule mapping


class _ScheduleMapper:
    """Turns a challenge's schedule into esdash's ingest and query steps."""

    def __init__(
        self,
        reader: _Reader,
        operations: Mapping[str, JsonObject],
        index: str,
        indices: Sequence[str],
        challenge: str,
        track_py: TrackPy | None = None,
        test_mode: bool = False,
        documents: Sequence[DocumentSet] = (),
    ) -> None:
        self.reader = reader
        #: Every document set of the track, and those the bulk tasks send, in their order.
        self.documents = tuple(documents)
        self.sent: list[DocumentSet] = []
        #: The bulk tasks esdash runs (ingest units), in schedule order.
        self.bulks: list[RallyTask] = []
        self.test_mode = test_mode
        self.operations = operations
        self.index = index
        self.indices = indices
        self.challenge = challenge
        self.track_py = track_py or TrackPy(reader.track_file.parent / "track.py", False)
        self.steps: list[QueryStep] = []
        #: Every task in schedule order, as esdash maps it: the plan before a distribution.
        self.planned: list[PlannedTask] = []
        self.task_queries: dict[str, Query] = {}
        self.ingest: RallyTask | None = None
        self.by_esdash: list[str] = []
        self.unsupported: list[str] = []
        self.notes: list[str] = []
        #: Settings of create-index tasks per index they name (None: every index).
        self.index_settings: list[tuple[list[str] | None, JsonObject]] = []
        self._task_names: set[str] = set()
        self._early_search_noted = False
        self._clients: list[str] = []
        #: The track's templates and data streams (set by the loader) and the one-off
        #: requests of its administrative tasks, in schedule order.
        self.templates = rr.Templates()
        self.data_streams: tuple[str, ...] = ()
        self.one_offs: list[rr.OneOff] = []
        #: The document sets each bulk task indexing during a query step sends, by task.
        self.step_documents: dict[str, tuple[DocumentSet, ...]] = {}
        #: The track's own code when the session trusts it (set by the loader; None: the
        #: tasks that need it are refused).
        self.code: trackcode.TrackCode | None = None

    def _timing(self, task: RallyTask) -> Timing:
        """The task's timing, remembering its clients for :meth:`finish`."""
        if task.clients > 1:
            self._clients.append(f"{task.name} ({task.clients})")
        return _timing(task)

    def finish(self) -> None:
        """Add the notes that summarise how tasks run."""
        if self._clients:
            self.notes.append(
                "tasks with several clients (spread over the bench ranks, several in one "
                "rank as concurrent connections; target-throughput is the rate of all of "
                "them together): " + ", ".join(self._clients)
            )

    def walk(self, schedule: Sequence[JsonValue]) -> None:
        context = f"challenge {self.challenge!r}"
        for number, entry in enumerate(schedule):
            if not isinstance(entry, dict):
                raise self.reader.fail(
                    f"{context}, schedule[{number}]",
                    f"must be an object, found {_describe(entry)}",
                    self.challenge,
                )
            if "parallel" in entry:
                self._parallel(entry["parallel"], f"{context}, schedule[{number}]", number + 1)
            else:
                self._handle(self._task(entry, f"{context}, schedule[{number}]", {}))

    def _task(self, spec: JsonMapping, context: str, defaults: JsonMapping) -> RallyTask:
        reader = self.reader
        if "operation" not in spec:
            raise reader.fail(context, "the task has no 'operation'", self.challenge)
        ref = spec["operation"]
        if isinstance(ref, str) and ref in self.operations:
            op = self.operations[ref]
        else:
            op = _operation(reader, ref, f"{context}, inline operation")
        name = reader.get(spec, "name", str, context, self.challenge, default=op["name"])
        where = f"{context}, task {name!r}"
        # The task's own line: its "name", else its "operation", below the challenge's name.
        if "name" in spec:
            spot: Spot = ("name", name, self.challenge)
        elif isinstance(ref, str):
            spot = ("operation", ref, self.challenge)
        else:
            spot = ("operation-type", op["operation-type"], self.challenge)
        if name in self._task_names:
            raise reader.fail(
                where, "appears twice in the schedule; give the tasks distinct 'name's", spot
            )
        self._task_names.add(name)
        merged = {**{k: v for k, v in defaults.items() if v is not None}, **spec}
        task = RallyTask(name, op["name"], op["operation-type"], op, merged, where)
        task.warmup_time = reader.number(merged, "warmup-time-period", where, spot)
        task.time = reader.number(merged, "time-period", where, spot)
        task.warmup_iterations = reader.number(merged, "warmup-iterations", where, spot, 0, True)
        task.iterations = reader.number(merged, "iterations", where, spot, 0, True)
        task.clients = reader.number(merged, "clients", where, spot, 1, True) or 1
        task.throughput = self._throughput(merged, where, spot, name)
        task.ramp_up = reader.number(merged, "ramp-up-time-period", where, spot, 0)
        self._check_timing(task, spot, defaults)
        if self.test_mode:
            _apply_test_mode(task)
        return task

    def _check_timing(self, task: RallyTask, spot: Spot, defaults: JsonMapping) -> None:
        """Refuse what Rally 2.13's track loader refuses (:func:`_timing_problem`)."""
        problem = _timing_problem(task, defaults)
        if problem is not None:
            raise self.reader.fail(task.where, problem, spot)

    def _throughput(self, spec: JsonMapping, where: str, name: Spot, label: str) -> float | None:
        """Rally's target rate in operations per second over all clients (None: unthrottled)."""
        throughput = spec.get("target-throughput")
        interval = spec.get("target-interval")
        if throughput is not None and interval is not None:
            raise self.reader.fail(
                where, "sets both 'target-throughput' and 'target-interval'; keep one", name
            )
        if interval is not None:
            value = self.reader.number(spec, "target-interval", where, name)
            return 1.0 / value if value else None
        if throughput is None:
            return None
        if isinstance(throughput, str):
            match = _THROUGHPUT.match(throughput)
            if not match:
                raise self.reader.fail(
                    where,
                    f"'target-throughput' {throughput!r} is not a number or '<number> <unit>/s'",
                    name,
                )
            if match.group(2) != "ops/s":
                self.notes.append(
                    f"{label}: target-throughput {throughput!r} is not in ops/s; taken as ops/s"
                )
            return float(match.group(1)) or None
        value = self.reader.number(spec, "target-throughput", where, name)
        return float(value) or None

    def _parallel(self, block: JsonValue, context: str, position: int = 0) -> None:
        reader = self.reader
        if not isinstance(block, dict):
            raise reader.fail(
                context, f"'parallel' must be an object, found {_describe(block)}", self.challenge
            )
        tasks_spec = reader.get(
            block, "tasks", list, f"{context}, parallel", self.challenge, required=True
        )
        # Timing set on the block is each task's default; the block's 'clients' caps the
        # clients of all tasks together and is not a per-task default.
        defaults = {key: block.get(key) for key in TIMING_KEYS if key != "clients"}
        tasks = []
        for number, spec in enumerate(tasks_spec):
            if not isinstance(spec, dict):
                raise reader.fail(
                    f"{context}, parallel.tasks[{number}]",
                    f"must be an object, found {_describe(spec)}",
                    self.challenge,
                )
            task = self._task(spec, f"{context}, parallel", defaults)
            task.block = position or None
            tasks.append(task)
        # bulk tasks with corpus documents index during the step of the block's searches
        bulks = [t for t in tasks if t.op_type == "bulk" and "param-source" not in t.op]
        searches = [t for t in tasks if t not in bulks]
        queries = [self._query(task) for task in searches]
        if searches and all(isinstance(q, Query) for q in queries):
            completed_by = block.get("completed-by")
            self._parallel_step(
                searches,
                [q for q in queries if isinstance(q, Query)],
                bulks,
                completed_by if isinstance(completed_by, str) else None,
                reader.number(block, "clients", f"{context}, parallel", self.challenge, 1, True),
            )
            return
        self.notes.append(
            f"parallel block ({', '.join(t.name for t in tasks)}): not all of its tasks are "
            f"searches esdash can run, so esdash runs them one after another"
        )
        with_searches = any(
            t.op_type in SEARCH_TYPES or t.op_type in REQUEST_OPERATIONS for t in tasks
        )
        # a bulk task beside searches esdash cannot send: refused for their reason
        unsent = next(
            ((t, q) for t, q in zip(searches, queries, strict=True) if isinstance(q, str)), None
        )
        for task in tasks:
            if task in bulks and unsent is not None and self._searchlike(searches):
                self._beside_unsent(task, *unsent)
                continue
            self._handle(
                task,
                " (esdash runs the tasks of this parallel block one after another)",
                with_searches=with_searches,
            )

    def _searchlike(self, tasks: Sequence[RallyTask]) -> bool:
        """Whether every task is a search or timed request (of Rally or the track's own)."""
        return all(
            t.op_type in SEARCH_TYPES or t.op_type in REQUEST_OPERATIONS or self._own(t)
            for t in tasks
        )

    def _beside_unsent(self, bulk: RallyTask, search: RallyTask, reason: str) -> None:
        """Refuse ``bulk``, which would index during ``search``, which esdash cannot send
        (``reason``), with the search's own kind of refusal."""
        own = "param-source" in search.op or self._own(search)
        why = (
            f"it would index during the searches of its parallel block, and esdash does not "
            f"run {search.name}: {reason}"
        )
        self.unsupported.append(f"{bulk.name} (bulk): {why}")
        self._plan(bulk, "not run", refusal=("track_py" if own else "unsupported_operation", why))

    def _parallel_step(
        self,
        tasks: list[RallyTask],
        queries: list[Query],
        bulks: Sequence[RallyTask] = (),
        completed_by: str | None = None,
        cap: int | None = None,
    ) -> None:
        """Searches run in parallel become one step whose queries are sent together; the
        block's ``bulks`` index during that step (:meth:`_indexing`); ``cap`` is the
        block's own ``clients`` (:meth:`_block_clients`)."""
        steps: set[str | None] = {
            t.spec.get("meta", {}).get("esdash-step")
            if isinstance(t.spec.get("meta"), dict)
            else None
            for t in tasks
        }
        named = steps.pop() if len(steps) == 1 else None
        name = named if named is not None else "+".join(t.name for t in tasks)
        timings = [self._timing(t) for t in tasks]
        ender = next((b for b in bulks if b.name == completed_by), None)
        clients = self._block_clients(name, tasks, bulks, cap)
        warmup, duration, counts = self._block_timing(name, tasks, timings, ender, clients)
        throughputs = [t.throughput for t in tasks]
        target = None
        if all(throughputs):
            target = sum(t for t in throughputs if t)  # the block's total rate
        elif any(throughputs):
            self.notes.append(
                f"{name}: only some parallel searches are throttled; esdash runs "
                f"the step unthrottled"
            )
        for task in tasks:
            self._search_notes(task)
        loads = {b.name: self._indexing(b) for b in bulks}
        indexing = tuple(load for load in loads.values() if isinstance(load, StepIndexing))
        step = QueryStep(
            name,
            tuple(queries),
            warmup,
            duration,
            target,
            clients=clients,
            indexing=indexing,
            warmup_iterations=None if counts is None else counts[0],
            iterations=None if counts is None else counts[1],
            ramp_up=max(t.ramp_up for t in timings),  # the block's, the same for every task
        )
        self.steps.append(step)
        for bulk in bulks:
            load = loads[bulk.name]
            if isinstance(load, str):
                self.unsupported.append(f"{bulk.name} (bulk): {load}")
                self._plan(bulk, "not run", refusal=("unsupported_operation", load))
            else:
                self._plan(
                    bulk, self._indexing_text(bulk, load, name, ender, completed_by), step=step
                )
        throttled = (
            "its rate is the sum of the tasks' target-throughput"
            if target
            else ("unthrottled unless the session sets benchmark.target_throughput")
        )
        during = (
            f"; bulk task(s) {', '.join(i.name for i in indexing)} index during the step"
            if indexing
            else ""
        )
        source = (
            "the sum of its tasks' clients"
            if clients == sum(t.clients for t in tasks)
            else "what the block's own clients leave its searches"
        )
        for task, timing, query in zip(tasks, timings, queries, strict=True):
            others = ", ".join(t.name for t in tasks if t is not task)
            self.task_queries[task.name] = query
            self._plan(
                task,
                f"runs as one query step {name!r} with {others or 'no other task'}: the "
                f"block's {clients} client(s) ({source}) each send the "
                f"block's {len(queries)} queries in their own random order, one request at a "
                f"time; {self._timing_text(task, timing)}; {throttled}{during}",
                step=step,
            )

    def _block_clients(
        self,
        name: str,
        tasks: Sequence[RallyTask],
        bulks: Sequence[RallyTask],
        cap: int | None,
    ) -> int:
        """The clients of a parallel block's query step: each task brings its own, and
        together they send the block's queries.  The block's own ``clients`` caps all of
        its tasks' clients together (Rally then runs the tasks' clients on that many, one
        after another): what its bulk tasks leave of it is the step's."""
        clients = sum(t.clients for t in tasks)
        indexing = sum(b.clients for b in bulks)
        if cap is None or clients + indexing <= cap:
            return clients
        capped = max(1, cap - indexing)
        self.notes.append(
            f"{name}: the block's 'clients' {cap} caps its tasks' {clients + indexing} "
            f"clients: its searches get {capped}"
            + (f" (its bulk tasks keep {indexing})" if indexing else "")
        )
        return capped

    def _block_timing(
        self,
        name: str,
        tasks: Sequence[RallyTask],
        timings: Sequence[Timing],
        ender: RallyTask | None,
        clients: int,
    ) -> tuple[float | None, float | None, tuple[int, int] | None]:
        """A parallel block's warm-up and measured time, or its (warm-up, measured)
        iterations per client when every search is counted.

        The block's clients each send all of its queries, so a counted block sends as many
        requests as its tasks together (iterations times clients, summed), spread evenly
        over the clients.  A bulk task with a time period that ends the block
        (``completed-by``) makes the block timed; counted searches in a timed block run for
        its time.
        """
        timed_by_bulk = ender is not None and ender.time is not None
        pairs = list(zip(tasks, timings, strict=True))
        if all(t.how == "iterations" for t in timings) and not timed_by_bulk:
            total = sum(t.clients * (g.iterations or 1) for t, g in pairs)
            warm = sum(t.clients * (g.warmup_iterations or 0) for t, g in pairs)
            counts = (math.ceil(warm / clients), math.ceil(total / clients))
            if len({(t.clients, g.iterations, g.warmup_iterations) for t, g in pairs}) > 1:
                self.notes.append(
                    f"{name}: the parallel searches' {warm}+{total} requests (iterations times "
                    f"clients, summed) are spread over the block's {clients} clients: "
                    f"{counts[0]}+{counts[1]} per client"
                )
            return None, None, counts
        timed = [t for t in timings if t.how == "time"]
        warmups = {t.warmup for t in timed}
        durations = {t.duration for t in timed}
        warmup = _longest(warmups)
        duration = _longest(durations)
        if timed_by_bulk and ender is not None:
            duration = ender.time  # the block lasts as long as the bulk task that ends it
        if len(warmups) > 1 or len(durations) > 1:
            self.notes.append(
                f"{name}: the parallel searches have different warm-up or measured times; "
                f"esdash runs them together for the longest ones"
            )
        counted = [t.name for t, g in pairs if g.how == "iterations"]
        if counted:
            self.notes.append(
                f"{name}: {', '.join(counted)} count iterations in a timed block; esdash runs "
                f"them for the block's time"
            )
        return warmup, duration, None

    def _indexing(self, task: RallyTask) -> StepIndexing | str:
        """A bulk task of a parallel block as the indexing of its step, or why it cannot
        be: its documents (:func:`bulk_documents`) must go to one index of the track."""
        reader, op, where, name = self.reader, task.op, task.where, task.op_name
        spot: Spot = ("operation", name, self.challenge)
        docs = bulk_documents(reader, self.documents, task)
        targets = list(dict.fromkeys(d.target_index or self.index for d in docs))
        if not docs:
            return "a bulk task in a parallel block that sends no corpus documents"
        if len(targets) > 1:
            return (
                f"a bulk task in a parallel block sending to several indices "
                f"({', '.join(targets)}); esdash indexes into one index during a step"
            )
        if targets[0] not in self.targets:
            return f"sends documents to {targets[0]!r}, which is none of the track's indices"
        self.step_documents[task.name] = tuple(docs)
        percentage = reader.number(op, "ingest-percentage", where, spot)
        if percentage is not None and not 0 < percentage <= 100:
            raise reader.fail(
                where, f"'ingest-percentage' must be in (0, 100], found {percentage}", spot
            )
        return StepIndexing(
            task.name,
            targets[0],
            clients=task.clients,
            bulk_size=reader.number(op, "bulk-size", where, spot, 1, True),
            target_throughput=task.throughput,
            pipeline=reader.get(op, "pipeline", str, where, spot),
            looped=bool(reader.get(op, "looped", bool, where, spot, default=False)),
            ingest_percentage=float(100 if percentage is None else percentage),
        )

    def _indexing_text(
        self,
        task: RallyTask,
        load: StepIndexing,
        step: str,
        ender: RallyTask | None,
        completed_by: str | None,
    ) -> str:
        """What esdash does with a bulk task that indexes during step ``step``."""
        corpora = ", ".join(dict.fromkeys(d.corpus for d in self.step_documents[task.name]))
        parts = [
            f"indexes {corpora} into {load.index} during the searches of query step "
            f"{step!r}, from its warm-up's start to its measured end: {load.clients} "
            f"client(s) over the bench ranks, each sending its own part of the documents",
            f"bulk-size {load.bulk_size}" if load.bulk_size else "benchmark.bulk_size per request",
            f"target-throughput {load.target_throughput:g} bulk requests/s over its clients"
            if load.target_throughput
            else "unthrottled",
        ]
        if load.pipeline:
            parts.append(f"pipeline {load.pipeline}")
        if load.ingest_percentage < 100:
            parts.append(f"{load.ingest_percentage:g} % of each client's part")
        parts.append(
            "looped (a client starts its part again when it is sent)"
            if load.looped
            else "a client stops when its part is sent"
        )
        if ender is task and task.time is not None:
            parts.append(
                f"completed-by this task: the step measures its time-period {task.time:g} s"
            )
        elif ender is task:
            parts.append(
                "completed-by this task, which esdash cannot honour exactly (the end of a "
                "bulk task's documents is not reported to rank 0, only its searches'): the "
                "step ends with its searches, whether or not the documents are all sent"
            )
        else:
            parts.append(
                "the step ends with its searches"
                + (f" (completed-by {completed_by})" if completed_by else "")
                + ", whether or not the documents are all sent"
            )
        parts.append(
            "recorded in the step under this task's name (docs/s); the documents stay in "
            "the index, so a later run re-ingests it (its document count differs)"
        )
        return "; ".join(parts)

    def _plan(
        self,
        task: RallyTask,
        esdash: str,
        *,
        step: QueryStep | None = None,
        ingest: bool = False,
        refusal: tuple[str, str] | None = None,
    ) -> None:
        """Record what esdash does with ``task`` (or why not) for :meth:`RallyTrack.plan`."""
        schedule: dict[str, Any] = {
            key: task.spec[key] for key in SCHEDULE_KEYS if key in task.spec
        }
        if self.test_mode:
            changes = list(task.test_mode)
            if ingest:
                changes.append(
                    f"the -1k document files, {TEST_MODE_DOCUMENTS:,} documents per file"
                )
            schedule["test mode"] = "; ".join(changes) or "nothing to change"
        planned = PlannedTask(
            task.name,
            task.op_type,
            esdash,
            clients=task.clients,
            schedule=schedule,
            parallel=task.block,
            step=step,
            ingest=ingest,
        )
        self.planned.append(planned.refused(*refusal) if refusal else planned)

    @staticmethod
    def _clients_text(task: RallyTask) -> str:
        if task.clients > 1:
            return (
                f"its {task.clients} clients are spread over the bench ranks (several in one "
                f"rank run as concurrent connections)"
            )
        return "its one client runs in the first bench rank"

    @staticmethod
    def _timing_text(task: RallyTask, timing: Timing) -> str:
        if timing.how == "iterations":
            warmup = f"{timing.warmup_iterations} warm-up then " if timing.warmup_iterations else ""
            return (
                f"{warmup}{timing.iterations} measured request(s) per client, counted: the "
                f"step ends when every client has sent them"
            )
        ramp = (
            f"; its clients start one after another over the first {timing.ramp_up:g} s of the "
            f"warm-up (ramp-up-time-period)"
            if timing.ramp_up
            else ""
        )
        if timing.duration is None:
            return f"measured for the session's benchmark.duration (no time-period given){ramp}"
        return f"warm-up and measured time as the task gives them{ramp}"

    def _handle(self, task: RallyTask, suffix: str = "", with_searches: bool = False) -> None:
        if task.op_type == "bulk":
            self._bulk(task, suffix, with_searches)
            return
        if self._sent_once(task):
            self._one_off(task, suffix)
            return
        if task.op_type in SEARCH_TYPES or task.op_type in REQUEST_OPERATIONS or self._own(task):
            query = self._query(task)
            if isinstance(query, str):
                self.unsupported.append(f"{task.name} ({task.op_type}): {query}")
                source = task.op.get("param-source")
                if source is not None or self._own(task):  # the reason names the source
                    self._plan(task, "not run", refusal=("track_py", query))
                else:
                    self._plan(task, "not run", refusal=("unsupported_operation", query))
                return
            if self.ingest is None and not self._early_search_noted:
                self._early_search_noted = True
                self.notes.append(
                    f"{task.name}: searches before the bulk task; esdash runs every query step "
                    f"after the ingest"
                )
            if self.ingest is None:
                suffix += " (after the ingest, although the schedule puts it before)"
            timing = self._timing(task)
            self._search_notes(task)
            what = "query step" if query.path is None else f"{query.method} {query.path} as step"
            suffix = self._resolves(query) + trackpy.query_text(query, task.op) + suffix
            step = QueryStep(
                task.name,
                (query,),
                timing.warmup,
                timing.duration,
                timing.target_throughput,
                clients=task.clients,
                warmup_iterations=timing.warmup_iterations,
                iterations=timing.iterations,
                ramp_up=timing.ramp_up,
            )
            self.steps.append(step)
            self.task_queries[task.name] = query
            ignored = self._ignored(task)
            rate = (
                f"target-throughput {timing.target_throughput:g} ops/s, the total rate of "
                f"the task's clients"
                if timing.target_throughput
                else "unthrottled unless the session sets benchmark.target_throughput"
            )
            self._plan(
                task,
                f"{what} {task.name!r}: {self._timing_text(task, timing)}; {rate}; "
                f"{self._clients_text(task)}"
                + (f"; ignores the task's {', '.join(ignored)}" if ignored else "")
                + suffix,
                step=step,
            )
            return
        if task.op_type in BY_ESDASH:
            if task.op_type == "create-index":
                self._create_index(task)
            self.by_esdash.append(f"{task.name} ({task.op_type}): {BY_ESDASH[task.op_type]}")
            self._plan(task, BY_ESDASH[task.op_type] + suffix)
            return
        if task.op_type in rr.ONE_OFF_OPERATIONS:
            self._one_off(task, suffix)
            return
        self.unsupported.append(
            f"{task.name} ({task.op_type}): esdash has no equivalent of this operation type"
        )
        if task.op_type not in RALLY_OPERATIONS:
            reason = (
                f"{task.op_type!r} is not one of Rally's operation types, so its runner is "
                f"the track's own: {self.track_py.holds('runner', task.op_type)}"
            )
            self._plan(task, "not run", refusal=("track_py", reason))
            return
        self._plan(
            task,
            "not run",
            refusal=(
                "unsupported_operation",
                f"esdash has no equivalent of Rally's {task.op_type!r} operation yet",
            ),
        )

    @staticmethod
    def _sent_once(task: RallyTask) -> bool:
        """A raw-request without a time period or iterations: Rally sends it once."""
        timed = ("warmup-time-period", "time-period", "warmup-iterations", "iterations")
        return (
            task.op_type == "raw-request"
            and "param-source" not in task.op
            and not any(k in task.spec for k in timed)
        )

    def _one_off(self, task: RallyTask, suffix: str) -> None:
        """An administrative task: its requests, sent once by rank 0 before the ingest
        (the task comes before the first bulk task) or after it (before the query steps)."""
        when = rr.BEFORE_INGEST if self.ingest is None else rr.AFTER_INGEST
        if task.op_type == "raw-request":
            query = self._request(task)
            found = [rr.raw_request(task.name, query.method, query.path or "/", query.body)]
        else:
            context = rr.Context(self.reader, self.indices, self.data_streams, self.templates)
            found = rr.one_offs(task.name, task.op_type, task.op, task.where, task.op_name, context)
        found = [replace(one, when=when) for one in found]
        self.one_offs += found
        where = "before the ingest" if when == rr.BEFORE_INGEST else "after the ingest"
        if when == rr.AFTER_INGEST and self.steps:
            where += " (before the query steps, although the schedule puts some before it)"
        skipped = [one.skipped for one in found if one.skipped]
        ignored = [k for k in TASK_IGNORED if k in task.spec]
        self._plan(
            task,
            f"sent once by rank 0 {where}: "
            + "; ".join(one.describe() for one in found)
            + (f"; {'; '.join(dict.fromkeys(skipped))}" if skipped else "")
            + (f"; ignores the task's {', '.join(ignored)}" if ignored else "")
            + suffix,
        )

    def _bulk(self, task: RallyTask, suffix: str, with_searches: bool) -> None:
        """A bulk task: one ingest unit, run in schedule order before the query steps.

        Each bulk task sends the document sets its ``corpora`` (and ``indices``) select,
        every index's documents once.  A bulk task inside a ``parallel`` block whose other
        tasks are searches indexes during their step (:meth:`_parallel_step`); inside a
        block with tasks esdash runs one after another it is refused (``with_searches``),
        since those searches then run after the ingest, not during it.
        """
        source = task.op.get("param-source")
        if source is not None:
            # the documents are the track's own Python's (random_vector's generated vectors)
            reason = f"its documents come from the parameter source {source!r}, not a corpus: "
            if self.track_py.exists:
                reason += (
                    f"esdash samples the bodies of {self.track_py.path.name}'s search parameter "
                    f"sources, not generated documents"
                )
            else:
                reason += self.track_py.holds("param-source", str(source))
            self.unsupported.append(f"{task.name} (bulk): {reason}")
            self._plan(task, "not run", refusal=("track_py", reason))
            return
        if with_searches:
            reason = (
                "a bulk task in a parallel block with searches: esdash ingests before its "
                "query steps and never measures searches during indexing"
            )
            self.unsupported.append(f"{task.name} (bulk): {reason}")
            self._plan(task, "not run", refusal=("unsupported_operation", reason))
            return
        docs = bulk_documents(self.reader, self.documents, task)
        fresh = [d for d in docs if d not in self.sent]
        self.sent += fresh
        self.bulks.append(task)
        if self.ingest is None:
            self.ingest = task
        ignored = [
            k
            for k in (
                "bulk-size",
                "clients",
                "warmup-time-period",
                "time-period",
                "ingest-percentage",
                "conflicts",
                "id-conflicts",
                "target-throughput",
                "pipeline",
            )
            if k in task.op or k in task.spec
        ]
        if ignored:
            self.notes.append(
                f"{task.name} (bulk) is an ingest; ignored: {', '.join(ignored)} "
                f"(esdash ingests each corpus once, split over its bench ranks, in "
                f"requests of benchmark.bulk_size documents)"
            )
        targets = list(
            dict.fromkeys(
                f"data stream {d.target_index} (as create actions)"
                if d.data_stream
                else d.target_index or "(its action lines' _index)"
                for d in fresh
            )
        )
        if fresh:
            what = (
                f"the ingest (bulk task {len(self.bulks)}): esdash ingests the corpora it sends "
                f"({', '.join(dict.fromkeys(d.corpus for d in fresh))}) into "
                f"{', '.join(targets)} once"
            )
        else:
            what = (
                f"the ingest (bulk task {len(self.bulks)}): sends nothing an earlier bulk task "
                f"did not send "
                f"(esdash ingests each document set once)"
            )
        self._plan(
            task,
            f"{what}, split over its bench ranks, in bulk requests of benchmark.bulk_size "
            f"documents, before the query steps (an index already holding them with the "
            f"planned fingerprint is reused instead)"
            + (f"; ignores the task's {', '.join(ignored)}" if ignored else "")
            + suffix,
            ingest=True,
        )

    def _create_index(self, task: RallyTask) -> None:
        """Remember ``settings`` of a create-index task for the indices it names (all when
        it names none), as Rally merges them into their bodies."""
        op = task.op
        wanted = op.get("index")
        if isinstance(wanted, str):
            wanted = [wanted]
        if wanted is not None and not (
            isinstance(wanted, list) and all(isinstance(w, str) for w in wanted)
        ):
            raise self.reader.fail(
                task.where,
                f"'index' must be a string or an array of strings, found {_describe(wanted)}",
                task.op_name,
            )
        settings = self.reader.get(op, "settings", dict, task.where, task.op_name)
        if settings:
            self.index_settings.append((list(wanted) if wanted else None, settings))

    @property
    def targets(self) -> list[str]:
        """Every index and data stream of the track: what a search may name."""
        return [*self.indices, *self.data_streams]

    def _resolves(self, query: Query) -> str:
        """What a search target that is not one index resolves to among the track's
        indices (Elasticsearch resolves ``logs-*`` or ``a,b`` itself), said in a clause."""
        if query.path is not None or query.index is None or query.index in self.targets:
            return ""
        matched = [i for i in self.targets if _index_matches(query.index, i)]
        return f"; searches {query.index!r}: {', '.join(matched)} among the track's indices"

    def _request(self, task: RallyTask) -> Query:
        """The timed request of an ``index-stats``, ``node-stats`` or ``raw-request`` task.

        As Rally 2.13 sends them: ``GET /INDEX/_stats`` (``index`` defaults to ``_all``),
        ``GET /_nodes/stats``, and a raw request's ``method`` (default GET), ``path``,
        ``body`` and ``request-params`` (the query string).
        """
        op, reader, where, name = task.op, self.reader, task.where, task.op_name
        if task.op_type == "index-stats":
            index = reader.get(op, "index", str, where, name, default="_all")
            return Query(name, {}, method="GET", path=f"/{quote(index, safe=',*')}/_stats")
        if task.op_type == "node-stats":
            return Query(name, {}, method="GET", path="/_nodes/stats")
        path = reader.get(op, "path", str, where, name, required=True)
        if not path.startswith("/") or any(ord(c) < 32 or c in " #?" for c in path):
            raise reader.fail(
                where,
                f"'path' must start with '/' and hold no spaces, control characters, '?' or "
                f"'#' (put parameters into 'request-params'), found {path!r}",
                name,
            )
        method = reader.get(op, "method", str, where, name, default="GET").upper()
        if method not in _HTTP_METHODS:
            raise reader.fail(
                where, f"'method' must be one of {', '.join(_HTTP_METHODS)}, found {method!r}", name
            )
        params = reader.get(op, "request-params", dict, where, name) or {}
        if params:
            path += "?" + urlencode({k: _param(v) for k, v in params.items()})
        body = reader.get(op, "body", dict, where, name) or {}
        requires: tuple[str, ...] = ("scripting",) if _needs_scripting(body) else ()
        return Query(name, dict(body), requires=requires, method=method, path=path)

    def _query(self, task: RallyTask) -> Query | str:
        """The esdash query of a search task (or a timed request), or why it cannot be one."""
        op, reader = task.op, self.reader
        if task.op_type in REQUEST_OPERATIONS:
            if "param-source" in op:
                return (
                    f"its requests come from the parameter source {op['param-source']!r} in "
                    f"the track's track.py; esdash runs parameter sources of searches only"
                )
            timed = ("warmup-time-period", "time-period", "warmup-iterations", "iterations")
            if task.op_type == "raw-request" and not any(k in task.spec for k in timed):
                return (
                    "a raw-request without a time period or iterations is a one-off call "
                    "(Rally sends it once); esdash runs raw requests only as timed tasks"
                )
            return self._request(task)
        context = trackpy.SourceContext(
            reader.track_file.parent,
            self.index,
            tuple(self.indices),
            self.challenge,
            self.documents,
            self.track_py.exists,
            self.track_py.path,
            self.code,
        )
        if self._own(task):
            return runners.runner_query(task, context)
        if task.op_type not in SEARCH_TYPES:
            return f"{task.op_type} is not a search"
        if "param-source" in op:
            query, notes = trackpy.source_query(task, context)
            self.notes += [note for note in notes if note not in self.notes]
            if isinstance(query, str):
                return f"its queries come from the parameter source {op['param-source']!r}: {query}"
            return query
        body = reader.get(op, "body", dict, task.where, task.op_name)
        target = reader.get(op, "index", str, task.where, task.op_name)
        if target is None:
            target = reader.get(op, "data-stream", str, task.where, task.op_name)
        targets = self.targets
        if not targets:
            return "the track defines no index, and esdash searches only the index it creates"
        if target is None:
            if len(targets) != 1:
                raise reader.fail(
                    task.where,
                    "the search names no 'index' and the track has several indices; "
                    "add 'index' to the operation",
                    task.op_name,
                )
            target = targets[0]
        if not any(_index_matches(target, index) for index in targets):
            return (
                f"searches {target!r}, which names none of the track's indices "
                f"({', '.join(targets)}), and esdash searches only what it creates"
            )
        requires: tuple[str, ...] = ("scripting",) if _needs_scripting(body) else ()
        meta = op.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("esdash-requires"), list):
            requires = tuple(str(r) for r in meta["esdash-requires"])
        # Rally sends request_cache only when the operation sets "cache"; otherwise the
        # index's setting (on by default for size-0 searches) decides, and so it does here.
        cache = reader.get(op, "cache", bool, task.where, task.op_name)
        if task.op_type != "search" or any(k in op for k in trackpy.PAGING):
            # request-params of a search are not sent (see SEARCH_IGNORED), paged or not
            params = {k: v for k, v in op.items() if k != "request-params"}
            return trackpy.search_query(
                task.op_name, [dict(body or {})], target, params, task.op_type, requires
            )
        return Query(task.op_name, dict(body or {}), target, requires, request_cache=cache)

    def _own(self, task: RallyTask) -> bool:
        """Whether the task's runner is one the track's own track.py registers."""
        return task.op_type not in RALLY_OPERATIONS and self.track_py.exists

    @staticmethod
    def _ignored(task: RallyTask) -> list[str]:
        """The task's properties that change what Rally sends, which esdash does not send."""
        ignored = [k for k in SEARCH_IGNORED if k in task.op]
        if task.op_type == "raw-request":  # its request-params are sent
            ignored = [k for k in ignored if k != "request-params"]
        if task.op_type == "index-stats" and "condition" in task.op:
            ignored.append("condition")  # Rally retries until it holds; esdash times each call
        return ignored + [k for k in TASK_IGNORED if k in task.spec]

    def _search_notes(self, task: RallyTask) -> None:
        ignored = self._ignored(task)
        if ignored:
            self.notes.append(f"{task.name} ({task.op_type}): ignored {', '.join(ignored)}")


def _param(value: JsonValue) -> str:
    """A request parameter as Rally's client puts it into the query string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Timing:
    """A Rally task's timing in esdash's terms: ``how`` is ``time`` (warm-up and measured
    seconds; None: the session's) or ``iterations`` (requests per client, counted: the
    step ends when every client has sent them)."""

    warmup: float | None
    duration: float | None
    target_throughput: float | None
    how: str
    warmup_iterations: int | None = None
    iterations: int | None = None
    ramp_up: float = 0.0


def _longest(seconds: set[float | None]) -> float | None:
    """The longest of the times, or None (the session's) when one of them is the session's."""
    if None in seconds:
        return None
    return max((s for s in seconds if s is not None), default=None)


def _timing(task: RallyTask) -> Timing:
    """Warm-up and measured time or iterations and the rate of a Rally task, as Rally 2.13's
    driver schedules it (``schedule_for``): a task with a time period is timed; any other is
    counted, ``warmup-iterations`` (default 0) then ``iterations`` (default 1) per client.

    Rally's ``target-throughput`` is the rate of all of the task's ``clients`` together, and
    an esdash step's target throughput is the rate of all its clients together (each paces
    itself at its share), so the rate carries over unchanged.  A measured time period
    without a warm-up gets none, as in Rally.  Test mode has already changed the task
    (:func:`_apply_test_mode`).
    """
    if task.warmup_time is not None or task.time is not None:
        warmup = 0.0 if task.warmup_time is None else float(task.warmup_time)
        duration = None if task.time is None else float(task.time)
        return Timing(warmup, duration, task.throughput, "time", ramp_up=task.ramp_up or 0.0)
    return Timing(
        None,
        None,
        task.throughput,
        "iterations",
        warmup_iterations=int(task.warmup_iterations or 0),
        iterations=int(task.iterations or 1),
    )


def bulk_documents(
    reader: _Reader, documents: Sequence[DocumentSet], task: RallyTask
) -> list[DocumentSet]:
    """The document sets a bulk task sends: those of its ``corpora`` (default: all),
    narrowed to its ``indices`` when it names them, as Rally's bulk parameter source does."""
    candidates = list(documents)
    names = sorted({d.corpus for d in documents})
    wanted = task.op.get("corpora")
    if wanted is not None:
        if isinstance(wanted, str):
            wanted = [wanted]
        if not isinstance(wanted, list) or not all(isinstance(w, str) for w in wanted):
            raise reader.fail(
                task.where,
                f"'corpora' must be a string or an array of strings, found {_describe(wanted)}",
                task.op_name,
            )
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise reader.fail(
                task.where,
                f"'corpora' names {', '.join(unknown)}, which the track does not define "
                f"(corpora: {', '.join(names) or 'none'})",
                task.op_name,
            )
        candidates = [d for d in candidates if d.corpus in wanted]
    targets = task.op.get("indices")
    if isinstance(targets, str):
        targets = [targets]
    if isinstance(targets, list):
        candidates = [d for d in candidates if d.target_index in targets]
    return candidates


def _ingest_documents(
    sent: Sequence[DocumentSet],
    documents: Sequence[DocumentSet],
    has_bulk: bool,
    index: str,
) -> tuple[list[DocumentSet], list[str]]:
    """The document sets the ingest sends to the main ``index`` (those the bulk tasks
    ``sent``; every set without a bulk task), and notes on them."""
    notes: list[str] = []
    candidates = list(sent) if has_bulk else list(documents)
    if not has_bulk:
        notes.append("the challenge has no bulk task; esdash ingests the corpus anyway")
    chosen = [d for d in candidates if d.target_index in (index, None)]
    if any(d.includes_action_and_meta_data for d in chosen):
        notes.append(
            "the corpus carries its own action lines; their _index decides where documents go"
        )
    return chosen, notes
