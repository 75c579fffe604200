"""The ``rally`` track: run a Rally track directory, as Elastic publishes them, with esdash.

Rally is the reference benchmark for Elasticsearch, and its tracks (``elastic/rally-tracks``)
are the workloads people already know.  This track reads such a directory with a locally
present corpus and maps what esdash can run onto esdash's model of one ingest followed by
timed query steps:

* ``indices[].body`` (rendered with the track parameters) is the index body; ``settings`` of
  the challenge's ``create-index`` tasks are merged into it, as Rally merges them;
* ``corpora[].documents[]`` aimed at the chosen index are the corpus (uncompressed files only;
  several files are joined once into esdash's cache);
* in the chosen challenge's schedule, the first ``bulk`` task is the ingest and each
  ``search`` task is a query step (a ``parallel`` block of searches is one step with several
  queries); ``warmup-time-period``, ``time-period``, iterations and ``target-throughput`` are
  converted (see :func:`_timing`);
* ``delete-index``, ``create-index``, ``refresh`` and ``cluster-health`` are done by esdash
  itself; every other task is listed as not supported.  Nothing is dropped silently:
  :meth:`RallyTrack.unsupported_operations` and the log say what is not run and why.

Rendering is in :mod:`esdash_plugins.tracks.rally_template`.  Every problem with the track is
an :class:`esdash.errors.BadInput` naming the file (and line where known) and the fix.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esdash_plugins.tracks import rally_template as tpl

from esdash.plugin_api import (
    REQUIRED,
    BadInput,
    Corpus,
    Distribution,
    FieldSpec,
    JsonMapping,
    JsonObject,
    JsonValue,
    Option,
    OptionValues,
    PlannedTask,
    Query,
    QueryStep,
    Track,
    adaptation_note,
    hookimpl,
    mapping_refusal,
    query_refusal,
)

if TYPE_CHECKING:
    import jinja2

log = logging.getLogger(__name__)

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
#: Rally's own template variables: never reported as unused or unknown parameters.
INTERNAL_NAMES = frozenset({"build_flavor", "serverless_operator", "now", "glob", "rally"})
#: Properties of a search that change what Rally sends, which esdash does not reproduce.
SEARCH_IGNORED = (
    "request-params",
    "cache",
    "headers",
    "request-timeout",
    "opaque-id",
    "response-compression-enabled",
    "detailed-results",
    "assertions",
)
TASK_IGNORED = ("schedule", "ramp-up-time-period")
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


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class DocumentSet:
    """One ``corpora[].documents[]`` entry of a Rally track."""

    corpus: str
    source_file: str
    documents: int
    target_index: str | None
    includes_action_and_meta_data: bool
    uncompressed_bytes: int | None = None
    base_url: str | None = None


@dataclass
class RallyTask:
    """One task of a challenge's schedule, with its operation resolved."""

    name: str
    op_name: str
    op_type: str
    op: JsonMapping
    spec: JsonMapping
    where: str
    warmup_time: float | None = None
    time: float | None = None
    warmup_iterations: int | None = None
    iterations: int | None = None
    clients: int = 1
    throughput: float | None = None
    block: int | None = None


@dataclass(frozen=True)
class TrackPy:
    """What a track's ``track.py`` registers, read without running it (esdash runs none)."""

    path: Path
    exists: bool
    runners: frozenset[str] = frozenset()
    param_sources: frozenset[str] = frozenset()

    def holds(self, kind: str, name: str) -> str:
        """Where the runner or parameter source ``name`` lives, said in a clause."""
        registered = self.runners if kind == "runner" else self.param_sources
        if not self.exists:
            return f"{self.path} would register it, but the track directory holds no track.py"
        if name in registered:
            return f"registered in {self.path}, which esdash does not run"
        return f"{self.path} does not register it by name, and esdash runs no track.py"


def scan_track_py(directory: Path) -> TrackPy:
    """The runners and parameter sources ``track.py`` registers with string literals."""
    path = directory / "track.py"
    if not path.is_file() or not tpl.inside(path, directory):
        return TrackPy(path, path.is_file())
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return TrackPy(path, True)
    found: dict[str, set[str]] = {"register_runner": set(), "register_param_source": set()}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in found
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found[node.func.attr].add(node.args[0].value)
    return TrackPy(
        path, True, frozenset(found["register_runner"]), frozenset(found["register_param_source"])
    )


