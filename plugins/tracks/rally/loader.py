"""Loading a Rally track directory: :func:`load` and its helpers.

It renders ``track.json``, reads the indices, corpora, operations and the chosen challenge,
checks the track parameters and keeps every file inside the track directory, then hands the
schedule to :mod:`esdash_plugins.tracks.rally.schedule` and returns a :class:`LoadedTrack`.
An OpenSearch Benchmark workload (``workload.json``, ``test_procedures``) is read the same
way under its own names (:mod:`esdash_plugins.tracks.rally.dialect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.plugin_api import (
    BadInput,
    JsonMapping,
    JsonObject,
    OptionValues,
)

from . import requests as rr
from . import template as tpl
from . import trackcode
from .dialect import OSB, RALLY, Dialect, dialect_of_file
from .model import (
    DocumentSet,
    IndexSet,
    LoadedTrack,
    _describe,
    _suggest,
    scan_track_py,
)
from .reader import (
    _operation,
    _Reader,
)
from .schedule import (
    _ingest_documents,
    _ScheduleMapper,
    _test_mode_documents,
)

if TYPE_CHECKING:
    import jinja2

#: Rally's own template variables: never reported as unused or unknown parameters.
INTERNAL_NAMES = frozenset(
    {"build_flavor", "serverless_operator", "now", "glob", "rally", "benchmark"}
)
#: What ``track.path`` must name, for its error messages.
_WANTED = (
    f"a Rally track or OpenSearch Benchmark workload directory (the one holding "
    f"{RALLY.spec_file} or {OSB.spec_file})"
)


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
    """The track.json of ``track.path`` (a directory or the file itself), or BadInput.

    A path the system refuses outright (too long, a looping symlink) is a BadInput on the key,
    not an OSError from deep in a stat call.
    """
    try:
        return _find_track_file(path)
    except OSError as exc:
        raise BadInput(
            f"track.path: cannot use it ({exc.strerror or exc}); set it to {_WANTED}"
        ) from None


def _find_track_file(path: Path) -> Path:
    """``track.json`` (Rally) or ``workload.json`` (OSB): the file named, or in the directory.

    A directory holding both is read as the Rally track (some OSB workloads still carry an
    old ``track.json``); name ``workload.json`` itself to read the workload.
    """
    names = (RALLY.spec_file, OSB.spec_file)
    if path.is_file() and path.name in names:
        return path
    if not path.exists():
        raise BadInput(f"track.path: {path} does not exist; set it to {_WANTED}")
    if path.is_dir():
        for name in names:
            if (path / name).is_file():
                return path / name
    raise BadInput(
        f"track.path: {path / RALLY.spec_file} does not exist (nor {OSB.spec_file}); "
        f"track.path must name {_WANTED}"
    )


def load(options: OptionValues, plan: bool = False) -> LoadedTrack:
    """Render and read a Rally track directory for ``options``; see the module docstring.

    With ``plan`` a track esdash cannot run at all (no indices, data streams) still loads,
    with the reason in ``blocker``, so a plan can list its tasks; every broken file, unknown
    challenge or unused parameter fails either way.
    """
    track_file = _track_file(Path(options["path"]).expanduser())
    directory = track_file.parent
    dialect = dialect_of_file(track_file)
    name = directory.resolve().name
    params = parse_params(options.get("track_params") or ())
    test_mode = bool(options.get("test_mode"))
    loaded: list[Path] = []
    env = tpl.environment(directory, params, loaded)
    source = tpl.assemble(track_file, root=directory, shared=dialect.shared(directory))
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
    names = [n for n, _ in indices]
    streams = list(rr.data_stream_names(reader, spec)) if blocker is None else []
    targets = [*names, *streams]  # every index and data stream a run creates
    chosen = options.get("index") or (targets[0] if targets else "")
    if targets and chosen not in targets:
        raise BadInput(
            f"track.index: {track_file} has no index {chosen!r}{_suggest(chosen, targets)}; "
            f"its indices: {', '.join(targets)}"
        )
    for _, body in indices:
        if body is not None and not tpl.inside(directory / body, directory):
            raise BadInput(
                f"{track_file}: index body {body!r} resolves to {(directory / body).resolve()}, "
                f"outside the track directory {directory}; a track may read only its own files"
            )
    documents = _corpora(reader, spec, names, streams)
    if test_mode:
        documents = [_test_mode_documents(d) for d in documents]
    operations = _operations(reader, spec)
    challenge, challenge_names = _challenge(reader, spec, options.get("challenge"), dialect)
    track_py = scan_track_py(directory)
    mapper = _ScheduleMapper(
        reader, operations, chosen, names, challenge["name"], track_py, test_mode, documents
    )
    mapper.templates = rr.read_templates(reader, spec, directory, env)
    mapper.data_streams = rr.data_stream_names(reader, spec)
    context = f"{dialect.procedure} {challenge['name']!r}"
    trusted = trackcode.trusted(options) and track_py.exists
    with trackcode.TrackCode(track_py.path) as track_code:  # a child process, started if needed
        mapper.code = track_code if trusted else None
        at = challenge["name"]
        mapper.walk(reader.get(challenge, "schedule", list, context, at, required=True))
    mapper.finish()
    sent = mapper.sent if mapper.ingest is not None else documents
    if not options.get("index"):  # the first index the ingest sends documents to
        chosen = next((d.target_index for d in sent if d.target_index in targets), chosen)

    # The run creates every index of the track (as Rally does), so each body must be
    # readable; create-index settings are merged into the indices they name.
    bodies: dict[str, JsonObject] = {}
    body_sources: list[str] = []
    for index, body_name in indices:
        bodies[index] = {}
        if body_name is not None:
            bodies[index], text = _index_body(directory / body_name, env, index, track_file)
            body_sources.append(text)
        _merge_settings(bodies[index], mapper.index_settings, index, directory / str(body_name))
    for stream in streams:  # made by the track's index template: no body of its own
        bodies.setdefault(stream, {})
    texts = [source.text, *body_sources, *mapper.templates.texts, *_texts(loaded)]
    _check_params(params, texts, track_file)
    index_body = bodies.get(chosen, {})

    ingest_docs, doc_notes = _ingest_documents(
        mapper.sent, documents, mapper.ingest is not None, chosen
    )
    # the other indices: those the bulk tasks send to first (in their order), then the rest
    order = list(dict.fromkeys(d.target_index for d in sent if d.target_index in bodies))
    order += [i for i in targets if i in bodies and i not in order]
    more = tuple(
        IndexSet(i, bodies[i], tuple(d for d in sent if d.target_index == i), i in streams)
        for i in order
        if i != chosen
    )
    created = {one.operation for one in mapper.one_offs}
    templates = [k for k, op in rr.TEMPLATE_CREATORS.items() if spec.get(k) and op not in created]
    if templates:
        doc_notes.append(
            f"{', '.join(templates)}: not installed (no task of the challenge creates them; "
            f"Rally installs them only through such tasks)"
        )
    if test_mode:
        doc_notes.append(
            "test mode (Rally's --test-mode): the -1k document files (1,000 documents each), "
            "no warm-up, time periods of at most 10 s, iterations cut to the task's clients, "
            "target throughput lifted"
        )
    if track_py.exists:
        doc_notes.append(track_code_note(track_py.path, trusted))
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
        more=more,
        bulks=tuple(task.name for task in mapper.bulks),
        one_offs=tuple(mapper.one_offs),
        data_streams=tuple(streams),
        step_documents=dict(mapper.step_documents),
    )


def track_code_note(python_file: Path, trusted: bool) -> str:
    """What esdash does with the track's own code (``track.py`` and the modules beside it)."""
    files = ", ".join(p.name for p in trackcode.code_files(python_file))
    if not trusted:
        return (
            f"{python_file.name}: the track's own code ({files}) is not run, as the session "
            f"does not trust it; the tasks that need it are refused (to run it, set "
            f"{trackcode.TRUST_HOW})"
        )
    return (
        f"{python_file.name}: the track's own code ({files}) runs in a child process as "
        f"{trackcode.runs_as()}, as the session trusts it: esdash samples the parameter sources "
        f"searches name (once, up front) and calls the runner of each of the track's own "
        f"operation types once with a client that records its requests; a runner that sends "
        f"more than one search or GET/POST request is not supported"
    )


