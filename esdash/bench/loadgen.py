"""The load generator's loops: bulk ingest of a corpus slice, and timed query steps.

These loops are the hot path.  Per request they do one HTTP round trip on a persistent
connection, a few clock reads and one :meth:`Recorder.record` call; everything else (merging,
writing the stream, plugins) happens elsewhere, once per interval.

Timing follows Rally's definitions: *service time* runs from sending a request to having its
response; *latency* runs from when the request was *scheduled* to be sent.  In a closed loop
(no target throughput) both are the same.  With a target throughput requests are scheduled at
fixed intervals, and a slow response delays the following sends: their latency then includes
the wait, so coordinated omission cannot hide a stall.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from esdash.cluster.http import Connection, RequestFailed, error_class_of
from esdash.plugin.redaction import redact_values
from esdash.rundir.records import JsonMapping, PlannedQuery

if TYPE_CHECKING:
    from esdash.bench.recorder import Recorder
    from esdash.bench.slices import Batch

#: Bulk responses start with this when no item failed (checked without parsing the JSON).
_NO_BULK_ERRORS = b'"errors":false'
#: A search response opens with ``took``, ``timed_out`` and ``_shards`` (both engines), so a
#: partial answer is seen in its first bytes without parsing the rest.
_TIMED_OUT = b'"timed_out":true'
_SHARDS = re.compile(
    rb'"_shards":\{"total":(\d+),"successful":\d+,(?:"skipped":\d+,)?"failed":(\d+)'
)
_HEAD = 256
#: The error class of a partial answer (HTTP 200 from only some shards, or timed out).
PARTIAL = "partial"
#: Back-off after a connection error, so a lost node is not hammered in a tight loop.
CONNECTION_BACKOFF = 0.1
#: How often a worker awaiting a bulk answer ticks (reports its intervals, notices an abort).
TICK_WHILE_WAITING = 0.1
#: The error class of a request with no answer yet when its step ended (plus the grace).
OPEN = "open"
#: Seconds past a step's end a request may still answer; then it is recorded as open.
OPEN_GRACE = 1.0
#: How long a scroll stays open between its pages, and the order it reads documents in:
#: what Rally 2.13's scroll search asks for (``scroll=10s``, ``sort=_doc``).
SCROLL_KEEP_ALIVE = "10s"
_SCROLL_ID = re.compile(rb'"_scroll_id":"([^"]+)"')
_TOTAL_HITS = re.compile(rb'"hits":\{"total":(?:\{"value":)?(\d+)')


@dataclass(frozen=True)
class PreparedQuery:
    """A request ready to send: its name, path and encoded body, and its HTTP method.

    ``variants`` are every body the query cycles through (a parameter source's samples;
    empty: always ``body``), ``pages`` makes it a scroll search (see :func:`send`) of
    ``page_size`` hits per page.  ``path`` is a plain search either way, so a caller that
    sends ``path`` and ``body`` itself (the global warm-up) sends one page, opening no
    scroll it would leave behind.
    """

    name: str
    path: str
    body: bytes | None
    method: str = "POST"
    variants: tuple[bytes, ...] = ()
    pages: int | None = None
    page_size: int = 10
    paging: str = "scroll"

    @classmethod
    def of(
        cls,
        name: str,
        index: str,
        body: JsonMapping | None,
        request_cache: bool | None = False,
        method: str = "POST",
        path: str | None = None,
        variants: Sequence[JsonMapping] = (),
        pages: int | None = None,
        paging: str = "scroll",
    ) -> PreparedQuery:
        """The request of a query; ``request_cache`` as :class:`esdash.plugin.api.Query` has it.

        By default ``request_cache=false``: every request is answered by the shards, not the
        cache, so repeated queries measure search and not a lookup.  ``None`` leaves the
        choice to the index (Rally's default).  A query with a ``path`` of its own (a
        request other than a search, such as index stats) is sent there with ``method``,
        and without a body when it has none.
        """
        encoded = tuple(json.dumps(v).encode() for v in variants)
        size = body.get("size", 10) if body else 10
        size = size if isinstance(size, int) and size > 0 else 10
        if path is not None:
            data = json.dumps(body).encode() if body else None
            return cls(name, path, data, method, encoded, pages, size, paging)
        path = f"/{index}/_search"
        if request_cache is not None:
            path += f"?request_cache={'true' if request_cache else 'false'}"
        return cls(name, path, json.dumps(body).encode(), method, encoded, pages, size, paging)

    @classmethod
    def planned(cls, query: PlannedQuery) -> PreparedQuery:
        """The request of a query of ``bench.json``."""
        return cls.of(
            query.name,
            query.index,
            query.body,
            query.request_cache,
            query.method,
            query.path,
            query.variants,
            query.pages,
            query.paging,
        )

    def body_at(self, use: int) -> bytes | None:
        """The body of this query's ``use``-th request (0-based) by one client."""
        if self.variants:
            return self.variants[use % len(self.variants)]
        return self.body