@dataclass(frozen=True)
class LoadedTrack:
    """What a Rally track directory means to esdash, for one set of options."""

    name: str
    directory: Path
    track_file: Path
    challenge: str
    challenges: tuple[str, ...]
    index: str
    indices: tuple[str, ...]
    index_body: JsonObject
    documents: tuple[DocumentSet, ...]
    steps: tuple[QueryStep, ...]
    ingest: str | None
    by_esdash: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    params: JsonMapping = field(default_factory=dict)
    #: Every task of the challenge, in schedule order, as esdash maps it (no distribution).
    tasks: tuple[PlannedTask, ...] = ()
    #: The query each task that became (part of) a query step sends, by task name.
    task_queries: Mapping[str, Query] = field(default_factory=dict)
    #: Why esdash cannot run this track at all (only loaded with ``plan=True``), else None.
    blocker: str | None = None

    def summary(self) -> str:
        """A readable account of what runs, what esdash does itself and what does not run."""
        lines = [
            f"Rally track {self.name!r} ({self.track_file}), challenge {self.challenge!r}, "
            f"index {self.index!r}:",
            f"  ingest: {self.ingest or '(no bulk task; the corpus is ingested anyway)'}",
            f"  query steps: {', '.join(s.name for s in self.steps) or 'none'}",
        ]
        for title, items in (
            ("done by esdash itself", self.by_esdash),
            ("NOT SUPPORTED, not run", self.unsupported),
            ("notes", self.notes),
        ):
            if items:
                lines.append(f"  {title}:")
                lines += [f"    - {item}" for item in items]
        return "\n".join(lines)


# ------------------------------------------------------------------------ helpers


def _describe(value: JsonValue) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kinds: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
    kinds.update({list: "array", dict: "object", type(None): "null"})
    return f"{text} ({kinds.get(type(value), type(value).__name__)})"


def _suggest(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _is_number(value: JsonValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _needs_scripting(body: JsonValue) -> bool:
    """True when a query body contains a script (``script``, ``script_score``, ...)."""
    if isinstance(body, Mapping):
        return any("script" in str(k) or _needs_scripting(v) for k, v in body.items())
    if isinstance(body, list):
        return any(_needs_scripting(v) for v in body)
    return False


def _index_matches(target: str, index: str) -> bool:
    """Whether a search target (``a,b``, ``logs-*``, ``_all``) includes ``index``."""
    for part in target.split(","):
        part = part.strip()
        if part in ("_all", "*") or fnmatch.fnmatchcase(index, part):
            return True
    return False


def rally_data_dir() -> Path:
    """Rally's default ``local.dataset.cache``: ``$RALLY_HOME/.rally/benchmarks/data``."""
    home = Path(os.environ.get("RALLY_HOME") or Path.home())
    return home / ".rally" / "benchmarks" / "data"


# ------------------------------------------------------------------------- loader


#: Where to look for an element: ("name", "index-append", None) or, for a task without a
#: name, ("operation", "index-append", "<its challenge>").
Spot = str | tuple[str, str, str | None]


class _Reader:
    """Reads one rendered track; errors name the file an element was most likely defined in."""

    def __init__(self, track_file: Path, source: tpl.Source) -> None:
        self.track_file = track_file
        self.source = source

    def defined_at(self, name: Spot | None) -> str:
        """``file:line`` where an element is most likely defined, else the track file.

        ``name`` is an element's ``"name"`` value, or a :data:`Spot` for elements found by
        another key (a task by its ``"operation"``) below their challenge's name.
        """
        if not name:
            return str(self.track_file)
        key, value, after = ("name", name, None) if isinstance(name, str) else name
        lines = self.source.text.split("\n")
        start = 0
        if after is not None:
            heading = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(after)))
            start = next((i for i, line in enumerate(lines) if heading.search(line)), 0)
        pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:\s*" + re.escape(json.dumps(value)))
        for index in range(start, len(lines)):
            if pattern.search(lines[index]):
                path, number = self.source.origins[index]
                return f"{path}:{number}"
        return str(self.track_file)

    def fail(self, context: str, message: str, name: Spot | None = None) -> BadInput:
        return BadInput(f"{self.defined_at(name)}: {context}: {message}")

    def get(
        self,
        obj: JsonMapping,
        key: str,
        kinds: type | tuple[type, ...],
        context: str,
        name: Spot | None = None,
        required: bool = False,
        default: Any = None,
    ) -> Any:
        """``obj[key]`` checked against ``kinds`` (``bool`` is never a number here)."""
        if key not in obj:
            if required:
                raise self.fail(context, f"'{key}' is missing", name)
            return default
        value = obj[key]
        kinds_tuple = kinds if isinstance(kinds, tuple) else (kinds,)
        if isinstance(value, bool) and bool not in kinds_tuple:
            ok = False
        else:
            ok = isinstance(value, kinds_tuple)
        if not ok:
            expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds_tuple)
            raise self.fail(context, f"'{key}' must be {expected}, found {_describe(value)}", name)
        return value

    def number(
        self,
        obj: JsonMapping,
        key: str,
        context: str,
        name: Spot | None,
        minimum: float = 0,
        integer: bool = False,
    ) -> Any:
        value = self.get(obj, key, int if integer else (int, float), context, name)
        if value is not None and value < minimum:
            raise self.fail(context, f"'{key}' must be >= {minimum:g}, found {value}", name)
        return value


