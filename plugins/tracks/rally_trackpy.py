"""Running a Rally track's own ``track.py``: its ``register(registry)`` and parameter sources.

Rally loads ``track.py`` beside ``track.json`` and calls its ``register(registry)``, which
registers parameter sources (``register_param_source``), runners (``register_runner``),
schedulers (``register_scheduler``), track processors (``register_track_processor``) and
standard value sources (``register_standard_value_source``).  esdash does the same with a
registry offering those calls (:class:`Registry`), in a fresh module namespace, and only for
a ``track.py`` that lies inside the track directory.

esdash uses the parameter sources: :func:`sample` calls a source as Rally does (a function
``source(track, params, **kwargs)`` per request; a class instantiated once with ``(track,
params, **kwargs)``, partitioned with ``partition(0, 1)`` and asked for ``params()`` per
request) up to :data:`MAX_SAMPLES` times, once, on the orchestrator, with Python's random
generator seeded with :data:`SEED` (restored afterwards), so a plan and the run it
describes hold the same bodies.  The samples become the bodies a query step cycles through.
A runner registered for an operation type of the track's own is called once with a client
that records instead of sending (:mod:`esdash_plugins.tracks.rally_runners`): one search or
one GET/POST request becomes the task's query, anything else keeps the task refused.
Schedulers, track processors and standard value sources are recorded, not run.

Every failure of the user's code (an import error, ``register`` raising, a source raising or
returning something that is not parameters) is a :class:`BadInput` of one line naming
``track.py``, its line and the error, never an esdash traceback.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import random
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, urlencode

from esdash_plugins.tracks import rally_template as tpl
from esdash_plugins.tracks.rally_model import (
    DocumentSet,
    RallyTask,
    _index_matches,
    _needs_scripting,
)

from esdash.plugin_api import ALL_PAGES, BadInput, JsonObject, Query

#: Python's random generator is seeded with this before a source is sampled.
SEED = 2013
#: At most this many samples of a parameter source are taken ...
MAX_SAMPLES = 200
#: ... and sampling stops once their bodies add up to this many bytes (as JSON).
MAX_BYTES = 4 * 1024 * 1024
#: The Rally version ``registry.meta_data`` reports to a ``register`` that asks.
RALLY_VERSION = "2.13.0"


@dataclass
class Registry:
    """What ``register(registry)`` of a track's ``track.py`` registers, by name."""

    param_sources: dict[str, Any] = field(default_factory=dict)
    runners: dict[str, Any] = field(default_factory=dict)
    schedulers: dict[str, Any] = field(default_factory=dict)
    track_processors: list[Any] = field(default_factory=list)
    standard_value_sources: list[tuple[str, str]] = field(default_factory=list)
    #: Rally's ``TrackPluginRegistry.meta_data``: some tracks check the version.
    meta_data: dict[str, Any] = field(
        default_factory=lambda: {"rally_version": RALLY_VERSION, "async_runner": True}
    )

    def register_param_source(self, name: str, param_source: Any) -> None:
        self.param_sources[name] = param_source

    def register_runner(self, name: str, runner: Any, **kwargs: Any) -> None:
        self.runners[name] = runner

    def register_scheduler(self, name: str, scheduler: Any) -> None:
        self.schedulers[name] = scheduler

    def register_track_processor(self, track_processor: Any) -> None:
        self.track_processors.append(track_processor)

    def register_standard_value_source(
        self, op_name: str, field_name: str, standard_value_source: Any
    ) -> None:
        self.standard_value_sources.append((op_name, field_name))


@dataclass(frozen=True)
class LoadedTrackPy:
    """A ``track.py`` that was run, with what its ``register`` registered."""

    path: Path
    registry: Registry

    def notes(self) -> list[str]:
        """What esdash does with the registrations it does not use."""
        found = []
        if self.registry.track_processors:
            found.append(
                f"{self.path.name}: {len(self.registry.track_processors)} track processor(s) "
                f"registered; esdash does not run them (it prepares the track itself)"
            )
        if self.registry.standard_value_sources:
            found.append(
                f"{self.path.name}: standard value sources registered (Rally's query "
                f"randomization); esdash does not randomize queries with them"
            )
        return found


