"""Rank 0's output: the run stream (``stream.jsonl``) and, at the end, ``results.json``.

The aggregator thread hands every payload to :meth:`StreamSink.accumulate` (decoded once,
kept for the results) and, once per interval, the payloads of that interval to
:meth:`StreamSink.interval`, which merges them per phase and appends the records.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import msgspec

from esdash.bench import pause
from esdash.bench.nodewatch import NodeWatch
from esdash.bench.rejections import ingest_flag
from esdash.bench.results import RunAccumulator, build_results, export_authors_format
from esdash.bench.rounds import rounds_result
from esdash.errors import EsdashError
from esdash.plugin.manager import get_plugins
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    INCOMPLETE_STEP,
    STREAM_SCHEMA,
    BenchInfo,
    BenchPlan,
    CacheCounts,
    ClusterFacts,
    Event,
    Final,
    GlobalWarmup,
    Header,
    IngestPlan,
    IngestProgress,
    IngestResult,
    Interval,
    JsonObject,
    NodeEvent,
    OpResult,
    Phase,
    PlannedStep,
    PlannedStepInfo,
    RankInfo,
    RankPayload,
    RankSummary,
    RequestResult,
    Results,
    RunStatus,
    SettleResult,
    Topology,
)
from esdash.rundir.stream import StreamReader, StreamWriter
from esdash.session import load_run_session
from esdash.stats.merge import Merged

#: The phases interval records carry; ranks report others (starting, sync, done) too.
PHASES: tuple[Phase, ...] = ("ingest", "warmup", "measure")


class StreamSink:
    def __init__(self, run: RunDir, plan: BenchPlan, ranks: int, topology: Topology) -> None:
        self.run, self.plan, self.ranks, self.topology = run, plan, ranks, topology
        self.writer = StreamWriter(run.stream_file)
        self.acc = RunAccumulator(plan.interval)
        self.t0 = time.time()
        self.docs_done = 0
        #: Whether this run ingests: on a reused index it does not, and no record may say
        #: "0.0 % (0/N docs)" of an ingest that never runs (:meth:`skip_ingest`).
        self.ingests = True
        self.phase: Phase = "ingest"
        self.step: int | None = None
        self.header: Header | None = None
        self.started = False
        #: Whether the ingest's rejections were announced (:meth:`ingest_rejections`).
        self.rejections_said = False

    def _t(self) -> float:
        return max(0.0, round(time.time() - self.t0, 3))

    def start(self, start: JsonObject, bench_ranks: list[JsonObject]) -> None:
        self.t0 = start["t0"]
        plugins = get_plugins()
        self.header = Header(
            schema=STREAM_SCHEMA,
            run_id=self.run.name,
            session=dict(load_run_session(self.run).source),
            plugins={name: info.version or "" for name, info in plugins.plugins.items()},
            topology=self.topology,
            bench=BenchInfo(
                ranks=len(bench_ranks),
                per_rank=[msgspec.convert(rank, RankInfo) for rank in bench_ranks],
            ),
            slurm_job_id=os.environ.get("SLURM_JOB_ID"),
            started=self.t0,
            interval=self.plan.interval,
            steps=[
                PlannedStepInfo(
                    name=step.name,
                    queries=[q.name for q in step.queries],
                    warmup=step.warmup,
                    duration=step.duration,
                    target_throughput=step.target_throughput,
                    round=step.round,
                    position=step.position,
                    clients=step.clients,
                    indexing=[load.name for load in step.indexing],
                    warmup_iterations=step.warmup_iterations,
                    iterations=step.iterations,
                )
                for step in self.plan.steps
            ],
            ingest=IngestPlan(docs_total=self.plan.documents_total),
        )
        self.writer.write(self.header)
        self.started = not start.get("error")
        for note in self.plan.notes:
            self.event("note", note, level="warning")
        if start.get("error"):
            self.event("failed", start["error"], level="error")
        elif start.get("index"):
            self.event("index", start["index"]["reason"])
        for k, step in enumerate(self.plan.steps):
            for query in step.queries:
                if query.unsupported:
                    self.event(
                        "unsupported",
                        f"{step.name}/{query.name}: not run: {query.unsupported}",
                        level="warning",
                        step=k,
                    )

    def event(
        self,
        kind: str,
        message: str,
        level: str = "info",
        step: int | None = None,
        data: JsonObject | None = None,
    ) -> None:
        self.writer.write(
            Event(
                t=self._t(),
                wall=time.time(),
                kind=kind,
                message=message,
                level=level,  # type: ignore[arg-type]
                step=step,
                data=data or {},
            )
        )

    def phase_event(self, phase: str, aborted: Callable[[], bool] | None = None) -> None:
        """Rank 0 enters ``phase`` (ingest, settle, warmup, steps, results): one event.

        The fault tests send their signals when this event appears; the test-only hold of
        :mod:`esdash.bench.pause` keeps a short phase going long enough to be hit.
        """
        self.event("phase", f"{phase} begins", data={"phase": phase})
        pause.hold(phase, aborted)

    def skip_ingest(self) -> None:
        """The index is reused: the records before the first step carry no ingest progress."""
        self.ingests = False

    def accumulate(self, message: JsonObject) -> None:
        """Every payload, once: decoded into the run's totals."""
        message["decoded"] = self.acc.add_interval(
            message["phase"],
            message["step"],
            message["rank"],
            message["data"],
            seq=message["seq"],
        )
        self.docs_done += int(message.get("docs_done") or 0)

    def interval(self, seq: int, messages: list[JsonObject], missing: list[int]) -> None:
        """One record per phase part of interval ``seq`` (one empty record when idle)."""
        parts: dict[tuple[Phase, int | None], Merged] = defaultdict(Merged)
        for message in messages:
            phase = message["phase"]
            # between phases (starting, sync, done): shown with the last one
            key = (phase, message["step"]) if phase in PHASES else (self.phase, self.step)
            parts[key].merge(message["decoded"])
        if parts:
            self.phase, self.step = max(
                parts, key=lambda p: sum(op.requests for op in parts[p].ops.values())
            )
        else:
            parts[(self.phase, self.step)] = Merged()
        for (phase, step), merged in parts.items():
            name = self.plan.steps[step].name if step is not None else None
            ingest = None
            if phase == "ingest" and self.ingests:
                ingest = IngestProgress(
                    docs_done=self.docs_done, docs_total=self.plan.documents_total
                )
            self.writer.write(
                Interval(
                    seq=seq,
                    t=round((seq + 1) * self.plan.interval, 3),
                    wall=time.time(),
                    phase=phase,
                    step=step,
                    step_name=name,
                    elapsed=merged.elapsed or self.plan.interval,
                    ops=merged.to_payload().ops,
                    ranks=sorted(merged.ranks),
                    missing_ranks=sorted(missing),
                    ingest=ingest,
                )
            )

    def ingest_rejections(self) -> None:
        """At the ingest's end, a warning event when documents were rejected.

        Said at once, from the payloads in so far (a rank's last payload comes before its
        word that it is done), so a user watching the run learns before the steps that they
        will measure an index without those documents; the results carry the same flag with
        the ranks' own counts.
        """
        merged = self.acc.merged("ingest", None)
        rejected: dict[str, int] = {}
        for data in merged.ops.values():
            for reason, count in data.doc_errors.items():
                rejected[reason] = rejected.get(reason, 0) + count
        seen = IngestResult(
            docs=sum(data.docs for data in merged.ops.values()),
            rejected_docs=rejected,
            ops={name: OpResult(last_errors=data.last_errors) for name, data in merged.ops.items()},
        )
        flag = ingest_flag(seen)
        if flag:
            self.event("ingest_rejected", f"ingest: {flag}", level="warning")
            self.rejections_said = True

    def step_requests(self, index: int) -> int:
        """Requests measured in step ``index`` so far (all ranks and queries).

        A counted step's cache readings span its warm-up too (its end is not known in
        advance: :func:`esdash.bench.conductor.step_windows`), so its warm-up requests count.
        """
        requests = self.acc.merged("measure", index).requests
        if self.plan.steps[index].warmup_iterations:
            requests += self.acc.merged("warmup", index).requests
        return requests

    def finish(
        self,
        finals: dict[int, JsonObject],
        errors: list[str],
        aborted: str = "",
        *,
        settle: SettleResult | None = None,
        track_requests: Sequence[RequestResult] = (),
        global_warmup: GlobalWarmup | None = None,
        caches: Mapping[int, CacheCounts] | None = None,
        cluster: ClusterFacts | None = None,
        watch: NodeWatch | None = None,
        lost: Mapping[int, tuple[float, int]] | None = None,
        intervals: Mapping[int, int] | None = None,
        windows: Sequence[tuple[int, float, float]] = (),
        silences: Sequence[tuple[int, float, float]] = (),
        exits: Mapping[int, str] | None = None,
    ) -> Results:
        """Write the final record, ``results.json`` and the authors' export.

        Workers are ranks 1..N (rank 0 coordinates); ``finals`` is keyed by rank.  What
        rank 0 did between ingest and the steps (``settle``, ``global_warmup``) and the
        per-step cache readings go into the results as they are.  ``watch`` holds the node
        events and the cluster's health over the run; a node loss is named first in the
        reason.  ``lost`` maps each worker that went silent to (its last heartbeat on rank
        0's clock, its interval payloads received): its numbers up to then are kept, and
        its per-rank entry says it was lost (and how it ended, from ``exits``, when its parent
        process saw it die).  ``intervals`` counts every worker's payloads.
        ``windows`` (step index, start, end; wall clock) are the steps' measurements: a step
        during which a node was down says so in its status, as does one during which a worker
        was silent (``silences``: rank, from, to) -- its load was not the planned load.
        """
        # workers never started when the start failed: nothing of theirs is missing
        missing = [r for r in range(1, self.ranks + 1) if r not in finals and self.started]
        statuses = {f.get("status") for f in finals.values()}
        status: RunStatus
        if aborted or "aborted" in statuses:
            status = "aborted"
            reason = aborted or next(
                f["reason"] for f in finals.values() if f.get("status") == "aborted"
            )
        elif "failed" in statuses or errors:
            status = "failed"
            reasons = [
                f"rank {r}: {f.get('reason')}"
                for r, f in sorted(finals.items())
                if f.get("status") == "failed"
            ] + errors
            reason = "; ".join(reasons)[:2000]
        else:
            status, reason = "ok", None
        warmup_failed = sorted(
            {
                s["step"]
                for f in finals.values()
                for s in f.get("steps", [])
                if s.get("status") == "warmup_failed"
            }
        )
        if warmup_failed:
            reason = (reason + "; " if reason else "") + (
                f"warm-up failed in step(s) {', '.join(warmup_failed)}"
            )
            if status == "ok":
                status = "failed"  # a step without numbers is not a successful run
        if missing:
            self.event(
                "ranks_missing",
                f"no final report from rank(s) {missing}",
                level="error",
                data={"ranks": missing},
            )
            causes = ", ".join(f"{r}: {(exits or {})[r]}" for r in missing if r in (exits or {}))
            reason = (
                (reason + "; " if reason else "")
                + f"rank(s) {missing} lost"
                + (f" ({causes})" if causes else "")
            )
            if status == "ok":
                status = "failed"  # the numbers are real, but not of the planned load
        nodes_lost = watch.summary() if watch is not None else None
        if nodes_lost:
            # the first cause: everything else (failed warm-ups, partial answers) follows
            if status == "aborted":
                reason = (reason + "; " if reason else "") + nodes_lost
            else:
                reason = nodes_lost + ("; " + reason if reason else "")
            if status == "ok":
                status = "failed"  # measured on fewer nodes than planned
        self._step_events(finals)
        ingest_seconds = [f["ingest"]["seconds"] for f in finals.values() if f.get("ingest")]
        if ingest_seconds:
            self.acc.set_window("ingest", None, max(ingest_seconds))
        final = Final(t=self._t(), wall=time.time(), status=status, reason=reason)
        assert self.header is not None, "finish() after start()"
        results = build_results(self.header, self.acc, final)
        results.encryption = self.plan.encryption
        results.missing_ranks = missing
        results.per_rank = {
            str(r): _rank_summary(f, (intervals or {}).get(r, 0)) for r, f in sorted(finals.items())
        }
        hosts = {info.rank: info.host for info in self.header.bench.per_rank}
        for rank in missing:
            heard, received = (lost or {}).get(rank, (None, (intervals or {}).get(rank, 0)))
            ended = (exits or {}).get(rank)
            results.per_rank[str(rank)] = RankSummary(
                host=hosts.get(rank),
                status="lost",
                reason=(
                    (f"{ended}; " if ended else "")
                    + "no final report; its numbers up to its last interval are kept"
                    + (f" ({received} interval payloads)" if received else "")
                ),
                last_heartbeat=heard,
                intervals=received,
            )
        results.per_rank = dict(sorted(results.per_rank.items(), key=lambda item: int(item[0])))
        if watch is not None:
            results.node_events = list(watch.events)
            results.cluster_health = list(watch.health)
        results.settle = settle
        results.track_requests = list(track_requests)
        results.global_warmup = global_warmup
        results.cluster = cluster
        for k, counts in (caches or {}).items():
            results.steps[k].caches = counts
        for k, step in enumerate(self.plan.steps):
            entry = results.steps[k]
            entry.unsupported = {q.name: q.unsupported for q in step.queries if q.unsupported}
            if not step.runnable:
                entry.status = "not run: " + "; ".join(sorted(set(entry.unsupported.values())))
            failures = {
                str(r): s.get("error")
                for r, f in finals.items()
                for s in f.get("steps", [])
                if s.get("index", k) == k
                and s.get("step") == step.name
                and s.get("status") == "warmup_failed"
            }
            if failures:
                entry.warmup_failed = failures
                entry.status = f"warm-up failed: {next(iter(failures.values()))}"
            elif step.counted and step.runnable and entry.status == "measured":
                entry.status = counted_status(k, step, finals, self.ranks)
        for k, begin, end in windows:
            entry = results.steps[k]
            quiet = {
                rank: min(to, end) - max(since, begin)
                for rank, since, to in silences
                if since < end and to > begin
            }
            if quiet:
                names = ", ".join(f"{r} ({s:.0f} s)" for r, s in sorted(quiet.items()))
                entry.status = f"rank(s) silent: {names} ({entry.status})"
            down = _nodes_down(watch.events, begin, end) if watch is not None else []
            if down:
                entry.status = f"node lost: {', '.join(down)} ({entry.status})"
        results.rounds = rounds_result(self.plan, results)
        self._flag_events(results)
        ingest = [f["ingest"] for f in finals.values() if f.get("ingest")]
        if ingest and results.ingest is None:  # cut short before its first interval
            results.ingest = IngestResult()
        if ingest and results.ingest is not None:
            results.ingest.docs_sent = sum(i["docs_sent"] for i in ingest)
            results.ingest.docs_rejected = sum(i["rejected"] for i in ingest)
            if all("cpu_seconds" in i for i in ingest):
                results.ingest.client_cpu_seconds = sum(i["cpu_seconds"] for i in ingest)
            if any("encode_seconds" in i for i in ingest):
                # client-side encryption inside the ingest ranks, summed over them
                results.ingest.encode_seconds = sum(i.get("encode_seconds", 0.0) for i in ingest)
            per_index: dict[str, int] = {}
            for each in ingest:  # several indices: what each rank sent to each
                for name, docs in (each.get("per_index") or {}).items():
                    per_index[name] = per_index.get(name, 0) + int(docs)
            if len(per_index) > 1:
                results.ingest.per_index = per_index
        if results.ingest is not None:
            results.ingest.flag = ingest_flag(results.ingest)
            if results.ingest.flag and not self.rejections_said:  # cut short before its end
                self.event("ingest_rejected", f"ingest: {results.ingest.flag}", level="warning")
        self.run.write_results(results)
        bodies = {
            k: {q.name: q.body for q in step.queries} for k, step in enumerate(self.plan.steps)
        }
        files.write(self.run.authors_results_file, export_authors_format(results, bodies))
        self.writer.write(final)
        self.writer.close()
        return results

    def _flag_events(self, results: Results) -> None:
        """One warning event per step whose numbers need a second look."""
        for k, step in enumerate(results.steps):
            if step.steadiness is not None and not step.steadiness.steady:
                self.event("unsteady", f"{step.name}: {step.steadiness.label}", "warning", k)
            if step.caches is not None and step.caches.flag:
                self.event("cached", f"{step.name}: {step.caches.flag}", "warning", k)
            if step.status.startswith(INCOMPLETE_STEP):
                self.event("step_incomplete", f"{step.name}: {step.status}", "warning", k)

    def _step_events(self, finals: dict[int, JsonObject]) -> None:
        for rank, final in sorted(finals.items()):
            for k, step in enumerate(final.get("steps", [])):
                if step.get("status") == "warmup_failed":
                    self.event(
                        "warmup_failed", f"rank {rank}: {step.get('error')}", level="error", step=k
                    )


