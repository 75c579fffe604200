"""The measurement path end to end, as rank 0 runs it (without MPI: ranks are recorders here).

recorders -> drain -> RunAccumulator.add_interval (decoded once) -> Merged per interval ->
stream records -> StreamWriter -> StreamReader -> log lines; accumulator -> results.json ->
summary and thresholds.
"""

from __future__ import annotations

import json

from support.records import final as final_record
from support.records import header as header_record
from support.records import interval as interval_record

from esdash.bench.recorder import Recorder
from esdash.bench.results import RunAccumulator, build_results
from esdash.rundir import files
from esdash.rundir.records import Results
from esdash.rundir.stream import StreamReader, StreamWriter
from esdash.stats.merge import Merged
from esdash.view.summary import render_record_line, render_summary
from esdash.view.thresholds import evaluate_thresholds, parse_threshold

STARTED = 2_000_000_000.0


def test_from_recorders_to_summary(tmp_path):
    clocks = [0.0, 0.0]
    recorders = [Recorder(rank=r, clock=lambda r=r: clocks[r]) for r in range(2)]
    header = header_record(
        run_id="pipeline",
        session={"name": "pipeline"},
        plugins={"esdash": "0.1.0"},
        topology_={"nodes": [{"name": "n0"}, {"name": "n1"}]},
        bench_ranks=[{"rank": r, "host": "h", "target": f"n{r}"} for r in range(2)],
        slurm_job_id=None,
        started=STARTED,
        interval=1.0,
        steps=[{"name": "one", "queries": ["q"], "warmup": 0, "duration": 4}],
    )
    acc = RunAccumulator(interval=header.interval)
    path = tmp_path / "stream.jsonl"
    with StreamWriter(path) as writer:
        writer.write(header)
        for seq in range(4):
            interval = Merged()
            for rank, recorder in enumerate(recorders):
                if seq == 2 and rank == 1:
                    continue  # rank 1 is late with this interval
                for k in range(100):
                    latency = 0.002 * (1 + rank) * (1 + (k % 5) / 10)
                    recorder.record("q", f"n{rank}", latency, latency, docs=10)
                clocks[rank] += 1.0
                interval.merge(acc.add_interval("measure", 0, rank, recorder.drain(), seq=seq))
            writer.write(
                interval_record(
                    seq=seq,
                    t=seq + 1.0,
                    wall=STARTED + seq + 1,
                    phase="measure",
                    step=0,
                    step_name="one",
                    elapsed=interval.elapsed,
                    ops=interval.to_payload().ops,
                    ranks=sorted(interval.ranks),
                    missing_ranks=[r for r in range(2) if r not in interval.ranks],
                )
            )
        final = final_record(t=5.0, wall=STARTED + 5, status="ok")
        writer.write(final)

    reader = StreamReader(path)
    records = reader.read_all()
    assert reader.problems == [] and reader.finished
    lines = [render_record_line(record, reader.header) for record in records]
    assert "missing ranks 1" in lines[3]
    assert lines[-1].endswith("run ended: ok")

    results = build_results(reader.header, acc, reader.final)
    written = json.loads(files.encode(results))  # no NaN or Infinity: strict JSON
    assert files.convert(written, Results, tmp_path) == results
    q = results.steps[0].queries["q"]
    assert q.requests == 700  # rank 1's late interval never arrived: 100 fewer
    assert set(q.per_rank) == {"0", "1"}
    assert q.per_node["n1"].requests == 300
    summary = render_summary(results)
    assert "1 one  q" in summary
    failures = evaluate_thresholds([parse_threshold("q:p99<3ms")], results)
    assert len(failures) == 1 and "p99 is" in failures[0].message
