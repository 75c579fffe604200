"""The child process that runs a track's own Python (``track.py`` / ``workload.py``) for esdash.

A track's Python is code its author wrote, so esdash never imports it into its own process
(which may run as root and holds the session's secrets).  When the session trusts the code,
:mod:`esdash_plugins.tracks.rally.trackcode` starts this file in a child process of its own
(as ``nobody`` when esdash runs as root), and asks it, one request at a time, to do what
esdash used to do in its own process:

* ``load``: run the file as Rally does (the track directory first on ``sys.path``, Python's
  ``random`` seeded with :data:`SEED`) and call its ``register(registry)``;
* ``sample``: sample a registered parameter source as Rally calls it (a function per
  request; a class instantiated once, ``partition(0, 1)``, ``params()`` per request), up to
  :data:`MAX_SAMPLES` times or :data:`MAX_BYTES` of bodies, seeded with :data:`SEED`;
* ``runner``: call a registered runner once with a client that records its requests.

Only data comes back: one JSON object per answer, on a pipe of its own (never pickle, so the
parent never runs anything the track's code made).  A failure of the user's code is an
answer too, the text of a one-line error that the parent puts after the file's path.

This module imports nothing but the standard library: the account it runs as may not be
able to read esdash's installation, so the parent passes its source on the command line
(``python -I -B -c SOURCE REQUESTS_FD ANSWERS_FD``).  Its own limits (memory, open files,
processes, no core files) are set before any of the track's code runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import json
import os
import random
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Python's random generator is seeded with this before a source is sampled.
SEED = 2013
#: At most this many samples of a parameter source are taken ...
MAX_SAMPLES = 200
#: ... and sampling stops once their bodies add up to this many bytes (as JSON).
MAX_BYTES = 4 * 1024 * 1024
#: The Rally version ``registry.meta_data`` reports to a ``register`` that asks.
RALLY_VERSION = "2.13.0"
#: The parameters of a search esdash uses; a source's other keys are named as ignored.
USED = ("body", "index", "cache", "request-params", "results-per-page", "pages")
#: Keys of a source's parameters that are the operation's own, not worth a note.
_OWN = ("name", "operation-type", "param-source", "type")

#: Address space of the child (a track importing numpy fits; a runaway one stops here).
MEMORY_LIMIT = 8 * 1024**3
#: Open files of the child.
FILES_LIMIT = 256
#: Processes and threads the child may add to those its account already runs.
PROCESSES_LIMIT = 64


class Failed(Exception):
    """The user's code failed: ``text`` follows the file's path in the one-line error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


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


def track_view(view: Mapping[str, Any]) -> TrackView:
    """The track as a parameter source sees it, from the parent's description: the names
    of its indices, its corpora (each a list of ``[target index, documents]``), challenge."""
    selected = Named(view["challenge"], parameters={})
    sets = tuple(
        Named(
            corpus,
            documents=tuple(
                Named(corpus, target_index=target, number_of_documents=count)
                for target, count in docs
            ),
        )
        for corpus, docs in view["corpora"]
    )
    return TrackView(
        name=view["name"],
        indices=tuple(Named(i) for i in view["indices"]),
        data_streams=(),
        corpora=sets,
        selected_challenge_or_default=selected,
        challenges=(selected,),
        root=view["root"],
    )


def failure(path: Path, exc: BaseException, where: str) -> Failed:
    """The user's code failed: its line in ``path`` (when the traceback reaches it) and
    the error, in one line."""
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
        hint = f"; esdash runs {path.name} without Rally's own modules (esrally)"
    at = f" line {line}" if line else ""
    return Failed(f"{at}: {message} ({where}){hint}")


