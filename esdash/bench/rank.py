"""The benchmark step: worker ranks generate load, rank 0 coordinates and records.

Started as ``python -m esdash.bench.rank RUN_DIR`` by ``mpiexec`` or ``srun`` with
``workers + 1`` ranks.  Rank 0 does no load: it prepares the index, merges the workers'
interval payloads into the run stream, releases the query steps once ingest is done, and
writes the results.  Merging must never stall on a slow request of its own, so rank 0 sends
none.

MPI is used only to start: the ranks gather who is where, and rank 0 broadcasts the start
time ``T0`` and the index decision.  After that they exchange nothing over MPI (without
fault-tolerant MPI a dead peer breaks every pending message and collective): each worker
appends to its own file in the run directory and rank 0 to one file all workers read
(:mod:`esdash.bench.channel`).  A rank that dies stops writing; the others go on.

Timeline (wall clock, shared through the broadcast):

1. rank 0 creates the index (or keeps a reused one: :func:`_prepare_index`) and broadcasts
   ``T0``;
2. ingest: each worker sends its byte-range slice of the corpus to its node in bulk requests,
   then says it is done;
3. when every worker is done or lost, rank 0 settles the index (refresh, flush, force-merge
   or wait: :mod:`esdash.bench.settle`);
4. the global warm-up: rounds over every query until each runs steadily
   (:mod:`esdash.bench.warmup`); rank 0 decides when it ends and when the steps start;
5. the steps run on a fixed schedule from that moment, in the plan's order and rounds:
   each step's warm-up, then measurement;
6. every worker writes its final report; rank 0 writes ``results.json`` and the final record.

Rank 0's side of 3-5 lives in :class:`esdash.bench.conductor.Conductor`, its watch over the
search nodes in :class:`esdash.bench.nodewatch.NodeWatch`.

Liveness is a heartbeat, independent of requests: a thread of every worker appends one every
half interval, with the requests it has in flight.  A worker whose last heartbeat is older
than :data:`SILENT_INTERVALS` intervals is lost (and back when it beats again); its data up
to its last interval is kept.  A worker whose interval payload is late is listed as missing
in that interval's record; its data still counts when it arrives.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from esdash.bench import loadgen
from esdash.bench.channel import ChannelReader, ChannelWriter
from esdash.bench.conductor import KIND_START, KIND_WARMUP_END, Conductor, step_end_kind
from esdash.bench.nodewatch import NodeWatch, http_ping
from esdash.bench.plan import BenchPlan
from esdash.bench.split import KIND_EXIT, run_split
from esdash.bench.step_indexing import IndexingClient, IndexingRun, client_numbers
from esdash.bench.track_requests import before_ingest, from_start, is_setup, line
from esdash.bench.warmup import WarmupSchedule, run_round
from esdash.boundary import private_files
from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.http import Connection, Target
from esdash.errors import EsdashError
from esdash.launch.owner import OwnerWatch
from esdash.paths import cache_dir
from esdash.plugin.api import ClientCodec
from esdash.plugin.control import ControlClient
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    JsonObject,
    NodePlan,
    PlannedIndex,
    PlannedQuery,
    PlannedStep,
    RankPayload,
)

if TYPE_CHECKING:
    from esdash.bench.recorder import Recorder
    from esdash.bench.sink import StreamSink
    from esdash.bench.slices import Batch

#: How often a rank looks whether the run's owner is still there (it reads a small file).
OWNER_LOOK_SECONDS = 1.0
#: Phases in which everything is measured: an owner dying now aborts nothing (rank 0 writes
#: the whole results, as after a stop signal in that phase).
MEASURED = ("results", "done")

#: What a worker calls between requests (reports intervals, notices an abort).
Tick = Callable[[], None]

#: Kinds of the records a worker appends to its channel.
KIND_INTERVAL = "interval"
KIND_HEARTBEAT = "heartbeat"
KIND_INGEST_DONE = "ingest_done"
KIND_WARMUP_ROUND = "warmup_round"
KIND_STEP_DONE = "step_done"
KIND_FINAL = "final"
#: How long past its end an interval waits for late workers before it is written.
GRACE_INTERVALS = 2.0
#: A worker whose last heartbeat is older than this many intervals (and at least
#: :data:`SILENT_FLOOR` seconds) is lost.
SILENT_INTERVALS = 3
SILENT_FLOOR = 3.0
#: How long workers wait for rank 0 to release the query steps.
SYNC_TIMEOUT = 3600.0
#: After a signal, how long rank 0 waits for the workers' final reports (seconds).
ABORT_WAIT = 5.0
#: How often rank 0 reads the workers' files (seconds).
READ_EVERY = 0.05


@dataclass
class Schedule:
    """The shared clock: interval numbers and boundaries in wall-clock seconds."""

    t0: float
    interval: float

    def seq(self, now: float) -> int:
        return int((now - self.t0) // self.interval)

    def boundary(self, seq: int) -> float:
        return self.t0 + (seq + 1) * self.interval


@dataclass
class RankState:
    """What this worker is doing, attached to every payload it sends."""

    phase: str = "starting"
    step: int | None = None
    aborted: str = ""


class Aborted(Exception):
    """SIGTERM or SIGINT arrived (Ctrl-C, scancel, a Slurm time limit): wrap up now."""


def _watch_signals(state: RankState) -> None:
    def on_signal(signum: int, _frame: object) -> None:
        state.aborted = f"received {signal.Signals(signum).name}"

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def _watch_owner(run: RunDir, state: RankState) -> OwnerWatch:
    """Abort like SIGTERM once the run's owner (``esdash run``) is gone for its grace.

    Nobody is left to signal the ranks when their owner was killed outright: each rank
    watches it itself (:mod:`esdash.launch.owner`), from a daemon thread, and wraps up the
    way a forwarded SIGTERM would have it -- rank 0 still writes what was measured.
    """
    watch = OwnerWatch(run)

    def look() -> None:
        while not state.aborted and state.phase not in MEASURED:
            gone = watch.gone()
            if gone and state.phase not in MEASURED:
                state.aborted = gone
                return
            time.sleep(OWNER_LOOK_SECONDS)

    threading.Thread(target=look, name="owner-watch", daemon=True).start()
    return watch


def _record_orphaned(run: RunDir, watch: OwnerWatch) -> None:
    """Rank 0, at the end: if the run's owner died, ``run.json`` says so (nobody else will)."""
    gone = watch.dead_now()
    if gone is None:
        return
    with contextlib.suppress(EsdashError, OSError), run.edit_info() as info:
        info.orphaned = gone
        if info.state in ("prepared", "starting", "running", None) and gone not in (
            info.reason or ""
        ):
            info.state = "failed"
            info.reason = f"{info.reason}; {gone}" if info.reason else gone


