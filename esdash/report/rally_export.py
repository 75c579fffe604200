"""Writing an esdash track as a Rally track directory (``esdash export-rally``).

The point is comparison: the same mapping, corpus and queries run under Rally (or
opensearch-benchmark) and under esdash give numbers that can be put side by side.  The
directory holds:

* ``track.json``: one index, one corpus, one operation per query and a default challenge
  ``esdash`` that deletes and creates the index, ingests with ``bulk``, refreshes and then
  runs each query step for its warm-up and measured time;
* ``index.json``: the index body (settings and mappings);
* ``documents.json``: the corpus, symlinked (default) or copied, with its ``document-count``
  and ``uncompressed-bytes`` in ``track.json`` (Rally checks both).

An esdash step's target throughput and a Rally task's ``target-throughput`` are both the
rate of all senders together (esdash's bench ranks, Rally's clients), so the rate is written
unchanged, and ``clients`` is the number of bench ranks (``nodes x workers_per_node`` of a
session).  A step with several queries becomes a ``parallel`` block whose ``clients`` cap
makes those clients share the queries, as esdash's ranks do, each task at its share of the
rate.  The ``rally`` track reads such a directory back into the same steps.

Rally renders ``track.json`` with Jinja2, so any ``{{``, ``{%`` or ``{#`` inside strings
(a query for a literal ``{{id}}``) is written as ``\\u007b...``, which JSON reads back as
``{``, and Jinja2 leaves alone.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote

import esdash
from esdash.errors import BadInput
from esdash.plugin.api import Track
from esdash.plugin.values import Corpus, OptionValues, Query, QueryStep
from esdash.rundir.records import JsonObject, JsonValue

if TYPE_CHECKING:
    from esdash.session import Session

#: esdash's own defaults for a session's [benchmark] table, used when no session is given.
DEFAULT_WARMUP = 5.0
DEFAULT_DURATION = 30.0
DEFAULT_BULK_SIZE = 1000
CORPUS_FILE = "documents.json"
INDEX_FILE = "index.json"
TRACK_FILE = "track.json"
_JINJA_OPENERS = re.compile(r"\{(?=[{%#])")


@dataclass(frozen=True)
class ExportSettings:
    """How the exported challenge runs: esdash's session values, in Rally's terms.

    ``target_throughput`` is the rate of all bench ranks together; ``clients`` is the
    number of bench ranks.
    """

    warmup: float = DEFAULT_WARMUP
    duration: float = DEFAULT_DURATION
    bulk_size: int = DEFAULT_BULK_SIZE
    clients: int = 1
    target_throughput: float | None = None
    copy_corpus: bool = False

    @classmethod
    def from_session(cls, session: Session, copy_corpus: bool = False) -> ExportSettings:
        """The settings of a validated :class:`esdash.session.Session`."""
        bench = session.benchmark
        return cls(
            warmup=bench.warmup,
            duration=bench.duration,
            bulk_size=bench.bulk_size,
            clients=max(1, session.cluster.nodes * bench.workers_per_node),
            target_throughput=bench.target_throughput,
            copy_corpus=copy_corpus,
        )


@dataclass(frozen=True)
class ExportResult:
    """What was written, for the command's summary."""

    directory: Path
    index: str
    documents: int
    uncompressed_bytes: int
    corpus_file: Path
    corpus_source: Path
    operations: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def jinja_safe_json(value: JsonValue) -> str:
    """JSON text that Jinja2 renders to itself (see the module docstring)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    # Structural braces are followed by a newline or "}" in indented JSON, so every "{" that
    # starts a Jinja2 delimiter is inside a string, where \u007b means the same character.
    return _JINJA_OPENERS.sub(r"\\u007b", text) + "\n"


def index_name(track: Track, options: OptionValues) -> str:
    """The index a track's documents go to, as the bench plan names it."""
    resolve = getattr(track, "index_name", None)
    if callable(resolve):
        return str(resolve(options))
    return track.index or track.name


