"""What every MPI rank of the benchmark step does; rank 0 also merges and writes the stream.

Started as ``python -m esdash.bench.rank RUN_DIR`` by ``mpiexec`` or ``srun``.

Timeline (wall clock, shared by all ranks through one broadcast):

1. rank 0 prepares the index (creates it, or keeps a reused one with the right document
   count) and broadcasts the start time ``T0``;
2. ingest: every rank sends its byte-range slice of the corpus to its node in bulk requests;
3. a non-blocking barrier with a deadline (a lost rank cannot stall the others), then rank 0
   refreshes the index and broadcasts when the query steps start;
4. query steps run on a fixed schedule from that moment: warm-up, then measurement;
5. every rank sends its final report; rank 0 writes ``results.json`` and the final record.

Every ``interval`` seconds each rank sends the recorder's interval payload to rank 0 with a
non-blocking send.  A thread on rank 0 merges what arrived and appends one record per
interval to ``stream.jsonl``; a rank whose payload is late is listed as missing in that
record (its data is kept and counted later), never waited for.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esdash.bench import loadgen
from esdash.bench.http import Connection, Target
from esdash.bench.plan import BenchPlan
from esdash.cluster import security
from esdash.cluster.rundir import RunDir, read_json
from esdash.paths import cache_dir

TAG_INTERVAL = 11
TAG_FINAL = 12
TAG_START = 13
#: How long past its end an interval waits for late ranks before it is written.
GRACE_INTERVALS = 2.0
#: How long rank 0 waits for the other ranks at synchronisation points and at the end.
SYNC_TIMEOUT = 600.0


@dataclass
class Schedule:
    """The shared clock: interval numbers and phase boundaries in wall-clock seconds."""

    t0: float
    interval: float

    def seq(self, now: float) -> int:
        return int((now - self.t0) // self.interval)

    def boundary(self, seq: int) -> float:
        return self.t0 + (seq + 1) * self.interval


@dataclass
class RankState:
    """What this rank is doing, attached to every payload it sends."""

    phase: str = "starting"
    step: int | None = None
    aborted: str = ""


class Aborted(Exception):
    """SIGTERM or SIGINT arrived (Ctrl-C, scancel, a Slurm time limit): wrap up now."""


class Reporter:
    """Sends interval payloads to rank 0: on interval boundaries and at phase changes."""

    def __init__(self, comm: Any, rank: int, recorder: Any, schedule: Schedule, state: RankState):
        self.comm, self.rank, self.recorder = comm, rank, recorder
        self.schedule, self.state = schedule, state
        self.sent_through = -1
        self.next_boundary = schedule.boundary(schedule.seq(time.time()))
        self.pending: list[Any] = []
        self.progress = 0

    def tick(self) -> None:
        """Called between requests: cheap unless an interval boundary has passed."""
        if self.state.aborted:
            raise Aborted(self.state.aborted)
        if time.time() >= self.next_boundary:
            self.flush(partial=False)

    def flush(self, partial: bool) -> None:
        now = time.time()
        seq = self.schedule.seq(now)
        closing = seq - 1 if not partial else seq
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
        self.pending.append(self.comm.isend(message, dest=0, tag=TAG_INTERVAL))
        self.pending = [r for r in self.pending if not r.test()[0]]

    def add_progress(self, docs: int) -> None:
        self.progress += docs


class Aggregator(threading.Thread):
    """Rank 0: receive payloads, write one stream record per interval, keep totals."""

    def __init__(self, comm: Any, ranks: int, schedule: Schedule, sink: Any) -> None:
        super().__init__(name="esdash-aggregator", daemon=True)
        self.comm, self.ranks, self.schedule, self.sink = comm, ranks, schedule, sink
        self.reported: dict[int, set[int]] = {}
        self.buckets: dict[int, list[dict]] = {}
        self.late: list[dict] = []
        self.written_through = -1
        self.finals: dict[int, dict] = {}
        self.stop_event = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        try:
            while not self.stop_event.is_set():
                busy = False
                while self.comm.iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
                    busy = True
                    message = self.comm.recv(source=status.Get_source(), tag=status.Get_tag())
                    if status.Get_tag() == TAG_FINAL:
                        self.finals[message["rank"]] = message
                    else:
                        self._add(message)
                self._emit_due(time.time())
                if not busy:
                    time.sleep(0.02)
            self._emit_due(float("inf"))
        except Exception:  # the run must end with a record of what went wrong
            self.errors.append(traceback.format_exc())

    def _add(self, message: dict) -> None:
        self.sink.accumulate(message)
        seq = message["seq"]
        if seq <= self.written_through:
            self.late.append(message)
            return
        self.buckets.setdefault(seq, []).append(message)
        if not message["partial"]:
            for covered in range(message["from_seq"], seq + 1):
                self.reported.setdefault(covered, set()).add(message["rank"])

    def _emit_due(self, now: float) -> None:
        while True:
            seq = self.written_through + 1
            ends = self.schedule.boundary(seq)
            if now < ends:
                return
            everyone = len(self.reported.get(seq, ())) >= self.ranks - len(self.finals)
            if not everyone and now < ends + GRACE_INTERVALS * self.schedule.interval:
                return
            messages = self.buckets.pop(seq, []) + self.late
            self.late = []
            reporting = self.reported.pop(seq, set())
            missing = sorted(
                r for r in range(self.ranks) if r not in reporting and r not in self.finals
            )
            self.sink.interval(seq, messages, missing)
            self.written_through = seq
            if now == float("inf") and not self.buckets:
                return


def _target(node: dict, secure: bool) -> Target:
    return Target(node["name"], f"{node['address']}:{node['http_port']}", secure)


@dataclass
class BenchRank:
    """The work of one rank, from the plan and the cluster's topology."""

    run: RunDir
    plan: BenchPlan
    rank: int
    size: int
    comm: Any
    nodes: list[dict] = field(default_factory=list)
    credentials: Any = None
    state: RankState = field(default_factory=RankState)

    def connection(self, node: dict, timeout: float = 120.0) -> Connection:
        return Connection(_target(node, self.credentials is not None), self.credentials, timeout)

    # ---------------------------------------------------------------- rank 0 admin
    def prepare_index(self) -> dict:
        """Create the index, or keep a reused one whose document count is complete."""
        admin = self.connection(self.nodes[0])
        index = self.plan.index
        status, body = admin.request("GET", f"/{index}/_count")
        if status == 200 and not self.plan.reingest and self.plan.corpus_documents:
            count = int(json.loads(body)["count"])
            if count == self.plan.corpus_documents:
                return {"ingest": False, "reason": f"index {index} reused with {count} documents"}
        if status == 200:
            admin.request("DELETE", f"/{index}")
        body_bytes = json.dumps(self.plan.index_body).encode()
        status, body = admin.request("PUT", f"/{index}", body_bytes)
        if status >= 300:
            raise RuntimeError(
                f"creating index {index} failed: HTTP {status}: "
                f"{loadgen.server_message(status, body)}"
            )
        return {"ingest": True, "reason": f"index {index} created"}

    def refresh(self) -> None:
        self.connection(self.nodes[0]).request("POST", f"/{self.plan.index}/_refresh")


