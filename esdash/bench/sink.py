"""Rank 0's output: the run stream (``stream.jsonl``) and, at the end, ``results.json``.

The aggregator thread hands every payload to :meth:`StreamSink.accumulate` (decoded once,
kept for the results) and, once per interval, the payloads of that interval to
:meth:`StreamSink.interval`, which merges them per phase and appends the records.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import Any

from esdash.bench.merge import Merged
from esdash.bench.plan import BenchPlan
from esdash.bench.results import RunAccumulator, build_results, export_authors_format
from esdash.cluster.rundir import RunDir, write_json
from esdash.errors import EsdashError
from esdash.plugins import get_plugins
from esdash.stream.reader import StreamReader
from esdash.stream.schema import event_record, final_record, header_record, interval_record
from esdash.stream.writer import StreamWriter

#: The phases interval records carry; ranks report others (starting, sync, done) too.
PHASES = ("ingest", "warmup", "measure")


class StreamSink:
    def __init__(self, run: RunDir, plan: BenchPlan, ranks: int, topology: dict) -> None:
        self.run, self.plan, self.ranks, self.topology = run, plan, ranks, topology
        self.writer = StreamWriter(run.path / "stream.jsonl")
        self.acc = RunAccumulator(plan.interval)
        self.t0 = time.time()
        self.docs_done = 0
        self.phase = "ingest"
        self.step: int | None = None
        self.header: dict[str, Any] = {}
        self.started = False

    def _t(self) -> float:
        return max(0.0, round(time.time() - self.t0, 3))

    def start(self, start: dict[str, Any], bench_ranks: list[dict[str, Any]]) -> None:
        self.t0 = start["t0"]
        plugins = get_plugins()
        self.header = header_record(
            run_id=self.run.path.name,
            session=dict(self.run.load_session().source),
            plugins={name: info.version or "" for name, info in plugins.plugins.items()},
            topology=self.topology,
            bench_ranks=bench_ranks,
            slurm_job_id=os.environ.get("SLURM_JOB_ID"),
            started=self.t0,
            interval=self.plan.interval,
            steps=[
                {
                    "name": step.name,
                    "queries": [q.name for q in step.queries],
                    "warmup": step.warmup,
                    "duration": step.duration,
                    "target_throughput": step.target_throughput,
                }
                for step in self.plan.steps
            ],
            docs_total=self.plan.corpus_documents,
        )
        self.writer.write(self.header)
        self.started = not start.get("error")
        for note in self.plan.extra.get("notes", []):
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
        data: dict[str, Any] | None = None,
    ) -> None:
        self.writer.write(
            event_record(
                t=self._t(),
                wall=time.time(),
                kind=kind,
                message=message,
                level=level,
                step=step,
                data=data,
            )
        )

    def accumulate(self, message: dict[str, Any]) -> None:
        """Every payload, once: decoded into the run's totals."""
        message["decoded"] = self.acc.add_interval(
            message["phase"],
            message["step"],
            message["rank"],
            message["data"],
            seq=message["seq"],
        )
        self.docs_done += int(message.get("docs_done") or 0)

    def interval(self, seq: int, messages: list[dict[str, Any]], missing: list[int]) -> None:
        """One record per phase part of interval ``seq`` (one empty record when idle)."""
        parts: dict[tuple[str, int | None], Merged] = defaultdict(Merged)
        for message in messages:
            key = (message["phase"], message["step"])
            if message["phase"] not in PHASES:  # between phases: shown with the last one
                key = (self.phase, self.step)
            parts[key].merge(message["decoded"])
        if parts:
            self.phase, self.step = max(
                parts, key=lambda p: sum(op.requests for op in parts[p].ops.values())
            )
        else:
            parts[(self.phase, self.step)] = Merged()
        for (phase, step), merged in parts.items():
            name = self.plan.steps[step].name if step is not None else None
            self.writer.write(
                interval_record(
                    seq=seq,
                    t=round((seq + 1) * self.plan.interval, 3),
                    wall=time.time(),
                    phase=phase,
                    step=step,
                    step_name=name,
                    elapsed=merged.elapsed or self.plan.interval,
                    ops=merged.to_payload()["ops"],
                    ranks=sorted(merged.ranks),
                    missing_ranks=missing,
                    docs_done=self.docs_done if phase == "ingest" else None,
                    docs_total=self.plan.corpus_documents if phase == "ingest" else None,
                )
            )

    def finish(
        self, finals: dict[int, dict[str, Any]], errors: list[str], aborted: str = ""
    ) -> dict[str, Any]:
        """Write the final record, ``results.json`` and the authors' export.

        Workers are ranks 1..N (rank 0 coordinates); ``finals`` is keyed by rank.
        """
        # workers never started when the start failed: nothing of theirs is missing
        missing = [r for r in range(1, self.ranks + 1) if r not in finals and self.started]
        statuses = {f.get("status") for f in finals.values()}
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
            reason = (reason + "; " if reason else "") + f"rank(s) {missing} lost"
            if status == "ok":
                status = "failed"  # the numbers are real, but not of the planned load
        self._step_events(finals)
        ingest_seconds = [f["ingest"]["seconds"] for f in finals.values() if f.get("ingest")]
        if ingest_seconds:
            self.acc.set_window("ingest", None, max(ingest_seconds))
        for k, step in enumerate(self.plan.steps):
            self.acc.set_window("measure", k, step.duration)
        final = final_record(t=self._t(), wall=time.time(), status=status, reason=reason)
        results = build_results(self.header, self.acc, final)
        results["encryption"] = self.plan.encryption
        results["missing_ranks"] = missing
        results["per_rank"] = {str(r): _rank_summary(f) for r, f in sorted(finals.items())}
        for k, step in enumerate(self.plan.steps):
            entry = results["steps"][k]
            entry["unsupported"] = {q.name: q.unsupported for q in step.queries if q.unsupported}
            if not step.runnable:
                entry["status"] = "not run: " + "; ".join(
                    sorted(set(entry["unsupported"].values()))
                )
            failures = {
                str(r): s.get("error")
                for r, f in finals.items()
                for s in f.get("steps", [])
                if s.get("step") == step.name and s.get("status") == "warmup_failed"
            }
            if failures:
                entry["warmup_failed"] = failures
                entry["status"] = "warm-up failed: " + next(iter(failures.values()))
        ingest = [f["ingest"] for f in finals.values() if f.get("ingest")]
        if ingest and results.get("ingest") is not None:
            results["ingest"]["docs_sent"] = sum(i["docs_sent"] for i in ingest)
            results["ingest"]["docs_rejected"] = sum(i["rejected"] for i in ingest)
            if all("cpu_seconds" in i for i in ingest):
                results["ingest"]["client_cpu_seconds"] = sum(i["cpu_seconds"] for i in ingest)
            if any("encode_seconds" in i for i in ingest):
                # client-side encryption inside the ingest ranks, summed over them
                results["ingest"]["encode_seconds"] = sum(
                    i.get("encode_seconds", 0.0) for i in ingest
                )
        write_json(self.run.path / "results.json", results)
        bodies = {
            k: {q.name: q.body for q in step.queries} for k, step in enumerate(self.plan.steps)
        }
        write_json(
            self.run.path / "results-authors-format.json", export_authors_format(results, bodies)
        )
        self.writer.write(final)
        self.writer.close()
        return results

    def _step_events(self, finals: dict[int, dict[str, Any]]) -> None:
        for rank, final in sorted(finals.items()):
            for k, step in enumerate(final.get("steps", [])):
                if step.get("status") == "warmup_failed":
                    self.event(
                        "warmup_failed", f"rank {rank}: {step.get('error')}", level="error", step=k
                    )


