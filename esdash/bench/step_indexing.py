"""Bulk indexing during a query step: a Rally bulk task in a ``parallel`` block with searches.

Rally runs such a block's tasks at once, so its searches are measured while documents are
indexed.  esdash runs the block as one query step (:class:`PlannedStep`) whose ``indexing``
loads (:class:`PlannedIndexing`) send documents beside the step's search clients, from the
warm-up's start to the measured end, on the step's shared schedule:

* a load's ``clients`` are spread over the bench ranks as a step's search clients are
  (:func:`client_numbers`); each sends its own part of the corpus (the corpus split over all
  of the load's clients, so no two send the same documents), only ``ingest_percentage`` % of
  it, and starts it again when it is sent only if the load is ``looped``;
* requests go to ``/_bulk`` (``?pipeline=`` when set), paced at the load's target rate (bulk
  requests/s of all its clients together) or as fast as they are answered;
* every request is recorded under the load's name, the bulk task's: indexed documents,
  rejected ones by reason and failed requests, as the ingest counts them, so the step's
  results hold an op for the task with its docs/s.

A client stops at the step's end, when its part is sent (unless looped), when the step is
aborted (the rank's state) or when the rank stops it (:meth:`IndexingRun.finish`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from esdash.bench import loadgen
from esdash.cluster.http import Connection, RequestFailed
from esdash.rundir.records import PlannedIndexing

if TYPE_CHECKING:
    from esdash.bench.recorder import Recorder
    from esdash.bench.slices import Batch
    from esdash.plugin.corpus_slices import Slice


def client_numbers(clients: int, workers: int, index: int) -> range:
    """The numbers (0-based, over all ranks) of the clients of a load bench rank ``index``
    runs: contiguous, as many as :func:`esdash.bench.worker.rank_share` gives it."""
    share, extra = divmod(clients, workers)
    start = index * share + min(index, extra)
    return range(start, start + share + (1 if index < extra else 0))


def documents_to_send(part: Slice, percentage: float) -> int:
    """How many documents of its part a client sends: Rally's ``ingest-percentage`` of it,
    rounded up (a part of any documents sends at least one)."""
    return min(part.documents, math.ceil(part.documents * percentage / 100.0))


def trimmed(batch: Batch, docs: int) -> Batch:
    """The first ``docs`` documents of ``batch``: every document is two lines of a bulk
    body (its action line and itself), whatever the corpus held."""
    lines = batch.body.splitlines(keepends=True)
    return type(batch)(b"".join(lines[: 2 * docs]), docs, batch.first_line)


@dataclass
class IndexingClient:
    """One client of a load in this rank: its part of the corpus and its connection."""

    load: PlannedIndexing
    number: int
    connection: Connection
    part: Slice
    #: Documents this client had indexed (measured and warm-up alike) and sent.
    indexed: int = 0
    sent: int = 0


def bulk_path(load: PlannedIndexing) -> str:
    """Where a load's requests go: ``/_bulk``, with its ingest pipeline."""
    if load.pipeline:
        return f"/_bulk?pipeline={quote(load.pipeline, safe='')}"
    return "/_bulk"


def index_until(
    client: IndexingClient,
    until: float,
    recorder: Recorder,
    tick: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Send ``client``'s part in bulk requests until ``until`` (wall clock) or the end of
    the part (again from its start when looped), recording each under the load's name.

    With a target rate the sends are scheduled at fixed moments and latency runs from the
    scheduled one (as :func:`loadgen.measure` does); a request still unanswered
    :data:`loadgen.OPEN_GRACE` seconds after the step's end is counted as open, and the
    client stops.
    """
    from esdash.bench.slices import read_slice
    from esdash.plugin.values import Corpus

    load = client.load
    corpus = Corpus(Path(load.corpus_path), load.corpus_documents, load.corpus_has_actions)
    limit = documents_to_send(client.part, load.ingest_percentage)
    connection, path = client.connection, bulk_path(load)
    node = connection.target.name
    perf = time.perf_counter
    deadline = perf() + (until - time.time())
    rate = load.target_throughput / load.clients if load.target_throughput else None
    period = 1.0 / rate if rate else 0.0
    scheduled = perf()
    while limit:
        left = limit
        batches = read_slice(corpus, client.part, load.bulk_size, load.index, op_type=load.op_type)
        try:
            for batch in batches:
                if left <= 0:
                    break
                if batch.docs > left:
                    batch = trimmed(batch, left)
                left -= batch.docs
                tick()
                if stop.is_set():
                    return
                now = perf()
                if period and scheduled > now:
                    if scheduled >= deadline:
                        return
                    time.sleep(scheduled - now)
                elif now >= deadline:
                    return
                intended = scheduled if period else perf()
                if not _send(client, batch, path, node, intended, deadline, recorder):
                    return
                if period:
                    scheduled += period
        finally:
            close = getattr(batches, "close", None)  # a generator: its file is closed
            if close is not None:
                close()
        if not load.looped:
            return


def _send(
    client: IndexingClient,
    batch: Batch,
    path: str,
    node: str,
    intended: float,
    deadline: float,
    recorder: Recorder,
) -> bool:
    """One bulk request, accounted as the ingest accounts it; False: the step is over."""
    name, connection = client.load.name, client.connection
    started = time.perf_counter()
    bound = math.ceil(deadline - started + loadgen.OPEN_GRACE)
    client.sent += batch.docs
    try:
        answer = connection.request(
            "POST", path, batch.body, content_type="application/x-ndjson", timeout=bound
        )
    except RequestFailed as exc:
        done = time.perf_counter()
        if exc.error_class == "timeout" and bound < connection.timeout:
            message = f"no answer {done - started:.1f} s after it was sent; its step had ended"
            recorder.record_error(name, node, loadgen.OPEN, None, message, done - intended)
            return False
        loadgen.account_failed_bulk(recorder, name, node, batch.docs, exc, done - intended)
        time.sleep(loadgen.CONNECTION_BACKOFF)
        return True
    done = time.perf_counter()
    client.indexed += loadgen.account_bulk(
        recorder, name, node, batch.docs, len(batch.body), answer, done - intended, done - started
    )
    return True


@dataclass
class IndexingRun:
    """This rank's indexing clients of one step, each in a thread of its own.

    :meth:`start` at the step's start; :meth:`finish` once the step's searches are done (or
    failed): it stops the clients, waits for them and raises the first failure.
    ``watch`` raises when the rank is aborted (the search clients' threads use the same).
    """

    clients: Sequence[IndexingClient]
    until: float
    recorder: Recorder
    watch: Callable[[], None]
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)

    def start(self) -> None:
        for client in self.clients:
            thread = threading.Thread(
                target=self._run,
                args=(client,),
                name=f"indexing-{client.load.name}-{client.number}",
                daemon=True,
            )
            self.threads.append(thread)
            thread.start()

    def _run(self, client: IndexingClient) -> None:
        try:
            index_until(client, self.until, self.recorder, self.watch, self.stop)
        except BaseException as exc:  # raised by finish(), in the rank's own thread
            self.failures.append(exc)

    def finish(self, check: bool = True) -> dict[str, int]:
        """Stop and join the clients; the documents each load indexed in this rank.

        ``check`` raises a client's first failure (not when the step already failed: then
        the step's own error is the one to report)."""
        self.stop.set()
        for thread in self.threads:
            thread.join()
        for client in self.clients:
            client.connection.close()
        if self.failures and check:
            raise self.failures[0]
        indexed: dict[str, int] = {}
        for client in self.clients:
            indexed[client.load.name] = indexed.get(client.load.name, 0) + client.indexed
        return indexed