@dataclass(frozen=True)
class TrackView:
    """The small part of Rally's track object a parameter source reads."""

    name: str
    indices: tuple[Any, ...]
    data_streams: tuple[Any, ...]
    corpora: tuple[Any, ...]
    selected_challenge_or_default: Any
    challenges: tuple[Any, ...] = ()
    description: str = ""
    meta_data: Mapping[str, Any] = field(default_factory=dict)
    root: str = ""


@dataclass(frozen=True)
class Named:
    """An index, data stream, challenge or document set as a source sees it (``.name``)."""

    name: str
    body: Any = None
    documents: tuple[Any, ...] = ()
    target_index: str | None = None
    number_of_documents: int = 0
    parameters: Mapping[str, Any] = field(default_factory=dict)


def track_view(
    name: str,
    directory: Path,
    indices: Sequence[str],
    challenge: str,
    corpora: Mapping[str, Sequence[tuple[str | None, int]]],
    params: Mapping[str, Any],
) -> TrackView:
    """The track as a parameter source sees it: names of its indices, corpora, challenge."""
    selected = Named(challenge, parameters=dict(params))
    sets = tuple(
        Named(
            corpus,
            documents=tuple(
                Named(corpus, target_index=target, number_of_documents=count)
                for target, count in docs
            ),
        )
        for corpus, docs in corpora.items()
    )
    return TrackView(
        name=name,
        indices=tuple(Named(i) for i in indices),
        data_streams=(),
        corpora=sets,
        selected_challenge_or_default=selected,
        challenges=(selected,),
        root=str(directory),
    )


_LOADED: dict[tuple[str, int, int], LoadedTrackPy] = {}
_SAMPLES: dict[str, Samples] = {}


