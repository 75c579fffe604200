"""The chosen challenge's schedule in esdash's terms: ingest, query steps and their timing.

The constants naming the tasks esdash does itself (:data:`BY_ESDASH`), Rally's operation types,
schedule and timing keys and the test-mode limits belong here, with the code that uses them.

:class:`_ScheduleMapper` sorts the tasks of a challenge into the ingest, query steps, what
esdash does itself and what it does not support; :func:`_timing` converts Rally's timing; the
test-mode rules change tasks and document sets as Rally's ``--test-mode`` does; and
:func:`_ingest_documents` picks the document sets the ingest sends.  Used by the loader.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

from esdash_plugins.tracks import rally_template as tpl
from esdash_plugins.tracks.rally_model import (
    DocumentSet,
    RallyTask,
    TrackPy,
    _describe,
    _index_matches,
    _needs_scripting,
)
from esdash_plugins.tracks.rally_reader import (
    Spot,
    _operation,
    _Reader,
)

from esdash.plugin_api import (
    JsonMapping,
    JsonObject,
    JsonValue,
    PlannedTask,
    Query,
    QueryStep,
)

#: Tasks esdash does itself around its ingest and query steps, with what it does instead.
BY_ESDASH = {
    "delete-index": "done by esdash itself (before the ingest it re-creates an index it made "
    "for another fingerprint, and keeps one with the planned fingerprint; it never deletes an "
    "index it did not make)",
    "create-index": "done by esdash itself (it creates the index; the task's settings are "
    "merged into the index body)",
    "refresh": "done by esdash itself (it refreshes and flushes the index once, after the ingest)",
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
TASK_IGNORED = ("schedule", "ramp-up-time-period")
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
TIMING_KEYS = ("warmup-time-period", "time-period", "warmup-iterations", "iterations", "clients")
_THROUGHPUT = re.compile(r"^\s*(\d*\.?\d+)\s+(\w+/s)\s*$")
#: Rally's ``--test-mode`` (``TestModeTrackProcessor`` in esrally/track/loader.py of Rally
#: 2.13): every bulk document set is cut to 1,000 documents read from its ``-1k`` file, and
#: measured time periods are capped at 10 s.
TEST_MODE_DOCUMENTS = 1000
TEST_MODE_TIME_PERIOD = 10.0
#: Measured seconds in test mode of a task timed by iterations (or not timed at all): Rally
#: then sends about one request per client, which has no time equivalent in an esdash step,
#: so the step gets the shortest measured time that still yields samples.
TEST_MODE_ITERATION_SECONDS = 1.0


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
    task.test_mode = tuple(changes)


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
    ) -> None:
        self.reader = reader
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
        self.create_settings: list[JsonObject] = []
        self._task_names: set[str] = set()
        self._early_search_noted = False
        self._converted: list[str] = []
        self._untimed: list[str] = []
        self._clients: list[str] = []

    def _timing(self, task: RallyTask) -> Timing:
        """The task's timing, remembering how it was converted for :meth:`finish`."""
        timing = _timing(task, self.test_mode)
        if timing.how == "iterations":
            self._converted.append(
                f"{task.name} ({task.warmup_iterations or 0}+{task.iterations or 0} x "
                f"{task.clients} client(s) at {timing.target_throughput:g}/s -> "
                f"{timing.warmup or 0:g} s+{timing.duration or 0:g} s)"
            )
        elif timing.how == "untimed":
            self._untimed.append(task.name)
        if task.clients > 1:
            self._clients.append(f"{task.name} ({task.clients})")
        return timing

    def finish(self) -> None:
        """Add the notes that summarise how task timing was converted."""
        if self._converted:
            self.notes.append(
                "warm-up+measured iterations (per client) converted to seconds at the task's "
                "target rate: " + ", ".join(self._converted)
            )
        if self._untimed:
            self.notes.append(
                "iterations without a target-throughput have no time equivalent, so the "
                "session's benchmark.warmup and benchmark.duration apply to: "
                + ", ".join(self._untimed)
            )
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
        if self.test_mode:
            _apply_test_mode(task)
        return task

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
        queries = [self._query(task) for task in tasks]
        if tasks and all(isinstance(q, Query) for q in queries):
            self._parallel_step(tasks, [q for q in queries if isinstance(q, Query)])
            return
        self.notes.append(
            f"parallel block ({', '.join(t.name for t in tasks)}): not all of its tasks are "
            f"searches esdash can run, so esdash runs them one after another"
        )
        for task in tasks:
            self._handle(task, " (esdash runs the tasks of this parallel block one after another)")

    def _parallel_step(self, tasks: list[RallyTask], queries: list[Query]) -> None:
        """Searches run in parallel become one step whose queries are sent together."""
        steps = {
            t.spec.get("meta", {}).get("esdash-step")
            if isinstance(t.spec.get("meta"), dict)
            else None
            for t in tasks
        }
        name = (
            steps.pop()
            if len(steps) == 1 and None not in steps
            else "+".join(t.name for t in tasks)
        )
        timings = [self._timing(t) for t in tasks]
        warmups = {t.warmup for t in timings}
        durations = {t.duration for t in timings}
        warmup = None if None in warmups else max(warmups, default=None)
        duration = None if None in durations else max(durations, default=None)
        if len(warmups) > 1 or len(durations) > 1:
            self.notes.append(
                f"{name}: the parallel searches have different warm-up or measured times; "
                f"esdash runs them together for the longest ones"
            )
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
        # each task brings its own clients; together they send the block's queries
        clients = sum(t.clients for t in tasks)
        step = QueryStep(name, tuple(queries), warmup, duration, target, clients=clients)
        self.steps.append(step)
        throttled = (
            "its rate is the sum of the tasks' target-throughput"
            if target
            else ("unthrottled unless the session sets benchmark.target_throughput")
        )
        for task, timing, query in zip(tasks, timings, queries, strict=True):
            others = ", ".join(t.name for t in tasks if t is not task)
            self.task_queries[task.name] = query
            self._plan(
                task,
                f"runs as one query step {name!r} with {others or 'no other task'}: the "
                f"block's {clients} client(s) (the sum of its tasks' clients) each send the "
                f"block's {len(queries)} queries in their own random order, one request at a "
                f"time; {self._timing_text(task, timing)}; {throttled}",
                step=step,
            )

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
            per_client = (timing.target_throughput or 0) / task.clients
            return (
                f"{task.warmup_iterations or 0}+{task.iterations or 0} iterations per client "
                f"converted to seconds at {per_client:g}/s per client"
            )
        if timing.how == "untimed":
            return (
                "iterations without a target-throughput have no time equivalent: the "
                "session's benchmark.warmup and benchmark.duration apply"
            )
        if timing.how == "none":
            return "no time given: the session's benchmark.warmup and benchmark.duration apply"
        if timing.how == "test-mode":
            return (
                f"test mode: no warm-up and {TEST_MODE_ITERATION_SECONDS:g} s measured (Rally "
                f"sends about one request per client)"
            )
        return "warm-up and measured time as the task gives them"

    def _handle(self, task: RallyTask, suffix: str = "") -> None:
        if task.op_type == "bulk":
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
                        f"{task.name} (bulk) is the ingest; ignored: {', '.join(ignored)} "
                        f"(esdash ingests the whole corpus once, split over its bench ranks, in "
                        f"requests of benchmark.bulk_size documents)"
                    )
                self._plan(
                    task,
                    f"the ingest: esdash ingests the corpus of index {self.index!r} once, split "
                    f"over its bench ranks, in bulk requests of benchmark.bulk_size documents "
                    f"(an index already holding them with the planned fingerprint is reused "
                    f"instead)"
                    + (f"; ignores the task's {', '.join(ignored)}" if ignored else "")
                    + suffix,
                    ingest=True,
                )
            else:
                self.unsupported.append(
                    f"{task.name} (bulk): esdash ingests once per run; the ingest is "
                    f"{self.ingest.name!r}"
                )
                self._plan(
                    task,
                    "not run",
                    refusal=(
                        "unsupported_operation",
                        f"esdash ingests once per run; its ingest is {self.ingest.name!r}",
                    ),
                )
            return
        if task.op_type == "search" or task.op_type in REQUEST_OPERATIONS:
            query = self._query(task)
            if isinstance(query, str):
                self.unsupported.append(f"{task.name} ({task.op_type}): {query}")
                source = task.op.get("param-source")
                if source is not None:
                    reason = (
                        f"its queries come from the parameter source {source!r}: "
                        f"{self.track_py.holds('param-source', str(source))}"
                    )
                    self._plan(task, "not run", refusal=("track_py", reason))
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
            step = QueryStep(
                task.name,
                (query,),
                timing.warmup,
                timing.duration,
                timing.target_throughput,
                clients=task.clients,
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

    def _create_index(self, task: RallyTask) -> None:
        """Remember ``settings`` of a create-index task for the chosen index, as Rally merges."""
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
        if wanted and self.index not in wanted:
            return
        settings = self.reader.get(op, "settings", dict, task.where, task.op_name)
        if settings:
            self.create_settings.append(settings)

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
        requires = ("scripting",) if _needs_scripting(body) else ()
        return Query(name, dict(body), requires=requires, method=method, path=path)

    def _query(self, task: RallyTask) -> Query | str:
        """The esdash query of a search task (or a timed request), or why it cannot be one."""
        op, reader = task.op, self.reader
        if task.op_type in REQUEST_OPERATIONS:
            if "param-source" in op:
                return (
                    f"its requests come from the parameter source {op['param-source']!r} in "
                    f"the track's track.py, which esdash does not run"
                )
            timed = ("warmup-time-period", "time-period", "warmup-iterations", "iterations")
            if task.op_type == "raw-request" and not any(k in task.spec for k in timed):
                return (
                    "a raw-request without a time period or iterations is a one-off call "
                    "(Rally sends it once); esdash runs raw requests only as timed tasks"
                )
            return self._request(task)
        if task.op_type != "search":
            return f"{task.op_type} is not a search"
        if "param-source" in op:
            return (
                f"its queries come from the parameter source {op['param-source']!r} in the "
                f"track's track.py, which esdash does not run"
            )
        for key in ("pages", "results-per-page", "with-point-in-time-from"):
            if key in op:
                return f"'{key}' (paginated search) is not supported by esdash"
        body = reader.get(op, "body", dict, task.where, task.op_name)
        target = reader.get(op, "index", str, task.where, task.op_name)
        if target is None:
            target = reader.get(op, "data-stream", str, task.where, task.op_name)
        if not self.indices:
            return "the track defines no index, and esdash searches only the index it creates"
        if target is None:
            if len(self.indices) != 1:
                raise reader.fail(
                    task.where,
                    "the search names no 'index' and the track has several indices; "
                    "add 'index' to the operation",
                    task.op_name,
                )
            target = self.indices[0]
        if not _index_matches(target, self.index):
            return (
                f"searches {target!r}, but esdash creates only {self.index!r} in this run "
                f"(choose the index with track.index)"
            )
        requires = ("scripting",) if _needs_scripting(body) else ()
        meta = op.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("esdash-requires"), list):
            requires = tuple(str(r) for r in meta["esdash-requires"])
        # Rally sends request_cache only when the operation sets "cache"; otherwise the
        # index's setting (on by default for size-0 searches) decides, and so it does here.
        cache = reader.get(op, "cache", bool, task.where, task.op_name)
        return Query(task.op_name, dict(body or {}), target, requires, request_cache=cache)

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
    """A Rally task's timing in esdash's terms; ``how`` says how it was obtained."""

    warmup: float | None
    duration: float | None
    target_throughput: float | None
    how: str  # "time", "iterations" (converted at the target rate), "none", "untimed",
    # "test-mode" (iterations or no time, in test mode)


