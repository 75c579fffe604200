"""A Rally track's own ``track.py``: its parameter sources become the bodies of searches.

Rally loads ``track.py`` beside ``track.json`` and calls its ``register(registry)``, which
registers parameter sources (``register_param_source``), runners (``register_runner``),
schedulers, track processors and standard value sources.  esdash does the same, but only
when the session trusts the track's code (``trust_code``), and never in its own process:
:mod:`esdash_plugins.tracks.rally.trackcode` runs the file in a child process
(:mod:`esdash_plugins.tracks.rally.child`), which answers with data.

esdash uses the parameter sources: a source is sampled as Rally calls it (a function
``source(track, params, **kwargs)`` per request; a class instantiated once with ``(track,
params, **kwargs)``, partitioned with ``partition(0, 1)`` and asked for ``params()`` per
request) up to :data:`MAX_SAMPLES` times, once, up front, with Python's random generator
seeded with :data:`SEED`, so a plan and the run it describes hold the same bodies.  The
samples become the bodies a query step cycles through.  A runner registered for an
operation type of the track's own is called once with a client that records instead of
sending (:mod:`esdash_plugins.tracks.rally.runners`).  Schedulers, track processors and
standard value sources are recorded, not run.

Every failure of the user's code (an import error, ``register`` raising, a source raising or
returning something that is not parameters) is a :class:`BadInput` of one line naming
``track.py``, its line and the error, never an esdash traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from esdash.plugin_api import ALL_PAGES, BadInput, JsonObject, Query

from . import child, trackcode
from .model import (
    DocumentSet,
    RallyTask,
    _index_matches,
    _needs_scripting,
)
from .trackcode import Samples, TrackCode

#: Python's random generator is seeded with this before a source is sampled.
SEED = child.SEED
#: At most this many samples of a parameter source are taken ...
MAX_SAMPLES = child.MAX_SAMPLES
#: ... and sampling stops once their bodies add up to this many bytes (as JSON).
MAX_BYTES = child.MAX_BYTES


@dataclass(frozen=True)
class LoadedTrackPy:
    """A ``track.py`` that was run, with what its ``register`` registered."""

    path: Path
    registered: trackcode.Registered
    code: TrackCode

    def notes(self) -> list[str]:
        """What esdash does with the registrations it does not use."""
        found = []
        if self.registered.track_processors:
            found.append(
                f"{self.path.name}: {self.registered.track_processors} track processor(s) "
                f"registered; esdash does not run them (it prepares the track itself)"
            )
        if self.registered.standard_value_sources:
            found.append(
                f"{self.path.name}: standard value sources registered (Rally's query "
                f"randomization); esdash does not randomize queries with them"
            )
        return found


def load(track_code: TrackCode) -> LoadedTrackPy:
    """Run the track's ``track.py`` and its ``register(registry)`` (once per file version)."""
    return LoadedTrackPy(track_code.path, track_code.registered(), track_code)


def sample(
    loaded: LoadedTrackPy,
    name: str,
    track: Mapping[str, Any],
    params: Mapping[str, Any],
    operation: str,
) -> Samples:
    """Up to :data:`MAX_SAMPLES` parameter sets of source ``name`` for ``operation``.

    Each set is copied as JSON when it is taken (a source may hand out the same dict each
    time and change it), keeping only what a search uses (``body``, ``index``, ``cache``,
    ``request-params``, ``results-per-page``, ``pages``) and naming other keys in
    ``ignored``.  A finite source ending (``StopIteration``) ends the sampling.
    """
    if name not in loaded.registered.param_sources:
        known = ", ".join(sorted(loaded.registered.param_sources)) or "none"
        raise BadInput(
            f"{loaded.path}: registers no parameter source {name!r}, which operation "
            f"{operation!r} names (it registers: {known})"
        )
    return loaded.code.sample(name, track, params, operation)


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
    #: The track's own Python file (``track.py``; an OSB workload's ``workload.py``).
    python_file: Path | None = None
    #: The track's code when the session trusts it (None: it does not, and nothing runs).
    code: TrackCode | None = None

    @property
    def file(self) -> Path:
        return self.python_file or self.directory / "track.py"


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
        path = context.file
        return f"{path} would register it, but the track directory holds no {path.name}", []
    if context.code is None:
        return trackcode.untrusted(context.file), []
    loaded = load(context.code)
    corpora: dict[str, list[tuple[str | None, int]]] = {}
    for doc in context.documents:
        corpora.setdefault(doc.corpus, []).append((doc.target_index, doc.documents))
    view = trackcode.view_of(
        context.directory.resolve().name,
        context.directory,
        context.indices,
        context.challenge,
        corpora,
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
        f"from parameter source {name!r} of {loaded.path.name} (random seed {SEED}); each "
        f"client cycles through them from its own starting point"
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