def send(
    connection: Connection, query: PreparedQuery, use: int, timeout: float | None = None
) -> tuple[int, bytes, int, int]:
    """Send ``query``'s ``use``-th request: (status, answer, documents, bytes).

    A plain query is one request.  A scroll search (``pages``) is timed as one exchange,
    as Rally 2.13 times it: the search opens a scroll (``scroll=10s``, ``sort=_doc``),
    ``POST /_search/scroll`` fetches the next pages until ``pages`` are read or a page
    comes back empty (the first page already ends it when the index holds fewer hits than
    a page), and the scroll is cleared.  Documents and bytes are summed over the pages; the
    answer returned is the first failed or partial page, else the last one.  A
    ``search_after`` query pages by :func:`_search_after` instead.
    """
    body = query.body_at(use)
    if query.pages is None:
        status, answer = connection.request(query.method, query.path, body, timeout=timeout)
        return status, answer, returned_documents(answer), len(answer)
    if query.paging == "search_after":
        return _search_after(connection, query, body, timeout)
    joiner = "&" if "?" in query.path else "?"
    first = f"{query.path}{joiner}scroll={SCROLL_KEEP_ALIVE}&sort=_doc"
    status, answer = connection.request(query.method, first, body, timeout=timeout)
    docs, size = returned_documents(answer), len(answer)
    found = _SCROLL_ID.search(answer) if status < 300 else None
    if found is None:
        return status, answer, docs, size
    scroll_id = found.group(1).decode()
    try:
        total = _TOTAL_HITS.search(answer)
        hits = int(total.group(1)) if total is not None else docs
        done = hits == 0 or hits < query.page_size or partial_reason(answer) is not None
        page = 1
        while not done and (query.pages < 0 or page < query.pages):
            more = json.dumps({"scroll_id": scroll_id, "scroll": SCROLL_KEEP_ALIVE}).encode()
            status, answer = connection.request("POST", "/_search/scroll", more, timeout=timeout)
            page += 1
            got = returned_documents(answer)
            docs, size = docs + got, size + len(answer)
            done = status >= 300 or got == 0 or partial_reason(answer) is not None
    finally:
        clear = json.dumps({"scroll_id": [scroll_id]}).encode()
        # a failed clear leaves the scroll to expire; the exchange's own outcome stands
        with contextlib.suppress(RequestFailed):
            connection.request("DELETE", "/_search/scroll", clear, timeout=timeout)
    return status, answer, docs, size


def _search_after(
    connection: Connection, query: PreparedQuery, body: bytes | None, timeout: float | None
) -> tuple[int, bytes, int, int]:
    """Rally 2.13's ``paginated-search``, timed as one exchange: the search, then again with
    ``search_after`` set to the last hit's ``sort`` values, until ``pages`` are read or, as
    Rally stops, the pages read cover the first page's total hits.  A page without sort
    values, or ending on those of the page before (the engine did not move on), ends it too:
    never loop forever.  Documents and bytes are summed; the answer is the first failed or
    partial page, else the last one."""
    pages = query.pages or 1
    status, answer = connection.request(query.method, query.path, body, timeout=timeout)
    docs, size = returned_documents(answer), len(answer)
    found = _TOTAL_HITS.search(answer) if status < 300 else None
    total = int(found.group(1)) if found is not None else docs
    page, previous = 1, None
    search = json.loads(body) if body else {}
    while (pages < 0 or page < pages) and total > page * query.page_size:
        if status >= 300 or partial_reason(answer) is not None:
            break
        hits = (json.loads(answer).get("hits") or {}).get("hits") or []
        last = hits[-1].get("sort") if hits else None
        if last is None or last == previous:
            break
        previous = search["search_after"] = last
        following = json.dumps(search).encode()
        status, answer = connection.request(query.method, query.path, following, timeout=timeout)
        page += 1
        docs, size = docs + returned_documents(answer), size + len(answer)
    return status, answer, docs, size


