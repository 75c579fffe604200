"""`esdash report` on synthetic runs with known numbers: tables, CSV, JSON, figures."""

from __future__ import annotations

import csv
import json
import math
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import synthetic
from support.cli import esdash

from esdash.report.document import build_report, write_report
from esdash.view import format as fmt
from esdash.view.inputs import load_inputs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
A = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 8.0]
B = [2.0, 2.0, 3.0, 5.0, 9.0]


def single(tmp_path: Path) -> Path:
    return synthetic.write_run(
        tmp_path,
        "one",
        {"age": {"age": synthetic.op(A, rates=[10.0, 12.0, 14.0])}},
        ingest=synthetic.ingest(4.0),
    )


def test_a_single_runs_numbers_are_its_own(tmp_path: Path) -> None:
    run = single(tmp_path)
    report = build_report(load_inputs([str(run)]))
    (row,) = report.table("queries").records
    op = json.loads((run / "results.json").read_text())["steps"][0]["queries"]["age"]
    # req/s = successful requests / seconds measured (7 in 10 s); +- its intervals' spread
    assert row["throughput_mean"] == pytest.approx(0.7) and row["throughput_std"] == 2.0
    assert row["throughput_basis"] == "intervals" and row["throughput_n"] == 3
    assert row["latency_gmean_ms"] == op["latency"]["gmean"]
    assert row["latency_gstd"] == op["latency"]["gstd"]
    assert row["latency_p1_ms"] == op["latency"]["p1"] and row["latency_p99_ms"] is None
    assert row["requests"] == 7 and row["runs"] == 1
    cells = report.table("queries").rows[0]
    assert cells[:5] == ["none", "loopback", "1", "1", "age"]
    assert cells[7] == f"{fmt.rate(0.7)} +- 2.0"
    assert cells[9] == fmt.ms(fmt.from_ms(op["latency"]["gmean"]))
    (ingest,) = report.table("ingest").records
    assert ingest["duration_s_mean"] == 4.0 and ingest["docs_per_s_mean"] == 250.0


def test_repetitions_are_pooled_exactly(tmp_path: Path) -> None:
    first = synthetic.write_run(tmp_path, "r1", {"s": {"q": synthetic.op(A, rates=[10, 12, 14])}})
    second = synthetic.write_run(tmp_path, "r2", {"s": {"q": synthetic.op(B, rates=[20, 22])}})
    (row,) = build_report(load_inputs([str(first), str(second)])).table("queries").records
    rates = [7 / 10, 5 / 10]  # each run's successful requests / seconds measured
    assert row["runs"] == 2 and row["throughput_n"] == 2
    assert row["throughput_mean"] == pytest.approx(statistics.fmean(rates))
    assert row["throughput_std"] == pytest.approx(statistics.stdev(rates))
    logs = [math.log(v / 1000) for v in A + B]
    # rounded to 4 digits like results.json
    assert row["latency_gmean_ms"] == round(math.exp(statistics.fmean(logs)) * 1000, 4)
    assert row["latency_gstd"] == round(math.exp(statistics.stdev(logs)), 4)
    assert row["latency_p50_ms"] == pytest.approx(synthetic.percentile(A + B, 50), rel=1e-3)
    assert row["latency_p1_ms"] == pytest.approx(min(A + B), rel=1e-3)


def test_overhead_as_in_the_accumulo_study(tmp_path: Path) -> None:
    """Median, min and max over repetitions; % change median vs median, and so on."""
    runs = []
    for mode, rates, durations in (
        ("none", [100.0, 110.0, 90.0], [10.0, 11.0, 12.0]),
        ("abe", [80.0, 85.0, 95.0], [13.0, 14.0, 15.0]),
    ):
        for k, (rate, duration) in enumerate(zip(rates, durations, strict=True)):
            runs.append(
                synthetic.write_run(
                    tmp_path,
                    f"{mode}{k}",
                    {"s": {"q": synthetic.op(A, requests_per_s=rate)}},
                    {"mode": mode},
                    ingest=synthetic.ingest(duration),
                )
            )
    report = build_report(load_inputs([str(r) for r in runs]))
    records = {r["metric"]: r for r in report.table("overhead").records}
    throughput = records["throughput req/s"]
    assert throughput["setup"] == "abe" and throughput["baseline"] == "none"
    assert throughput["baseline_stats"]["median"] == 100.0
    assert throughput["change_median_pct"] == pytest.approx((85 / 100 - 1) * 100)
    assert throughput["change_min_pct"] == pytest.approx((80 / 90 - 1) * 100)
    assert throughput["change_max_pct"] == pytest.approx((95 / 110 - 1) * 100)
    assert throughput["setup_stats"]["std"] == pytest.approx(statistics.stdev([80, 85, 95]))
    ingest = records["ingest time s"]
    assert ingest["change_median_pct"] == pytest.approx((14 / 11 - 1) * 100)
    assert records["latency gmean ms"]["change_median_pct"] == pytest.approx(0.0)
    row = next(r for r in report.table("overhead").rows if r[5] == "throughput req/s")
    assert row[6] == "100.0 [90.0, 110.0] (3)" and row[-5:-2] == ["-15.00%", "-11.11%", "-13.64%"]
    # and as esdash compare judges it: the ratio of the means, its interval over 3 runs each
    assert throughput["ratio"] == pytest.approx((260 / 3) / 100)
    assert throughput["low"] < throughput["ratio"] < throughput["high"]
    assert row[-2] == (
        f"{throughput['ratio']:.3f} [{throughput['low']:.3f}, {throughput['high']:.3f}]"
    )
    assert row[-1] == throughput["verdict"] in ("worse", "inconclusive")
    assert records["ingest time s"]["ratio"] == pytest.approx(14 / 11)
    (wide,) = [t for t in report.tables if t.id == "throughput_wide"]
    assert [r[0] for r in wide.rows] == ["none", "abe"]  # the baseline first