def _wait(request: Any, deadline: float) -> bool:
    """Wait for a non-blocking MPI request until ``deadline`` (wall clock); True if done."""
    while time.time() < deadline:
        if request.Test():
            return True
        time.sleep(0.01)
    return False


def _sleep_until(moment: float, state: RankState) -> None:
    while not state.aborted:
        left = moment - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.1))
    raise Aborted(state.aborted)


def _ingest(bench: BenchRank, recorder: Any, reporter: Reporter) -> dict:
    from esdash.bench.corpus import plan_slices, read_slice
    from esdash.plugin_api import Corpus

    plan = bench.plan
    corpus = Corpus(Path(plan.corpus_path), plan.corpus_documents, plan.corpus_has_actions)
    slices = plan_slices(corpus, bench.size, cache_dir() / "offsets")
    node = bench.nodes[bench.rank % len(bench.nodes)]
    connection = bench.connection(node)
    outcome = loadgen.ingest(
        connection,
        read_slice(corpus, slices[bench.rank], plan.bulk_size, plan.index),
        recorder,
        reporter.tick,
        reporter.add_progress,
    )
    connection.close()
    return {
        "node": node["name"],
        "docs_sent": outcome.docs_sent,
        "docs_indexed": outcome.docs_indexed,
        "rejected": outcome.rejected,
    }


def _query_steps(bench: BenchRank, recorder: Any, reporter: Reporter, start: float) -> list[dict]:
    """Run every step on the shared schedule; return what happened per step."""
    plan, state = bench.plan, bench.state
    outcomes = []
    moment = start
    for k, step in enumerate(plan.steps):
        runnable = step.runnable
        if not runnable:
            outcomes.append({"step": step.name, "status": "unsupported"})
            continue
        warm_end = moment + step.warmup
        end = warm_end + step.duration
        rng = random.Random(plan.seed * 1_000_003 + bench.rank * 7_919 + k)
        node = rng.choice(bench.nodes)
        connection = bench.connection(node, timeout=max(30.0, step.duration))
        prepared = [loadgen.PreparedQuery.of(q.name, q.index, q.body) for q in runnable]
        order = loadgen.query_order(prepared, rng)
        outcome = {"step": step.name, "node": node["name"], "order": [q.name for q in order]}
        _sleep_until(moment, state)
        state.phase, state.step = "warmup", k
        try:
            if step.warmup > 0:
                outcome["warmup_requests"] = loadgen.warm_up(
                    connection, order, warm_end, recorder, reporter.tick
                )
        except loadgen.WarmupFailed as exc:
            outcome.update(status="warmup_failed", error=str(exc))
            outcomes.append(outcome)
            reporter.flush(partial=True)
            _sleep_until(end, state)
            moment = end
            continue
        reporter.flush(partial=True)
        state.phase = "measure"
        rate = step.target_throughput / bench.size if step.target_throughput else None
        outcome["requests"] = loadgen.measure(
            connection, order, end, recorder, reporter.tick, rate, step.think_time
        )
        reporter.flush(partial=True)
        connection.close()
        outcome["status"] = "ok"
        outcomes.append(outcome)
        moment = end
    return outcomes


