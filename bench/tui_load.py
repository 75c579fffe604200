"""What the dashboard costs on a big run: CPU share and the lag from write to display.

    .venv/bin/python bench/tui_load.py [--ranks 64] [--speed 10] [--fps 4] [--size 160x48]

Replays a recorded 64-rank stream at 10x speed into the dashboard's live screen running
headless (Textual's test harness, ``App.run_test``) and prints:

* the dashboard process's CPU time over the replay's wall time, as a share of one core
  (everything in the process: the reader thread, folding, snapshots, Textual's layout and
  rendering at ``--fps`` redraws per second);
* the lag of every interval record from being written (its ``wall`` time, set by the writer
  when it appends the line) to the first redraw that shows it: median, p95, max.

Targets (issue 6): under 15 % of one core at a 4 Hz redraw tick, lag under 1 s.

The recorded stream is made once and cached (``<cache>/bench/tui-load-<ranks>.jsonl``): for
every interval, each of ``--ranks`` ranks records a realistic number of requests with the
real :class:`~esdash.bench.recorder.Recorder` (log-normal latencies, a few rejections),
rank 0's merge (:class:`~esdash.stats.merge.Merged`) combines the payloads, and the records
are built with the stream schema's builders — as ``esdash run`` writes them.  The plan:
30 s of ingest, then three query steps of 10 s warm-up and 60 s measurement, one rank
missing for a few intervals, cluster samples of 8 nodes every 2 s.

A separate writer process appends the records at ``--speed`` times their pace (stamping each
with the time it is written), so the dashboard process measures only itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from esdash.bench.recorder import Recorder
from esdash.paths import cache_dir
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    BenchInfo,
    Event,
    Final,
    Header,
    IngestPlan,
    IngestProgress,
    Interval,
    NodePlan,
    PlannedStepInfo,
    RankInfo,
    RankPayload,
    Topology,
)
from esdash.stats.merge import Merged

NODES = 8
INGEST_SECONDS = 30
STEPS = (("term", 10, 60), ("range", 10, 60), ("aggs", 10, 60))
REQUESTS_PER_RANK = 150  # per interval and rank: 64 ranks -> ~9,600 requests/s
BULK_DOCS = 5000
MISSING = (17, range(70, 74))  # rank 17 misses intervals 70..73


def _rank_payload(rank: int, seq: int, op: str, rng: random.Random) -> RankPayload:
    recorder = Recorder(rank=rank, clock=iter([0.0, 1.0]).__next__, wall=lambda: 1.8e9 + seq)
    node = f"node-{rank % NODES}"
    if op == "bulk":
        for _ in range(3):
            value = rng.lognormvariate(math.log(0.25), 0.4)
            recorder.record("bulk", node, value, value, docs=BULK_DOCS, nbytes=BULK_DOCS * 900)
        return recorder.drain()
    median = {"term": 0.004, "range": 0.012, "aggs": 0.035}[op]
    for _ in range(rng.randint(REQUESTS_PER_RANK - 20, REQUESTS_PER_RANK + 20)):
        value = rng.lognormvariate(math.log(median), 0.7)
        recorder.record(op, node, value, value * 0.95, docs=10, nbytes=4000)
    if rng.random() < 0.05:
        recorder.record_error(op, node, "http_429", 429, "rejected execution of search")
    return recorder.drain()


def make_stream(ranks: int, path: Path) -> None:
    """Build the recorded stream (and its cluster samples next to it)."""
    rng = random.Random(42)
    started = 1_800_000_000.0
    steps = [
        PlannedStepInfo(name=n, queries=[n], warmup=w, duration=d, target_throughput=None)
        for n, w, d in STEPS
    ]
    nodes = tuple(
        NodePlan(
            rank=k,
            name=f"node-{k}",
            host=f"h{k}",
            interface="ib0",
            address=f"10.0.0.{k + 1}",
            http_port=9250,
            transport_port=9350,
            master_eligible=k < 3,
        )
        for k in range(NODES)
    )
    docs_total = ranks * 3 * BULK_DOCS * INGEST_SECONDS
    header = Header(
        schema="esdash.stream/1",
        run_id=f"tui-load-{ranks}",
        session={"name": f"load-{ranks}", "cluster": {"nodes": NODES}, "track": {"name": "mri"}},
        plugins={"elasticsearch": "0.1.0"},
        topology=Topology(cluster_name="esdash-load", nodes=nodes),
        bench=BenchInfo(
            ranks=ranks,
            per_rank=[RankInfo(rank=r, host=f"h{r % NODES}") for r in range(1, ranks + 1)],
        ),
        slurm_job_id="4242",
        started=started,
        interval=1.0,
        steps=steps,
        ingest=IngestPlan(docs_total=docs_total),
    )
    plan: list[tuple[str, int | None, str]] = [("ingest", None, "bulk")] * INGEST_SECONDS
    for k, (name, warmup, duration) in enumerate(STEPS):
        plan += [("warmup", k, name)] * warmup + [("measure", k, name)] * duration
    lines: list[Header | Interval | Event | Final] = [header]
    docs = 0
    for seq, (phase, step, op) in enumerate(plan):
        missing = [MISSING[0]] if seq in MISSING[1] else []
        merged = Merged()
        for rank in range(1, ranks + 1):
            if rank not in missing:
                merged.add(_rank_payload(rank, seq, op, rng))
        if phase == "ingest":
            docs += merged.ops["bulk"].docs
        if seq == 0 or plan[seq - 1][:2] != (phase, step):
            lines.append(
                Event(
                    t=seq,
                    wall=started + seq,
                    kind="phase",
                    level="info",
                    message=f"{phase} {op}",
                    step=step,
                    data={"phase": phase, "step": step},
                )
            )
        lines.append(
            Interval(
                seq=seq,
                t=seq + 1.0,
                wall=started + seq + 1,
                phase=phase,  # type: ignore[arg-type]
                step=step,
                step_name=None if step is None else STEPS[step][0],
                elapsed=1.0,
                ops=merged.to_payload().ops,
                ranks=sorted(merged.ranks),
                missing_ranks=missing,
                ingest=IngestProgress(docs_done=docs, docs_total=docs_total)
                if phase == "ingest"
                else None,
            )
        )
    lines.append(Final(t=len(plan) + 0.5, wall=started + len(plan) + 0.5, status="ok"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for record in lines:
            handle.write(files.encode(record, indent=0) + b"\n")


def cluster_sample(t: float, wall: float) -> dict[str, Any]:
    nodes = {}
    for k in range(NODES):
        nodes[f"node-{k}"] = {
            "name": f"node-{k}",
            "heap_used_percent": 40 + (k * 7 + int(t)) % 30,
            "cpu_percent": 50 + (k * 11 + int(t)) % 40,
            "gc_count": int(t) * 2,
            "gc_millis": int(t * 15),
            "segments": 40 + k,
            "docs": 1000 * int(t),
            "rejected": {"search": int(t) // 50, "write": 0},
        }
    return {
        "schema": "esdash.cluster/1",
        "type": "sample",
        "time": wall,
        "health": {"status": "green", "number_of_nodes": NODES, "unassigned_shards": 0},
        "nodes": nodes,
    }


def write(source: Path, run: Path, speed: float) -> None:
    """The writer process: append the records at ``speed`` times their pace."""
    records = [json.loads(line) for line in source.read_text().splitlines()]
    begin = time.time()
    t0 = records[0]["started"]
    records[0]["started"] = begin
    next_sample = 0.0
    rundir = RunDir(run)
    with rundir.stream_file.open("a") as stream, rundir.cluster_samples_file.open("a") as cluster:
        for record in records:
            offset = (record.get("wall", t0) - t0) / speed
            delay = begin + offset - time.time()
            if delay > 0:
                time.sleep(delay)
            if record["type"] != "header":
                record["wall"] = time.time()
            stream.write(json.dumps(record, separators=(",", ":")) + "\n")
            stream.flush()
            if record.get("t", 0) >= next_sample:
                cluster.write(json.dumps(cluster_sample(record.get("t", 0), time.time())) + "\n")
                cluster.flush()
                next_sample += 2.0


async def replay(run: Path, source: Path, speed: float, fps: float, size: tuple[int, int]):
    from esdash.tui.app import EsdashApp
    from esdash.tui.screens.live import LiveScreen

    app = EsdashApp(run=run, fps=fps)
    lags: list[float] = []
    shown = [0]
    redraws = [0]

    def on_display(snap) -> None:
        now = time.time()
        redraws[0] += 1
        screen = app.screen
        records = screen.model.records
        for index in range(shown[0], snap.count):
            lags.append(now - records[index].wall)  # folded Interval records, not dicts
        shown[0] = max(shown[0], snap.count)

    async with app.run_test(headless=True, size=size):
        while not isinstance(app.screen, LiveScreen):
            await asyncio.sleep(0.05)
        screen = app.screen
        screen.on_display = on_display
        writer = subprocess.Popen(
            [sys.executable, __file__, "--write", str(source), str(run), "--speed", str(speed)]
        )
        cpu0, wall0 = time.process_time(), time.monotonic()
        try:
            while writer.poll() is None or not (screen.latest and screen.latest.finished):
                await asyncio.sleep(0.1)  # not pilot.pause: it would add its own CPU
                if not app.is_running:  # it failed: leaving run_test raises its error
                    break
                if time.monotonic() - wall0 > 3600:
                    raise SystemExit("the replay did not finish within an hour")
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return cpu, wall, lags, redraws[0], shown[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--fps", type=float, default=4.0)
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--stream", type=Path, help="recorded stream (default: cached)")
    parser.add_argument("--write", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write(args.write[0], args.write[1], args.speed)
        return
    source = args.stream or cache_dir() / "bench" / f"tui-load-{args.ranks}.jsonl"
    if not source.exists():
        print(f"recording a {args.ranks}-rank stream into {source} (once) ...", flush=True)
        started = time.monotonic()
        make_stream(args.ranks, source)
        print(f"  done in {time.monotonic() - started:.0f} s", flush=True)
    lines = source.read_text().splitlines()
    intervals = sum(1 for line in lines if '"type":"interval"' in line)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="esdash-tui-load-") as tmp:
        run = Path(tmp) / "tui-load"
        run.mkdir()
        cpu, wall, lags, redraws, shown = asyncio.run(
            replay(run, source, args.speed, args.fps, (width, height))
        )
    lags.sort()
    print(
        f"stream: {intervals} interval records of {args.ranks} ranks "
        f"({source.stat().st_size / 1e6:.1f} MB), replayed at {args.speed:g}x in {wall:.1f} s"
    )
    print(f"dashboard: {args.size}, redraw tick {args.fps:g} Hz, {redraws} redraws of new data")
    print(f"CPU: {cpu:.2f} s in {wall:.1f} s = {cpu / wall * 100:.1f}% of one core")
    if lags:
        p95 = lags[min(len(lags) - 1, int(0.95 * len(lags)))]
        print(
            f"lag write -> display over {len(lags)} records: median "
            f"{statistics.median(lags) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {lags[-1] * 1000:.0f} ms"
        )
    if shown != intervals:
        print(f"warning: {intervals - shown} records were never shown")


if __name__ == "__main__":
    main()
