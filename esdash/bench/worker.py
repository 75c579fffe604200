"""A load-generating bench rank (ranks 1..N): ingest, global warm-up, query steps.

A worker sends its slice of every corpus to its node (:meth:`Worker.ingest`), runs warm-up
rounds until rank 0 ends them (:meth:`Worker.global_warmup`), then the plan's query steps on
the shared schedule (:meth:`Worker.query_steps`), its clients spread over the nodes
(:class:`StepClient`).  With client-side encryption a read-ahead thread encrypts the next bulk
bodies while the cluster indexes the current one (:func:`_read_ahead`).  Everything it
measures goes to rank 0 through its channel (:mod:`esdash.bench.reporting`); after the start
it sends and receives no MPI message.
"""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esdash.bench import loadgen
from esdash.bench.channel import ChannelWriter
from esdash.bench.conductor import KIND_START, KIND_WARMUP_END, step_end_kind
from esdash.bench.rank_state import (
    Aborted,
    RankState,
    Schedule,
    Tick,
    sleep_until,
    watch_owner,
    watch_signals,
)
from esdash.bench.reporting import (
    KIND_FINAL,
    KIND_INGEST_DONE,
    KIND_STEP_DONE,
    KIND_WARMUP_ROUND,
    READ_EVERY,
    Heartbeat,
    Inbox,
    Reporter,
)
from esdash.bench.step_indexing import IndexingClient, IndexingRun, client_numbers
from esdash.bench.warmup import WarmupSchedule, run_round
from esdash.cluster.http import Connection, Target
from esdash.paths import cache_dir
from esdash.plugin.api import ClientCodec
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    BenchPlan,
    JsonObject,
    NodePlan,
    PlannedIndex,
    PlannedQuery,
    PlannedStep,
)

if TYPE_CHECKING:
    from esdash.bench.recorder import Recorder
    from esdash.bench.slices import Batch

#: How long workers wait for rank 0 to release the query steps.
SYNC_TIMEOUT = 3600.0


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
        from esdash.bench.slices import read_slice
        from esdash.plugin.corpus_slices import plan_slices
        from esdash.plugin.values import Corpus

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
            sleep_until(moment, self.state, reporter.tick)

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
        clients = self.step_clients(step, k, step.runnable)
        outcome = self.step_outcome(k, step, clients)
        warm = self.client_warm_up(step, moment, recorder, outcome)
        send = self.client_measurement(step, end, recorder)

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
            sleep_until(moment, self.state, reporter.tick)
            self.state.phase, self.state.step = "warmup", k
            indexing.start()  # bulk tasks index from the warm-up's start to the end
            try:
                if warms and clients:
                    outcome["warmup_requests"] = self.each_client(clients, reporter, warm)
                elif indexing.clients and step.warmup_iterations is None:
                    sleep_until(warm_end, self.state, reporter.tick)  # documents not measured
            except loadgen.WarmupFailed as exc:
                outcome.update(status="warmup_failed", error=str(exc))
                reporter.flush(partial=True)
                if step.counted:
                    indexing.finish(check=False)
                    self.state.phase = "between"
                    wait_for_rank0()
                else:
                    sleep_until(end, self.state, reporter.tick)
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
                    sleep_until(end, self.state, reporter.tick)
                end_measurement()
            outcome["status"] = "ok"
            return outcome
        finally:
            indexing.finish(check=False)
            self.close_clients(clients)

    @staticmethod
    def step_outcome(k: int, step: PlannedStep, clients: Sequence[StepClient]) -> JsonObject:
        """The start of step ``k``'s outcome: which step, and this rank's clients, nodes and
        the first client's query order."""
        outcome: JsonObject = {"index": k, "step": step.name, "round": step.round}
        outcome["clients"] = len(clients)
        if clients:
            outcome["node"] = clients[0].node.name
            outcome["order"] = [q.name for q in clients[0].order]
        if len(clients) > 1:
            outcome["nodes"] = [c.node.name for c in clients]
        return outcome

    def client_warm_up(
        self, step: PlannedStep, moment: float, recorder: Recorder, outcome: JsonObject
    ) -> Callable[[StepClient, Tick], int]:
        """What one client does in the warm-up of the step starting at ``moment``: it waits
        for its place in the ramp-up (noted in the outcome's ``client_starts``), then warms up
        until the warm-up's end or its iterations are sent."""
        warm_end = moment + step.warmup
        total = step.clients or self.workers
        starts: dict[str, float] = {}
        if step.ramp_up:
            outcome["client_starts"] = starts

        def warm(c: StepClient, tick: Tick) -> int:
            # Rally's ramp-up: client i of n starts ramp_up * i / n into the warm-up
            sleep_until(moment + step.ramp_up * c.number / total, self.state, tick)
            if step.ramp_up:  # when each client started, seconds into the step
                starts[str(c.number)] = round(time.time() - moment, 3)
            return loadgen.warm_up(
                c.connection, c.order, warm_end, recorder, tick, c.decode, step.warmup_iterations
            )

        return warm

    def client_measurement(
        self, step: PlannedStep, end: float, recorder: Recorder
    ) -> Callable[[StepClient, Tick], int]:
        """What one client does in the step's measurement: send until ``end`` or its
        iterations, at its share of the step's target throughput."""
        total = step.clients or self.workers
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

        return send

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
        from esdash.plugin.corpus_slices import plan_slices
        from esdash.plugin.values import Corpus

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
    watch_signals(worker.state)
    watch_owner(run, worker.state)
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
        sleep_until(schedule.t0, worker.state)
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


def worker_codec(plan: BenchPlan) -> tuple[ClientCodec | None, str | None]:
    """This worker's client codec, built (keys derived) once, before the clock starts."""
    if not plan.client_codec:
        return None, None
    try:
        from esdash.plugin.manager import get_plugins

        mode = get_plugins().encryption(plan.encryption)
        return mode.codec_from_spec(plan.client_codec), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