def counted_status(
    index: int, step: PlannedStep, finals: Mapping[int, JsonObject], workers: int
) -> str:
    """A counted step's status from the ranks' reports: ``measured`` when every client
    sent its iterations, ``lost ranks (...)`` when ranks that had clients did not report,
    ``ended early (...)`` when clients stopped at the step's time limit."""
    reports = [
        s["iterations"]
        for f in finals.values()
        for s in f.get("steps", [])
        if s.get("index") == index and isinstance(s.get("iterations"), dict)
    ]
    ranks = workers if step.clients is None else min(workers, step.clients)
    with_clients = [r for r in reports if r.get("planned")]
    planned = (step.clients or workers) * (step.iterations or 0)
    sent = sum(int(r.get("sent") or 0) for r in reports)
    if len(with_clients) < ranks:
        return f"lost ranks ({len(with_clients)} of {ranks} reported their iterations)"
    if sent < planned:
        return (
            f"ended early (time limit of {step.duration:g} s: {sent} of {planned} iterations sent)"
        )
    return "measured"


def _nodes_down(events: Sequence[NodeEvent], begin: float, end: float) -> list[str]:
    """Nodes that were lost at some moment of [begin, end] (wall clock)."""
    down: set[str] = set()
    for node in {e.node for e in events}:
        lost_at: float | None = None
        for event in (e for e in events if e.node == node):
            if event.kind == "lost":
                lost_at = event.wall
            elif lost_at is not None:
                if lost_at <= end and event.wall >= begin:
                    down.add(node)
                lost_at = None
        if lost_at is not None and lost_at <= end:
            down.add(node)
    return sorted(down)