def load(directory: Path) -> LoadedTrackPy:
    """Run ``directory/track.py`` and its ``register(registry)`` (once per file version)."""
    path = directory / "track.py"
    if not tpl.inside(path, directory):
        raise BadInput(
            f"{path}: resolves to {path.resolve()}, outside the track directory {directory}; "
            f"esdash runs only a track.py inside the track directory"
        )
    try:
        stat = path.stat()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror or exc})") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key in _LOADED:
        return _LOADED[key]
    digest = hashlib.sha256(key[0].encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(f"esdash_rally_track_{digest}", path)
    if spec is None or spec.loader is None:
        raise BadInput(f"{path}: Python cannot load it as a module")
    module = importlib.util.module_from_spec(spec)
    # track.py may import modules beside it, as Rally puts the track directory on sys.path;
    # no __pycache__ is written into the track directory (it may be read-only, or shared)
    sys.path.insert(0, str(directory))
    bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    state = random.getstate()
    random.seed(SEED)  # draws at import time (a module-level sample) are reproducible too
    try:
        spec.loader.exec_module(module)
        registry = Registry()
        register = _register_of(module, path)
        register(registry)
    except BadInput:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        what = "in register(registry)" if "registry" in locals() else "importing track.py"
        raise failure(path, exc, what) from None
    finally:
        random.setstate(state)
        sys.dont_write_bytecode = bytecode
        if str(directory) in sys.path:
            sys.path.remove(str(directory))
    loaded = LoadedTrackPy(path, registry)
    _LOADED[key] = loaded
    return loaded


def _register_of(module: ModuleType, path: Path) -> Callable[[Registry], object]:
    register = getattr(module, "register", None)
    if not callable(register):
        raise BadInput(
            f"{path}: defines no register(registry) function; Rally calls it to learn the "
            f"track's parameter sources and runners"
        )
    return register  # type: ignore[no-any-return]


def failure(path: Path, exc: BaseException, where: str) -> BadInput:
    """The user's code failed: one line naming ``track.py``'s line and the error."""
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None:
        frames = traceback.extract_tb(exc.__traceback__)
        resolved = str(path.resolve())
        line = next(
            (f.lineno for f in reversed(frames) if str(Path(f.filename).resolve()) == resolved),
            None,
        )
    text = " ".join(str(exc).split())
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    hint = ""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "esrally":
        hint = "; esdash runs track.py without Rally's own modules (esrally)"
    at = f" line {line}" if line else ""
    return BadInput(f"{path}{at}: {message} ({where}){hint}")


@dataclass(frozen=True)
class Samples:
    """What a parameter source gave for one operation: its parameters, in the order given."""

    source: str
    params: tuple[JsonObject, ...]
    #: Why sampling stopped before :data:`MAX_SAMPLES` (None: it did not).
    stopped: str | None = None


def sample(
    loaded: LoadedTrackPy,
    name: str,
    track: TrackView,
    params: Mapping[str, Any],
    operation: str,
) -> Samples:
    """Up to :data:`MAX_SAMPLES` parameter sets of source ``name`` for ``operation``.

    Each set is copied as JSON when it is taken (a source may hand out the same dict each
    time and change it), keeping only what a search uses (``body``, ``index``, ``cache``,
    ``request-params``, ``results-per-page``, ``pages``) and naming other keys in
    ``ignored``.  A finite source ending (``StopIteration``) ends the sampling.
    """
    path = loaded.path
    source = loaded.registry.param_sources.get(name)
    if source is None:
        known = ", ".join(sorted(loaded.registry.param_sources)) or "none"
        raise BadInput(
            f"{path}: registers no parameter source {name!r}, which operation {operation!r} "
            f"names (it registers: {known})"
        )
    key = json.dumps(
        [str(path.resolve()), path.stat().st_mtime_ns, name, operation, _jsonable(params)],
        sort_keys=True,
        default=repr,
    )
    if key in _SAMPLES:
        return _SAMPLES[key]
    state = random.getstate()
    random.seed(SEED)
    taken: list[JsonObject] = []
    stopped = None
    size = 0
    where = f"in param source {name!r}"
    try:
        get = _params_of(source, track, params, operation)
        while len(taken) < MAX_SAMPLES:
            try:
                given = get()
            except StopIteration:
                stopped = f"the source ended after {len(taken)} parameter set(s)"
                break
            taken.append(_kept(given, path, where))
            size += len(json.dumps(taken[-1].get("body")))
            if size > MAX_BYTES:
                stopped = f"its bodies reached {MAX_BYTES // (1024 * 1024)} MB"
                break
    except BadInput:
        raise
    except Exception as exc:
        raise failure(path, exc, where) from None
    finally:
        random.setstate(state)
    if not taken:
        raise BadInput(f"{path}: parameter source {name!r} gave no parameters ({where})")
    result = Samples(name, tuple(taken), stopped)
    _SAMPLES[key] = result
    return result


def _params_of(
    source: Any, track: TrackView, params: Mapping[str, Any], operation: str
) -> Callable[[], Any]:
    """What gives the next parameters, as Rally calls a source: a class is instantiated
    once and partitioned for one client (``partition(0, 1)``), its ``params()`` called per
    request; a function is called per request with the track and the operation's params."""
    make: Any = source
    if inspect.isclass(source):
        instance: Any = make(track, dict(params), operation_name=operation)
        partition = getattr(instance, "partition", None)
        if callable(partition):
            instance = partition(0, 1)
        return instance.params  # type: ignore[no-any-return]
    own = dict(params)
    return lambda: source(track, own, operation_name=operation)


#: Keys of a source's parameters that are the operation's own, not worth a note.
_OWN = ("name", "operation-type", "param-source", "type")
#: The parameters of a search esdash uses; a source's other keys are named as ignored.
USED = ("body", "index", "cache", "request-params", "results-per-page", "pages")


def _kept(given: Any, path: Path, where: str) -> JsonObject:
    if not isinstance(given, Mapping):
        raise BadInput(
            f"{path}: {where} returned {type(given).__name__}, not a dict of parameters "
            f"(Rally expects e.g. {{'body': {{...}}, 'index': ...}})"
        )
    kept: JsonObject = {}
    for key in USED:
        if key not in given:
            continue
        try:
            kept[key] = json.loads(json.dumps(given[key]))
        except (TypeError, ValueError) as exc:
            raise BadInput(f"{path}: {where} returned {key!r} that is not JSON ({exc})") from None
    body = kept.get("body")
    if body is not None and not isinstance(body, dict):
        raise BadInput(
            f"{path}: {where} returned a 'body' of type {type(body).__name__}; a search "
            f"body is a dict"
        )
    kept["_ignored"] = sorted(
        str(k) for k in given if k not in USED and k not in _OWN and given[k] is not None
    )
    return kept


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=repr))
    except (TypeError, ValueError):
        return repr(value)