def _announce_query_start(bench: BenchRank, comm: Any, rank: int, size: int) -> float:
    """Rank 0 refreshes the index and tells every rank when the query steps start.

    Point-to-point messages with a deadline rather than a broadcast: a lost rank must not
    keep the others from starting.
    """
    if rank == 0:
        bench.refresh()
        moment = time.time() + 1.0
        for other in range(1, size):
            comm.isend(moment, dest=other, tag=TAG_START)
        return moment
    request = comm.irecv(source=0, tag=TAG_START)
    deadline = time.time() + SYNC_TIMEOUT
    while time.time() < deadline:
        done, moment = request.test()
        if done:
            return moment
        if bench.state.aborted:
            raise Aborted(bench.state.aborted)
        time.sleep(0.01)
    raise RuntimeError("rank 0 never announced the query steps (lost?)")


def run_bench_rank(run_path: Path) -> int:
    from mpi4py import MPI

    from esdash.bench.recorder import Recorder
    from esdash.bench.sink import StreamSink

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    run = RunDir.open(run_path)
    plan = BenchPlan.read(run)
    topology = read_json(run.topology_file)
    credentials = security.read_credentials(run.path) if run.credentials_file.exists() else None
    state = RankState()

    def on_signal(signum: int, _frame: object) -> None:
        state.aborted = f"received {signal.Signals(signum).name}"

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    bench = BenchRank(run, plan, rank, size, comm, topology["nodes"], credentials, state)
    start = None
    if rank == 0:
        try:
            start = {"t0": time.time() + 0.5, "index": bench.prepare_index(), "error": None}
        except Exception as exc:
            start = {"t0": time.time(), "index": None, "error": f"{type(exc).__name__}: {exc}"}
    start = comm.bcast(start, root=0)
    me = {
        "rank": rank,
        "host": MPI.Get_processor_name(),
        "target": bench.nodes[rank % len(bench.nodes)]["name"],
    }
    everyone = comm.gather(me, root=0)
    schedule = Schedule(start["t0"], plan.interval)
    recorder = Recorder(rank)
    reporter = Reporter(comm, rank, recorder, schedule, state)
    sink = aggregator = None
    if rank == 0:
        sink = StreamSink(run, plan, size, topology)
        sink.start(start, everyone)
        aggregator = Aggregator(comm, size, schedule, sink)
        aggregator.start()
    final: dict[str, Any] = {"rank": rank, "host": MPI.Get_processor_name(), "status": "ok"}
    try:
        if start["error"]:
            raise RuntimeError(start["error"])
        _sleep_until(schedule.t0, state)
        recorder.drain()  # the wait for T0 is not part of any interval
        if start["index"]["ingest"]:
            state.phase = "ingest"
            began = time.time()
            final["ingest"] = _ingest(bench, recorder, reporter)
            final["ingest"]["seconds"] = time.time() - began
            reporter.flush(partial=True)
        state.phase = "sync"
        _wait(comm.Ibarrier(), time.time() + SYNC_TIMEOUT)
        query_start = _announce_query_start(bench, comm, rank, size)
        final["steps"] = _query_steps(bench, recorder, reporter, query_start)
    except Aborted as exc:
        final.update(status="aborted", reason=str(exc))
    except Exception as exc:
        final.update(
            status="failed",
            reason=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc()[-2000:],
        )
    state.phase = "done"
    reporter.flush(partial=True)
    for pending in reporter.pending:
        _wait(pending, time.time() + 30)
    _wait(comm.isend(final, dest=0, tag=TAG_FINAL), time.time() + 30)
    if rank == 0:
        deadline = time.time() + max(30.0, 5 * plan.interval)
        while len(aggregator.finals) < size and time.time() < deadline and not state.aborted:
            time.sleep(0.05)
        aggregator.stop_event.set()
        aggregator.join(timeout=60)
        sink.finish(aggregator.finals, aggregator.errors)
    return 0 if final["status"] == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m esdash.bench.rank RUN_DIR", file=sys.stderr)
        return 2
    return run_bench_rank(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