def _timing(task: RallyTask, test_mode: bool = False) -> Timing:
    """Warm-up and measured seconds and the rate of a Rally task, in esdash's terms.

    Rally's ``target-throughput`` is the rate of all of the task's ``clients`` together, and
    an esdash step's target throughput is the rate of all bench ranks together (each rank
    paces itself at its share), so the rate carries over unchanged.  Iterations are per
    client in Rally; at the per-client rate ``target-throughput / clients`` they take
    ``iterations * clients / target-throughput`` seconds.  Without a rate they have no time
    equivalent and the session's warm-up and duration apply (``None``).  A measured phase
    without a warm-up gets none, as in Rally.  In ``test_mode`` (the task already changed by
    :func:`_apply_test_mode`) such a task gets no warm-up and
    :data:`TEST_MODE_ITERATION_SECONDS`, so a test run stays short.
    """
    per_client = task.throughput / task.clients if task.throughput else None
    warmup, duration = task.warmup_time, task.time
    iterations = task.warmup_iterations is not None or task.iterations is not None
    if iterations and per_client:
        if warmup is None and task.warmup_iterations is not None:
            warmup = task.warmup_iterations / per_client
        if duration is None and task.iterations is not None:
            duration = task.iterations / per_client
        how = "iterations"
    elif iterations:
        how = "untimed"
    else:
        how = "time" if warmup is not None or duration is not None else "none"
    if test_mode and how in ("untimed", "none"):
        warmup, duration, how = 0.0, TEST_MODE_ITERATION_SECONDS, "test-mode"
    if warmup is None and duration is not None:
        warmup = 0.0  # Rally warms up only when told to; a measured phase alone has none
    return Timing(
        None if warmup is None else float(warmup),
        None if duration is None else float(duration),
        task.throughput,
        how,
    )