def _sleep_until(moment: float, state: RankState, tick: Tick | None = None) -> None:
    while not state.aborted:
        left = moment - time.time()
        if left <= 0:
            return
        if tick is not None:
            tick()
        time.sleep(min(left, 0.1))
    raise Aborted(state.aborted)


# ------------------------------------------------------------------------------ workers


class Reporter:
    """Writes interval payloads to this worker's channel: on boundaries and phase changes."""

    def __init__(
        self,
        channel: ChannelWriter,
        rank: int,
        recorder: Recorder,
        schedule: Schedule,
        state: RankState,
    ):
        self.channel, self.rank, self.recorder = channel, rank, recorder
        self.schedule, self.state = schedule, state
        self.sent_through = -1
        self.next_boundary = schedule.boundary(schedule.seq(time.time()))
        self.progress = 0

    def tick(self) -> None:
        """Called between requests: cheap unless an interval boundary has passed."""
        if self.state.aborted:
            raise Aborted(self.state.aborted)
        if time.time() >= self.next_boundary:
            self.flush(partial=False)

    def flush(self, partial: bool) -> None:
        """Send what was recorded; ``partial`` at a phase change inside an interval."""
        now = time.time()
        seq = self.schedule.seq(now)
        closing = seq if partial else seq - 1
        message = {
            "rank": self.rank,
            "seq": closing,
            "from_seq": self.sent_through + 1,
            "partial": partial,
            "phase": self.state.phase,
            "step": self.state.step,
            "docs_done": self.progress,
            "data": self.recorder.drain(),
        }
        self.progress = 0
        if not partial:
            self.sent_through = closing
        self.next_boundary = self.schedule.boundary(seq)
        self.send(message, KIND_INTERVAL)

    def send(self, message: JsonObject, kind: str) -> None:
        self.channel.write({"kind": kind, **message})

    def add_progress(self, docs: int) -> None:
        self.progress += docs


class Heartbeat(threading.Thread):
    """Appends a heartbeat every ``period`` seconds, whatever the load loop is doing.

    A worker blocked in a request to a frozen node is alive: its heartbeat says so, and
    names the request in flight and how long it has been open, which is how rank 0 tells a
    node that stopped answering from a rank that died.  The thread makes no MPI calls.
    """

    def __init__(
        self,
        reporter: Reporter,
        connections: weakref.WeakSet[Connection],
        period: float,
    ) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.reporter, self.connections, self.period = reporter, connections, period
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.beat()
            self.stopped.wait(self.period)

    def beat(self) -> None:
        now = time.monotonic()
        in_flight = []
        for connection in list(self.connections):
            sent = connection.sent_at
            if sent is not None:
                in_flight.append({"node": connection.target.name, "seconds": round(now - sent, 3)})
        state = self.reporter.state
        self.reporter.send(
            {
                "rank": self.reporter.rank,
                "wall": time.time(),
                "phase": state.phase,
                "step": state.step,
                "open": in_flight,
            },
            KIND_HEARTBEAT,
        )

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5.0)


class Inbox:
    """Rank 0's word to the workers, read from the coordinator's channel."""

    def __init__(self, path: Path) -> None:
        self.reader = ChannelReader(path)
        self.received: dict[str, JsonObject] = {}

    def get(self, kind: str) -> JsonObject | None:
        """The latest message of ``kind`` rank 0 wrote, or None (yet)."""
        if kind not in self.received:
            for message in self.reader.read():
                self.received[str(message.get("kind"))] = message
        return self.received.get(kind)