_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "an array",
    dict: "an object",
}


def parse_params(entries: Sequence[str]) -> JsonObject:
    """The ``track_params`` option (``["bulk_size=500", "index_settings={...}"]``) as a dict."""
    params: JsonObject = {}
    for entry in entries:
        try:
            key, value = tpl.parse_param(entry)
        except ValueError:
            raise BadInput(
                f"track.track_params: {entry!r} is not key=value; write e.g. "
                f'"bulk_size=5000" (JSON values such as 5, true or {{"a": 1}} keep their type)'
            ) from None
        params[key] = value
    return params


def _track_file(path: Path) -> Path:
    if path.is_file() and path.name == "track.json":
        return path
    if not path.exists():
        raise BadInput(
            f"track.path: {path} does not exist; set it to a Rally track directory (the one "
            f"holding track.json)"
        )
    track_file = path / "track.json"
    if not path.is_dir() or not track_file.is_file():
        raise BadInput(
            f"track.path: {track_file} does not exist; track.path must name a Rally track "
            f"directory (the one holding track.json)"
        )
    return track_file


def load(options: OptionValues, plan: bool = False) -> LoadedTrack:
    """Render and read a Rally track directory for ``options``; see the module docstring.

    With ``plan`` a track esdash cannot run at all (no indices, data streams) still loads,
    with the reason in ``blocker``, so a plan can list its tasks; every broken file, unknown
    challenge or unused parameter fails either way.
    """
    track_file = _track_file(Path(options["path"]).expanduser())
    directory = track_file.parent
    name = directory.resolve().name
    params = parse_params(options.get("track_params") or ())
    loaded: list[Path] = []
    env = tpl.environment(directory, params, loaded)
    source = tpl.assemble(track_file, root=directory)
    spec = tpl.load_json(tpl.render(source, env, "the track"), source, "the track")
    reader = _Reader(track_file, source)
    if not isinstance(spec, dict):
        raise BadInput(
            f"{track_file}: the rendered track must be a JSON object, found {_describe(spec)}"
        )
    version = reader.get(spec, "version", int, "track")
    if version is not None and version not in (1, 2):
        raise reader.fail("track", f"'version' {version} is not supported (Rally uses 2)")

    blocker = _no_indices(reader, spec)
    if blocker is not None and not plan:
        raise reader.fail("track", blocker)
    indices = _indices(reader, spec) if blocker is None else []
    chosen = options.get("index") or (indices[0][0] if indices else "")
    names = [n for n, _ in indices]
    if indices and chosen not in names:
        raise BadInput(
            f"track.index: {track_file} has no index {chosen!r}{_suggest(chosen, names)}; "
            f"its indices: {', '.join(names)}"
        )
    body_name = dict(indices).get(chosen)
    for _, body in indices:
        if body is not None and not tpl.inside(directory / body, directory):
            raise BadInput(
                f"{track_file}: index body {body!r} resolves to {(directory / body).resolve()}, "
                f"outside the track directory {directory}; a track may read only its own files"
            )
    index_body: JsonObject = {}
    body_sources: list[str] = []
    if body_name is not None:
        index_body, text = _index_body(directory / body_name, env, chosen)
        body_sources.append(text)
    # Other indices' bodies may read parameters too; only the chosen one must be readable.
    others = {b for _, b in indices if b is not None and b != body_name}
    body_sources += _texts([directory / other for other in sorted(others)])

    _check_params(params, [source.text, *body_sources, *_texts(loaded)], track_file)

    documents = _corpora(reader, spec, names)
    operations = _operations(reader, spec)
    challenge, challenge_names = _challenge(reader, spec, options.get("challenge"))
    track_py = scan_track_py(directory)
    mapper = _ScheduleMapper(reader, operations, chosen, names, challenge["name"], track_py)
    context = f"challenge {challenge['name']!r}"
    mapper.walk(reader.get(challenge, "schedule", list, context, challenge["name"], required=True))
    mapper.finish()
    for settings in mapper.create_settings:
        index_body.setdefault("settings", {})
        if not isinstance(index_body["settings"], dict):
            raise BadInput(f"{directory / str(body_name)}: 'settings' must be an object")
        index_body["settings"].update(settings)

    ingest_docs, doc_notes = _ingest_documents(reader, documents, mapper.ingest, chosen)
    templates = [
        k for k in ("templates", "composable-templates", "component-templates") if spec.get(k)
    ]
    if templates:
        doc_notes.append(f"{', '.join(templates)}: not installed by esdash")
    if track_py.exists:
        doc_notes.append(
            "track.py (custom runners, parameter sources) is not run by esdash; operations "
            "that need it are listed as not supported"
        )
    return LoadedTrack(
        name=name,
        directory=directory,
        track_file=track_file,
        challenge=challenge["name"],
        challenges=tuple(challenge_names),
        index=chosen,
        indices=tuple(names),
        index_body=index_body,
        documents=tuple(ingest_docs),
        steps=tuple(mapper.steps),
        ingest=mapper.ingest.name if mapper.ingest else None,
        by_esdash=tuple(mapper.by_esdash),
        unsupported=tuple(mapper.unsupported),
        notes=tuple(mapper.notes + doc_notes),
        params=params,
        tasks=tuple(mapper.planned),
        task_queries=dict(mapper.task_queries),
        blocker=blocker,
    )


