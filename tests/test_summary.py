"""Text renderings: the end-of-run summary (exact strings), the live table, log lines."""

from __future__ import annotations

from pathlib import Path

from support.records import event as event_record
from support.records import final as final_record
from support.records import header as header_record
from support.records import interval as interval_record

from esdash.bench.recorder import Recorder
from esdash.rundir import files
from esdash.rundir.records import Results
from esdash.stats.merge import merge_payloads
from esdash.view import format as fmt
from esdash.view.summary import render_live, render_record_line, render_summary


def results(document) -> Results:
    """A results.json document, read as the summary's callers read it."""
    return files.convert(document, Results, Path("results.json"))


def op(requests, failed, mean, std, n, rps, docs_ps, gmean, gstd, p50, p99, mx, p99_9=None):
    latency = {
        "count": requests - failed,
        "min": 1.0,
        "mean": gmean,
        "gmean": gmean,
        "gstd": gstd,
        "p1": 1.0,
        "p50": p50,
    }
    if p99 is not None:
        latency["p99"] = p99
    if p99_9 is not None:
        latency["p99.9"] = p99_9
    latency["max"] = mx
    return {
        "requests": requests,
        "ok": requests - failed,
        "failed": failed,
        "errors": {"http_429": failed} if failed else {},
        "error_rate": failed / requests if requests else None,
        "docs": 0,
        "bytes": 0,
        "rejected_docs": {},
        "throughput": {
            "requests_per_s": rps,
            "docs_per_s": docs_ps,
            "intervals": {
                "n": n,
                "mean": mean,
                "std": std,
                "min": None,
                "median": None,
                "max": None,
            },
        },
        "latency": latency,
        "service_time": latency,
        "error_time_mean": None,
        "per_rank": {},
        "per_node": {},
        "last_errors": {},
        "histograms": {},
    }


CANNED = {
    "schema": "esdash.results/1",
    "run_id": "nyc-20261121-031000",
    "started": 1000.0,
    "ended": 5000.0,
    "status": "ok",
    "reason": None,
    "units": {},
    "ranks": 3,
    "ingest": {
        "duration_s": 3334.04,
        "docs": 165346692,
        "docs_per_s": 49593.8,
        "rejected_docs": {"bulk_item_mapper_parsing_exception": 12},
        "ops": {
            "bulk": op(
                16535,
                0,
                4.96,
                0.3,
                3334,
                4.96,
                49593.8,
                486.0,
                1.62,
                421.0,
                4080.0,
                15900.0,
                7000.0,
            )
        },
    },
    "steps": [
        {
            "index": 0,
            "name": "match_all",
            "status": "measured",
            "duration_s": 300.0,
            "queries": {
                "match_all": op(
                    221051, 0, 736.8, 12.14, 300, 736.84, 7368.4, 3.8, 1.16, 3.8, 4.7, 551.0, 9.9
                )
            },
        },
        {
            "index": 1,
            "name": "mixed",
            "status": "measured",
            "duration_s": 300.0,
            "queries": {
                "range": op(
                    5802, 0, 19.34, 1.1, 300, 19.34, 19340.0, 112.1, 1.04, 113.0, 121.3, 192.0
                ),
                "match_all": op(
                    5900, 100, 19.33, 0.9, 300, 19.33, 19333.0, 21.8, 1.17, 23.8, 28.3, 118.0
                ),
            },
        },
        {"index": 2, "name": "agg", "status": "no data", "duration_s": 0.0, "queries": {}},
        {
            "index": 3,
            "name": "tiny",
            "status": "measured",
            "duration_s": 0.5,
            "queries": {"one": op(5, 0, None, None, 0, 10.0, 0.0, 0.412, 1.05, 0.41, None, 0.45)},
        },
    ],
    "unattributed_requests": {},
}


# The expected table is wider than a source line: it lives next to the other fixtures.
EXPECTED_SUMMARY = (Path(__file__).parent / "fixtures" / "summary" / "canned.txt").read_text()


def test_summary_table_is_exact():
    assert render_summary(results(CANNED)) == EXPECTED_SUMMARY


def test_summary_of_an_aborted_run_without_ingest():
    aborted = {**CANNED, "status": "aborted", "reason": "received SIGTERM", "ingest": None}
    aborted["steps"] = CANNED["steps"][:1]
    assert render_summary(results(aborted)) == (
        "esdash run nyc-20261121-031000: aborted (received SIGTERM), 3 bench ranks\n"
        "\n"
        "step         query      requests  req/s (+- std)  hits/s  gmean ms  gstd"
        "  p50 ms  p99 ms  max ms  errors\n"
        "------------ ---------- --------- --------------- ------- --------- -----"
        " ------- ------- ------- ------\n"
        "1 match_all  match_all   221,051   736.8 +- 12.1   7,368      3.80  1.16"
        "    3.80    4.70   551.0       0\n"
        "  req/s = successful requests / the planned step duration (results format 1, written "
        "before esdash measured the seconds)\n"
        "  +- = the standard deviation of the step's per-interval req/s (full intervals only)\n"
        "  hits/s = documents the searches returned (their hits) / the seconds of req/s\n"
        "  closed loop (no target throughput): latency percentiles are service times\n"
    )