@dataclass
class Worker:
    """One load-generating rank."""

    plan: BenchPlan
    index: int
    workers: int
    nodes: tuple[NodePlan, ...]
    credentials: Credentials | None
    state: RankState = field(default_factory=RankState)
    #: The client-side encryption codec (None: documents and queries go out unchanged).
    codec: ClientCodec | None = None
    #: Every connection opened, for the heartbeat's report of requests in flight.
    connections: weakref.WeakSet[Connection] = field(default_factory=weakref.WeakSet)
    #: The ingest's counts as it goes (None: no ingest began), for :meth:`ingest_summary`.
    tally: IngestTally | None = None

    def connection(self, node: NodePlan, timeout: float = 120.0) -> Connection:
        target = Target(node.name, node.http_address, self.credentials is not None)
        connection = Connection(target, self.credentials, timeout)
        self.connections.add(connection)
        return connection

    @property
    def ingest_node(self) -> NodePlan:
        return self.nodes[self.index % len(self.nodes)]

    def ingest(
        self, recorder: Recorder, reporter: Reporter, names: Sequence[str] | None = None
    ) -> JsonObject:
        """Ingest this rank's slice of each index's corpus, one index after another.

        ``names`` are the indices rank 0 decided to ingest (None: the main index only, as
        an older rank 0 said); the indices go in the plan's order (the track's bulk tasks).
        The result adds up the units, with the documents sent to each index in
        ``per_index``: :meth:`ingest_summary`, which an abort reads as far as it got.
        """
        wanted = [self.plan.index] if names is None else list(names)
        units = [i for i in self.plan.all_indices if i.name in wanted and i.has_corpus]
        self.tally = IngestTally(self.ingest_node.name)
        for unit in units:
            self._ingest_one(unit, recorder, reporter, self.tally.unit(unit.name))
        return self.tally.summary()

    def ingest_summary(self) -> JsonObject | None:
        """What the ingest did so far (None: it never began), marked when it did not end."""
        if self.tally is None:
            return None
        summary = self.tally.summary()
        if self.tally.units and not self.tally.ended:
            summary["complete"] = False
        return summary

    def _ingest_one(
        self, unit: PlannedIndex, recorder: Recorder, reporter: Reporter, counts: UnitTally
    ) -> None:
        """This rank's slice of one index's corpus, sent in bulk requests, counted into
        ``counts`` as it goes."""
        from esdash.bench.slices import plan_slices, read_slice
        from esdash.plugin.api import Corpus

        plan = self.plan
        corpus = Corpus(Path(unit.corpus_path), unit.corpus_documents, unit.corpus_has_actions)
        part = plan_slices(corpus, self.workers, cache_dir() / "offsets")[self.index]
        connection = self.connection(self.ingest_node)
        encode: Callable[[list[JsonObject]], list[bytes]] | None = None
        encode_raw: Callable[[list[bytes]], list[bytes | None]] | None = None
        encoding = counts.encoding
        counts.encodes = self.codec is not None
        if self.codec is not None:
            # Encryption runs here, between reading and sending: part of the ingest time.
            def encode(
                docs: list[JsonObject],
                lines: Callable[[list[JsonObject]], list[bytes]] = self.codec.encode_lines,
            ) -> list[bytes]:
                started = time.perf_counter()
                try:
                    return lines(docs)
                finally:
                    encoding[0] += time.perf_counter() - started

            raw_path = getattr(self.codec, "encode_raw_lines", None)
            if raw_path is not None:
                # A codec's fast path takes the raw lines (it parses them itself): its time
                # counts as encryption, parsing included.
                def encode_raw(
                    lines: list[bytes],
                    fast: Callable[[list[bytes]], list[bytes | None]] = raw_path,
                ) -> list[bytes | None]:
                    started = time.perf_counter()
                    try:
                        return fast(lines)
                    finally:
                        encoding[0] += time.perf_counter() - started

        batches: Iterator[Batch] = read_slice(
            corpus,
            part,
            plan.bulk_size,
            unit.name,
            encode=encode,
            encode_raw=encode_raw,
            op_type=unit.op_type,
        )
        if encode is not None:
            batches = _read_ahead(batches, reporter.tick)
        try:
            loadgen.ingest(
                connection, batches, recorder, reporter.tick, reporter.add_progress, counts.outcome
            )
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        connection.close()
        counts.ended = True

    def decoder(
        self, queries: Sequence[PlannedQuery]
    ) -> Callable[[loadgen.PreparedQuery, bytes], None] | None:
        """The per-response decode of a client-side codec, or None (not decoding)."""
        codec = self.codec
        if codec is None or not codec.decode_responses:
            return None
        # requests other than searches (index stats, say) answer in plaintext
        requests = {q.name: q.body for q in queries if q.path is None}

        def decode(query: loadgen.PreparedQuery, body: bytes) -> None:
            if query.name not in requests:
                return
            try:
                codec.decode_response(json.loads(body), requests[query.name])
            except Exception as exc:
                raise loadgen.DecodeFailed(f"{type(exc).__name__}: {exc}") from exc

        return decode

    def global_warmup(
        self, inbox: Inbox, recorder: Recorder, reporter: Reporter, schedule: WarmupSchedule
    ) -> float:
        """Warm-up rounds against this worker's own node until rank 0 ends them.

        Returns when the query steps start.  Without word from rank 0 the rounds stop two
        rounds past the bound, so a lost rank 0 cannot keep the workers here.
        """
        node = self.ingest_node
        runnable = {q.name: q for step in self.plan.steps for q in step.runnable}
        prepared = [loadgen.PreparedQuery.planned(runnable[name]) for name in schedule.queries]
        decode = self.decoder(tuple(runnable.values()))
        connection = self.connection(node, timeout=max(30.0, 2 * schedule.slot))
        decision: JsonObject | None = None

        def record(query: loadgen.PreparedQuery, seconds: float, body: bytes) -> None:
            recorder.record(
                query.name, node.name, seconds, seconds, loadgen.returned_documents(body), len(body)
            )

        def wait_until(moment: float) -> None:
            _sleep_until(moment, self.state, reporter.tick)

        self.state.phase, self.state.step = "warmup", None
        round_ = 0
        try:
            while True:
                counts = run_round(
                    connection,
                    prepared,
                    schedule,
                    round_,
                    record,
                    reporter.tick,
                    wait_until,
                    decode,
                )
                reporter.send(
                    {"rank": self.index + 1, "round": round_, "counts": counts}, KIND_WARMUP_ROUND
                )
                if decision is None:
                    decision = inbox.get(KIND_WARMUP_END)
                if decision is not None and decision["last_round"] <= round_:
                    break
                if round_ >= schedule.max_rounds + 1:
                    decision = {"steps_start": schedule.steps_start(round_)}
                    break
                round_ += 1
        finally:
            connection.close()
        reporter.flush(partial=True)
        self.state.phase = "between"
        return float(decision["steps_start"])

    def query_steps(
        self, recorder: Recorder, reporter: Reporter, start: float, inbox: Inbox
    ) -> list[JsonObject]:
        """Run every step on the shared schedule; return what happened per step.

        The schedule is fixed in advance except after a counted step: that one ends when
        every client of every rank is done, and rank 0 says when the next step starts
        (:meth:`counted_end`).
        """
        outcomes: list[JsonObject] = []
        moment = start
        for k, step in enumerate(self.plan.steps):
            if not step.runnable:
                outcomes.append({"index": k, "step": step.name, "status": "unsupported"})
                continue
            # the pause before the step's warm-up sends nothing (see PlannedStep.pause)
            outcome = self.query_step(k, step, moment + step.pause, recorder, reporter, inbox)
            outcomes.append(outcome)
            moment += step.pause + step.warmup + step.duration
            next_start = outcome.pop("next_start", None)
            if next_start is not None:
                moment = float(next_start)
        return outcomes

    def query_step(
        self,
        k: int,
        step: PlannedStep,
        moment: float,
        recorder: Recorder,
        reporter: Reporter,
        inbox: Inbox | None = None,
    ) -> JsonObject:
        """Step ``k`` from ``moment`` (wall clock): this rank's clients warm up and measure.

        A counted step's clients stop when they have sent their iterations (or at the
        step's time limit); the rank then tells rank 0 and waits for its word that every
        rank is done, which carries the next step's start (``next_start`` of the outcome).
        """
        warm_end = moment + step.warmup
        end = warm_end + step.duration
        outcome: JsonObject = {"index": k, "step": step.name, "round": step.round}
        clients = self.step_clients(step, k, step.runnable)
        outcome["clients"] = len(clients)
        if clients:
            outcome["node"] = clients[0].node.name
            outcome["order"] = [q.name for q in clients[0].order]
        if len(clients) > 1:
            outcome["nodes"] = [c.node.name for c in clients]

        total = step.clients or self.workers
        starts: dict[str, float] = {}
        if step.ramp_up:
            outcome["client_starts"] = starts

        def warm(c: StepClient, tick: Tick) -> int:
            # Rally's ramp-up: client i of n starts ramp_up * i / n into the warm-up
            _sleep_until(moment + step.ramp_up * c.number / total, self.state, tick)
            if step.ramp_up:  # when each client started, seconds into the step
                starts[str(c.number)] = round(time.time() - moment, 3)
            return loadgen.warm_up(
                c.connection, c.order, warm_end, recorder, tick, c.decode, step.warmup_iterations
            )

        rate = step.target_throughput / total if step.target_throughput else None

        def send(c: StepClient, tick: Tick) -> int:
            return loadgen.measure(
                c.connection,
                c.order,
                end,
                recorder,
                tick,
                rate,
                step.think_time,
                c.decode,
                step.iterations,
            )

        def wait_for_rank0() -> None:
            # a counted step ends when every rank's clients are done: rank 0 says when
            if inbox is not None:
                outcome["next_start"] = self.counted_end(k, end, inbox, reporter).get("next")

        def end_measurement() -> None:
            if indexing.clients:
                outcome["indexed"] = indexing.finish()
            outcome["measure_end"] = time.time()
            reporter.flush(partial=True)
            # idle time until the next step belongs to no step: it must not stretch this
            # step's measured seconds (the throughput's denominator)
            self.state.phase = "between"

        # a counted warm-up sends its iterations; a timed one lasts its seconds
        counted_warmup = step.warmup_iterations
        warms = step.warmup > 0 if counted_warmup is None else counted_warmup > 0
        indexing = self.step_indexing(step, end, recorder)
        try:
            _sleep_until(moment, self.state, reporter.tick)
            self.state.phase, self.state.step = "warmup", k
            indexing.start()  # bulk tasks index from the warm-up's start to the end
            try:
                if warms and clients:
                    outcome["warmup_requests"] = self.each_client(clients, reporter, warm)
                elif indexing.clients and step.warmup_iterations is None:
                    _sleep_until(warm_end, self.state, reporter.tick)  # documents not measured
            except loadgen.WarmupFailed as exc:
                outcome.update(status="warmup_failed", error=str(exc))
                reporter.flush(partial=True)
                if step.counted:
                    indexing.finish(check=False)
                    self.state.phase = "between"
                    wait_for_rank0()
                else:
                    _sleep_until(end, self.state, reporter.tick)
                return outcome
            reporter.flush(partial=True)
            self.state.phase = "measure"
            outcome["measure_start"] = time.time()
            outcome["requests"] = self.each_client(clients, reporter, send)
            if step.counted:
                outcome["iterations"] = {
                    "planned": len(clients) * (step.iterations or 0),
                    "sent": outcome["requests"],
                }
            if step.counted and clients:  # done: this rank's measurement (and indexing) ends
                end_measurement()
                wait_for_rank0()
            elif step.counted:  # a rank that only indexes goes on until every rank is done
                wait_for_rank0()
                end_measurement()
            else:
                if not clients:  # a rank with no client in this step waits it out
                    _sleep_until(end, self.state, reporter.tick)
                end_measurement()
            outcome["status"] = "ok"
            return outcome
        finally:
            indexing.finish(check=False)
            self.close_clients(clients)

    def counted_end(self, k: int, limit: float, inbox: Inbox, reporter: Reporter) -> JsonObject:
        """Tell rank 0 this rank is done with counted step ``k``; wait for its word that
        every rank is (it holds ``next``, the next step's start), or for the step's time
        ``limit`` (then {}: the next step starts at the limit, as rank 0 then decides)."""
        reporter.send({"rank": self.index + 1, "step": k}, KIND_STEP_DONE)
        kind = step_end_kind(k)
        while (word := inbox.get(kind)) is None and time.time() < limit:
            if self.state.aborted:
                raise Aborted(self.state.aborted)
            reporter.tick()
            time.sleep(READ_EVERY)
        return word or {}

    def step_indexing(self, step: PlannedStep, end: float, recorder: Recorder) -> IndexingRun:
        """This rank's clients of the step's indexing loads, each with its part of the
        load's corpus (split over all of the load's clients) and a node of its own."""
        from esdash.bench.slices import plan_slices
        from esdash.plugin.api import Corpus

        clients = []
        for load in step.indexing:
            corpus = Corpus(Path(load.corpus_path), load.corpus_documents, load.corpus_has_actions)
            parts = plan_slices(corpus, load.clients, cache_dir() / "offsets")
            for number in client_numbers(load.clients, self.workers, self.index):
                node = self.nodes[number % len(self.nodes)]
                connection = self.connection(node, timeout=max(30.0, step.duration))
                clients.append(IndexingClient(load, number, connection, parts[number]))

        def watch() -> None:
            if self.state.aborted:
                raise Aborted(self.state.aborted)

        return IndexingRun(clients, end, recorder, watch)

    def step_clients(
        self, step: PlannedStep, k: int, runnable: tuple[PlannedQuery, ...]
    ) -> list[StepClient]:
        """This rank's clients of step ``k``, each with its node, connection and query order.

        Clients are spread evenly over the nodes: client ``i`` (numbered over all ranks)
        targets node ``(i + r) mod nodes``, where ``r`` is drawn from the seed for step ``k``
        alone, so every rank draws the same one.  A node choice drawn per client put both
        clients of a 2-rank, 2-node run on one coordinating node in half the steps, and
        which steps those were depended on the step's position: a per-position effect the
        step order then moved (measured with ``bench/order_bias.py``).  The query order is
        each client's own permutation, from its own seed.
        """
        prepared = [loadgen.PreparedQuery.planned(q) for q in runnable]
        decode = self.decoder(runnable)
        clients = []
        numbers = (
            client_numbers(step.clients, self.workers, self.index)
            if step.clients is not None
            else range(self.index, self.index + 1)
        )
        rotation = random.Random(self.plan.seed * 1_000_003 + k).randrange(len(self.nodes))
        for c, number in enumerate(numbers):
            seed = self.plan.seed * 1_000_003 + self.index * 7_919 + k + c * 104_729
            rng = random.Random(seed)
            node = self.nodes[(number + rotation) % len(self.nodes)]
            connection = self.connection(node, timeout=max(30.0, step.duration))
            order = loadgen.query_order(prepared, rng)
            clients.append(StepClient(node, connection, order, decode, number))
        return clients

    def each_client(
        self,
        clients: Sequence[StepClient],
        reporter: Reporter,
        send: Callable[[StepClient, Tick], int],
    ) -> int:
        """Run ``send`` for every client at once; the number of requests they sent together.

        The first client runs in this thread and ticks the reporter (which drains the
        recorder on interval boundaries); the others run in threads of their own and only
        watch for an abort.  The first failure of any client is raised once all have ended.
        """
        if not clients:
            return 0
        if len(clients) == 1:
            return send(clients[0], reporter.tick)
        counts = [0] * len(clients)
        failures: list[BaseException] = []

        def watch() -> None:
            if self.state.aborted:
                raise Aborted(self.state.aborted)

        def other(n: int) -> None:
            try:
                counts[n] = send(clients[n], watch)
            except BaseException as exc:  # handed to the first client's thread below
                failures.append(exc)

        threads = [
            threading.Thread(target=other, args=(n,), name=f"client-{n}", daemon=True)
            for n in range(1, len(clients))
        ]
        for thread in threads:
            thread.start()
        try:
            counts[0] = send(clients[0], reporter.tick)
        finally:
            for thread in threads:
                thread.join()
        if failures:
            raise failures[0]
        return sum(counts)

    @staticmethod
    def close_clients(clients: Sequence[StepClient]) -> None:
        for client in clients:
            client.connection.close()