def _merge_settings(
    body: JsonObject,
    settings: Sequence[tuple[list[str] | None, JsonObject]],
    index: str,
    path: Path,
) -> None:
    """Merge the ``settings`` of the create-index tasks naming ``index`` (or every index)
    into its body, as Rally does."""
    for names, each in settings:
        if names is not None and index not in names:
            continue
        body.setdefault("settings", {})
        if not isinstance(body["settings"], dict):
            raise BadInput(f"{path}: 'settings' must be an object")
        body["settings"].update(each)


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
    """Why esdash cannot run a track for want of a target (None: it has indices or data
    streams, which its index templates make)."""
    if reader.get(spec, "indices", list, "track", default=[]) or spec.get("data-streams"):
        return None
    return "has no 'indices' or 'data-streams'; esdash needs one to ingest into"


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


def _index_body(
    path: Path, env: jinja2.Environment, index: str, track_file: Path
) -> tuple[JsonObject, str]:
    what = f"the body of index {index!r}"
    if not path.is_file():
        raise BadInput(
            f"{path}: {what} is missing; add the file or fix 'body' of the index in "
            f"{track_file.name}"
        )
    source = tpl.assemble(path, root=tpl.env_dir(env))
    body = tpl.load_json(tpl.render(source, env, what), source, what)
    if not isinstance(body, dict):
        raise BadInput(f"{path}: {what} must be a JSON object, found {_describe(body)}")
    return body, source.text