def _texts(paths: Sequence[Path]) -> list[str]:
    texts = []
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def _check_params(params: JsonMapping, texts: Sequence[str], track_file: Path) -> None:
    """Refuse parameters no template reads, as Rally does: a typo would go unnoticed."""
    known = tpl.variables(texts) - INTERNAL_NAMES
    unused = sorted(set(params) - known)
    if unused:
        hints = "".join(_suggest(name, sorted(known)) for name in unused)
        raise BadInput(
            f"track.track_params: {', '.join(unused)} not used by {track_file}{hints}; "
            f"the track reads: {', '.join(sorted(known)) or 'no parameters'}"
        )


def _no_indices(reader: _Reader, spec: JsonMapping) -> str | None:
    """Why esdash cannot run a track for want of an index (None: it has indices)."""
    if reader.get(spec, "indices", list, "track", default=[]):
        return None
    if spec.get("data-streams"):
        return (
            "uses 'data-streams', not 'indices'; esdash ingests into and queries an index, "
            "so this track cannot run with esdash"
        )
    return "has no 'indices'; esdash needs one index to ingest into"


def _indices(reader: _Reader, spec: JsonMapping) -> list[tuple[str, str | None]]:
    entries = reader.get(spec, "indices", list, "track", default=[])
    found: list[tuple[str, str | None]] = []
    for number, entry in enumerate(entries):
        context = f"indices[{number}]"
        if not isinstance(entry, dict):
            raise reader.fail(context, f"must be an object, found {_describe(entry)}")
        index = reader.get(entry, "name", str, context, required=True)
        body = reader.get(entry, "body", str, f"index {index!r}", index)
        found.append((index, body))
    return found


def _index_body(path: Path, env: jinja2.Environment, index: str) -> tuple[JsonObject, str]:
    what = f"the body of index {index!r}"
    if not path.is_file():
        raise BadInput(
            f"{path}: {what} is missing; add the file or fix 'body' of the index in track.json"
        )
    source = tpl.assemble(path, root=tpl.env_dir(env))
    body = tpl.load_json(tpl.render(source, env, what), source, what)
    if not isinstance(body, dict):
        raise BadInput(f"{path}: {what} must be a JSON object, found {_describe(body)}")
    return body, source.text


