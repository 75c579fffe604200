"""Rank 0 of a benchmark: it decides the start, merges the workers' reports, writes results.

Rank 0 sends no load: merging must never stall on a slow request of its own.  Before the
start it sends the track's administrative requests and prepares the index
(:func:`decide_start`).  Then :class:`Coordinator` reads every worker's channel
(:mod:`esdash.bench.reporting`), writes one stream record per interval, tells a lost rank
from a silent node and drives the :class:`esdash.bench.conductor.Conductor` (settling,
warm-up, the steps' releases); :func:`run_coordinator` ends with ``results.json``.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from esdash.bench.channel import ChannelReader, ChannelWriter
from esdash.bench.conductor import Conductor
from esdash.bench.nodewatch import NodeWatch, http_ping
from esdash.bench.rank_state import RankState, Schedule, watch_owner, watch_signals
from esdash.bench.reporting import (
    KIND_FINAL,
    KIND_HEARTBEAT,
    KIND_INGEST_DONE,
    KIND_INTERVAL,
    KIND_STEP_DONE,
    KIND_WARMUP_ROUND,
    READ_EVERY,
)
from esdash.bench.split import KIND_EXIT
from esdash.bench.track_requests import before_ingest, from_start, is_setup, line
from esdash.cluster.control import control_client
from esdash.errors import EsdashError
from esdash.launch.owner import OwnerWatch
from esdash.plugin.control import ControlClient
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir
from esdash.rundir.records import BenchPlan, JsonObject, NodePlan, RankPayload

if TYPE_CHECKING:
    from esdash.bench.sink import StreamSink

#: How long past its end an interval waits for late workers before it is written.
GRACE_INTERVALS = 2.0
#: A worker whose last heartbeat is older than this many intervals (and at least
#: :data:`SILENT_FLOOR` seconds) is lost.
SILENT_INTERVALS = 3
SILENT_FLOOR = 3.0
#: After a signal, how long rank 0 waits for the workers' final reports (seconds).
ABORT_WAIT = 5.0


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


def decide_start(
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
    watch_signals(state)
    owner = watch_owner(run, state)
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
                else:
                    sink.skip_ingest()
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
