"""A Rally track's own runners, sent by esdash when they are one request.

A task whose operation type is not one of Rally's runs the runner the track's ``track.py``
registers for it.  esdash cannot run arbitrary client code per request, but a runner that
sends one search or one GET/POST request is that request: :func:`runner_query` has the
runner called once, in the child process that runs the track's code
(:mod:`esdash_plugins.tracks.rally.trackcode`), with the operation's parameters and a client
that records instead of sending (:class:`esdash_plugins.tracks.rally.child.RecordingClient`),
and turns the one request into the task's query.  Anything else keeps the task refused with
the runner named and what it did; so does a session that does not trust the track's code.
"""

from __future__ import annotations

from urllib.parse import urlencode

from esdash.plugin_api import Query

from . import trackcode
from .model import RallyTask, _index_matches, _needs_scripting
from .trackpy import SourceContext, load


def runner_query(task: RallyTask, context: SourceContext) -> Query | str:
    """The request of a task whose runner is the track's own, or why esdash cannot send it.

    The runner is called once, with the operation's parameters (as Rally's default
    parameter source passes them) and a recording client; when it sends exactly one search
    or one GET/POST request, that request is the task's query.  Anything else (other client
    calls, several requests, reading an answer it did not get) keeps the task refused,
    naming the runner and what it did.
    """
    op_type = task.op_type
    prefix = f"{op_type!r} is not one of Rally's operation types, so its runner is the track's own"
    if context.code is None:
        return f"{prefix}: {trackcode.untrusted(context.file)}"
    loaded = load(context.code)
    path = loaded.path
    if op_type not in loaded.registered.runners:
        known = ", ".join(sorted(loaded.registered.runners)) or "none"
        return f"{prefix}, but {path} registers no runner {op_type!r} (it registers: {known})"
    sent = context.code.record(op_type, task.op)
    why = None
    if "why" in sent:
        why = str(sent["why"])
    elif "runner_failed" in sent:
        error = f"{path}{sent['runner_failed']}"
        why = f"it failed with only a recorded request to work with ({error})"
    simple = "esdash runs a track's runner only when it sends one search or one GET/POST request"
    first = sent.get("first") or {}
    if why is None and sent.get("calls") != 1:
        why = f"it sends {sent.get('calls')} requests"
    if why is None and first.get("method") not in ("GET", "POST"):
        why = f"it sends a {first.get('method')} request"
    if why is not None:
        return f"{prefix}: registered in {path}; {why}, and {simple}"
    if first.get("problem"):
        return f"{prefix}: registered in {path}; {first['problem']}"
    method, target = str(first["method"]), str(first["path"])
    body, params = dict(first["body"]), dict(first["params"])
    query_string = urlencode(params)
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
