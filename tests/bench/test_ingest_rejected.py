"""The ingest loop against a real local HTTP server that rejects every document, slowly.

OpenSearch took 13 s to answer a bulk request of 1,000 documents over its field limit; while
the answer was awaited the rank reported nothing and an abort waited for it.  The server here
holds each answer until the loop has ticked (so a loop that does not tick while waiting
fails, by a timeout, instead of passing), then rejects every item as OpenSearch does.  No
timing is asserted.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from esdash.bench import loadgen
from esdash.bench.recorder import Recorder
from esdash.bench.slices import Batch
from esdash.cluster.http import Connection, Target

REASON = "Limit of total fields [1000] has been exceeded"
#: Ticks the loop must make while a request is open before the server answers it.
TICKS_BEFORE_ANSWER = 3
#: The longest the server holds an answer (a loop that never ticks then fails the test).
HOLD_LIMIT = 20.0


class Gate:
    """Lets the server answer once the loop under test has ticked enough during a request."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.waiting = threading.Event()
        self.ticks_while_waiting = 0

    def tick(self) -> None:
        if self.waiting.is_set():
            self.ticks_while_waiting += 1
            if self.ticks_while_waiting >= TICKS_BEFORE_ANSWER:
                self.open.set()


def rejecting_handler(gate: Gate) -> type[http.server.BaseHTTPRequestHandler]:
    class Rejecting(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            items = len(body.splitlines()) // 2
            gate.waiting.set()
            ticked = gate.open.wait(HOLD_LIMIT)
            gate.waiting.clear()
            gate.open.clear()
            if not ticked:  # the loop did not tick while it waited: fail its request
                self.send_response(504)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            error = {"type": "illegal_argument_exception", "reason": REASON}
            answer = json.dumps(
                {
                    "took": 5,
                    "errors": True,
                    "items": [{"index": {"status": 400, "error": error}}] * items,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Rejecting


@pytest.fixture
def served() -> Iterator[tuple[Connection, Gate]]:
    gate = Gate()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), rejecting_handler(gate))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    target = Target("node-0", f"127.0.0.1:{server.server_address[1]}", False)
    connection = Connection(target, None, timeout=HOLD_LIMIT * 2)
    try:
        yield connection, gate
    finally:
        gate.open.set()
        connection.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def batches(count: int, docs: int) -> list[Batch]:
    line = b'{"index":{"_index":"x"}}\n{"f":1}\n'
    return [Batch(line * docs, docs, k * docs * 2) for k in range(count)]


def test_every_rejected_document_is_counted_and_the_loop_ticks_while_it_waits(
    served: tuple[Connection, Gate],
) -> None:
    connection, gate = served
    recorder = Recorder(rank=1)
    progress: list[int] = []
    outcome = loadgen.ingest(connection, batches(3, 50), recorder, gate.tick, progress.append)
    assert (outcome.docs_sent, outcome.docs_indexed, outcome.rejected) == (150, 0, 150)
    assert progress == [50, 50, 50]  # sent is progress, whatever became of the documents
    bulk = recorder.drain().ops["bulk"]
    assert bulk.requests == 3 and bulk.docs == 0
    assert bulk.doc_errors == {"bulk_item_illegal_argument_exception": 150}
    example = bulk.last_errors["bulk_item_illegal_argument_exception"][-1]
    assert example.message == f"illegal_argument_exception: {REASON}"


class Stop(Exception):
    """What a worker's tick raises on a signal (rank.Aborted, here without MPI)."""


def test_an_abort_while_an_answer_is_awaited_stops_at_once_and_keeps_the_counts(
    served: tuple[Connection, Gate],
) -> None:
    connection, gate = served
    outcome = loadgen.IngestOutcome()
    answered = []

    def tick() -> None:
        if answered and gate.waiting.is_set():
            raise Stop  # the second request is open: abort without its answer
        gate.tick()

    def on_progress(docs: int) -> None:
        answered.append(docs)

    with pytest.raises(Stop):
        loadgen.ingest(connection, batches(2, 40), Recorder(rank=1), tick, on_progress, outcome)
    assert answered == [40]
    assert (outcome.docs_sent, outcome.docs_indexed, outcome.rejected) == (40, 0, 40)
