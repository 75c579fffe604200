"""Coordinated omission, checked on a real node that stops answering for a known time.

A paced load generator that measured from the moment it actually sent would hide a stall:
while the server hangs, the client sends nothing, so one request is slow and the requests
that *should* have gone out during the stall are never timed (Gil Tene's "coordinated
omission").  esdash measures **latency** from the scheduled send time and **service time**
from the actual send (``esdash.bench.loadgen.measure``), so:

* at most one request per client has a service time of the stall (the one in flight);
* every request scheduled during the stall has a latency of at least its wait, the time
  from its scheduled send to the end of the stall.

The stall is real: the node's server JVM gets SIGSTOP, then SIGCONT (always, in a
``finally``), through :mod:`esdash.launch.process` after its identity (pid, create time,
command line) is established from the node's status file and its launcher.

What the recorder keeps is histograms: they show the first property and the *distribution*
the second implies (how many latencies exceed each wait), checked on the real payload.  The
per-request pairs (scheduled time, latency) are not in any payload, so the per-request check
observes the values ``measure`` hands to :meth:`Recorder.record` (a subclass records the
arguments and the call time, then counts them as usual): the scheduled time of a request is
its completion (the call) minus its latency.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.nodes import server_jvm

from esdash.bench import loadgen
from esdash.bench.recorder import Recorder
from esdash.cluster import pki
from esdash.cluster.http import Connection, Target
from esdash.launch import process
from esdash.rundir import hdr
from esdash.rundir.layout import RunDir
from esdash.rundir.records import RankPayload

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDEX = "esdash-coordinated-omission"
QUERY = "co"
CLIENTS = 2
#: Requests per second per client, the whole measurement, when the stall starts, its length.
RATE = 10.0
DURATION = 7.0
STALL_AT = 2.0
STALL = 2.0
#: Slack for clocks read a few statements apart and threads sharing two busy cores.
TOLERANCE = 0.05


class ObservedRecorder(Recorder):
    """A real recorder that also keeps what ``measure`` reported per request, in order.

    ``calls`` holds ``(perf_counter at the call, latency, service time)`` of each successful
    request; ``errors`` the error classes of failed ones.  Counting is the recorder's own.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[float, float, float]] = []
        self.errors: list[str] = []

    def record(
        self,
        op: str,
        node: str,
        latency: float,
        service_time: float,
        docs: int = 0,
        nbytes: int = 0,
    ) -> None:
        self.calls.append((time.perf_counter(), latency, service_time))
        super().record(op, node, latency, service_time, docs, nbytes)

    def record_error(
        self,
        op: str,
        node: str,
        error_class: str,
        status: int | None,
        message: str,
        latency: float | None = None,
    ) -> None:
        self.errors.append(f"{error_class}: {message}")
        super().record_error(op, node, error_class, status, message, latency)


def connect(run: RunDir, rank: int) -> Connection:
    node = run.read_topology().nodes[rank]
    credentials = pki.read_credentials(run.path) if run.credentials_file.exists() else None
    return Connection(Target(node.name, node.http_address, credentials is not None), credentials)


def request_ok(connection: Connection, method: str, path: str, body: bytes | None = None) -> None:
    status, answer = connection.request(method, path, body)
    assert status < 300, (method, path, status, answer[:500])


def count_at_least(counts: hdr.Counts, seconds: float) -> int:
    """Samples in buckets that may hold a value of at least ``seconds`` (an upper bound)."""
    return sum(n for _low, high, n in hdr.buckets(counts) if high >= seconds)


def count_surely_at_least(counts: hdr.Counts, seconds: float) -> int:
    """Samples in buckets whose every value is at least ``seconds`` (a lower bound)."""
    return sum(n for low, _high, n in hdr.buckets(counts) if low >= seconds)