def test_number_formats():
    """One formatter for every viewer; latencies in seconds (results' ms convert first)."""
    seconds = [None, 0.0004123, 0.0038, 0.07814, 0.41994, 8.6712, 123.4]
    assert [fmt.ms(v) for v in seconds] == ["-", "0.412", "3.80", "78.1", "419.9", "8,671", "123s"]
    assert fmt.ms(fmt.from_ms(419.94)) == "419.9"
    rates = [None, 0.25, 736.84, 118767.0, 2_345_678.0]
    assert [fmt.rate(v) for v in rates] == ["-", "0.2", "736.8", "118,767", "2.3M"]
    assert [fmt.count(v) for v in (None, 0, 12_345_678, 2_000_000_000)] == [
        "-",
        "0",
        "12,345,678",
        "2.0G",
    ]
    assert fmt.errors(0, 10) == "0" and fmt.errors(3, 1000) == "3 (0.30%)"
    assert fmt.duration(185) == "3m05s" and fmt.change(0.123) == "+12.3%"


def _interval():
    recorders = [Recorder(rank=r) for r in range(2)]
    for k in range(200):
        recorders[k % 2].record("age", "n0", 0.001 * (1 + k % 10), 0.001, 10, 100)
    for _ in range(20):
        recorders[0].record("range", "n0", 0.050, 0.050, 1000, 100)
    recorders[1].record_error("range", "n0", "http_429", 429, "rejected")
    ops = merge_payloads(r.drain() for r in recorders).to_payload().ops
    return interval_record(
        seq=11,
        t=12.0,
        wall=1012.0,
        phase="measure",
        step=1,
        step_name="sizes",
        elapsed=2.0,
        ops=ops,
        ranks=[0],
        missing_ranks=[1],
    )


HEADER = header_record(
    run_id="demo",
    session={},
    plugins={},
    topology_={"nodes": [{"name": "n0"}, {"name": "n1"}]},
    bench_ranks=[
        {"rank": 0, "host": "h", "target": "n0"},
        {"rank": 1, "host": "h", "target": "n1"},
    ],
    slurm_job_id="77",
    started=1000.0,
    interval=2.0,
    steps=[{"name": s, "queries": [], "warmup": 0, "duration": 10} for s in ("a", "sizes", "c")],
)


def test_live_table():
    """Every figure is the interval's (``now``); a search's documents are hits/s; p99 of
    'range' is hidden: 20 samples in the interval cannot support it."""
    assert render_live(_interval(), HEADER) == (
        "t=12.0s  measure step 2/3 sizes  missing ranks: 1  (now: this 2.0 s interval)\n"
        "op     req/s now  hits/s now  p50 ms  p99 ms     errors\n"
        "------ ---------- ----------- ------- ------- ---------\n"
        "age        100.0       1,000    5.00    10.0          0\n"
        "range       10.0      10,000    50.0       -  1 (4.76%)\n"
    )


def test_one_line_per_record():
    ingest = interval_record(
        seq=3,
        t=4.0,
        wall=1004.0,
        phase="ingest",
        step=None,
        step_name=None,
        elapsed=1.0,
        ops={},
        ranks=[0, 1],
        docs_done=1_200_000,
        docs_total=2_600_000,
    )
    lines = [
        render_record_line(HEADER),
        render_record_line(ingest, HEADER),
        render_record_line(_interval(), HEADER),
        render_record_line(
            event_record(t=20.0, wall=1020.0, kind="node_lost", level="warning", message="n1 gone")
        ),
        render_record_line(final_record(t=30.0, wall=1030.0, status="failed", reason="boom")),
    ]
    assert lines == [
        "[     0.0s] run demo: 2 bench ranks, 2 nodes, 3 steps, interval 2 s, slurm job 77",
        "[     4.0s] ingest: 46.2% (1,200,000/2,600,000 docs)",
        "[    12.0s] measure step 2/3 sizes: age now 100.0 req/s 1,000 hits/s p50 5.00 p99 10.0"
        " ms err 0; range now 10.0 req/s 10,000 hits/s p50 50.0 p99 - ms err 1 (4.76%);"
        " missing ranks 1",
        "[    20.0s] WARNING node_lost: n1 gone",
        "[    30.0s] run ended: failed (boom)",
    ]
    assert all("\x1b" not in line and line.isascii() for line in lines)