@dataclass
class UnitTally:
    """One index's ingest on this rank: its live counts and encryption time."""

    name: str
    outcome: loadgen.IngestOutcome = field(default_factory=loadgen.IngestOutcome)
    #: Seconds of client-side encryption (a list: the encoding closures add to it).
    encoding: list[float] = field(default_factory=lambda: [0.0])
    encodes: bool = False
    ended: bool = False


@dataclass
class IngestTally:
    """This rank's ingest as it goes, one :class:`UnitTally` per index.

    The final report's ``ingest`` comes from here, so a rank whose ingest an abort cut
    short still reports the documents it sent and had rejected, and its CPU time.
    """

    node: str
    began: float = field(default_factory=time.time)
    cpu: float = field(default_factory=time.process_time)
    units: list[UnitTally] = field(default_factory=list)

    def unit(self, name: str) -> UnitTally:
        counts = UnitTally(name)
        self.units.append(counts)
        return counts

    @property
    def ended(self) -> bool:
        return all(u.ended for u in self.units)

    def summary(self) -> JsonObject:
        """The counts summed over the indices, documents sent per index, seconds, CPU."""
        total: JsonObject = {
            "node": self.node,
            "docs_sent": sum(u.outcome.docs_sent for u in self.units),
            "docs_indexed": sum(u.outcome.docs_indexed for u in self.units),
            "rejected": sum(u.outcome.rejected for u in self.units),
            "per_index": {},
        }
        for u in self.units:
            total["per_index"][u.name] = total["per_index"].get(u.name, 0) + u.outcome.docs_sent
        if any(u.encodes for u in self.units):
            total["encode_seconds"] = sum(u.encoding[0] for u in self.units)
        total["seconds"] = time.time() - self.began
        # this rank's CPU time (all threads): the client's cost, independent of load
        total["cpu_seconds"] = time.process_time() - self.cpu
        return total


