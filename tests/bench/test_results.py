"""results.json from interval payloads, and the export to the authors' per-query format."""

from __future__ import annotations

import json

import pytest
from support.records import as_json, header

from esdash.bench.recorder import Recorder
from esdash.bench.results import SCHEMA, RunAccumulator, build_results, export_authors_format
from esdash.rundir import hdr
from esdash.rundir.records import Final
from esdash.stats.merge import Merged

STEPS = [
    {
        "name": "s0",
        "queries": ["a", "b"],
        "warmup": 1,
        "duration": 3,
        "target_throughput": None,
    },
    {"name": "s1", "queries": ["c"], "warmup": 1, "duration": 3, "target_throughput": None},
]
HEADER = header(
    run_id="demo-1",
    started=1000.0,
    interval=1.0,
    bench_ranks=[{"rank": 1}, {"rank": 2}],
    steps=STEPS,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Run:
    """Two ranks with controllable clocks, feeding one accumulator like rank 0 would."""

    def __init__(self) -> None:
        self.clocks = [Clock(), Clock()]
        self.recorders = [Recorder(rank=r, clock=self.clocks[r]) for r in range(2)]
        self.acc = RunAccumulator(interval=1.0)
        self.seq = 0
        self.records: list[Merged] = []

    def interval(self, phase, step, seconds, work):
        """Let each rank do ``work(rank, recorder)`` for ``seconds``, then drain both."""
        merged = Merged()
        for rank, recorder in enumerate(self.recorders):
            work(rank, recorder)
            self.clocks[rank].now += seconds
            decoded = self.acc.add_interval(phase, step, rank, recorder.drain(), seq=self.seq)
            merged.merge(decoded)
        self.records.append(merged)
        self.seq += 1


def ingest_work(rank, recorder):
    for _ in range(10):
        recorder.record("bulk", f"node-{rank}", 0.100, 0.100, docs=100, nbytes=50_000)
    if rank == 1:
        recorder.record_bulk_rejections("bulk", "node-1", {"mapper_parsing_exception": 5})
        recorder.record_error("bulk", "node-1", "http_429", 429, "rejected", 0.002)
        recorder.record_bulk_rejections("bulk", "node-1", {"http_429": 100})


def measure_work(rank, recorder, scale=1):
    if rank == 0:
        for _ in range(100 * scale):
            recorder.record("a", "node-0", 0.010, 0.010, docs=10)
    else:
        for _ in range(50 * scale):
            recorder.record("a", "node-1", 0.020, 0.015, docs=10)
        for _ in range(10 * scale):
            recorder.record("b", "node-1", 0.200, 0.200, docs=1000)
        recorder.record_error("b", "node-1", "http_503", 503, "unavailable", 0.001)


@pytest.fixture(scope="module")
def run() -> Run:
    run = Run()
    for _ in range(2):
        run.interval("ingest", None, 1.0, ingest_work)
    run.interval("warmup", 0, 1.0, lambda rank, rec: rec.record("a", "n", 0.5, 0.5))
    for _ in range(3):
        run.interval("measure", 0, 1.0, measure_work)
    run.interval("measure", 0, 0.2, lambda rank, rec: measure_work(rank, rec, scale=0))
    return run


@pytest.fixture(scope="module")
def built(run: Run):
    return build_results(HEADER, run.acc, Final(t=10.0, status="ok", reason=None, wall=1010.0))


@pytest.fixture(scope="module")
def results(built) -> dict:
    """The results as written to results.json."""
    return as_json(built)


def test_accumulator_views(run):
    acc = run.acc
    assert set(acc.parts()) == {("ingest", None), ("warmup", 0), ("measure", 0)}
    assert acc.window("measure", 0) == pytest.approx(3.2)
    assert acc.window("ingest", None) == pytest.approx(2.0)
    assert set(acc.per_rank("measure", 0)) == {0, 1}
    assert acc.merged("measure", 0).ops["a"].ok == 450
    # The 0.2 s sliver is left out of the per-interval series.
    assert acc.interval_throughputs("measure", 0, "a") == [150.0, 150.0, 150.0]
    assert acc.interval_throughputs("measure", 0, "b") == [10.0, 10.0, 10.0]
    acc2 = RunAccumulator()
    acc2.set_window("measure", 0, 5.0)
    assert acc2.window("measure", 0) == 5.0


def test_returned_decoded_payloads_build_the_interval_records(run):
    last_full = run.records[5]
    assert last_full.ranks == {0, 1}
    assert last_full.ops["a"].ok == 150 and last_full.ops["b"].failed == 1


def test_results_document(results):
    assert results["schema"] == SCHEMA
    assert results["status"] == "ok" and results["ended"] == 1010.0 and results["ranks"] == 2
    assert json.loads(json.dumps(results, allow_nan=False)) == results
    assert results["unattributed_requests"] == {}

    step = results["steps"][0]
    assert step["status"] == "measured" and step["duration_s"] == pytest.approx(3.2)
    assert step["warmup"] == {"requests": 2, "errors": 0}
    assert list(step["queries"]) == ["a", "b"]  # planned order
    a = step["queries"]["a"]
    assert (a["requests"], a["ok"], a["failed"], a["docs"]) == (450, 450, 0, 4500)
    assert a["error_rate"] == 0.0
    assert a["throughput"]["requests_per_s"] == pytest.approx(450 / 3.2, abs=1e-3)
    assert a["throughput"]["docs_per_s"] == pytest.approx(4500 / 3.2, abs=1e-3)
    assert a["throughput"]["intervals"] == {
        "n": 3,
        "mean": 150.0,
        "std": 0.0,
        "min": 150.0,
        "median": 150.0,
        "max": 150.0,
    }
    latency = a["latency"]
    assert latency["count"] == 450
    assert latency["min"] == pytest.approx(10.0) and latency["max"] == pytest.approx(20.0)
    assert latency["gmean"] == pytest.approx(10 * 2 ** (150 / 450), abs=1e-4)  # 4 digits
    assert latency["p50"] == pytest.approx(10.0, rel=1e-3)
    assert latency["p99"] == pytest.approx(20.0, rel=1e-3)
    assert "p99.9" not in latency  # 450 samples cannot support it
    assert a["service_time"]["max"] == pytest.approx(15.0)
    assert set(a["per_rank"]) == {"0", "1"}
    assert a["per_rank"]["0"]["requests_per_s"] == pytest.approx(300 / 3.2, abs=1e-3)
    assert a["per_rank"]["1"]["latency"]["p50"] == pytest.approx(20.0, rel=1e-3)
    assert a["per_node"]["node-1"]["latency"]["gmean"] == pytest.approx(20.0)
    assert hdr.total(hdr.decode(a["histograms"]["latency"])) == 450

    b = step["queries"]["b"]
    # One failure per interval, the 0.2 s sliver included.
    assert (b["requests"], b["ok"], b["failed"]) == (34, 30, 4)
    assert b["errors"] == {"http_503": 4}
    assert b["error_rate"] == pytest.approx(4 / 34, abs=1e-6)
    assert b["error_time_mean"] == pytest.approx(1.0)
    assert b["last_errors"]["http_503"][0]["message"] == "unavailable"
    assert b["per_node"]["node-1"]["errors"] == {"http_503": 4}

    empty = results["steps"][1]
    assert empty["status"] == "no data" and empty["queries"] == {}
    assert empty["planned"]["queries"] == ["c"]


def test_ingest_results(results):
    ingest = results["ingest"]
    assert ingest["duration_s"] == pytest.approx(2.0)
    assert ingest["docs"] == 4000
    assert ingest["docs_per_s"] == pytest.approx(2000.0)
    assert ingest["rejected_docs"] == {"bulk_item_mapper_parsing_exception": 10, "http_429": 200}
    bulk = ingest["ops"]["bulk"]
    assert bulk["requests"] == 42 and bulk["failed"] == 2
    assert bulk["latency"]["gmean"] == pytest.approx(100.0)


def test_requests_outside_known_parts_are_reported():
    acc = RunAccumulator()
    recorder = Recorder()
    recorder.record("a", "n", 0.01, 0.01)
    acc.add_interval("sync", None, 0, recorder.drain())
    results = build_results(HEADER, acc)
    assert results.unattributed_requests == {"sync:None": 1}
    assert results.ingest is None and results.status is None


def test_export_in_the_authors_format(built):
    exported = export_authors_format(built, bodies={0: {"a": {"query": {"match_all": {}}}}})
    assert len(exported) == 2
    step = exported[0]
    assert step["warmup_time_secs"] == 1 and step["execution_time_secs"] == 3
    assert step["sleep_between_requests_secs"] == 0.0
    assert step["esdash_export"]["approximate"] is True
    a, b = step["search_results"]
    assert a["query"] == {"body": {"query": {"match_all": {}}}}
    assert b["query"] == {"name": "b"}
    assert [len(r) for r in a["responses"]] == [300, 150]
    rank1 = a["responses"][1]
    # Rank 1's service time was 15 ms for every request; its bucket's middle is within 0.1 %.
    assert all(abs(r["latency"] - 0.015) <= 0.015e-3 for r in rank1)
    assert sum(r["docs"] for r in rank1) == 1500
    errors = [r for r in b["responses"][1] if "error_code" in r]
    assert errors == [{"error_code": 503}] * 4
    assert b["responses"][0] == []
    assert exported[1]["search_results"] == []
    json.dumps(exported)


def test_export_spreads_uneven_docs_exactly():
    acc = RunAccumulator()
    recorder = Recorder(rank=0)
    for docs in (1, 2, 4):
        recorder.record("q", "n", 0.001, 0.001, docs=docs)
    recorder.record_error("q", "n", "timeout", None, "slow")
    acc.add_interval("measure", 0, 0, recorder.drain(), seq=0)
    one_rank = header(run_id="demo-1", started=1000.0, bench_ranks=[{"rank": 1}], steps=STEPS)
    exported = export_authors_format(build_results(one_rank, acc), think_time=[0.25, 0.0])
    responses = exported[0]["search_results"][0]["responses"][0]
    assert sorted(r.get("docs", -1) for r in responses) == [-1, 2, 2, 3]
    assert responses[-1] == {"error_code": -1}
    assert exported[0]["sleep_between_requests_secs"] == 0.25
