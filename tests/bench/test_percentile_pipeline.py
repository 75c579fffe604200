"""The percentile pipeline, checked: known latencies in, numpy's statistics out.

Three worker ranks (``mpiexec -n 4``, ``percentile_ranks.py``) record seeded latencies into
real recorders and report them through their channel files the way ``run_worker`` does; rank 0
merges them with the real coordinator, stream sink and results code.  Here ``results.json``
and the stream are read back through :mod:`esdash.rundir` and compared with numpy on the raw values:

* count, min, max and mean exactly (up to the 4 decimals of milliseconds results keep);
* gmean and gstd exactly too: the recorder sums ``ln(x)`` and ``ln(x)**2`` per value;
* every reported percentile within HDR's precision of the raw order statistic HdrHistogram
  picks (rank ``round(p * n / 100)``, from numpy's sort): the recorder truncates to whole
  microseconds, and a bucket's highest equivalent value is at most 1/1024 above its lowest.
  (numpy's default percentile interpolates between neighbours instead; in the sparse tails
  of 1500 samples that alone differs by a few percent, more than HDR's error.)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from support.prereqs import venv_bin
from support.procs import run_bounded

from esdash.rundir import files, hdr
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    BenchPlan,
    Interval,
    LatencyStats,
    NodePlan,
    PlannedQuery,
    PlannedStep,
    Topology,
)
from esdash.rundir.stream import StreamReader
from esdash.stats import PERCENTILES, percentile_name, supported_percentiles

pytestmark = pytest.mark.mpi

PROGRAM = Path(__file__).with_name("percentile_ranks.py")
WORKERS = 3
MS = 1000.0
#: results.json keeps milliseconds to 4 decimals (0.1 µs) and gstd to 4 decimals.
ROUNDING = 0.5e-4 + 1e-9
#: The recorder truncates to whole microseconds (ms here).
TRUNCATION = 1e-3
#: The run directory, and per worker rank its raw ``latency`` and ``service_time`` (seconds).
Pipeline = tuple[RunDir, dict[str, dict[str, list[float]]]]
#: A bucket's highest equivalent value is at most this share above its lowest.
BUCKET_SHARE = 1 / 2 ** (hdr.HALF_COUNT_MAGNITUDE)


def prepare_run(root: Path) -> RunDir:
    """A run directory with what rank 0 reads: run info, session, topology and bench plan."""
    run = RunDir.create(root, "pipeline")
    run.session_file.write_text(
        'name = "pipeline"\n[cluster]\nnodes = 1\n[track]\nname = "mri"\ndocuments = 10\n'
    )
    with run.edit_info() as info:
        info.session_name = "pipeline"
    node = NodePlan(
        rank=0,
        name="node-0",
        host="localhost",
        interface="lo",
        address="127.0.0.1",
        http_port=9200,
        transport_port=9300,
        master_eligible=True,
    )
    run.write_topology(Topology(cluster_name="pipeline", nodes=(node,)))
    query = PlannedQuery(name="q", index="i", body={"query": {"match_all": {}}})
    step = PlannedStep(name="s", queries=(query,), warmup=0.0, duration=1.0, target_throughput=None)
    run.write_bench_plan(
        BenchPlan(
            index="i",
            index_body={},
            corpus_path="",
            corpus_documents=None,
            corpus_has_actions=False,
            bulk_size=1,
            steps=(step,),
            interval=0.25,
            seed=1,
            ranks=WORKERS,
        )
    )
    return run


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    root = tmp_path_factory.mktemp("percentiles")
    run = prepare_run(root / "runs")
    raw_file = root / "raw.json"
    command = [str(venv_bin() / "mpiexec"), "-n", str(WORKERS + 1), sys.executable, str(PROGRAM)]
    proc = run_bounded([*command, str(run.path), str(raw_file)], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run, json.loads(raw_file.read_text())


def check(stats: LatencyStats, raw: np.ndarray) -> None:
    """``stats`` (milliseconds) against numpy on ``raw`` (seconds)."""
    n = raw.size
    ms = np.sort(raw) * MS
    logs = np.log(raw)
    assert stats.count == n
    assert stats.min == pytest.approx(ms[0], abs=ROUNDING)
    assert stats.max == pytest.approx(ms[-1], abs=ROUNDING)
    assert stats.mean == pytest.approx(ms.mean(), abs=ROUNDING)
    assert stats.gmean == pytest.approx(math.exp(logs.mean()) * MS, abs=ROUNDING)
    assert stats.gstd == pytest.approx(math.exp(logs.std(ddof=1)), abs=ROUNDING)
    stored = files.to_builtins(stats)  # percentiles only where n supports them
    present = {name for name, value in stored.items() if name[0] == "p" and value is not None}
    assert present == {percentile_name(p) for p in supported_percentiles(n)}
    for percentile in supported_percentiles(n):
        value = stored[percentile_name(percentile)]
        exact = ms[max(int(percentile * n / 100 + 0.5), 1) - 1]
        low = exact - TRUNCATION - ROUNDING
        high = min(exact * (1 + BUCKET_SHARE), ms[-1]) + ROUNDING
        assert low <= value <= high, (percentile, value, exact)


@pytest.mark.parametrize("series", ["latency", "service_time"])
def test_results_match_numpy_on_the_raw_values(pipeline: Pipeline, series: str) -> None:
    run, raw = pipeline
    results = run.read_results()
    assert results.status == "ok" and results.missing_ranks == []
    query = results.steps[0].queries["q"]
    pooled = np.concatenate([np.asarray(raw[r][series]) for r in sorted(raw)])
    assert query.requests == query.ok == pooled.size == WORKERS * 1500
    assert set(PERCENTILES) == set(supported_percentiles(pooled.size))  # p99.9 included
    check(getattr(query, series), pooled)
    for rank, values in raw.items():
        check(getattr(query.per_rank[rank], series), np.asarray(values[series]))


def test_the_stream_holds_the_same_samples(pipeline: Pipeline) -> None:
    """Interval records, merged again, give back every sample and the results' histogram."""
    run, raw = pipeline
    reader = StreamReader(run.stream_file)
    intervals = [r for r in reader.read_all() if isinstance(r, Interval) and "q" in r.ops]
    assert reader.problems == [] and reader.finished
    assert len({r.seq for r in intervals}) >= 2  # several intervals were merged
    counts = hdr.merge(r.ops["q"].latency.hdr for r in intervals)
    assert hdr.total(counts) == sum(len(v["latency"]) for v in raw.values())
    encoded = run.read_results().steps[0].queries["q"].histograms.latency
    assert encoded is not None
    assert np.array_equal(hdr.trim(counts), hdr.trim(hdr.decode(encoded)))