def test_csv_and_json_hold_every_run_and_query(tmp_path: Path) -> None:
    first = synthetic.write_run(
        tmp_path, "r1", {"s": {"q": synthetic.op(A), "p": synthetic.op(B)}}, {"workers": 2}
    )
    second = synthetic.write_run(tmp_path, "r2", {"s": {"q": synthetic.op(B)}}, {"nodes": 3})
    out = tmp_path / "out"
    report = build_report(load_inputs([str(first), str(second)]))
    write_report(report, out, ["csv", "json"], figures=False)
    with (out / "report.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["run"], r["query"], r["nodes"], r["workers_per_node"]) for r in rows] == [
        ("r1", "q", "1", "2"),
        ("r1", "p", "1", "2"),
        ("r2", "q", "3", "1"),
    ]
    assert float(rows[1]["latency_gmean_ms"]) == synthetic.op(B)["latency"]["gmean"]
    document = json.loads((out / "report.json").read_text())
    assert document["schema"] == "esdash.report/1"
    assert len(document["tables"]["queries"]["records"]) == 3
    assert document["environment"]["runs"][0]["slurm_job"] == "4242"
    assert "[cluster]" in document["environment"]["runs"][0]["session"]


def _check_figure(path: Path) -> None:
    data = path.read_bytes()
    if path.suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in data[-16:], path
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg", path


def test_markdown_html_and_figures(tmp_path: Path) -> None:
    """Real (trimmed) runs with streams: 1 and 2 workers per node, plus a synthetic 3-node run."""
    third = synthetic.write_run(
        tmp_path, "big", {"age": {"age": synthetic.op(B, rates=[5.0, 6.0])}}, {"nodes": 3}
    )
    inputs = [
        str(FIXTURES / "dev-20261121-032918"),
        str(FIXTURES / "dev2-20261121-033750"),
        str(third),
    ]
    out = tmp_path / "out"
    result = esdash(
        "report", *inputs, "--format", "md,html", "--out", str(out), env_runs=tmp_path / "runs"
    )
    assert "wrote" in result.stdout
    report = build_report(load_inputs(inputs))
    names = {p.name for p in (out / "figures").iterdir()}
    for stem in (
        "latency-age",
        "latency-body_part",
        "percentiles-age",
        "percentiles-body_part",
        "timeline-dev-20261121-032918",
        "timeline-dev2-20261121-033750",
        "throughput-vs-workers",
        "latency-vs-workers",
        "throughput-vs-nodes",
        "latency-vs-nodes",
    ):
        assert {f"{stem}.png", f"{stem}.svg"} <= names, stem
    for path in (out / "figures").iterdir():
        _check_figure(path)
    markdown = (out / "report.md").read_text()
    dev = json.loads((FIXTURES / "dev-20261121-032918" / "results.json").read_text())
    age = dev["steps"][2]["queries"]["age"]
    intervals = age["throughput"]["intervals"]
    # the synthetic run differs in measured settings: each setup names those that differ
    (record,) = [
        r
        for r in report.table("queries").records
        if (r["query"], r["nodes"], r["workers_per_node"]) == ("age", 1, 1)
    ]
    row = f"| none · {record['other']} | loopback | 1 | 1 | age | 1 | {age['requests']:,} | "
    row += f"{fmt.rate(age['throughput']['requests_per_s'])} +- {fmt.rate(intervals['std'])} |"
    assert row in markdown
    assert "![Latency distribution of age](figures/latency-age.png)" in markdown
    assert "```toml\n# Short run for dashboard fixtures." in markdown
    assert (
        report.table("queries").records[0]["latency_gmean_ms"]
        == dev["steps"][0]["queries"]["body_part"]["latency"]["gmean"]
    )
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and 'src="figures/latency-age.png"' in html
    contained = tmp_path / "contained"
    write_report(report, contained, ["html"], figures=True, self_contained=True)
    page = (contained / "report.html").read_text()
    assert "data:image/png;base64," in page and 'src="figures/' not in page


def test_report_of_a_campaign_and_its_selection(tmp_path: Path) -> None:
    runs = [
        (
            {"cluster.nodes": n, "encryption.mode": mode},
            1,
            synthetic.write_run(
                tmp_path, f"{mode}{n}", {"s": {"q": synthetic.op(A)}}, {"nodes": n, "mode": mode}
            ),
        )
        for n in (1, 3)
        for mode in ("none", "abe")
    ]
    campaign = synthetic.write_campaign(tmp_path, "camp", runs)
    result = esdash("report", str(campaign), "--no-figures", env_runs=tmp_path / "runs")
    assert f"wrote {campaign / 'report' / 'report.md'}" in result.stdout
    chosen = load_inputs([f"{campaign}#nodes=3,mode=abe"]).entries
    assert [(e.config["nodes"], e.config["setup"], e.campaign) for e in chosen] == [
        (3, "abe", "camp")
    ]
    bad = esdash("report", str(tmp_path / "nothing"), env_runs=tmp_path / "runs", check=False)
    assert bad.returncode == 2 and "no such run, campaign or file" in bad.stderr