def _rank_summary(final: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": final.get("host"),
        "status": final.get("status"),
        "reason": final.get("reason"),
        "ingest_node": (final.get("ingest") or {}).get("node"),
        "step_nodes": {s["step"]: s.get("node") for s in final.get("steps", [])},
    }


def results_from_stream(run: RunDir, plan: BenchPlan, reason: str) -> dict[str, Any]:
    """Results rebuilt from ``stream.jsonl`` when rank 0 could not write them.

    The stream holds every interval merged over the ranks, so totals, rates and latency
    statistics survive; per-rank breakdowns do not (they appear under rank ``-1``).
    """
    records = StreamReader(run.path / "stream.jsonl").read_all()
    header = next((r for r in records if r.get("type") == "header"), None)
    if header is None:
        raise EsdashError(f"{reason}; the stream has no header, so there are no results")
    acc = RunAccumulator(plan.interval)
    for record in records:
        if record.get("type") == "interval" and record.get("ops"):
            payload = {"v": 1, "rank": None, "elapsed": record["elapsed"], "ops": record["ops"]}
            acc.add_interval(record["phase"], record["step"], -1, payload, seq=record["seq"])
    for k, step in enumerate(plan.steps):
        acc.set_window("measure", k, step.duration)
    last = records[-1] if records else {}
    final = final_record(
        t=float(last.get("t", 0.0)), wall=time.time(), status="failed", reason=reason
    )
    results = build_results(header, acc, final)
    results["recovered_from_stream"] = True
    results["encryption"] = plan.encryption
    write_json(run.path / "results.json", results)
    if not any(r.get("type") == "final" for r in records):
        with StreamWriter(run.path / "stream.jsonl") as writer:
            writer.write(final)
    return results