def _ingest_documents(
    reader: _Reader,
    documents: Sequence[DocumentSet],
    ingest: RallyTask | None,
    index: str,
) -> tuple[list[DocumentSet], list[str]]:
    """The document sets the ingest sends to ``index``, and notes on those it leaves out."""
    notes: list[str] = []
    candidates = list(documents)
    if ingest is not None:
        names = sorted({d.corpus for d in documents})
        wanted = ingest.op.get("corpora")
        if wanted is not None:
            if isinstance(wanted, str):
                wanted = [wanted]
            if not isinstance(wanted, list) or not all(isinstance(w, str) for w in wanted):
                raise reader.fail(
                    ingest.where,
                    f"'corpora' must be a string or an array of strings, found {_describe(wanted)}",
                    ingest.op_name,
                )
            unknown = [w for w in wanted if w not in names]
            if unknown:
                raise reader.fail(
                    ingest.where,
                    f"'corpora' names {', '.join(unknown)}, which the track does not define "
                    f"(corpora: {', '.join(names) or 'none'})",
                    ingest.op_name,
                )
            candidates = [d for d in candidates if d.corpus in wanted]
        targets = ingest.op.get("indices")
        if isinstance(targets, str):
            targets = [targets]
        if isinstance(targets, list):
            candidates = [d for d in candidates if d.target_index in targets]
    else:
        notes.append("the challenge has no bulk task; esdash ingests the corpus anyway")
    chosen = [d for d in candidates if d.target_index in (index, None)]
    others = [d for d in candidates if d.target_index not in (index, None)]
    if others:
        listed = ", ".join(f"{d.source_file} -> {d.target_index}" for d in others[:8])
        more = f" and {len(others) - 8} more" if len(others) > 8 else ""
        notes.append(f"not ingested (esdash ingests one index per run, {index!r}): {listed}{more}")
    if any(d.includes_action_and_meta_data for d in chosen):
        notes.append(
            "the corpus carries its own action lines; their _index decides where documents go"
        )
    return chosen, notes
