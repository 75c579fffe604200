"""The authors' result files, read next to esdash runs (fixtures in tests/fixtures/authors)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from support import synthetic
from support.cli import esdash
from support.records import as_json

from esdash.errors import BadInput
from esdash.report.document import build_report
from esdash.view.authors import load_ingest, load_queries, sniff
from esdash.view.inputs import load_inputs

AUTHORS = Path(__file__).parent.parent / "fixtures" / "authors"
QUERIES = AUTHORS / "query-3n-1ppn.json"
MATCH_ALL_1000 = {"query": {"match_all": {}}, "size": 1000}
RANGE_1000 = {"query": {"range": {"total_amount": {"gte": 5, "lt": 15}}}, "size": 1000}


def test_their_query_results_become_results() -> None:
    assert sniff(QUERIES) == "queries"
    results = as_json(load_queries(QUERIES, "paper"))
    assert results["ranks"] == 3
    first, second = results["steps"]
    assert (first["name"], list(first["queries"])) == ("step0", ["q0"])
    op = first["queries"]["q0"]
    latencies = [0.004, 0.005, 0.003, 0.006, 0.004, 0.008]
    assert op["requests"] == op["ok"] == 6 and op["docs"] == 60
    assert op["throughput"]["requests_per_s"] == 3.0  # successful requests / execution time
    assert op["throughput"]["intervals"]["n"] == 0  # no timestamps: no interval spread
    gmean = math.exp(statistics.fmean(math.log(v) for v in latencies)) * 1000
    assert op["latency"]["gmean"] == pytest.approx(gmean, abs=1e-4)
    assert op["latency"]["max"] == 8.0 and op["latency"]["p50"] == pytest.approx(4.0, rel=1e-3)
    mixed = second["queries"]
    assert mixed["q0"]["errors"] == {"http_429": 1} and mixed["q0"]["requests"] == 4
    assert mixed["q0"]["throughput"]["requests_per_s"] == 0.75
    assert mixed["q1"]["ok"] == 3 and mixed["q1"]["body"] == RANGE_1000


@pytest.mark.parametrize("name", ["ingest-3n-2ppn.txt", "ingest-3n-2ppn-lines.txt"])
def test_their_ingest_files_both_layouts(name: str) -> None:
    assert sniff(AUTHORS / name) == "ingest"
    ingest = as_json(load_ingest(AUTHORS / name, "paper", docs=9500))["ingest"]
    assert ingest["duration_s"] == 4.75  # the slowest rank's summed bulk time
    assert ingest["cpu_time_s"] == pytest.approx(11.45)
    assert ingest["docs_per_s"] == 2000.0
    assert ingest["ops"]["bulk"]["requests"] == 8
    assert load_ingest(AUTHORS / name, "paper").ingest.docs_per_s is None


def test_broken_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("['0:00:01.5', 'soon']")
    with pytest.raises(BadInput, match="bad.txt: list 1 is not a list of 'H:MM:SS.ff'"):
        load_ingest(bad, "x")
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(BadInput, match="notes.txt: not a run or campaign directory"):
        load_inputs([str(other)])


def test_a_campaign_file_nested_too_deeply_is_named(tmp_path: Path) -> None:
    deep = tmp_path / "study.toml"
    deep.write_text("name = 'x'\naxes = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(BadInput, match=f"^{deep}: nested too deeply"):
        load_inputs([str(deep)])


def test_their_numbers_land_next_to_a_run(tmp_path: Path) -> None:
    """Their unnamed queries take the names of the run's queries with the same bodies."""
    run = synthetic.write_run(
        tmp_path,
        "ours",
        {
            "match_all_10": {"match_all_10": synthetic.op([3.0, 4.0, 5.0])},
            "mixed": {
                "range_1000": synthetic.op([100.0, 110.0]),
                "match_all_1000": synthetic.op([20.0, 22.0]),
            },
        },
        {"nodes": 3, "interconnect": "ethernet"},
        bodies={
            "match_all_10": {"query": {"match_all": {}}},
            "range_1000": RANGE_1000,
            "match_all_1000": MATCH_ALL_1000,
        },
    )
    meta = "#nodes=3,ppn=1,setup=none,interconnect=ethernet"
    inputs = load_inputs(
        [str(run), f"{QUERIES}{meta}", f"{AUTHORS / 'ingest-3n-2ppn.txt'}{meta},docs=9500"]
    )
    report = build_report(inputs)
    rows = {(r["source"], r["step"], r["query"]): r for r in report.table("queries").records}
    assert rows[("authors", "mixed", "range_1000")]["requests"] == 3
    assert rows[("authors", "match_all_10", "match_all_10")]["throughput_mean"] == 3.0
    assert rows[("esdash", "mixed", "range_1000")]["requests"] == 2
    labels = [r[0] for r in report.table("queries").rows]
    assert "none [authors]" in labels
    (ingest,) = report.table("ingest").records
    assert ingest["source"] == "authors" and ingest["docs_per_s_mean"] == 2000.0
    compared = esdash(
        "compare", f"{QUERIES}{meta}", str(run), "--format", "md", env_runs=tmp_path / "runs"
    )
    # one value per side, no intervals: the ratio without an interval, and no verdict
    line = (
        "| ours | mixed/range_1000 | req/s | 0.8 | 0.2 | 0.267 | - | inconclusive | - | no "
        "spread known (baseline: one value of an imported file; contender: one value, no "
        "stream) |"
    )
    assert line in compared.stdout
    line = "| ours | mixed/range_1000 | p99 ms | - | - | - | - | - | - | too few samples |"
    assert line in compared.stdout