def count_documents(corpus: Corpus) -> int:
    """Documents in the corpus: its declared count, else its lines (halved with actions)."""
    if corpus.documents is not None:
        return corpus.documents
    lines = 0
    last = b"\n"
    with open(corpus.path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1
    return lines // 2 if corpus.includes_action_and_meta_data else lines


def _seconds(value: float, minimum: int, what: str, step: str, notes: list[str]) -> int:
    """Whole seconds, as Rally's schema requires, rounding up (never below ``minimum``)."""
    whole = max(minimum, math.ceil(value - 1e-9))
    if whole != value:
        notes.append(f"{step}: {what} {value:g} s written as {whole} s (Rally takes whole seconds)")
    return whole


def _plain(value: object) -> JsonValue:
    """Option values as JSON (paths as strings, tuples as lists) for the track's meta data."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class _Names:
    """Unique names for operations and tasks (Rally requires both to be unique)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def take(self, wanted: str) -> str:
        name, number = wanted, 2
        while name in self.used:
            name, number = f"{wanted}-{number}", number + 1
        self.used.add(name)
        return name


def build_track(
    track: Track,
    options: OptionValues,
    index: str,
    steps: tuple[QueryStep, ...],
    documents: int,
    size: int,
    includes_actions: bool,
    settings: ExportSettings,
) -> tuple[JsonObject, list[str]]:
    """The ``track.json`` object, and notes on what had to be adapted."""
    notes: list[str] = []
    op_names, task_names = _Names(), _Names()
    bulk_name = op_names.take("bulk")
    operations: list[JsonObject] = [
        {"name": bulk_name, "operation-type": "bulk", "bulk-size": settings.bulk_size}
    ]
    by_query: dict[str, str] = {}

    def operation(query: Query) -> str:
        op: JsonObject = {"name": query.name}
        if query.path is not None:
            op.update(request_operation(query))
        else:
            op.update({"operation-type": "search", "index": query.index or index})
            op["body"] = dict(query.body)
            if query.request_cache is not None:
                op["cache"] = query.request_cache  # Rally sends it as esdash does
            if query.pages is not None:  # Rally's scroll search, page size as the body's
                paginated = query.paging == "search_after"
                op["operation-type"] = "paginated-search" if paginated else "scroll-search"
                op["pages"] = "all" if query.pages < 0 else query.pages
                if isinstance(query.body.get("size"), int):
                    op["results-per-page"] = query.body["size"]
            if query.variants:
                notes.append(
                    f"query {query.name!r}: exported with its first of {len(query.variants)} "
                    f"bodies (the others came from a parameter source)"
                )
        if query.requires:
            op["meta"] = {"esdash-requires": list(query.requires)}
        key = json.dumps(op, sort_keys=True, default=str)
        if key in by_query:
            return by_query[key]  # the same query in several steps: one operation
        name = op["name"] = op_names.take(query.name)
        if name != query.name:
            notes.append(f"query {query.name!r} differs between steps; one is {name!r}")
        operations.append(op)
        by_query[key] = name
        return name

    clients = settings.clients
    schedule: list[JsonObject] = [
        {"operation": "delete-index"},
        {"operation": {"operation-type": "create-index"}},
        {"operation": bulk_name, "clients": clients},
        {"name": task_names.take("refresh-after-ingest"), "operation": "refresh"},
    ]
    task_names.used |= {"delete-index", "create-index", bulk_name}
    for step in steps:
        warmup = settings.warmup if step.warmup is None else step.warmup
        duration = settings.duration if step.duration is None else step.duration
        rate = (
            settings.target_throughput
            if step.target_throughput is None
            else (step.target_throughput)
        )
        timing: JsonObject
        if step.iterations is not None:  # counted: Rally's iterations, per client
            timing = {"iterations": step.iterations}
            if step.warmup_iterations is not None:
                timing["warmup-iterations"] = step.warmup_iterations
            else:
                notes.append(
                    f"{step.name}: a timed warm-up before counted requests has no Rally "
                    f"equivalent; exported without a warm-up"
                )
        else:
            timing = {
                "warmup-time-period": _seconds(warmup, 0, "warm-up", step.name, notes),
                "time-period": _seconds(duration, 1, "duration", step.name, notes),
            }
            if step.ramp_up:
                timing["ramp-up-time-period"] = step.ramp_up
        if not step.queries:
            notes.append(f"{step.name}: has no queries; left out")
            continue
        if getattr(step, "think_time", 0):
            notes.append(
                f"{step.name}: think time {step.think_time:g} s has no Rally equivalent; the "
                f"task runs {'at the target rate' if rate else 'as a closed loop'} without it"
            )
        if len(step.queries) == 1:
            task: JsonObject = {
                "name": task_names.take(step.name),
                "operation": operation(step.queries[0]),
                "clients": clients,
                **timing,
            }
            if rate:
                task["target-throughput"] = rate
            schedule.append(task)
            continue
        tasks = []
        for query in step.queries:
            task = {
                "name": task_names.take(f"{step.name}/{query.name}"),
                "operation": operation(query),
                "clients": clients,
                "meta": {"esdash-step": step.name},
            }
            if rate:
                task["target-throughput"] = rate / len(step.queries)
            tasks.append(task)
        schedule.append({"parallel": {"clients": clients, **timing, "tasks": tasks}})

    document_set: JsonObject = {
        "source-file": CORPUS_FILE,
        "document-count": documents,
        "uncompressed-bytes": size,
    }
    if includes_actions:
        document_set["includes-action-and-meta-data"] = True
    else:
        document_set["target-index"] = index
    spec = {
        "version": 2,
        "description": f"{track.description} (exported from esdash track {track.name!r})",
        "meta": {
            "esdash-version": esdash.__version__,
            "esdash-track": track.name,
            "esdash-options": _plain(dict(options)),
        },
        "indices": [{"name": index, "body": INDEX_FILE}],
        "corpora": [{"name": track.name, "documents": [document_set]}],
        "operations": operations,
        "challenges": [
            {
                "name": "esdash",
                "description": (
                    f"as esdash runs it: ingest, then {len(steps)} query step(s); "
                    f"clients = {clients} bench rank(s)"
                ),
                "default": True,
                "schedule": schedule,
            }
        ],
    }
    return spec, notes


def _prepare(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"{out_dir}: exists and is not a directory; choose another OUT_DIR")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise BadInput(
            f"{out_dir}: not empty; choose a new directory or pass --force to replace "
            f"{TRACK_FILE}, {INDEX_FILE} and {CORPUS_FILE} in it"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"{out_dir}: cannot create the directory: {exc.strerror}") from None


def _place_corpus(source: Path, target: Path, copy: bool) -> None:
    """Link or copy the corpus; an existing ``documents.json`` is replaced."""
    if target.resolve() == source.resolve() and not target.is_symlink():
        return  # exporting into the directory that already holds the corpus
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        if copy:
            shutil.copyfile(source, partial)
        else:
            partial.symlink_to(source.resolve())
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        how = "copy" if copy else "link"
        raise BadInput(f"{target}: cannot {how} the corpus {source}: {exc.strerror}") from None


def request_operation(query: Query) -> JsonObject:
    """The Rally operation of a request other than a search (``Query.path``): the
    ``node-stats`` or ``index-stats`` it was read from, else a ``raw-request``."""
    path, _, params = (query.path or "/").partition("?")
    if query.method == "GET" and not query.body and not params:
        if path == "/_nodes/stats":
            return {"operation-type": "node-stats"}
        stats = re.fullmatch(r"/([^/]+)/_stats", path)
        if stats:
            return {"operation-type": "index-stats", "index": unquote(stats.group(1))}
    op: JsonObject = {"operation-type": "raw-request", "method": query.method, "path": path}
    if params:
        op["request-params"] = dict(parse_qsl(params, keep_blank_values=True))
    if query.body:
        op["body"] = dict(query.body)
    return op


def export_track(
    track: Track,
    options: OptionValues,
    out_dir: Path,
    cache_dir: Path,
    settings: ExportSettings | None = None,
    force: bool = False,
) -> ExportResult:
    """Write ``track`` with ``options`` as a Rally track directory ``out_dir``."""
    settings = settings or ExportSettings()
    corpus = track.corpus(options, cache_dir)
    steps = track.query_steps(options)
    index = index_name(track, options)
    body = track.index_body(options)
    source = Path(corpus.path)
    if not source.is_file():
        raise BadInput(f"track {track.name}: corpus {source} does not exist")
    documents = count_documents(corpus)
    if documents < 1:
        raise BadInput(f"{source}: the corpus is empty; Rally needs at least one document")
    size = source.stat().st_size
    spec, notes = build_track(
        track,
        options,
        index,
        steps,
        documents,
        size,
        corpus.includes_action_and_meta_data,
        settings,
    )
    _prepare(out_dir, force)
    target = out_dir / CORPUS_FILE
    _place_corpus(source, target, settings.copy_corpus)
    for name, content in ((INDEX_FILE, body), (TRACK_FILE, spec)):
        path = out_dir / name
        try:
            path.write_text(jinja_safe_json(content), encoding="utf-8")
        except (OSError, TypeError, ValueError) as exc:
            raise BadInput(f"{path}: cannot be written: {exc}") from None
    return ExportResult(
        directory=out_dir,
        index=index,
        documents=documents,
        uncompressed_bytes=size,
        corpus_file=target,
        corpus_source=source,
        operations=len(spec["operations"]),
        notes=tuple(notes),
    )