def _corpora(reader: _Reader, spec: JsonMapping, indices: Sequence[str]) -> list[DocumentSet]:
    found: list[DocumentSet] = []
    seen: set[str] = set()
    for number, corpus in enumerate(reader.get(spec, "corpora", list, "track", default=[])):
        if not isinstance(corpus, dict):
            raise reader.fail(f"corpora[{number}]", f"must be an object, found {_describe(corpus)}")
        name = reader.get(corpus, "name", str, f"corpora[{number}]", required=True)
        context = f"corpus {name!r}"
        if name in seen:
            raise reader.fail(context, "is defined twice; corpus names must be unique", name)
        seen.add(name)
        default_target = reader.get(corpus, "target-index", str, context, name)
        if default_target is None and len(indices) == 1:
            default_target = indices[0]
        default_actions = reader.get(
            corpus, "includes-action-and-meta-data", bool, context, name, default=False
        )
        base_url = reader.get(corpus, "base-url", str, context, name)
        documents = reader.get(corpus, "documents", list, context, name, required=True)
        for doc_number, doc in enumerate(documents):
            doc_context = f"{context}, documents[{doc_number}]"
            if not isinstance(doc, dict):
                raise reader.fail(doc_context, f"must be an object, found {_describe(doc)}", name)
            source_format = reader.get(doc, "source-format", str, doc_context, name, default="bulk")
            if source_format != "bulk":
                raise reader.fail(
                    doc_context, f"source-format {source_format!r} is unknown (Rally: 'bulk')", name
                )
            source_file = reader.get(doc, "source-file", str, doc_context, name, required=True)
            count = reader.number(doc, "document-count", doc_context, name, 0, integer=True)
            if count is None:
                raise reader.fail(doc_context, "'document-count' is missing", name)
            actions = reader.get(
                doc,
                "includes-action-and-meta-data",
                bool,
                doc_context,
                name,
                default=default_actions,
            )
            target = reader.get(doc, "target-index", str, doc_context, name, default=default_target)
            size = reader.number(doc, "uncompressed-bytes", doc_context, name, 0, integer=True)
            url = reader.get(doc, "base-url", str, doc_context, name, default=base_url)
            found.append(
                DocumentSet(
                    name, source_file, count, None if actions else target, actions, size, url
                )
            )
    return found


def _operations(reader: _Reader, spec: JsonMapping) -> dict[str, JsonObject]:
    operations: dict[str, JsonObject] = {}
    for number, op in enumerate(reader.get(spec, "operations", list, "track", default=[])):
        op = _operation(reader, op, f"operations[{number}]")
        if op["name"] in operations:
            raise reader.fail(
                f"operation {op['name']!r}",
                "is defined twice; operation names must be unique",
                op["name"],
            )
        operations[op["name"]] = op
    return operations


def _operation(reader: _Reader, op: JsonValue, context: str) -> JsonObject:
    """An operation as a dict with ``name`` and ``operation-type`` (a bare string is both)."""
    if isinstance(op, str):
        return {"name": op, "operation-type": op}
    if not isinstance(op, dict):
        raise reader.fail(context, f"an operation must be an object, found {_describe(op)}")
    name = reader.get(op, "name", str, context)
    op_type = reader.get(
        op, "operation-type", str, f"operation {name or context!r}", name, required=True
    )
    return {**op, "name": name or op_type}