class DecodeFailed(Exception):
    """A client-side codec could not decode a response (counted as a failed request)."""


class WarmupFailed(Exception):
    """A warm-up request failed: the step cannot produce meaningful numbers."""

    def __init__(self, query: str, message: str) -> None:
        super().__init__(f"warm-up of query {query!r} failed: {message}")
        self.query = query


def server_message(status: int, body: bytes) -> str:
    """The error reason Elasticsearch gave, for error records and warm-up failures.

    Without the values of documents or queries it quotes (:func:`redact_values`): the
    reason is kept in ``results.json`` and the stream.
    """
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return redact_values(body[:300].decode("utf-8", "replace"))
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return redact_values(f"{root.get('type', 'error')}: {root.get('reason', '')}")[:300]
    return redact_values(str(error))[:300]


def partial_reason(body: bytes) -> str | None:
    """Why a 2xx search answer is partial (some shards failed, or timed out), else None.

    A node that died answers nothing, but the others answer HTTP 200 for the shards they
    hold (``_shards.failed`` > 0): counted as a success, a third of the data would look like
    a fast query.  Such answers are errors of their own class, :data:`PARTIAL`.
    """
    head = body[:_HEAD]
    if _TIMED_OUT in head:
        return "the search timed out: partial results"
    found = _SHARDS.search(head)
    if found is not None and found.group(2) != b"0":
        total, failed = int(found.group(1)), int(found.group(2))
        return f"{failed} of {total} shards failed: partial results"
    return None


def returned_documents(body: bytes) -> int:
    """Hits in a search response, counted without parsing it (each hit carries an ``_id``)."""
    return body.count(b'"_id":')


# ------------------------------------------------------------------------------ ingest


@dataclass
class IngestOutcome:
    """Documents of an ingest so far: sent, indexed and rejected (kept up to date as it runs,
    so a caller holding it still has the counts when the ingest is cut short)."""

    docs_sent: int = 0
    docs_indexed: int = 0
    rejected: int = 0


def bulk_rejection_reasons(body: bytes) -> tuple[dict[str, int], dict[str, str]]:
    """Rejected items of a bulk response by error type, and the first reason of each type.

    The type alone (``illegal_argument_exception``) rarely says what to fix; its reason
    ("Limit of total fields [1000] has been exceeded") does.  A reason that quotes the
    document's value ("Preview of field's value: '...'") keeps its words, not the value.
    """
    if _NO_BULK_ERRORS in body[:64]:
        return {}, {}
    counts: dict[str, int] = {}
    reasons: dict[str, str] = {}
    for item in json.loads(body).get("items", []):
        result = next(iter(item.values()))
        error = result.get("error")
        if error:
            kind = error.get("type", "unknown") if isinstance(error, dict) else str(error)
            counts[kind] = counts.get(kind, 0) + 1
            if kind not in reasons:
                detail = error.get("reason") if isinstance(error, dict) else None
                reasons[kind] = redact_values(f"{kind}: {detail}") if detail else kind
    return counts, reasons


def bulk(connection: Connection, body: bytes, tick: Callable[[], None]) -> tuple[int, bytes]:
    """``POST /_bulk`` with ``body``, calling ``tick`` while the answer is awaited.

    A cluster can take long over a bulk request it rejects item by item (OpenSearch took
    13 s for 1,000 documents over its field limit): the rank must go on reporting its
    intervals and noticing an abort meanwhile, or it looks silent for as long as the
    rejections take.  The request runs in a daemon thread (which an abort leaves behind);
    this thread ticks, so the recorder is still touched by this thread only.
    """
    answer: list[tuple[int, bytes]] = []
    failure: list[BaseException] = []

    def send() -> None:
        try:
            answer.append(
                connection.request("POST", "/_bulk", body, content_type="application/x-ndjson")
            )
        except BaseException as exc:  # raised below, in the caller's thread
            failure.append(exc)

    sender = threading.Thread(target=send, name="bulk", daemon=True)
    sender.start()
    sender.join(TICK_WHILE_WAITING)
    while sender.is_alive():
        tick()
        sender.join(TICK_WHILE_WAITING)
    if failure:
        raise failure[0]
    return answer[0]