class Host:
    """The loaded track code and what it registered; answers the parent's requests."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.registry = Registry()

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        what = request.get("op")
        try:
            if what == "load":
                return self.load(Path(request["path"]), Path(request["directory"]))
            if what == "sample":
                return self.sample(request)
            if what == "runner":
                return self.runner(request)
        except Failed as exc:
            return {"failed": exc.text}
        return {"failed": f": esdash asked its child process for {what!r}, which it does not know"}

    # ------------------------------------------------------------------------ loading

    def load(self, path: Path, directory: Path) -> dict[str, Any]:
        """Run ``path`` as Rally runs ``track.py``, then its ``register(registry)``."""
        for needed, read in ((directory, os.listdir), (path, lambda p: open(p, "rb").close())):
            try:
                read(needed)
            except PermissionError:  # the account this runs as may not read the track
                return {"unreadable": str(needed)}
            except OSError as exc:
                return {"failed": f": cannot read it ({exc.strerror or exc})"}
        self.path = path
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
        spec = importlib.util.spec_from_file_location(f"esdash_rally_track_{digest}", path)
        if spec is None or spec.loader is None:
            return {"failed": ": Python cannot load it as a module"}
        module = importlib.util.module_from_spec(spec)
        # the file may import modules beside it, as Rally puts the track directory on
        # sys.path (for the load only, as esdash always did); no __pycache__ is written
        # (python -B)
        sys.path.insert(0, str(directory))
        state = random.getstate()
        random.seed(SEED)  # draws at import time (a module-level sample) are reproducible too
        registering = False
        try:
            spec.loader.exec_module(module)
            register = getattr(module, "register", None)
            if not callable(register):
                return {
                    "failed": ": defines no register(registry) function; Rally calls it to "
                    "learn the track's parameter sources and runners"
                }
            registering = True
            register(self.registry)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: the user's code, not this process
            where = "in register(registry)" if registering else f"importing {path.name}"
            raise failure(path, exc, where) from None
        finally:
            random.setstate(state)
            if str(directory) in sys.path:
                sys.path.remove(str(directory))
        registry = self.registry
        return {
            "param_sources": sorted(registry.param_sources),
            "runners": sorted(registry.runners),
            "track_processors": len(registry.track_processors),
            "standard_value_sources": len(registry.standard_value_sources),
        }

    # ----------------------------------------------------------------------- sampling

    def sample(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Up to :data:`MAX_SAMPLES` parameter sets of one source, each copied as JSON when
        it is taken (a source may hand out the same dict each time and change it); a finite
        source ending (``StopIteration``) ends the sampling."""
        assert self.path is not None
        name, operation = request["name"], request["operation"]
        source = self.registry.param_sources[name]
        track, params = track_view(request["track"]), request["params"]
        state = random.getstate()
        random.seed(SEED)
        taken: list[dict[str, Any]] = []
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
                taken.append(_kept(given, where))
                size += len(json.dumps(taken[-1].get("body")))
                if size > MAX_BYTES:
                    stopped = f"its bodies reached {MAX_BYTES // (1024 * 1024)} MB"
                    break
        except Failed:
            raise
        except Exception as exc:
            raise failure(self.path, exc, where) from None
        finally:
            random.setstate(state)
        return {"params": taken, "stopped": stopped}

    # ------------------------------------------------------------------------ runners

    def runner(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Call the runner of ``type`` once with a :class:`RecordingClient`: what it sent,
        or why it is not one simple request."""
        assert self.path is not None
        op_type = request["type"]
        runner = self.registry.runners[op_type]
        client = RecordingClient()
        state = random.getstate()
        random.seed(SEED)
        try:
            outcome = runner(client, dict(request["params"]))
            if inspect.isawaitable(outcome):
                asyncio.run(_awaited(outcome))
        except _Unsupported as exc:
            return {"why": f"it calls {exc}"}
        except Exception as exc:  # the runner needs more than a recorded request gives it
            return {"runner_failed": failure(self.path, exc, f"in runner {op_type!r}").text}
        finally:
            random.setstate(state)
        if not client.calls:
            return {"calls": 0}
        method, target, params, body = client.calls[0]
        first: dict[str, Any] = {"method": method, "path": target}
        if body is not None and not isinstance(body, dict):
            first["problem"] = "its request body is not a JSON object"
        else:
            try:
                first["body"] = json.loads(json.dumps(body or {}))
                first["params"] = {str(k): query_param(v) for k, v in params.items()}
            except (TypeError, ValueError) as exc:
                first["problem"] = f"its request is not JSON ({exc})"
        return {"calls": len(client.calls), "first": first}


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


def _kept(given: Any, where: str) -> dict[str, Any]:
    """The parameters a search uses, as JSON, and the names of the others (``_ignored``)."""
    if not isinstance(given, Mapping):
        raise Failed(
            f": {where} returned {type(given).__name__}, not a dict of parameters "
            f"(Rally expects e.g. {{'body': {{...}}, 'index': ...}})"
        )
    kept: dict[str, Any] = {}
    for key in USED:
        if key not in given:
            continue
        try:
            kept[key] = json.loads(json.dumps(given[key]))
        except (TypeError, ValueError) as exc:
            raise Failed(f": {where} returned {key!r} that is not JSON ({exc})") from None
    body = kept.get("body")
    if body is not None and not isinstance(body, dict):
        raise Failed(
            f": {where} returned a 'body' of type {type(body).__name__}; a search body is a dict"
        )
    kept["_ignored"] = sorted(
        str(k) for k in given if k not in USED and k not in _OWN and given[k] is not None
    )
    return kept


def query_param(value: Any) -> str:
    """A request parameter as Rally's client puts it into the query string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------ the recording client


class _Unsupported(Exception):
    """A runner called a client method esdash does not turn into a request."""


#: What a recorded search answers: no hits (a runner reading more is not a simple request).
_EMPTY_SEARCH = {
    "took": 0,
    "timed_out": False,
    "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    "hits": {"total": {"value": 0, "relation": "eq"}, "hits": []},
}


class _Namespace:
    """``es.indices``, ``es.cluster``, ...: every call is one esdash does not send."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        raise _Unsupported(f"es.{self._name}.{method}")


class RecordingClient:
    """The ``es`` a runner gets when esdash records its request instead of sending it.

    It knows the calls of a simple runner: ``es.search(index=..., body=..., **params)``
    and ``es.perform_request(method, path, body=..., params=...)`` (also through
    ``es.transport``); any other call stops the runner.  Requests are recorded as
    (method, path, params, body).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], Any]] = []
        self.transport = self

    async def search(
        self, index: Any = None, body: Any = None, params: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        target = ",".join(index) if isinstance(index, list | tuple) else index
        path = f"/{target}/_search" if target else "/_search"
        extra = {**(params or {}), **{k: v for k, v in kwargs.items() if k != "headers"}}
        self.calls.append(("POST", path, extra, body))
        return dict(_EMPTY_SEARCH)

    async def perform_request(
        self, method: str, path: str, body: Any = None, params: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        self.calls.append((str(method).upper(), str(path), dict(params or {}), body))
        return dict(_EMPTY_SEARCH)

    def options(self, **kwargs: Any) -> RecordingClient:
        return self

    def return_raw_response(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Namespace(name)


async def _awaited(outcome: Any) -> Any:
    return await outcome


# --------------------------------------------------------------------- the process


def _tasks_of(uid: int) -> int | None:
    """Processes and threads the account ``uid`` runs now (RLIMIT_NPROC counts them all);
    None when ``/proc`` cannot tell."""
    count = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def limit_resources() -> None:
    """Memory, open files, processes and core files of this process, before any of the
    track's code runs (hard limits too, so the code cannot raise them again)."""
    import resource

    running = _tasks_of(os.getuid())
    wanted = [
        (resource.RLIMIT_AS, MEMORY_LIMIT),
        (resource.RLIMIT_NOFILE, FILES_LIMIT),
        (resource.RLIMIT_CORE, 0),
    ]
    if running is not None:
        wanted.append((resource.RLIMIT_NPROC, running + PROCESSES_LIMIT))
    for which, value in wanted:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def serve(requests: Any, answers: Any) -> None:
    """Answer each request line with one JSON line, until the parent closes the pipe."""
    host = Host()
    for line in requests:
        answer = host.answer(json.loads(line))
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


def main(argv: list[str]) -> None:
    limit_resources()
    with os.fdopen(int(argv[1]), "rb") as requests, os.fdopen(int(argv[2]), "wb") as answers:
        serve(requests, answers)


if __name__ == "__main__":
    main(sys.argv)