def _challenge(
    reader: _Reader, spec: JsonMapping, wanted: str | None
) -> tuple[JsonObject, list[str]]:
    """The challenge to run: ``wanted``, or the track's default one."""
    present = [key for key in ("challenges", "challenge", "schedule") if key in spec]
    if len(present) != 1:
        which = ", ".join(present) if present else "none of them"
        raise reader.fail(
            "track",
            f"must define exactly one of 'challenges', 'challenge' or 'schedule' (found {which})",
        )
    if present[0] == "schedule":
        challenges = [{"name": "default", "schedule": spec["schedule"]}]
    elif present[0] == "challenge":
        challenges = [reader.get(spec, "challenge", dict, "track")]
    else:
        challenges = reader.get(spec, "challenges", list, "track")
    names: list[str] = []
    defaults: list[str] = []
    for number, challenge in enumerate(challenges):
        if not isinstance(challenge, dict):
            raise reader.fail(
                f"challenges[{number}]", f"must be an object, found {_describe(challenge)}"
            )
        name = reader.get(challenge, "name", str, f"challenges[{number}]", required=True)
        if name in names:
            raise reader.fail(f"challenge {name!r}", "is defined twice", name)
        names.append(name)
        if reader.get(challenge, "default", bool, f"challenge {name!r}", name, default=False):
            defaults.append(name)
    if not names:
        raise reader.fail("track", "has no challenge")
    if wanted is not None:
        if wanted not in names:
            raise BadInput(
                f"track.challenge: {reader.track_file} has no challenge {wanted!r}"
                f"{_suggest(wanted, names)}; its challenges: {', '.join(names)}"
            )
        return challenges[names.index(wanted)], names
    if len(names) == 1:
        return challenges[0], names
    if len(defaults) != 1:
        problem = (
            "marks no challenge as default"
            if not defaults
            else (f"marks {len(defaults)} challenges as default ({', '.join(defaults)})")
        )
        raise BadInput(
            f"{reader.track_file}: the track {problem}; choose one with track.challenge "
            f"({', '.join(names)})"
        )
    return challenges[names.index(defaults[0])], names


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
    ) -> None:
        self.reader = reader
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
        timing = _timing(task)
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
                "Rally clients are not reproduced (esdash's bench ranks are its clients; "
                "target-throughput is kept as the total rate): " + ", ".join(self._clients)
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
        step = QueryStep(name, tuple(queries), warmup, duration, target)
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
                f"runs as one query step {name!r} with {others or 'no other task'}: every bench "
                f"rank sends the block's {len(queries)} queries in its own random order, one "
                f"request at a time (the tasks do not get clients of their own); "
                f"{self._timing_text(task, timing)}; {throttled}; {self._clients_text(task)}",
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
        schedule = {key: task.spec[key] for key in SCHEDULE_KEYS if key in task.spec}
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
                f"esdash's bench ranks are its clients, one each, not the task's "
                f"{task.clients} clients"
            )
        return "esdash's bench ranks are its clients, one each"

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
        if task.op_type == "search":
            query = self._query(task)
            if isinstance(query, str):
                self.unsupported.append(f"{task.name} (search): {query}")
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
            step = QueryStep(
                task.name, (query,), timing.warmup, timing.duration, timing.target_throughput
            )
            self.steps.append(step)
            self.task_queries[task.name] = query
            ignored = [k for k in SEARCH_IGNORED if k in task.op]
            ignored += [k for k in TASK_IGNORED if k in task.spec]
            rate = (
                f"target-throughput {timing.target_throughput:g} ops/s, kept as the total rate "
                f"of all bench ranks"
                if timing.target_throughput
                else "unthrottled unless the session sets benchmark.target_throughput"
            )
            self._plan(
                task,
                f"query step {task.name!r}: {self._timing_text(task, timing)}; {rate}; "
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

    def _query(self, task: RallyTask) -> Query | str:
        """The esdash query of a search task, or why it cannot be one."""
        op, reader = task.op, self.reader
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
        return Query(task.op_name, dict(body or {}), target, requires)

    def _search_notes(self, task: RallyTask) -> None:
        ignored = [k for k in SEARCH_IGNORED if k in task.op]
        ignored += [k for k in TASK_IGNORED if k in task.spec]
        if ignored:
            self.notes.append(f"{task.name} (search): ignored {', '.join(ignored)}")


@dataclass(frozen=True)
class Timing:
    """A Rally task's timing in esdash's terms; ``how`` says how it was obtained."""

    warmup: float | None
    duration: float | None
    target_throughput: float | None
    how: str  # "time", "iterations" (converted at the target rate), "none", "untimed"


def _timing(task: RallyTask) -> Timing:
    """Warm-up and measured seconds and the rate of a Rally task, in esdash's terms.

    Rally's ``target-throughput`` is the rate of all of the task's ``clients`` together, and
    an esdash step's target throughput is the rate of all bench ranks together (each rank
    paces itself at its share), so the rate carries over unchanged.  Iterations are per
    client in Rally; at the per-client rate ``target-throughput / clients`` they take
    ``iterations * clients / target-throughput`` seconds.  Without a rate they have no time
    equivalent and the session's warm-up and duration apply (``None``).  A measured phase
    without a warm-up gets none, as in Rally.
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


# ------------------------------------------------------------------------- corpus


def locate_documents(
    doc: DocumentSet,
    directories: Sequence[Path],
    track_file: Path,
    data_dirs: Sequence[Path] = (),
    confined: bool = True,
) -> Path:
    """The uncompressed file of a document set, or a BadInput saying how to get it.

    A ``source-file`` must stay inside the directory it is looked up in (no ``..``, no
    absolute path).  In the track directory the file must also resolve (after symlinks)
    inside it or inside one of ``data_dirs`` (the user's corpus directory, Rally's data
    directory, esdash's corpus cache, which ``export-rally`` links to): a track must not make
    esdash send files that are not its own to a cluster.  Not ``confined``: the track
    directory is the user's ``corpus_dir`` too, which vouches for its links.
    """
    archive = tpl.decompress_hint(doc.source_file)
    plain = archive[0] if archive else doc.source_file
    track_dir = track_file.parent
    for directory in directories:
        candidate = directory / plain
        lexical = Path(os.path.normpath(candidate))
        if not lexical.is_relative_to(Path(os.path.normpath(directory))):
            raise BadInput(
                f"{track_file}: corpus {doc.corpus!r}: source-file {doc.source_file!r} points "
                f"outside {directory}; name a file inside the corpus directory"
            )
        if confined and candidate.is_file() and directory == track_dir:
            allowed = [track_dir, *data_dirs]
            if not any(tpl.inside(candidate, root) for root in allowed):
                raise BadInput(
                    f"{track_file}: corpus {doc.corpus!r}: {candidate} resolves to "
                    f"{candidate.resolve()}, outside the track directory {track_dir}; copy the "
                    f"file into it, or set track.corpus_dir to the directory holding it (links "
                    f"there are followed)"
                )
        if candidate.is_file():
            path = candidate
            if doc.uncompressed_bytes is not None and path.stat().st_size != doc.uncompressed_bytes:
                raise BadInput(
                    f"{path}: {path.stat().st_size} bytes, but {track_file} says "
                    f"uncompressed-bytes {doc.uncompressed_bytes} (corpus {doc.corpus!r}); the "
                    f"file is incomplete or another version: replace it, or fix the count in "
                    f"track.json"
                )
            return path
    looked = ", ".join(str(d) for d in directories)
    if archive:
        for directory in directories:
            if (directory / doc.source_file).is_file():
                packed = directory / doc.source_file
                raise BadInput(
                    f"{packed}: esdash reads only uncompressed corpora; decompress it next to "
                    f"itself (cd {directory} && {archive[1]} {doc.source_file}), which gives "
                    f"{directory / plain}"
                )
    url = (
        f"; Rally downloads it from {doc.base_url.rstrip('/')}/{doc.source_file}"
        if (doc.base_url)
        else ""
    )
    raise BadInput(
        f"{track_file}: corpus {doc.corpus!r}: {plain} (or {doc.source_file}) is in none of "
        f"{looked}{url}. Put the uncompressed file in one of them or set track.corpus_dir"
    )


def join_documents(paths: Sequence[Path], cache_dir: Path, label: str) -> Path:
    """One NDJSON file from several, written once under ``cache_dir`` and reused after."""
    digest = hashlib.sha256()
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    target = cache_dir / f"rally-{label}-{digest.hexdigest()[:16]}.json"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        with partial.open("wb") as out:
            for path in paths:
                with path.open("rb") as part:
                    shutil.copyfileobj(part, out, 1024 * 1024)
                    if part.tell() and _last_byte(path) != b"\n":
                        out.write(b"\n")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise BadInput(f"{cache_dir}: cannot write the joined corpus: {exc.strerror}") from None
    return target


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


# -------------------------------------------------------------------------- track


def _field_specs(properties: JsonMapping, prefix: str = "") -> list[FieldSpec]:
    specs: list[FieldSpec] = []
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        path = f"{prefix}{name}"
        if isinstance(spec.get("properties"), dict):
            specs += _field_specs(spec["properties"], f"{path}.")
            continue
        kind = str(spec.get("type", "object"))
        subfields = spec.get("fields")
        if (
            kind == "text"
            and isinstance(subfields, dict)
            and any(isinstance(s, dict) and s.get("type") == "keyword" for s in subfields.values())
        ):
            kind = "text+keyword"
        specs.append(FieldSpec(path, kind))
    return specs


class RallyTrack(Track):
    """A Rally track directory (``path``) run as an esdash track."""

    name = "rally"
    description = "a Rally track directory (track.json, corpora, challenges) run by esdash"
    options = (
        Option("path", "path", "Rally track directory (holding track.json)", default=REQUIRED),
        Option("challenge", "str", "challenge to run (default: the track's default challenge)"),
        Option(
            "track_params",
            "list[str]",
            'track parameters as "key=value" (JSON values keep their type), like Rally\'s '
            "--track-params",
            default=(),
        ),
        Option(
            "corpus_dir",
            "path",
            "directory holding the uncompressed documents files (default: the track "
            "directory, then ~/.rally/benchmarks/data/<corpus>)",
        ),
        Option("index", "str", "which of the track's indices to ingest (default: the first)"),
    )

    def __init__(self) -> None:
        self._index = ""
        self._announced: set[tuple[str, str, str, str]] = set()

    @property
    def index(self) -> str:
        """The index of the most recently loaded options.

        ``Track.index`` is one name per track, but a Rally track's index depends on its
        options; :meth:`index_name` is the reliable form.  Callers that read ``index`` after
        calling :meth:`corpus` or :meth:`query_steps` with the same options (as the bench
        plan does) get the right name.
        """
        return self._index

    def load(self, options: OptionValues) -> LoadedTrack:
        """The track read for ``options``; the first time, what is not run is logged."""
        loaded = load(options)
        self._index = loaded.index
        key = (str(loaded.track_file), loaded.challenge, loaded.index, repr(loaded.params))
        if key not in self._announced:
            self._announced.add(key)
            level = logging.WARNING if loaded.unsupported else logging.INFO
            log.log(level, "%s", loaded.summary())
        return loaded

    def index_name(self, options: OptionValues) -> str:
        return self.load(options).index

    def index_body(self, options: OptionValues) -> JsonObject:
        return self.load(options).index_body

    def query_steps(self, options: OptionValues) -> tuple[QueryStep, ...]:
        return self.load(options).steps

    def plan(
        self, options: OptionValues, distribution: Distribution | None
    ) -> tuple[PlannedTask, ...]:
        """Every task of the challenge in schedule order, parallel blocks included.

        What :class:`_ScheduleMapper` made of each task, then checked against
        ``distribution``: a query needing a module it lacks refuses its task, a mapping it
        cannot hold refuses every task esdash would run (the run stops at creating the
        index), and so does a track esdash cannot run at all (no index, or no documents for
        it).
        """
        loaded = load(options, plan=True)
        self._index = loaded.index
        blocker = loaded.blocker and f"the track {loaded.blocker}"
        if blocker is None and not loaded.documents:
            blocker = (
                f"no corpus documents go to index {loaded.index!r} in challenge "
                f"{loaded.challenge!r}, so esdash refuses the run (choose another index with "
                f"track.index: {', '.join(loaded.indices)})"
            )
        mapping = mapping_refusal(loaded.index_body, distribution) if blocker is None else None
        adapted = adaptation_note(loaded.index_body, distribution)
        tasks: list[PlannedTask] = []
        for task in loaded.tasks:
            query = loaded.task_queries.get(task.name)
            refusal = query_refusal(query.requires, query.body, distribution) if query else None
            if task.status == "refused":
                pass
            elif blocker is not None:
                task = task.refused("unsupported_operation", blocker)
            elif mapping is not None:
                reason = mapping.reason
                if not task.ingest:
                    reason = f"its index cannot be created: {reason}"
                task = task.refused(mapping.kind, reason)
            elif refusal is not None:
                task = task.refused(refusal.kind, refusal.reason)
            elif task.ingest and adapted:
                task = replace(task, esdash=f"{task.esdash}; {adapted}")
            tasks.append(task)
        return tuple(tasks)

    def unsupported_operations(self, options: OptionValues) -> list[str]:
        """Tasks of the challenge esdash does not run, each with the reason."""
        return list(self.load(options).unsupported)

    def esdash_operations(self, options: OptionValues) -> list[str]:
        """Tasks esdash does itself instead (delete/create index, refresh, cluster health)."""
        return list(self.load(options).by_esdash)

    def notes(self, options: OptionValues) -> list[str]:
        """How properties were converted or why they are ignored."""
        return list(self.load(options).notes)

    def field_specs(self, options: OptionValues) -> tuple[FieldSpec, ...]:
        """Field types from the index mapping (Rally tracks carry no value ranges)."""
        mappings = self.load(options).index_body.get("mappings", {})
        properties = mappings.get("properties", {}) if isinstance(mappings, dict) else {}
        return tuple(_field_specs(properties if isinstance(properties, dict) else {}))

    def corpus(self, options: OptionValues, cache_dir: Path) -> Corpus:
        loaded = self.load(options)
        if not loaded.documents:
            raise BadInput(
                f"{loaded.track_file}: no corpus documents go to index {loaded.index!r} in "
                f"challenge {loaded.challenge!r}; choose another index with track.index "
                f"({', '.join(loaded.indices)})"
            )
        if options.get("corpus_dir"):
            directories = [Path(options["corpus_dir"])]
        else:
            directories = [loaded.directory]
            for corpus in dict.fromkeys([*(d.corpus for d in loaded.documents), loaded.name]):
                directories.append(rally_data_dir() / corpus)
        data_dirs = [*directories[1:], cache_dir]
        paths = [
            locate_documents(
                d, directories, loaded.track_file, data_dirs, not options.get("corpus_dir")
            )
            for d in loaded.documents
        ]
        actions = {d.includes_action_and_meta_data for d in loaded.documents}
        if len(actions) > 1:
            raise BadInput(
                f"{loaded.track_file}: the documents for index {loaded.index!r} mix files with "
                f"and without action-and-meta-data lines; esdash needs one kind per corpus"
            )
        count = sum(d.documents for d in loaded.documents)
        path = (
            paths[0]
            if len(paths) == 1
            else join_documents(paths, cache_dir, f"{loaded.name}-{loaded.index}")
        )
        return Corpus(path, count, actions.pop())


@hookimpl
def esdash_register_tracks(register) -> None:
    register(RallyTrack())