def account_bulk(
    recorder: Recorder,
    name: str,
    node: str,
    docs: int,
    nbytes: int,
    answer: tuple[int, bytes],
    latency: float,
    service: float,
) -> int:
    """One answered bulk request of ``docs`` documents in the recorder under ``name``, as
    the ingest and a step's indexing both count it; the documents indexed.

    An error status rejects every document under its error class; otherwise each item the
    engine rejected is counted by reason, and the rest are the request's indexed documents.
    """
    status, body = answer
    if status >= 300:
        error = error_class_of(status)
        recorder.record_error(name, node, error, status, server_message(status, body), latency)
        recorder.record_bulk_rejections(name, node, {error: docs})
        return 0
    rejected, reasons = bulk_rejection_reasons(body)
    if rejected:
        recorder.record_bulk_rejections(name, node, rejected, reasons)
    indexed = docs - sum(rejected.values())
    recorder.record(name, node, latency, service, indexed, nbytes)
    return indexed


def account_failed_bulk(
    recorder: Recorder, name: str, node: str, docs: int, exc: RequestFailed, latency: float
) -> None:
    """A bulk request that got no answer: an error, and every document rejected by it."""
    recorder.record_error(name, node, exc.error_class, None, str(exc), latency)
    recorder.record_bulk_rejections(name, node, {exc.error_class: docs})


def ingest(
    connection: Connection,
    batches: Iterable[Batch],
    recorder: Recorder,
    tick: Callable[[], None],
    on_progress: Callable[[int], None] | None = None,
    outcome: IngestOutcome | None = None,
) -> IngestOutcome:
    """Send every batch of a corpus slice as one ``_bulk`` request; account for every doc.

    ``on_progress`` hears of every batch sent, whatever became of its documents: the
    progress of an ingest is what was sent (rejections are counted, by reason, in the
    recorder).  ``outcome``, when given, is the one counted into as the ingest goes, so the
    caller keeps the counts of an ingest that an abort cut short.
    """
    outcome = IngestOutcome() if outcome is None else outcome
    node = connection.target.name
    for batch in batches:
        tick()
        started = time.perf_counter()
        try:
            answer = bulk(connection, batch.body, tick)
        except RequestFailed as exc:
            elapsed = time.perf_counter() - started
            account_failed_bulk(recorder, "bulk", node, batch.docs, exc, elapsed)
            outcome.docs_sent += batch.docs
            outcome.rejected += batch.docs
            if on_progress is not None:
                on_progress(batch.docs)
            time.sleep(CONNECTION_BACKOFF)
            continue
        elapsed = time.perf_counter() - started
        outcome.docs_sent += batch.docs
        indexed = account_bulk(
            recorder, "bulk", node, batch.docs, len(batch.body), answer, elapsed, elapsed
        )
        outcome.docs_indexed += indexed
        outcome.rejected += batch.docs - indexed
        if on_progress is not None:
            on_progress(batch.docs)
    return outcome


# ------------------------------------------------------------------------- query steps


def query_order(queries: Sequence[PreparedQuery], rng: random.Random) -> list[PreparedQuery]:
    """This rank's own random permutation of the step's queries (cycled through).

    A query with several bodies starts at a body of its own in each client (drawn after
    the permutation, so the permutation is the one a query without variants gets): the
    clients do not send the same body at the same moment.
    """
    order = list(queries)
    rng.shuffle(order)
    for k, query in enumerate(order):
        if len(query.variants) > 1:
            start = rng.randrange(len(query.variants))
            order[k] = replace(query, variants=query.variants[start:] + query.variants[:start])
    return order


