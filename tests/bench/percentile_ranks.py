"""MPI program for ``test_percentile_pipeline.py``: known latencies through the real ranks.

``mpiexec -n N python percentile_ranks.py RUN_DIR RAW_JSON``.  Workers (ranks 1..N-1) each
record a seeded set of latencies and service times into a real :class:`Recorder` and report
it with the real :class:`Reporter` (interval payloads appended to its channel file, then a
final report), as ``run_worker`` does.  Rank 0 runs the real :class:`Coordinator` and
:class:`StreamSink`, so the stream and ``results.json`` come out of the code every run uses;
it also gathers the raw values into ``RAW_JSON`` for the test to compute the reference
statistics from.  Only the HTTP requests are missing: the values are recorded instead of
measured.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from mpi4py import MPI

from esdash.bench.channel import ChannelWriter
from esdash.bench.coordinator import Coordinator
from esdash.bench.rank_state import RankState, Schedule
from esdash.bench.recorder import Recorder
from esdash.bench.reporting import KIND_FINAL, Reporter
from esdash.rundir.layout import RunDir

SEED = 20240613
#: Requests per worker, recorded in this many intervals.
REQUESTS = 1500
CHUNKS = 4
QUERY = "q"


def latencies(rank: int) -> tuple[list[float], list[float]]:
    """Rank ``rank``'s latencies and service times (seconds): log-normal, median 2 ms * rank.

    The spread puts values below 2 ms (the histogram's 1 µs buckets) and far above (0.1 %
    buckets); service time is a random share of the latency, as a paced wait would leave.
    """
    rng = np.random.default_rng([SEED, rank])
    latency = rng.lognormal(np.log(0.002 * rank), 0.7, REQUESTS)
    service = latency * rng.uniform(0.3, 1.0, REQUESTS)
    return latency.tolist(), service.tolist()


def worker(run: RunDir, rank: int, schedule: Schedule, node: str) -> None:
    while time.time() < schedule.t0:
        time.sleep(0.01)
    recorder = Recorder(rank)
    state = RankState(phase="measure", step=0)
    reporter = Reporter(ChannelWriter(run.rank_channel(rank)), rank, recorder, schedule, state)
    latency, service = latencies(rank)
    size = -(-REQUESTS // CHUNKS)
    for start in range(0, REQUESTS, size):
        for lat, svc in zip(
            latency[start : start + size], service[start : start + size], strict=True
        ):
            recorder.record(QUERY, node, lat, svc, docs=1, nbytes=100)
        # sit out the rest of the interval: its boundary sends the payload
        boundary = reporter.next_boundary
        while True:
            reporter.tick()
            if time.time() > boundary:
                break
            time.sleep(0.005)
    state.phase = "done"
    reporter.flush(partial=True)
    final = {
        "rank": rank,
        "status": "ok",
        "steps": [{"index": 0, "step": "s", "status": "ok", "node": node, "requests": REQUESTS}],
    }
    reporter.send(final, KIND_FINAL)


def coordinator(size: int, run: RunDir, schedule: Schedule) -> None:
    """Rank 0: the real coordinator's receive and emit, the real sink's stream and results.

    ``Coordinator.serve`` also drives the step conductor (index, settling, warm-up), which
    needs a cluster; this loop is serve's without it: receive, emit due intervals, stop when
    every worker's final report is in.
    """
    from esdash.bench.sink import StreamSink

    plan = run.read_bench_plan()
    sink = StreamSink(run, plan, size - 1, run.read_topology())
    start = {"t0": schedule.t0, "index": {"ingest": False, "reason": "test"}, "error": None}
    everyone = [{"rank": r, "host": "localhost", "target": "node-0"} for r in range(1, size)]
    sink.start(start, everyone)
    coordinating = Coordinator(run, size - 1, schedule, sink)
    deadline = time.time() + 120
    while len(coordinating.finals) < size - 1 and time.time() < deadline:
        if not coordinating.receive():
            time.sleep(0.01)
        coordinating.emit_due(time.time())
    coordinating.receive()
    coordinating.emit_due(float("inf"))
    sink.finish(coordinating.finals, coordinating.errors)


def main(run_path: str, raw_path: str) -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    run = RunDir.open(run_path)
    t0 = comm.bcast(time.time() + 0.5 if rank == 0 else None, root=0)
    schedule = Schedule(t0, run.read_bench_plan().interval)
    if rank:
        worker(run, rank, schedule, run.read_topology().nodes[0].name)
    else:
        coordinator(size, run, schedule)
    raw = comm.gather(latencies(rank) if rank else None, root=0)
    if rank == 0:
        assert raw is not None
        out = {str(r): {"latency": v[0], "service_time": v[1]} for r, v in enumerate(raw) if v}
        Path(raw_path).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1], sys.argv[2])
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)  # the other ranks would wait for this one forever
    sys.exit(code)