def _rank_summary(final: JsonObject, intervals: int = 0) -> RankSummary:
    return RankSummary(
        host=final.get("host"),
        status=final.get("status"),
        reason=final.get("reason"),
        ingest_node=(final.get("ingest") or {}).get("node"),
        step_nodes={s["step"]: s.get("node") for s in final.get("steps", [])},
        step_clients={s["step"]: s["clients"] for s in final.get("steps", []) if "clients" in s},
        intervals=intervals,
    )


def results_from_stream(run: RunDir, plan: BenchPlan, reason: str) -> Results:
    """Results rebuilt from ``stream.jsonl`` when rank 0 could not write them.

    The stream holds every interval merged over the ranks, so totals, rates and latency
    statistics survive; per-rank breakdowns do not (they appear under rank ``-1``).
    """
    records = StreamReader(run.stream_file).read_all()
    header = next((r for r in records if isinstance(r, Header)), None)
    if header is None:
        raise EsdashError(f"{reason}; the stream has no header, so there are no results")
    acc = RunAccumulator(plan.interval)
    for record in records:
        if isinstance(record, Interval) and record.ops:
            payload = RankPayload(elapsed=record.elapsed, ops=record.ops)
            acc.add_interval(record.phase, record.step, -1, payload, seq=record.seq)
    for k, step in enumerate(plan.steps):
        acc.set_window("measure", k, step.duration)
    last = records[-1] if records else None
    t = 0.0 if last is None or isinstance(last, Header) else last.t
    final = Final(t=t, wall=time.time(), status="failed", reason=reason)
    results = build_results(header, acc, final)
    results.recovered_from_stream = True
    results.encryption = plan.encryption
    run.write_results(results)
    if not any(isinstance(r, Final) for r in records):
        with StreamWriter(run.stream_file) as writer:
            writer.write(final)
    return results
