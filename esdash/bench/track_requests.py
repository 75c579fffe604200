"""Rank 0 sends the track's administrative requests once: before and after the ingest.

A Rally track's ``force-merge``, ``put-settings``, template, data-stream and untimed
``raw-request`` tasks change what the benchmark measures, so a run sends them as Rally
does: once, in schedule order, those before the first bulk task before the ingest starts
(templates and pipelines before esdash prepares the indices, since they apply when an index
is made; the others after), the rest after the ingest and before settling and the query
steps (:attr:`esdash.rundir.records.BenchPlan.track_requests`).  Each goes through
the backend's control client; each is timed (Rally's service time of an administrative task)
and recorded in ``results.json``.

Errors are handled as Rally handles them by default (``--on-error=continue``): a request the
cluster answers with an error is recorded as such (``status: error`` with the engine's
reason; Rally counts it in the task's error rate) and the run goes on; a request that gets
no answer at all (the cluster cannot be reached) stops the run, as it stops a race:
:func:`send` raises :class:`TrackRequestFailed` naming the task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import msgspec

from esdash.errors import ClusterError
from esdash.plugin.control import ControlClient, ControlError
from esdash.rundir.records import JsonObject, PlannedRequest, RequestResult

BEFORE_INGEST = "before-ingest"
AFTER_INGEST = "after-ingest"
#: Seconds between two readings of a condition polled after a request (Rally: 1 s).
POLL_EVERY = 1.0
#: How long a polled condition may take before the request counts as failed.
POLL_LIMIT = 3600.0


class TrackRequestFailed(ClusterError):
    """An administrative request of the track got no answer: the run stops (as Rally's
    race stops on a connection error); ``sent`` holds every result up to it."""

    def __init__(self, result: RequestResult, sent: list[RequestResult]) -> None:
        super().__init__(
            f"the track's task {result.name!r} ({result.operation}: {result.request}) got no "
            f"answer: {result.error}; the run stops, as Rally stops a race on a connection "
            f"error"
        )
        self.result = result
        self.sent = sent


def describe(request: PlannedRequest) -> str:
    """The request in a line, as results and the run's output show it."""
    if not request.method:
        return f"sleep {request.seconds:g} s"
    return f"{request.method} {request.path}"


def _recovered(answer: JsonObject) -> bool:
    """Whether every shard of a ``_recovery`` answer is done (an empty answer is not)."""
    shards = [
        s for index in answer.values() if isinstance(index, dict) for s in index.get("shards", [])
    ]
    return bool(shards) and all(isinstance(s, dict) and s.get("stage") == "DONE" for s in shards)


def send_one(
    control: ControlClient,
    request: PlannedRequest,
    sleep: Callable[[float], None] = time.sleep,
) -> RequestResult:
    """Send ``request`` (or sleep, or poll its condition); its result, never raising for
    what the cluster answers."""
    result = RequestResult(
        name=request.name,
        operation=request.operation,
        when=request.when,
        request=describe(request),
        started=time.time(),
    )
    begin = time.monotonic()
    try:
        if not request.method:
            sleep(request.seconds)
        else:
            operation = f"{request.operation} {request.name!r}"
            try:
                answer = control.request(
                    operation, request.method, request.path, request.body, request.timeout
                )
            except ControlError as exc:
                if not (request.missing_ok and exc.status == 404):
                    raise
                answer = {}
            if request.wait == "recovery":
                while not _recovered(answer):
                    if time.monotonic() - begin > POLL_LIMIT:
                        raise ControlError(operation, f"recovery not done after {POLL_LIMIT:g} s")
                    sleep(POLL_EVERY)
                    answer = control.request(operation, "GET", request.path, None, None)
    except ControlError as exc:
        result.status, result.error = "error", str(exc)
        result.http_status = exc.status
    result.seconds = time.monotonic() - begin
    return result


def line(result: RequestResult) -> str:
    """A result in one line, as the run's output and its summary show it."""
    text = (
        f"track task {result.name} ({result.operation}, {result.when}): {result.request}: "
        f"{result.status} in {result.seconds:.3f} s"
    )
    return text + (f" ({result.error})" if result.error else "")


def send(
    control: ControlClient,
    requests: Iterable[PlannedRequest],
    when: str,
    say: Callable[[str], None] | None = None,
) -> list[RequestResult]:
    """Send the requests of phase ``when`` in order and return their results; an error
    answer is a result, no answer at all raises :class:`TrackRequestFailed` (with the
    results so far in ``sent``)."""
    results: list[RequestResult] = []
    for request in requests:
        if request.when != when:
            continue
        result = send_one(control, request)
        results.append(result)
        if say is not None:
            say(line(result))
        if result.status != "ok" and result.http_status is None:
            raise TrackRequestFailed(result, results)
    return results


#: Operations that shape how an index is created (templates apply when an index or data
#: stream is made, a default pipeline must exist before it is named): before the ingest they
#: go before esdash prepares the indices, as a track schedules them before ``create-index``.
SETUP_OPERATIONS = frozenset(
    {
        "create-index-template", "delete-index-template",
        "create-composable-template", "delete-composable-template",
        "create-component-template", "delete-component-template",
        "put-pipeline", "create-ilm-policy", "delete-ilm-policy",
    }
)  # fmt: skip


def is_setup(request: PlannedRequest) -> bool:
    """Whether ``request`` is one of the :data:`SETUP_OPERATIONS`."""
    return request.operation in SETUP_OPERATIONS


def before_ingest(requests: Iterable[PlannedRequest], control: ControlClient) -> JsonObject:
    """Rank 0's start: the requests before the ingest, as the ``requests`` and ``error``
    of its start decision (plain data, broadcast to the ranks)."""
    try:
        sent = send(control, requests, BEFORE_INGEST)
    except TrackRequestFailed as exc:
        return {"requests": [msgspec.to_builtins(r) for r in exc.sent], "error": str(exc)}
    return {"requests": [msgspec.to_builtins(r) for r in sent], "error": None}


def from_start(start: JsonObject) -> list[RequestResult]:
    """The results of the requests rank 0 sent before the ingest (from its start decision)."""
    return [msgspec.convert(r, RequestResult) for r in start.get("requests") or ()]