@pytest.fixture
def stalled_node_run(shared_cluster: tuple[Path, Path]) -> Iterator[RunDir]:
    """The shared cluster with a one-shard index of one document to query."""
    run = RunDir(shared_cluster[0])
    connection = connect(run, 0)
    try:
        connection.request("DELETE", f"/{INDEX}")
        body = b'{"settings": {"number_of_shards": 1, "number_of_replicas": 0}}'
        request_ok(connection, "PUT", f"/{INDEX}", body)
        request_ok(connection, "POST", f"/{INDEX}/_doc?refresh=true", b'{"n": 1}')
        yield run
        connection.request("DELETE", f"/{INDEX}")
    finally:
        connection.close()


def test_a_stall_shows_in_latency_not_in_service_time(stalled_node_run: RunDir) -> None:
    run = stalled_node_run
    rank = len(run.read_topology().nodes) - 1
    jvm = server_jvm(run, rank)
    query = loadgen.PreparedQuery.of(QUERY, INDEX, {"query": {"match_all": {}}, "size": 1})
    recorders = [ObservedRecorder() for _ in range(CLIENTS)]
    connections = [connect(run, rank) for _ in range(CLIENTS)]
    for connection in connections:
        request_ok(connection, "POST", query.path, query.body)  # connected and warm
    until = time.time() + DURATION
    started = threading.Barrier(CLIENTS + 1)

    def client(k: int) -> int:
        started.wait()
        return loadgen.measure(connections[k], [query], until, recorders[k], lambda: None, RATE)

    with ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(client, k) for k in range(CLIENTS)]
        started.wait()
        time.sleep(STALL_AT)
        try:
            stall_start = time.perf_counter()
            assert process.send(jvm, signal.SIGSTOP)
            time.sleep(STALL)
        finally:
            resumed = process.send(jvm, signal.SIGCONT)
            stall_end = time.perf_counter()
        assert resumed, "SIGCONT not sent: the JVM's identity no longer matched"
        sent = [future.result(timeout=DURATION + 60) for future in futures]
    for connection in connections:
        connection.close()
    stall = stall_end - stall_start
    payloads: list[RankPayload] = [recorder.drain() for recorder in recorders]

    for k, (recorder, payload) in enumerate(zip(recorders, payloads, strict=True)):
        assert recorder.errors == [], recorder.errors
        op = payload.ops[QUERY]
        assert op.requests == sent[k] == len(recorder.calls)
        # every request scheduled up to the end of the stall was sent (the backlog after the
        # stall is sent as fast as the node answers; on a busy machine it may not catch up)
        assert sent[k] >= (STALL_AT + STALL) * RATE - 2, (k, sent[k])
        service = hdr.decode(op.service_time.hdr)
        latency = hdr.decode(op.latency.hdr)

        # What the histograms hold: at most one service time as long as the stall ...
        assert count_at_least(service, stall - TOLERANCE) <= 1, k
        # ... while the latencies show every wait: requests scheduled in the first (1 - f) of
        # the stall waited at least f of it
        for share in (0.25, 0.5, 0.75):
            waited = count_surely_at_least(latency, share * stall - TOLERANCE)
            assert waited >= int((1 - share) * stall * RATE) - 1, (k, share, waited)

        # Per request, from what measure reported: scheduled = completion - latency.
        schedule = [(done - lat, lat, svc) for done, lat, svc in recorder.calls]
        period = 1 / RATE
        for (before, _, _), (next_one, _, _) in zip(schedule, schedule[1:], strict=False):
            assert next_one - before == pytest.approx(period, abs=TOLERANCE), (k, before, next_one)
        during = [
            (when, lat) for when, lat, _ in schedule if stall_start + TOLERANCE <= when <= stall_end
        ]
        assert len(during) >= int((stall - TOLERANCE) * RATE) - 1, (k, len(during))
        for when, lat in during:
            assert lat >= stall_end - when - TOLERANCE, (k, when - stall_start, lat)
        assert sum(svc >= stall - TOLERANCE for _, _, svc in schedule) <= 1, k

    # the node answers again
    check = connect(run, rank)
    try:
        request_ok(check, "POST", query.path, query.body)
    finally:
        check.close()
