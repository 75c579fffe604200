"""Rank 0's timeline between ingest and the steps: settle, global warm-up, cache snapshots.

The coordinator's loop (:class:`esdash.bench.coordinator.Coordinator`) must keep receiving
interval payloads and writing the stream while the cluster settles (a force-merge of a large
index takes minutes) and while the warm-up runs, so this conductor is polled from that loop
and never blocks it: control operations (settle, index statistics) run one at a time on a
single helper thread, and every message to the workers is written from the loop itself (to
the coordinator's channel, :mod:`esdash.bench.channel`).

Phases: ``ingest`` (until every worker is done or lost) -> ``settle`` -> ``warmup`` (only
with ``benchmark.warmup_max`` > 0) -> ``steps``.  Once the steps' start is known, the index's
cache counters and segment count are read at the start and end of each step's measurement,
so every step says how much of it a cache answered.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from esdash.bench import track_requests
from esdash.bench.facts import read_facts
from esdash.bench.settle import settle
from esdash.bench.warmup import DECISION_MARGIN, WarmupJudge, WarmupSchedule
from esdash.plugin.control import ControlClient, ControlError
from esdash.rundir.records import (
    BenchPlan,
    CacheCounts,
    ClusterFacts,
    GlobalWarmup,
    JsonObject,
    RequestResult,
    SettleResult,
)

if TYPE_CHECKING:
    from esdash.bench.sink import StreamSink

#: Kinds of rank 0's messages to the workers: when the steps start (or the warm-up's
#: schedule), and which warm-up round is the last.
KIND_START = "start"
KIND_WARMUP_END = "warmup_end"
#: Share of a step's requests answered by the request cache above which it is flagged.
REQUEST_CACHE_FLAG = 0.5
#: Query-cache hit ratio above which a step's filters are flagged as cached.
QUERY_CACHE_FLAG = 0.9
#: Pause between deciding and starting (messages must reach every worker first).
LEAD = 1.0
#: The same after a counted step: its workers are waiting for the word, reading every
#: 50 ms, so half a second reaches them all (a worker that has not heard by the step's
#: time limit goes on at that limit, as rank 0 then decides too).
STEP_LEAD = 0.5
#: Seconds between two readings of the nodes' JIT figures during the warm-up (their ranks
#: refresh them every 2 s).
JIT_READ_EVERY = 2.0


def step_end_kind(index: int) -> str:
    """The kind of rank 0's word that counted step ``index`` has ended."""
    return f"step_end:{index}"


@dataclass(frozen=True)
class StepWindow:
    """When step ``index`` of the plan measures (wall clock)."""

    index: int
    start: float
    end: float


def step_windows(plan: BenchPlan, steps_start: float, first: int = 0) -> list[StepWindow]:
    """The measurement windows of the runnable steps from step ``first`` on, as the
    workers' schedule runs them from ``steps_start``.

    A counted step's window starts with its warm-up (which ends when its clients have sent
    it, not at a known moment: its cache readings then cover the warm-up too) and ends at
    its time limit, until rank 0 learns that every client is done (:meth:`Conductor.poll`).
    """
    windows = []
    moment = steps_start
    for k, step in enumerate(plan.steps):
        if k < first or not step.runnable:
            continue
        started = moment + step.pause
        measured = started + step.warmup
        moment = measured + step.duration
        windows.append(StepWindow(k, started if step.warmup_iterations else measured, moment))
    return windows


def cache_counters(stats: JsonObject) -> JsonObject:
    """Cache hits and misses and the segment count of all shard copies of an index."""
    total = (stats.get("_all") or {}).get("total") or {}
    request = total.get("request_cache") or {}
    query = total.get("query_cache") or {}
    return {
        "request_cache_hits": request.get("hit_count"),
        "request_cache_misses": request.get("miss_count"),
        "query_cache_hits": query.get("hit_count"),
        "query_cache_misses": query.get("miss_count"),
        "segments": (total.get("segments") or {}).get("count"),
    }