def warm_up(
    connection: Connection,
    order: Sequence[PreparedQuery],
    until: float,
    recorder: Recorder,
    tick: Callable[[], None],
    decode: Callable[[PreparedQuery, bytes], object] | None = None,
    count: int | None = None,
) -> int:
    """Send queries until ``until`` (wall clock); every query at least once.  With a
    ``count`` (a counted step's warm-up iterations): that many requests, stopping at
    ``until`` all the same.

    Warm-up requests are recorded like measured ones (the phase tells them apart), so the
    live view shows the warm-up converging.  ``decode`` is applied as in :func:`measure`.

    Any error aborts the step with the server's message: a warm-up that silently failed
    (as the authors' did) would make the measured numbers look like a warm cache.
    """
    node = connection.target.name
    sent = 0
    position = 0
    perf = time.perf_counter
    while (
        position < count and time.time() < until
        if count is not None
        else position < len(order) or time.time() < until
    ):
        query = order[position % len(order)]
        use = position // len(order)
        position += 1
        tick()
        started = perf()
        try:
            status, body, docs, nbytes = send(connection, query, use)
        except RequestFailed as exc:
            raise WarmupFailed(query.name, str(exc)) from exc
        if status >= 300:
            raise WarmupFailed(query.name, f"HTTP {status}: {server_message(status, body)}")
        partial = partial_reason(body)
        if partial is not None:
            raise WarmupFailed(query.name, partial)
        if decode is not None:
            try:
                decode(query, body)
            except DecodeFailed as exc:
                raise WarmupFailed(query.name, str(exc)) from exc
        elapsed = perf() - started
        recorder.record(query.name, node, elapsed, elapsed, docs, nbytes)
        sent += 1
    return sent


def measure(
    connection: Connection,
    order: Sequence[PreparedQuery],
    until: float,
    recorder: Recorder,
    tick: Callable[[], None],
    rate: float | None = None,
    think_time: float = 0.0,
    decode: Callable[[PreparedQuery, bytes], object] | None = None,
    limit: int | None = None,
) -> int:
    """Send queries until ``until`` (wall clock): closed loop, or paced at ``rate`` req/s;
    with a ``limit`` (a counted step's iterations), stop once that many are sent.

    ``decode`` (client-side encryption) is called with every successful response before the
    clock stops: decrypting what it read is part of the client's service time.  It raises
    :class:`DecodeFailed` for a response it cannot decode, which counts as a failed request.

    A request still unanswered :data:`OPEN_GRACE` (to 2) seconds after the step's end is not
    waited for: it is counted as an error of class :data:`OPEN` with the time it had been
    open, so a frozen node's slowest requests stay in the step's numbers instead of
    vanishing (the bound is rounded up to whole seconds: the socket's timeout then changes
    once a second, not with every request).
    """
    node = connection.target.name
    sent = 0
    count = len(order)
    perf, wall = time.perf_counter, time.time
    # Schedules run on the monotonic clock; the deadline is shared by all ranks (wall clock).
    deadline = perf() + (until - wall())
    period = 1.0 / rate if rate else 0.0
    scheduled = perf()
    while limit is None or sent < limit:
        tick()
        now = perf()
        if period:
            if scheduled > now:
                if scheduled >= deadline:
                    break
                time.sleep(scheduled - now)
            elif now >= deadline:
                break
        elif now >= deadline:
            break
        query = order[sent % count]
        started = perf()
        intended = scheduled if period else started
        bound = math.ceil(deadline - started + OPEN_GRACE)
        try:
            status, body, docs, nbytes = send(connection, query, sent // count, bound)
            if decode is not None and status < 300:
                decode(query, body)
        except RequestFailed as exc:
            done = perf()
            if exc.error_class == "timeout" and bound < connection.timeout:
                recorder.record_error(
                    query.name,
                    node,
                    OPEN,
                    None,
                    f"no answer {done - started:.1f} s after it was sent; its step had ended",
                    done - intended,
                )
                break
            recorder.record_error(
                query.name, node, exc.error_class, None, str(exc), done - intended
            )
            time.sleep(CONNECTION_BACKOFF)
        except DecodeFailed as exc:
            done = perf()
            recorder.record_error(
                query.name, node, "other", None, f"decoding failed: {exc}", done - intended
            )
        else:
            done = perf()
            if status >= 300:
                recorder.record_error(
                    query.name,
                    node,
                    error_class_of(status),
                    status,
                    server_message(status, body),
                    done - intended,
                )
            elif (partial := partial_reason(body)) is not None:
                recorder.record_error(query.name, node, PARTIAL, status, partial, done - intended)
            else:
                recorder.record(query.name, node, done - intended, done - started, docs, nbytes)
        sent += 1
        if period:
            scheduled += period
        elif think_time:
            time.sleep(think_time)
    return sent