# ------------------------------------------------------------------ searches from sources


@dataclass(frozen=True)
class SourceContext:
    """What a parameter source's search needs to know of the track being mapped."""

    directory: Path
    index: str
    indices: tuple[str, ...]
    challenge: str
    documents: tuple[DocumentSet, ...] = ()
    exists: bool = True


#: Properties that make a search paged (or ask for a page size).
PAGING = ("pages", "results-per-page", "with-point-in-time-from")


def pages_of(params: Mapping[str, Any], op_type: str) -> tuple[int | None, str | None]:
    """A search's pages as :attr:`Query.pages` (None: one request), or why esdash cannot.

    Rally 2.13 scrolls for ``scroll-search`` and for a ``search`` with ``pages``
    (deprecated there); ``paginated-search`` pages with ``search_after``
    (:attr:`Query.paging`), which esdash does too, but not over a point in time.
    """
    if "with-point-in-time-from" in params:
        return None, (
            "a search over a point in time (with-point-in-time-from) is not supported by "
            "esdash; paginated-search without one and scroll-search are"
        )
    if op_type not in ("scroll-search", "paginated-search") and "pages" not in params:
        return None, None
    pages = params.get("pages")
    if pages == "all":
        return ALL_PAGES, None
    if isinstance(pages, str) and pages.isdigit():
        pages = int(pages)
    if isinstance(pages, int) and not isinstance(pages, bool) and pages >= 1:
        return pages, None
    return None, f"'pages' must be a number of pages (at least 1) or \"all\", found {pages!r}"


def search_query(
    name: str,
    bodies: Sequence[JsonObject],
    target: str,
    params: Mapping[str, Any],
    op_type: str,
    requires: tuple[str, ...] = (),
) -> Query | str:
    """The esdash query of a Rally search with these bodies, as Rally's search runner sends
    it: ``results-per-page`` becomes the body's ``size``, ``cache`` the ``request_cache``
    parameter (not sent without it), ``request-params`` the query string, and ``pages``
    (``scroll-search``) a scroll over that many pages (``paginated-search``: pages by
    ``search_after``)."""
    pages, refusal = pages_of(params, op_type)
    if refusal is not None:
        return refusal
    size = params.get("results-per-page")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        return f"'results-per-page' must be a number of hits (at least 1), found {size!r}"
    sized = [dict(b, size=size) if size else dict(b) for b in bodies]
    cache = params.get("cache")
    if cache is not None and not isinstance(cache, bool):
        return f"'cache' must be true or false, found {cache!r}"
    if not requires and any(_needs_scripting(b) for b in sized):
        requires = ("scripting",)
    variants = tuple(sized) if any(b != sized[0] for b in sized) else ()
    path = None
    extra = params.get("request-params")
    if isinstance(extra, Mapping) and extra:
        query = {str(k): query_param(v) for k, v in extra.items()}
        if cache is not None:
            query["request_cache"] = query_param(cache)
        path = f"/{quote(target, safe=',*')}/_search?{urlencode(query)}"
    return Query(
        name,
        sized[0],
        target,
        requires,
        request_cache=cache,
        path=path,
        variants=variants,
        pages=pages,
        paging="search_after" if op_type == "paginated-search" else "scroll",
    )