def _corpora(
    reader: _Reader, spec: JsonMapping, indices: Sequence[str], streams: Sequence[str] = ()
) -> list[DocumentSet]:
    """Every document set, with its target: ``target-index`` or ``target-data-stream`` of
    the set or its corpus, else the track's only index or data stream."""
    found: list[DocumentSet] = []
    only = [*indices, *streams]
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
        default_stream = reader.get(corpus, "target-data-stream", str, context, name)
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
            stream = reader.get(
                doc, "target-data-stream", str, doc_context, name, default=default_stream
            )
            if target is None and stream is None and len(only) == 1:
                target, stream = (only[0], None) if indices else (None, only[0])
            size = reader.number(doc, "uncompressed-bytes", doc_context, name, 0, integer=True)
            packed = reader.number(doc, "compressed-bytes", doc_context, name, 0, integer=True)
            url = reader.get(doc, "base-url", str, doc_context, name, default=base_url)
            found.append(
                DocumentSet(
                    name,
                    source_file,
                    count,
                    None if actions else (target or stream),
                    actions,
                    size,
                    url,
                    packed,
                    data_stream=target is None and stream is not None,
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


def _challenge(
    reader: _Reader, spec: JsonMapping, wanted: str | None, dialect: Dialect = RALLY
) -> tuple[JsonObject, list[str]]:
    """The challenge to run: ``wanted``, or the track's default one.

    An OpenSearch Benchmark workload calls them test procedures (``test_procedures``,
    ``test_procedure``), and so do its errors; the session key is ``track.challenge`` for
    both.
    """
    kind, one, many = dialect.kind, dialect.procedure, dialect.procedures
    keys = (dialect.procedures_key, dialect.procedure_key, "schedule")
    present = [key for key in keys if key in spec]
    if len(present) != 1:
        which = ", ".join(present) if present else "none of them"
        raise reader.fail(
            kind,
            f"must define exactly one of '{keys[0]}', '{keys[1]}' or 'schedule' (found {which})",
        )
    if present[0] == "schedule":
        challenges = [{"name": "default", "schedule": spec["schedule"]}]
    elif present[0] == dialect.procedure_key:
        challenges = [reader.get(spec, dialect.procedure_key, dict, kind)]
    else:
        challenges = reader.get(spec, dialect.procedures_key, list, kind)
    names: list[str] = []
    defaults: list[str] = []
    for number, challenge in enumerate(challenges):
        at = f"{dialect.procedures_key}[{number}]"
        if not isinstance(challenge, dict):
            raise reader.fail(at, f"must be an object, found {_describe(challenge)}")
        name = reader.get(challenge, "name", str, at, required=True)
        if name in names:
            raise reader.fail(f"{one} {name!r}", "is defined twice", name)
        names.append(name)
        if reader.get(challenge, "default", bool, f"{one} {name!r}", name, default=False):
            defaults.append(name)
    if not names:
        raise reader.fail(kind, f"has no {one}")
    if wanted is not None:
        if wanted not in names:
            raise BadInput(
                f"track.challenge: {reader.track_file} has no {one} {wanted!r}"
                f"{_suggest(wanted, names)}; its {many}: {', '.join(names)}"
            )
        return challenges[names.index(wanted)], names
    if len(names) == 1:
        return challenges[0], names
    if len(defaults) != 1:
        problem = (
            f"marks no {one} as default"
            if not defaults
            else (f"marks {len(defaults)} {many} as default ({', '.join(defaults)})")
        )
        raise BadInput(
            f"{reader.track_file}: the {kind} {problem}; choose one with track.challenge "
            f"({', '.join(names)})"
        )
    return challenges[names.index(defaults[0])], names