def cache_delta(before: JsonObject, after: JsonObject, requests: int) -> CacheCounts:
    """The counters' change over a step, and a flag when a cache served most of it."""

    def delta(key: str) -> int | None:
        a, b = after.get(key), before.get(key)
        return None if a is None or b is None else max(0, int(a) - int(b))

    counts = CacheCounts(
        request_cache_hits=delta("request_cache_hits"),
        request_cache_misses=delta("request_cache_misses"),
        query_cache_hits=delta("query_cache_hits"),
        query_cache_misses=delta("query_cache_misses"),
        segments=after.get("segments"),
    )
    hits = counts.request_cache_hits or 0
    if requests and hits >= REQUEST_CACHE_FLAG * requests:
        counts.flag = f"mostly from the request cache ({hits} hits for {requests} requests)"
    else:
        q_hits, q_misses = counts.query_cache_hits or 0, counts.query_cache_misses or 0
        if q_hits + q_misses and q_hits / (q_hits + q_misses) >= QUERY_CACHE_FLAG:
            counts.flag = (
                f"filters mostly from the query cache "
                f"({q_hits / (q_hits + q_misses):.0%} hit ratio)"
            )
    return counts


class Conductor:
    """Drives rank 0 from "ingest done" to "steps running" without blocking its loop."""

    def __init__(
        self,
        post: Callable[[JsonObject], None],
        workers: int,
        plan: BenchPlan,
        control: ControlClient | None,
        sink: StreamSink,
        ingested: bool,
        jit_source: Callable[[], dict[str, tuple[float, float]]] | None = None,
    ) -> None:
        self.post, self.workers, self.plan, self.control = post, workers, plan, control
        #: The nodes' JIT readings (node -> (time, compiler CPU seconds)) for the warm-up.
        self.jit_source = jit_source
        self._jit_read = 0.0
        self.sink, self.ingested = sink, ingested
        self.phase = "ingest"
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="control")
        self.settling: Future[SettleResult] | None = None
        self.settled: SettleResult | None = None
        self.judge: WarmupJudge | None = None
        self._warmup_said = False
        self.steps_start: float | None = None
        self.snapshots: dict[tuple[int, str], Future[JsonObject]] = {}
        self.windows: list[StepWindow] = []
        self.facts: Future[ClusterFacts] | None = None
        #: Events the control thread has to say, written to the stream by :meth:`poll`.
        self.said: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        #: The track's administrative requests sent so far (before the ingest: set by rank
        #: 0's start), and errors that fail the run (an after-ingest request without answer).
        self.track_results: list[RequestResult] = []
        self.errors: list[str] = []
        #: Per counted step, the workers whose clients are done with it, and the steps
        #: whose end rank 0 has announced.
        self.counted_done: dict[int, set[int]] = {}
        self.counted_ended: set[int] = set()

    # ------------------------------------------------------------------ messages
    def _send_all(self, message: JsonObject, kind: str) -> None:
        """One message every worker reads (a lost worker simply never does)."""
        self.post({"kind": kind, **message})

    def add_warmup_round(self, message: JsonObject) -> None:
        if self.judge is not None:
            self.judge.add(int(message["rank"]), int(message["round"]), message["counts"])

    def add_step_done(self, message: JsonObject) -> None:
        """A worker's clients have sent a counted step's iterations (or hit its limit)."""
        self.counted_done.setdefault(int(message["step"]), set()).add(int(message["rank"]))

    # -------------------------------------------------------------------- phases
    def ingest_finished(self, done_by: int) -> None:
        """Every worker finished ingest (or was lost): start settling."""
        self.phase = "settle"
        self.sink.event("ingest_done", f"ingest done by {done_by} of {self.workers} workers")
        self.sink.ingest_rejections()
        self.sink.phase_event("settle")
        if self.control is None:
            self.settled = SettleResult(after_ingest=self.plan.after_ingest)
            return
        control, plan = self.control, self.plan
        if plan.after_ingest != "none" or self.ingested:
            self.sink.event("settle", f"settling the index ({plan.after_ingest} after ingest)")

        def say(message: str, level: str) -> None:
            # called on the control thread: the stream is written by the loop only
            self.said.put((message, level))

        def requests_then_settle() -> SettleResult:
            # the track's administrative requests after the ingest come before settling, on
            # refreshed indices (Rally's schedules refresh before a force-merge, and esdash
            # does a track's refresh task itself)
            if any(r.when == track_requests.AFTER_INGEST for r in plan.track_requests):
                try:
                    control.refresh(plan.index_names)
                except ControlError as exc:
                    say(f"refresh before the track's requests failed: {exc}", "warning")
            try:
                self.track_results += track_requests.send(
                    control, plan.track_requests, track_requests.AFTER_INGEST, say=say_info
                )
            except track_requests.TrackRequestFailed as exc:
                self.track_results += exc.sent
                self.errors.append(str(exc))
                raise
            return settle(
                control,
                plan.index_names,  # every index of the run, comma-separated
                plan.after_ingest,
                ingested=self.ingested,
                max_num_segments=plan.max_num_segments,
                timeout=plan.settle_timeout,
                say=say,
            )

        def say_info(message: str) -> None:
            say(message, "info")

        self.settling = self.pool.submit(requests_then_settle)

    def _start_warmup_or_steps(self, now: float) -> None:
        plan = self.plan
        queries = tuple(dict.fromkeys(q.name for step in plan.steps for q in step.runnable))
        if plan.warmup_max > 0 and queries:
            schedule = WarmupSchedule.fitting(
                now + LEAD, queries, plan.warmup_round, plan.warmup_max
            )
            if schedule.max_rounds == 0:  # the pre-flight refuses such a bound; be safe
                self.sink.event(
                    "warmup",
                    f"no global warm-up: {plan.warmup_max:g} s is shorter than one round",
                    level="warning",
                )
                self._start_steps(now + LEAD)
                return
            self.judge = WarmupJudge(schedule)
            self.phase = "warmup"
            self._send_all({"warmup": schedule.to_message()}, KIND_START)
            self.sink.phase_event("warmup")
            self.sink.event(
                "warmup",
                f"global warm-up: rounds of {schedule.round_seconds:g} s over "
                f"{len(queries)} queries until the cluster is warm, at most {plan.warmup_max:g} s",
            )
            return
        self._start_steps(now + LEAD)

    def _start_steps(self, moment: float, message: JsonObject | None = None) -> None:
        """Tell the workers when the steps start (after the warm-up: with its last round)."""
        self.phase = "steps"
        self.steps_start = moment
        self.windows = step_windows(self.plan, moment)
        if message is None:
            self._send_all({"steps_start": moment}, KIND_START)
        else:
            self._send_all({**message, "steps_start": moment}, KIND_WARMUP_END)
        self.sink.event("steps", f"query steps start in {max(0.0, moment - time.time()):.1f} s")
        self.sink.phase_event("steps")

    def poll(self, now: float, expected: set[int]) -> None:
        """Advance the phases that can advance now (never blocks)."""
        self._say_queued()
        if self.phase == "settle":
            if self.settling is not None and not self.settling.done():
                return
            if self.settling is not None:
                try:
                    self.settled = self.settling.result()
                except Exception as exc:  # recorded; the run still measures, flagged
                    self.settled = SettleResult(after_ingest=self.plan.after_ingest)
                    self.sink.event("settle", f"settling failed: {exc}", level="warning")
                self._say_queued()
            if self.control is not None:
                control, index = self.control, self.plan.index
                self.facts = self.pool.submit(read_facts, control, index)
            self._start_warmup_or_steps(time.time())
        elif self.phase == "warmup" and self.judge is not None:
            self._observe_jit(now)
            decided = self.judge.poll(now, expected)
            if decided is not None:
                last_round, steps_start = decided
                warm = self.judge.result()
                for query, error in self.judge.failing.items():
                    self.sink.event(
                        "warmup",
                        f"global warm-up: every request of {query} failed in a round, so the "
                        f"warm-up does not wait for it: {error}",
                        level="warning",
                    )
                why = (
                    "the cluster is warm"
                    if warm.converged
                    else f"the bound of {self.judge.schedule.bound:g} s allows no more rounds"
                )
                self.sink.event(
                    "warmup", f"global warm-up: round {last_round + 1} is the last ({why})"
                )
                self._start_steps(steps_start, {"last_round": last_round})
        elif self.phase == "steps":
            if self.judge is not None and not self._warmup_said:
                self._observe_jit(now)  # the last round's readings, for its verdict
            self._warmup_verdict(now, expected)
            self._end_counted_step(now, expected)
            self._snapshot_due(now)

    def _observe_jit(self, now: float) -> None:
        """The nodes' JIT readings, for the warm-up's judge, every :data:`JIT_READ_EVERY` s."""
        if self.judge is None or self.jit_source is None or now - self._jit_read < JIT_READ_EVERY:
            return
        self._jit_read = now
        self.judge.observe_jit(self.jit_source())

    def _warmup_verdict(self, now: float, expected: set[int]) -> None:
        """Once the last warm-up round is in (or its reports are overdue): the verdict, with
        the figures it rests on -- said after the rounds it is about, never before."""
        judge = self.judge
        if judge is None or judge.last_round is None or self._warmup_said:
            return
        last = judge.last_round
        reported = set(judge.rounds.get(last, {}))
        ended = judge.schedule.round_start(last + 1)
        if now < ended or (not expected <= reported and now < ended + 2 * DECISION_MARGIN):
            return
        self._warmup_said = True
        warm = judge.result()
        ran = f"{warm.rounds} round(s) of {warm.round_seconds:g} s = {warm.seconds:g} s"
        if warm.converged:
            self.sink.event("warmup", f"global warm-up converged: {ran}; {warm.reason}")
            return
        self.sink.event(
            "warmup",
            f"global warm-up ended at its bound without converging: {ran} (bound "
            f"{warm.bound_seconds:g} s); {warm.reason}",
            level="warning",
        )

    def _end_counted_step(self, now: float, expected: set[int]) -> None:
        """Announce the end of the running counted step once every expected worker is done.

        The next step starts :data:`STEP_LEAD` later, or at the step's time limit when that
        comes first (a worker not told by then goes on at the limit); the windows from the
        next step on move to that start, so the cache readings follow the workers.
        """
        for position, window in enumerate(self.windows):
            step = self.plan.steps[window.index]
            if not step.counted or window.index in self.counted_ended:
                continue
            done = self.counted_done.get(window.index, set())
            if not done or not expected <= done:
                return  # steps end in order: a later one cannot have ended first
            ended = min(now, window.end)
            start = min(now + STEP_LEAD, window.end)
            self.counted_ended.add(window.index)
            self._send_all(
                {"step": window.index, "ended": ended, "next": start},
                step_end_kind(window.index),
            )
            self.windows = (
                self.windows[:position]
                + [StepWindow(window.index, window.start, ended)]
                + step_windows(self.plan, start, window.index + 1)
            )
            return

    def _say_queued(self) -> None:
        while not self.said.empty():
            message, level = self.said.get()
            self.sink.event("settle", message, level=level)

    def _snapshot_due(self, now: float) -> None:
        if self.control is None:
            return
        control, index = self.control, self.plan.index_names  # counters over every index
        for window in self.windows:
            for edge, moment in (("start", window.start), ("end", window.end)):
                key = (window.index, edge)
                if key not in self.snapshots and now >= moment:
                    read: Callable[[], JsonObject] = lambda: cache_counters(  # noqa: E731
                        control.index_stats(index, ("request_cache", "query_cache", "segments"))
                    )
                    self.snapshots[key] = self.pool.submit(read)

    # ------------------------------------------------------------------- results
    @property
    def schedule_end(self) -> float | None:
        """When the last step ends (None until the steps' start is known)."""
        if self.steps_start is None:
            return None
        return self.windows[-1].end if self.windows else self.steps_start

    def caches(self, requests: Callable[[int], int]) -> dict[int, CacheCounts]:
        """Per step index, the cache deltas over its measurement (steps with both readings)."""
        found: dict[int, CacheCounts] = {}
        for window in self.windows:
            before, after = (self.snapshots.get((window.index, e)) for e in ("start", "end"))
            if before is None or after is None:
                continue
            try:
                found[window.index] = cache_delta(
                    before.result(timeout=30), after.result(timeout=30), requests(window.index)
                )
            except Exception:  # a failed reading leaves that step without cache figures
                continue
        return found

    def cluster_facts(self) -> ClusterFacts | None:
        """Engine, JVMs, heaps and index settings read back after settling (None: unread)."""
        if self.facts is None:
            return None
        try:
            return self.facts.result(timeout=30)
        except Exception as exc:  # recorded as missing: a comparison then says so
            self.sink.event("facts", f"could not read the cluster's facts: {exc}", "warning")
            return None

    def global_warmup(self) -> GlobalWarmup | None:
        return self.judge.result() if self.judge is not None else None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