def query_param(value: Any) -> str:
    """A request parameter as Rally's client puts it into the query string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def source_query(task: RallyTask, context: SourceContext) -> tuple[Query | str, list[str]]:
    """The query of a search whose bodies come from a parameter source, and notes on it.

    The source's first parameters decide the index, ``cache``, ``request-params`` and
    paging of every request (only the bodies vary); an ``index`` of None is the index
    esdash creates (Rally would search every index of the cluster).
    """
    op = task.op
    name = str(op["param-source"])
    if not context.exists:
        path = context.directory / "track.py"
        return f"{path} would register it, but the track directory holds no track.py", []
    loaded = load(context.directory)
    corpora: dict[str, list[tuple[str | None, int]]] = {}
    for doc in context.documents:
        corpora.setdefault(doc.corpus, []).append((doc.target_index, doc.documents))
    view = track_view(
        context.directory.resolve().name,
        context.directory,
        context.indices,
        context.challenge,
        corpora,
        {},
    )
    samples = sample(loaded, name, view, op, task.name)
    first = samples.params[0]
    merged = {**op, **{k: v for k, v in first.items() if v is not None}}
    target = merged.get("index") or merged.get("data-stream") or context.index
    if isinstance(target, list):
        target = ",".join(str(t) for t in target)
    target = str(target)
    notes = [n for n in loaded.notes()]
    if not any(_index_matches(target, index) for index in context.indices or (context.index,)):
        return (
            f"it searches {target!r}, which names none of the "
            f"track's indices ({', '.join(context.indices)}), and esdash searches only what "
            f"it creates"
        ), notes
    bodies = [dict(p.get("body") or {}) for p in samples.params]
    meta = op.get("meta")
    requires: tuple[str, ...] = ()
    if isinstance(meta, dict) and isinstance(meta.get("esdash-requires"), list):
        requires = tuple(str(r) for r in meta["esdash-requires"])
    query = search_query(op["name"], bodies, target, merged, task.op_type, requires)
    if isinstance(query, str):
        return query, notes
    distinct = len({json.dumps(b, sort_keys=True) for b in bodies})
    text = (
        f"{task.name}: {len(bodies)} parameter set(s) ({distinct} distinct bodies) sampled "
        f"from parameter source {name!r} of track.py (random seed {SEED}); each client "
        f"cycles through them from its own starting point"
    )
    if samples.stopped:
        text += f" (sampling stopped: {samples.stopped})"
    notes.append(text)
    fixed = [
        key
        for key in ("index", "cache", "request-params", "results-per-page", "pages")
        if any(p.get(key) != first.get(key) for p in samples.params)
    ]
    if fixed:
        notes.append(
            f"{task.name}: the source's {', '.join(fixed)} vary; esdash sends every request "
            f"with its first value"
        )
    ignored = sorted({k for p in samples.params for k in p.get("_ignored", [])})
    if ignored:
        notes.append(
            f"{task.name}: parameters of source {name!r} that Rally's search runner does not "
            f"send either, or esdash does not: {', '.join(ignored)}"
        )
    return query, notes


def query_text(query: Query, op: Mapping[str, Any]) -> str:
    """What a task's plan line adds for bodies from a source, a scroll or a track's runner."""
    parts = []
    if query.variants:
        parts.append(
            f"{len(query.variants)} bodies sampled from parameter source "
            f"{op.get('param-source')!r} of track.py, cycled by each client"
        )
    elif "param-source" in op:
        parts.append(f"the one body parameter source {op.get('param-source')!r} gives")
    if query.pages is not None:
        pages = "every page" if query.pages < 0 else f"up to {query.pages} page(s)"
        size = query.body.get("size", 10)
        how = "search_after pages" if query.paging == "search_after" else "a scroll"
        parts.append(f"each request {how} over {pages} of {size} hits, timed as one")
    return "".join(f"; {part}" for part in parts)