@dataclass(frozen=True)
class StepClient:
    """One client of a query step in this rank: its node, connection and query order."""

    node: NodePlan
    connection: Connection
    order: list[loadgen.PreparedQuery]
    decode: Callable[[loadgen.PreparedQuery, bytes], object] | None
    #: The client's number over all ranks (0-based), for the step's ramp-up.
    number: int = 0


def rank_share(clients: int | None, workers: int, index: int) -> int:
    """How many of a step's ``clients`` bench rank ``index`` (0-based) runs.

    ``None`` is esdash's own model, one client per rank.  Otherwise the clients are spread
    as evenly as possible, the first ranks taking one more: 5 clients over 2 ranks are 3 and
    2, and 1 client over 3 ranks leaves two ranks idle for the step.
    """
    if clients is None:
        return 1
    share, extra = divmod(clients, workers)
    return share + (1 if index < extra else 0)


def _read_ahead(
    batches: Iterable[Batch], tick: Tick | None = None, depth: int = 2
) -> Iterator[Batch]:
    """Yield ``batches``, produced up to ``depth`` ahead by a background thread.

    With client-side encryption the next bulk bodies are encrypted while the cluster indexes
    the current one, as a real client pipeline would: encryption stays inside the ingest
    time, but is not serialised with the cluster's work (on a saturated machine it still
    competes for the CPU).  The thread makes no MPI calls.  Errors surface here, in order.
    While it waits for a batch (slow encryption: pyope), ``tick`` keeps the rank reporting,
    so rank 0 does not take it for lost.
    """
    import queue
    import threading

    #: ("batch", a batch), ("end", None) or ("error", the exception)
    ready: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for batch in batches:
                if not put(("batch", batch)):
                    return
            put(("end", None))
        except BaseException as exc:  # re-raised in the consuming thread
            put(("error", exc))

    thread = threading.Thread(target=produce, name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            try:
                kind, item = ready.get(timeout=0.5)
            except queue.Empty:
                if tick is not None:
                    tick()
                continue
            if kind == "batch":
                yield item
            elif kind == "end":
                return
            else:
                raise item
    finally:
        stop.set()
        thread.join(timeout=5.0)


def _wait_for_start(inbox: Inbox, state: RankState, reporter: Reporter) -> JsonObject:
    """Rank 0's word after ingest: ``{"steps_start": t}`` or ``{"warmup": schedule}``."""
    deadline = time.time() + SYNC_TIMEOUT
    while time.time() < deadline:
        message = inbox.get(KIND_START)
        if message is not None:
            return message
        reporter.tick()
        time.sleep(0.05)
    raise RuntimeError("rank 0 never released the query steps (lost?)")


def run_worker(
    run: RunDir,
    rank: int,
    size: int,
    plan: BenchPlan,
    nodes: tuple[NodePlan, ...],
    credentials: Credentials | None,
    start: JsonObject,
    codec: ClientCodec | None = None,
    codec_error: str | None = None,
) -> int:
    from esdash.bench.recorder import Recorder, SharedRecorder

    worker = Worker(plan, rank - 1, size - 1, nodes, credentials, codec=codec)
    _watch_signals(worker.state)
    _watch_owner(run, worker.state)
    schedule = Schedule(start["t0"], plan.interval)
    # several clients in one rank count into one recorder from their own threads
    several = any(rank_share(s.clients, size - 1, rank - 1) > 1 or s.indexing for s in plan.steps)
    recorder = SharedRecorder(rank) if several else Recorder(rank)
    channel = ChannelWriter(run.rank_channel(rank))
    reporter = Reporter(channel, rank, recorder, schedule, worker.state)
    inbox = Inbox(run.coordinator_channel)
    heartbeat = Heartbeat(reporter, worker.connections, min(1.0, max(0.1, plan.interval / 2)))
    heartbeat.start()
    final: JsonObject = {"rank": rank, "status": "ok"}
    try:
        if codec_error:
            raise RuntimeError(f"client-side encryption: {codec_error}")
        _sleep_until(schedule.t0, worker.state)
        recorder.drain()  # the wait for T0 is not part of any interval
        if start["index"]["ingest"]:
            worker.state.phase = "ingest"
            final["ingest"] = worker.ingest(recorder, reporter, start["index"].get("indices"))
            reporter.flush(partial=True)
        worker.state.phase = "sync"
        reporter.send({"rank": rank}, KIND_INGEST_DONE)
        word = _wait_for_start(inbox, worker.state, reporter)
        if "warmup" in word:
            warmup = WarmupSchedule.from_message(word["warmup"])
            query_start = worker.global_warmup(inbox, recorder, reporter, warmup)
        else:
            query_start = float(word["steps_start"])
        final["steps"] = worker.query_steps(recorder, reporter, query_start, inbox)
    except Aborted as exc:
        final.update(status="aborted", reason=str(exc))
    except Exception as exc:
        final.update(
            status="failed",
            reason=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc()[-2000:],
        )
    if "ingest" not in final and (summary := worker.ingest_summary()) is not None:
        final["ingest"] = summary  # cut short: what it sent and had rejected still counts
    # What an abort or a failure cut short is flushed under the phase it was measured in:
    # labelled "done", rank 0's results counted it nowhere (an aborted ingest's documents
    # were in the stream but not in results.json).
    reporter.flush(partial=True)
    worker.state.phase = "done"
    heartbeat.stop()
    reporter.send(final, KIND_FINAL)
    return 0 if final["status"] == "ok" else 1


# ----------------------------------------------------------------------- coordinator


class Coordinator:
    """Rank 0: reads the workers' channels, writes one stream record per interval."""

    def __init__(
        self,
        run: RunDir,
        workers: int,
        schedule: Schedule,
        sink: StreamSink,
        watch: NodeWatch | None = None,
    ) -> None:
        self.workers, self.schedule, self.sink, self.watch = workers, schedule, sink, watch
        self.readers = {r: ChannelReader(run.rank_channel(r)) for r in range(1, workers + 1)}
        self.reported: dict[int, set[int]] = {}
        self.buckets: dict[int, list[JsonObject]] = {}
        self.late: list[JsonObject] = []
        self.written_through = max(-1, schedule.seq(time.time()) - 1)  # nothing before T0
        self.finals: dict[int, JsonObject] = {}
        self.ingest_done: set[int] = set()
        #: Rank 0's clock when each worker's channel last grew (clocks of other hosts are
        #: never compared with this one).
        self.heard: dict[int, float] = {r: time.time() for r in range(1, workers + 1)}
        self.last_beat: dict[int, float] = dict(self.heard)
        self.intervals: dict[int, int] = {r: 0 for r in range(1, workers + 1)}
        #: Workers whose parent reported how they ended without a final report.
        self.exits: dict[int, str] = {}
        #: Ranks silent now (since when), and silences that ended: (rank, from, to).
        self.silent_since: dict[int, float] = {}
        self.silences: list[tuple[int, float, float]] = []
        self.errors: list[str] = []
        self.conductor: Conductor | None = None
        self.next_watch = 0.0

    @property
    def silence(self) -> float:
        return max(SILENT_FLOOR, SILENT_INTERVALS * self.schedule.interval)

    @property
    def lost(self) -> set[int]:
        now = time.time()
        return {
            r
            for r, seen in self.heard.items()
            if r not in self.finals and now - seen > self.silence
        }

    def receive(self) -> bool:
        """Take every record the workers appended; True if there were any."""
        busy = False
        for rank, reader in self.readers.items():
            records = reader.read()
            if not records:
                continue
            busy = True
            if rank not in self.exits:
                self.heard[rank] = self.last_beat[rank] = time.time()
            for message in records:
                self._take(rank, message)
        return busy

    def _take(self, rank: int, message: JsonObject) -> None:
        kind = message.get("kind")
        if kind == KIND_INTERVAL:
            message["rank"] = rank
            message["data"] = msgspec.convert(message["data"], RankPayload)
            self.intervals[rank] += 1
            self._add(message)
        elif kind == KIND_HEARTBEAT:
            if self.watch is not None:
                self.watch.heartbeat(rank, message.get("open") or [])
        elif kind == KIND_FINAL:
            self.finals[rank] = message
            if self.watch is not None:
                self.watch.forget_rank(rank)
        elif kind == KIND_EXIT:
            # the rank's parent process: its worker ended without a final report
            self.exits[rank] = str(message.get("reason") or "ended")
            self.heard[rank] = float("-inf")  # lost now, not after the silence
        elif kind == KIND_INGEST_DONE:
            self.ingest_done.add(rank)
        elif kind == KIND_WARMUP_ROUND and self.conductor is not None:
            self.conductor.add_warmup_round(message)
        elif kind == KIND_STEP_DONE and self.conductor is not None:
            self.conductor.add_step_done(message)

    def _add(self, message: JsonObject) -> None:
        self.sink.accumulate(message)
        if self.watch is not None:
            self.watch.payload(message["decoded"])
        seq = message["seq"]
        if seq <= self.written_through:
            self.late.append(message)
            return
        self.buckets.setdefault(seq, []).append(message)
        if not message["partial"]:
            for covered in range(message["from_seq"], seq + 1):
                self.reported.setdefault(covered, set()).add(message["rank"])

    def emit_due(self, now: float) -> None:
        """Write every interval that is complete, or whose grace period has passed."""
        while True:
            seq = self.written_through + 1
            ends = self.schedule.boundary(seq)
            if now < ends:
                return
            expected = set(range(1, self.workers + 1)) - set(self.finals) - self.lost
            complete = expected <= self.reported.get(seq, set())
            if not complete and now < ends + GRACE_INTERVALS * self.schedule.interval:
                return
            messages = self.buckets.pop(seq, []) + self.late
            self.late = []
            reporting = self.reported.pop(seq, set())
            missing = sorted(expected - reporting)
            self.sink.interval(seq, messages, missing)
            self.written_through = seq
            if now == float("inf") and not self.buckets:
                return

    def watch_due(self, now: float) -> None:
        """Twice per interval, whatever the intervals' records wait for: :meth:`_watch`."""
        if now >= self.next_watch:
            self.next_watch = now + self.schedule.interval / 2
            self._watch()

    def _watch(self) -> None:
        """Ranks gone silent or back, nodes lost or back."""
        lost = self.lost
        for rank in sorted(lost - set(self.silent_since)):
            self.silent_since[rank] = self.last_beat.get(rank, self.heard[rank])
            why = self.exits.get(rank) or (
                f"no heartbeat for {time.time() - self.heard[rank]:.1f} s"
            )
            self.sink.event(
                "rank_lost", f"rank {rank}: {why}", level="error", data={"rank": rank, "why": why}
            )
            if self.watch is not None:
                self.watch.forget_rank(rank)
        for rank in sorted(set(self.silent_since) - lost):
            since = self.silent_since.pop(rank)
            self.silences.append((rank, since, self.heard[rank]))
            self.sink.event(
                "rank_back",
                f"rank {rank}: heartbeat again after {self.heard[rank] - since:.1f} s",
                data={"rank": rank},
            )
        if self.watch is None:
            return
        for event in self.watch.poll(time.time()):
            self.sink.event(
                f"node_{event.kind}",
                f"node {event.node} {event.kind}: {event.cause}",
                level="error" if event.kind == "lost" else "info",
                step=self.sink.step if self.sink.phase == "measure" else None,
                data={"node": event.node, "cause": event.cause, "t": event.t},
            )

    def all_silences(self) -> list[tuple[int, float, float]]:
        """(rank, silent from, heard again) on rank 0's clock; still silent: until now."""
        now = time.time()
        return self.silences + [(r, since, now) for r, since in self.silent_since.items()]

    def serve(self, state: RankState, conductor: Conductor) -> None:
        """The main loop: receive, emit, advance the conductor, until all finals are in."""
        self.conductor = conductor
        aborted_at: float | None = None
        while True:
            busy = self.receive()
            now = time.time()
            self.emit_due(now)
            self.watch_due(now)
            lost = self.lost
            done_or_lost = self.ingest_done | set(self.finals) | lost
            if conductor.phase == "ingest" and len(done_or_lost) >= self.workers:
                conductor.ingest_finished(len(self.ingest_done))
            expected = set(range(1, self.workers + 1)) - set(self.finals) - lost
            conductor.poll(now, expected)
            if len(set(self.finals) | lost) >= self.workers:
                break
            end = conductor.schedule_end
            deadline = None if end is None else end + max(60.0, 10 * self.schedule.interval)
            if state.aborted:
                # the workers got the same signal: a moment for their final reports
                aborted_at = aborted_at or now
                deadline = aborted_at + ABORT_WAIT
            if deadline is not None and now > deadline:
                break
            if not busy:
                time.sleep(READ_EVERY)
        self.receive()
        self.emit_due(float("inf"))


def _prepare_index(plan: BenchPlan, control: ControlClient) -> JsonObject:
    """Create the index, keep one whose ``_meta.esdash`` fingerprint is the planned one, or
    re-create or refuse it (``--reuse-index``): :mod:`esdash.bench.index_reuse` decides.

    Raises :class:`esdash.bench.index_reuse.IndexRefused` (an ``EsdashError``) to refuse.
    """
    from esdash.bench.index_reuse import prepare_index

    return prepare_index(plan, control)


def run_coordinator(
    run: RunDir,
    size: int,
    plan: BenchPlan,
    control: ControlClient | None,
    start: JsonObject,
    everyone: list[JsonObject],
    credentials: Credentials | None = None,
) -> int:
    from esdash.bench.sink import StreamSink

    state = RankState()
    _watch_signals(state)
    owner = _watch_owner(run, state)
    schedule = Schedule(start["t0"], plan.interval)
    topology = run.read_topology()
    sink = StreamSink(run, plan, size - 1, topology)
    sink.start(start, everyone)
    info = run.read_info()
    watch = NodeWatch(
        RunDir(Path(info.cluster_run or run.path)),
        topology.nodes,
        plan.interval,
        start["t0"],
        ping=http_ping(credentials),
    )
    coordinator = Coordinator(run, size - 1, schedule, sink, watch)
    ingested = bool(start["index"] and start["index"]["ingest"])
    post = ChannelWriter(run.coordinator_channel)
    conductor = Conductor(
        post.write, size - 1, plan, control, sink, ingested, jit_source=_jit_readings(watch)
    )
    conductor.track_results = from_start(start)
    for result in conductor.track_results:
        sink.event("track_request", line(result), "info" if result.status == "ok" else "error")
    try:
        if start["error"] is None:
            try:
                if ingested:
                    sink.phase_event("ingest")
                coordinator.serve(state, conductor)
                conductor.poll(time.time(), set())  # the last step's closing cache reading
            except Exception:
                coordinator.errors.append(traceback.format_exc()[-2000:])
        else:
            coordinator.errors.append(start["error"])
        state.phase = "results"  # everything is measured: the owner's death aborts nothing
        sink.phase_event("results", aborted=lambda: bool(state.aborted))
        if state.aborted:
            coordinator.errors.append(state.aborted)
        coordinator.errors += conductor.errors
        sink.finish(
            coordinator.finals,
            coordinator.errors,
            aborted=state.aborted,
            settle=conductor.settled,
            track_requests=conductor.track_results,
            global_warmup=conductor.global_warmup(),
            caches=conductor.caches(sink.step_requests),
            cluster=conductor.cluster_facts(),
            watch=watch,
            lost={
                rank: (coordinator.last_beat[rank], coordinator.intervals[rank])
                for rank in coordinator.lost
            },
            exits=coordinator.exits,
            intervals=coordinator.intervals,
            windows=[(w.index, w.start, w.end) for w in conductor.windows],
            silences=coordinator.all_silences(),
        )
    finally:
        conductor.close()
        watch.close()
        _record_orphaned(run, owner)
    return 0


def _jit_readings(watch: NodeWatch) -> Callable[[], dict[str, tuple[float, float]]]:
    """The nodes' JIT readings from their status files (their ranks refresh them), by node."""

    def read() -> dict[str, tuple[float, float]]:
        found = {}
        for status in watch.cluster_run.node_statuses().values():
            if status.name is not None and status.jvm is not None:
                found[status.name] = (status.jvm.time, status.jvm.compiler)
        return found

    return read


def _worker_codec(plan: BenchPlan) -> tuple[ClientCodec | None, str | None]:
    """This worker's client codec, built (keys derived) once, before the clock starts."""
    if not plan.client_codec:
        return None, None
    try:
        from esdash.plugin.manager import get_plugins

        mode = get_plugins().encryption(plan.encryption)
        return mode.codec_from_spec(plan.client_codec), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def run_bench_rank(run_path: Path) -> int:
    """One bench rank: the MPI start exchange in this process, the work in its child.

    See :mod:`esdash.bench.split` for why every rank is two processes.
    """
    run = RunDir.open(run_path)
    plan = run.read_bench_plan()
    nodes = run.read_topology().nodes
    # a benchmark against a running cluster reads that cluster's credentials
    info = run.read_info()
    cluster_run = RunDir(Path(info.cluster_run or run.path))

    def credentials() -> Credentials | None:
        if not cluster_run.credentials_file.exists():
            return None
        return pki.read_credentials(cluster_run.path)

    def exchange(worker_pid: int) -> JsonObject:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        # Errors of the start exchange are raised in Python, not an abort of the whole job.
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        rank, size = comm.Get_rank(), comm.Get_size()
        me = {"rank": rank, "host": MPI.Get_processor_name(), "pid": worker_pid}
        if rank:
            me["target"] = nodes[(rank - 1) % len(nodes)].name
        everyone = comm.gather(me, root=0)
        start = None
        if rank == 0:
            run.ranks_dir.mkdir(parents=True, exist_ok=True)
            start = _start(plan, cluster_run, str(info.engine), nodes)
        # The last MPI operation: from here on the ranks talk through files only.
        start = comm.bcast(start, root=0)
        return {"rank": rank, "size": size, "start": start, "everyone": everyone}

    def role(handover: JsonObject) -> int:
        rank, size, start = handover["rank"], handover["size"], handover["start"]
        if rank == 0:
            control = None
            if start["error"] is None:
                control = control_client(cluster_run, str(info.engine), nodes[:1], timeout=300.0)
            try:
                bench_ranks = handover["everyone"][1:]
                return run_coordinator(run, size, plan, control, start, bench_ranks, credentials())
            finally:
                if control is not None:
                    control.close()
        if start["error"]:
            return 1
        codec, codec_error = _worker_codec(plan)
        return run_worker(run, rank, size, plan, nodes, credentials(), start, codec, codec_error)

    return run_split(run, exchange, role)


def _start(
    plan: BenchPlan, cluster_run: RunDir, engine: str, nodes: tuple[NodePlan, ...]
) -> JsonObject:
    """Rank 0's start decision: ``T0`` and the index (kept or created), or the error."""
    try:
        # merges and refreshes of a large index take minutes
        control = control_client(cluster_run, engine, nodes[:1], timeout=300.0)
        try:
            # the track's administrative requests before the ingest, in Rally's schedule
            # order: templates and pipelines before the indices are made, the others after
            setup = before_ingest([r for r in plan.track_requests if is_setup(r)], control)
            if setup["error"] is not None:
                return {"t0": time.time() + 0.5, "index": None, **setup}
            index = _prepare_index(plan, control)
            sent = before_ingest([r for r in plan.track_requests if not is_setup(r)], control)
            sent["requests"] = setup["requests"] + sent["requests"]
            return {"t0": time.time() + 0.5, "index": index, **sent}
        finally:
            control.close()
    except Exception as exc:
        return {"t0": time.time(), "index": None, "error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m esdash.bench.rank RUN_DIR", file=sys.stderr)
        return 2
    with private_files():  # everything this rank writes is its owner's alone
        return run_bench_rank(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
