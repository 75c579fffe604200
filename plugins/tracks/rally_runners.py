"""A Rally track's own runners, sent by esdash when they are one request.

A task whose operation type is not one of Rally's runs the runner the track's ``track.py``
registers for it.  esdash cannot run arbitrary client code per request, but a runner that
sends one search or one GET/POST request is that request: :func:`runner_query` calls the
runner once, with the operation's parameters and a :class:`RecordingClient` that records
instead of sending, and turns the one request into the task's query.  Anything else keeps
the task refused with the runner named and what it did.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
from typing import Any
from urllib.parse import urlencode

from esdash_plugins.tracks.rally_model import RallyTask, _index_matches, _needs_scripting
from esdash_plugins.tracks.rally_trackpy import SEED, SourceContext, failure, load, query_param

from esdash.plugin_api import Query


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


def runner_query(task: RallyTask, context: SourceContext) -> Query | str:
    """The request of a task whose runner is the track's own, or why esdash cannot send it.

    The runner is called once, with the operation's parameters (as Rally's default
    parameter source passes them) and a :class:`RecordingClient`; when it sends exactly
    one search or one GET/POST request, that request is the task's query.  Anything else
    (other client calls, several requests, reading an answer it did not get) keeps the
    task refused, naming the runner and what it did.
    """
    op_type = task.op_type
    loaded = load(context.directory)
    path = loaded.path
    prefix = f"{op_type!r} is not one of Rally's operation types, so its runner is the track's own"
    runner = loaded.registry.runners.get(op_type)
    if runner is None:
        known = ", ".join(sorted(loaded.registry.runners)) or "none"
        return f"{prefix}, but {path} registers no runner {op_type!r} (it registers: {known})"
    client = RecordingClient()
    state = random.getstate()
    random.seed(SEED)
    why = None
    try:
        outcome = runner(client, dict(task.op))
        if inspect.isawaitable(outcome):
            asyncio.run(_awaited(outcome))
    except _Unsupported as exc:
        why = f"it calls {exc}"
    except Exception as exc:  # the runner needs more than a recorded request gives it
        error = failure(path, exc, f"in runner {op_type!r}")
        why = f"it failed with only a recorded request to work with ({error})"
    finally:
        random.setstate(state)
    simple = "esdash runs a track's runner only when it sends one search or one GET/POST request"
    if why is None and len(client.calls) != 1:
        why = f"it sends {len(client.calls)} requests"
    if why is None and client.calls[0][0] not in ("GET", "POST"):
        why = f"it sends a {client.calls[0][0]} request"
    if why is not None:
        return f"{prefix}: registered in {path}; {why}, and {simple}"
    method, target, params, body = client.calls[0]
    if body is not None and not isinstance(body, dict):
        return f"{prefix}: registered in {path}; its request body is not a JSON object"
    try:
        body = json.loads(json.dumps(body or {}))
        query_string = urlencode({str(k): query_param(v) for k, v in params.items()})
    except (TypeError, ValueError) as exc:
        return f"{prefix}: registered in {path}; its request is not JSON ({exc})"
    index = target[1:].split("/")[0] if target.endswith("/_search") else None
    if index is not None and not params:
        if not any(_index_matches(index, i) for i in context.indices or (context.index,)):
            return (
                f"{prefix}: registered in {path}; it searches {index!r}, which names none of "
                f"the track's indices ({', '.join(context.indices)})"
            )
        requires = ("scripting",) if _needs_scripting(body) else ()
        return Query(task.op_name, body, index, requires, request_cache=None)
    full = f"{target}?{query_string}" if query_string else target
    requires = ("scripting",) if _needs_scripting(body) else ()
    return Query(task.op_name, body, requires=requires, method=method, path=full)


async def _awaited(outcome: Any) -> Any:
    return await outcome
