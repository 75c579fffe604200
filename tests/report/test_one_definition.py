"""One run directory, every surface, one number per figure (issue 29, part 2).

Each recorded fixture run is read on every surface that shows its figures: the live lines of
``esdash run`` (the run's stream replayed through its live printer, as lines and as the
terminal table), the end-of-run summary, the dashboard (its model, read by the dashboard's
own poller, and the cells its query table and ingest panel print), the report in Markdown,
HTML, CSV and JSON, ``esdash compare`` of the run with itself and with the other fixture, and
``rally.json``.  Every printed figure must equal the run's figure to the digits printed, or
carry the name of its other definition -- ``now`` (one interval, the dashboard's window),
``so far`` (the stream's, inside a step), Rally's in ``rally.json`` -- and then equal that
definition's value.

The expected values are computed here from the raw files (``json.loads`` of
``results.json`` and ``stream.jsonl``, HdrHistogram's own decoder), by each figure's
definition, not by esdash's readers: req/s = successful requests / the step's seconds
(these fixtures predate results format 3: their seconds are the planned 5 s, which every
surface must say), hits/s = documents returned / the same seconds, ingest docs/s = documents
/ the ingest's time, error rate = failed / all requests, latency statistics as the run
recorded them, Rally's throughput as Rally's ``ThroughputCalculator`` counts it.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from rich.console import Console

from esdash.report.document import build_report, write_report
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Final
from esdash.tui.widgets.panels import ProgressPanel
from esdash.tui.widgets.queries import COLUMNS, DOCUMENTS_COLUMN, QueryTable, documents_label
from esdash.view.compare import compare, load_side, render
from esdash.view.inputs import load_inputs
from esdash.view.live import LivePrinter
from esdash.view.model import RunModel, Update, ViewParams
from esdash.view.source import RunSource
from esdash.view.summary import render_summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUNS = ("dev-20261121-032918", "dev2-20261121-033750")
NOW = 2_000_000_000.0


# ----------------------------------------------------------------- printed numbers


NUMBER = re.compile(r"^-?[\d,]*\.?\d+$")


def agrees(printed: str, value: float | None) -> bool:
    """Whether ``printed`` is ``value`` to the digits it shows (``-`` or empty: none)."""
    printed = printed.strip()
    if printed in ("-", ""):
        return value is None
    assert NUMBER.match(printed), f"not a number: {printed!r}"
    if value is None:
        return False
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    shown = float(printed.replace(",", ""))
    return abs(shown - value) <= 0.5 * 10**-decimals * (1 + 1e-9) + 1e-12


def check(printed: str, value: float | None, what: str) -> None:
    assert agrees(printed, value), f"{what}: printed {printed!r}, the figure is {value!r}"


def fixed_width(lines: list[str]) -> list[dict[str, str]]:
    """Rows of a text table whose second line is the dashed rule under the headers."""
    header, rule, *rows = lines
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    names = [header[a:b].strip() for a, b in spans]
    found = []
    for row in rows:
        cells = []
        for k, (a, _b) in enumerate(spans):
            end = spans[k + 1][0] if k + 1 < len(spans) else len(row) + 1
            cells.append(row[a:end].strip())
        found.append(dict(zip(names, cells, strict=True)))
    return found


def pm(cell: str) -> tuple[str, str]:
    """``329.2 +- 99.4`` -> (``329.2``, ``99.4``); a cell without a spread: (it, ``-``)."""
    value, _, spread = cell.partition(" +- ")
    return value, spread or "-"


# ------------------------------------------------------------ the raw definitions


@dataclass
class Op:
    """One query of one step (or the ingest's bulk), by definition from the raw files."""

    requests: int
    failed: int
    req_per_s: float
    documents_per_s: float
    interval_std: float | None
    latency: dict

    @property
    def error_rate(self) -> float:
        return self.failed / self.requests


def raw_results(run: str) -> dict:
    return json.loads((FIXTURES / run / "results.json").read_text())


def raw_records(run: str) -> list[dict]:
    lines = (FIXTURES / run / "stream.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def raw_steps(run: str) -> dict[str, Op]:
    """Every measured query: successful requests and documents over the step's seconds."""
    found = {}
    for step in raw_results(run)["steps"]:
        seconds = step["duration_s"]
        for name, op in step["queries"].items():
            found[name] = Op(
                requests=op["requests"],
                failed=op["failed"],
                req_per_s=op["ok"] / seconds,
                documents_per_s=op["docs"] / seconds,
                interval_std=op["throughput"]["intervals"]["std"],
                latency=op["latency"],
            )
    return found


def raw_ingest(run: str) -> tuple[float, Op]:
    """The ingest's docs/s (documents / its time) and its bulk operation."""
    ingest = raw_results(run)["ingest"]
    rate = ingest["docs_per_s"]  # docs / the unrounded time; duration_s keeps 3 decimals
    assert rate == pytest.approx(ingest["docs"] / ingest["duration_s"], rel=1e-3)
    bulk = ingest["ops"]["bulk"]
    return rate, Op(
        requests=bulk["requests"],
        failed=bulk["failed"],
        req_per_s=bulk["ok"] / ingest["duration_s"],
        documents_per_s=rate,
        interval_std=bulk["throughput"]["intervals"]["std"],
        latency=bulk["latency"],
    )


def ok_of(op: dict) -> int:
    return op["requests"] - sum(op["errors"].values())


def percentile_s(series: dict, p: float) -> float | None:
    """A record's percentile as HdrHistogram gives it, clipped to the exact extremes, where
    the sample count supports it (n >= ceil(1 / (1 - p/100)))."""
    count = series["count"]
    if not count or count < math.ceil(round(1 / (1 - p / 100), 9)):
        return None
    value = HdrHistogram.decode(series["hdr"]).get_value_at_percentile(p) * 1e-6
    return min(max(value, series["min"]), series["max"])


def rally_samples(run: str, step: int | None, name: str, docs: bool) -> list[float]:
    """Rally's throughput samples (its ``ThroughputCalculator``): everything completed since
    the task's first request over the seconds since, warm-up included, one sample per
    measured interval with a completion."""
    count, seconds, samples, started = 0, 0.0, [], False
    for record in raw_records(run):
        if record["type"] != "interval":
            continue
        if step is None and record["phase"] != "ingest":
            continue
        if step is not None and (record["step"] != step or record["phase"] == "ingest"):
            continue
        op = record["ops"].get(name)
        if not started and not (op and op["requests"]):
            continue
        started = True
        seconds += record["elapsed"]
        if op:
            count += op["docs"] if docs else ok_of(op)
            if op["requests"] and record["phase"] != "warmup":
                samples.append(count / seconds)
    return samples


# ----------------------------------------------------------------------- surfaces


@pytest.mark.parametrize("run", RUNS)
def test_live_lines_are_the_intervals_figures_and_say_now(run):
    """Each interval line gives its operations' figures over that interval, marked
    ``now``; a search's documents are hits/s, the ingest's docs/s."""
    out = io.StringIO()
    LivePrinter(FIXTURES / run / "stream.jsonl", out, tty=False).close()
    lines = {}
    for line in out.getvalue().splitlines():
        stamp, _, text = line.partition("] ")
        lines.setdefault(stamp, []).append(text)
    shown = re.compile(
        r"(\S+) now ([\d,.]+) req/s ([\d,.]+) (docs|hits)/s p50 (\S+) p99 (\S+) ms err (\S+)"
    )
    checked = 0
    for record in raw_records(run):
        if record["type"] != "interval" or not record["ops"]:
            continue
        stamp = f"[{record['t']:8.1f}s"
        where = record["phase"] if record["step"] is None else f"{record['phase']} step"
        (text,) = [t for t in lines[stamp] if t.startswith(where)]
        found = {m.group(1): m for m in shown.finditer(text)}
        assert set(found) == set(record["ops"]), text
        for name, op in record["ops"].items():
            m, elapsed = found[name], record["elapsed"]
            check(m.group(2), ok_of(op) / elapsed, f"{run} {stamp} {name} req/s now")
            check(m.group(3), op["docs"] / elapsed, f"{run} {stamp} {name} documents/s now")
            assert m.group(4) == ("docs" if record["phase"] == "ingest" else "hits"), text
            for group, p in ((5, 50.0), (6, 99.0)):
                value = percentile_s(op["latency"], p)
                check(m.group(group), None if value is None else value * 1000, f"{name} p{p}")
            assert m.group(7) == "0" and not op["errors"]
            checked += 1
    assert checked >= 15

    # on a terminal: the table of the newest interval, its figures marked "now"
    out = io.StringIO()
    LivePrinter(FIXTURES / run / "stream.jsonl", out, tty=True).close()
    drawn = out.getvalue().split("\x1b[J")[-1].splitlines()
    table = drawn[max(k for k, line in enumerate(drawn) if line.startswith("t=")) :]
    last = [r for r in raw_records(run) if r["type"] == "interval"][-1]
    assert "(now: this" in table[0]
    (row,) = fixed_width(table[1:])
    op = last["ops"][row["op"]]
    check(row["req/s now"], ok_of(op) / last["elapsed"], "terminal req/s now")
    check(row["hits/s now"], op["docs"] / last["elapsed"], "terminal hits/s now")


@pytest.mark.parametrize("run", RUNS)
def test_summary_prints_the_runs_figures(run):
    summary = render_summary(RunDir(FIXTURES / run).read_results()).splitlines()
    rate, bulk = raw_ingest(run)
    m = re.match(r"ingest: [\d,]+ docs in [\d.]+ s = ([\d,.]+) docs/s", summary[1])
    assert m is not None, summary[1]
    check(m.group(1), rate, "summary ingest docs/s")
    start = next(k for k, line in enumerate(summary) if line.startswith("step "))
    end = next(k for k, line in enumerate(summary) if line.startswith("  req/s = "))
    rows = {row["query"]: row for row in fixed_width(summary[start:end])}
    expected = {"bulk": bulk, **raw_steps(run)}
    assert set(rows) == set(expected)
    for name, op in expected.items():
        row = rows[name]
        value, spread = pm(row["req/s (+- std)"])
        check(value, op.req_per_s, f"summary {name} req/s")
        check(spread, op.interval_std, f"summary {name} +- std")
        column = "docs/s" if name == "bulk" else "hits/s"
        check(row[column], op.documents_per_s, f"summary {name} {column}")
        assert row["hits/s" if name == "bulk" else "docs/s"] == ""
        for header, key in (("gmean ms", "gmean"), ("p50 ms", "p50"), ("p99 ms", "p99")):
            check(row[header], op.latency.get(key), f"summary {name} {header}")
        check(row["max ms"], op.latency["max"], f"summary {name} max")
        check(row["gstd"], op.latency["gstd"], f"summary {name} gstd")
        assert row["errors"] == "0" and op.failed == 0
    # these runs divided by the planned duration: the summary names that definition
    assert "  req/s = successful requests / the planned step duration" in "\n".join(summary)


def _dashboard(run: str) -> RunModel:
    """The run as the dashboard reads it: its own poller, then its model."""
    model = RunModel(run)
    model.apply(RunSource(FIXTURES / run, files_every=0.0).poll())
    assert model.results is not None and model.final is not None
    return model


def _scope_ends(run: str) -> dict[tuple[str, int | None], int]:
    ends = {}
    intervals = [r for r in raw_records(run) if r["type"] == "interval"]
    for index, record in enumerate(intervals):
        ends[(record["phase"], record["step"])] = index
    return ends


def _table_cells(row) -> dict[str, dict[str, str]]:
    """What the dashboard's query table prints for one operation: {"now"/"final"/...: cells}."""
    labels = [label.strip() or "kind" for label, _w in COLUMNS]
    labels[DOCUMENTS_COLUMN] = "documents"  # its header: documents_label (hits/s, docs/s)
    shown = {}
    for _suffix, cells in QueryTable._rows(row, 40):
        texts = [cell.plain.strip() for cell in cells[1:]]
        values = dict(zip(labels, texts, strict=True))
        shown[values["kind"]] = values
    return shown


@pytest.mark.parametrize("run", RUNS)
def test_dashboard_shows_the_runs_figures_once_a_step_is_over(run):
    model = _dashboard(run)
    ends = _scope_ends(run)
    steps = raw_steps(run)
    for index in range(len(raw_results(run)["steps"])):
        snap = model.snapshot(ViewParams(upto=ends[("measure", index)]), NOW)
        assert documents_label(snap.ops) == "hits/s"
        for row in snap.ops:
            op, cells = steps[row.name], _table_cells(row)["final"]
            check(cells["req/s"], op.req_per_s, f"dashboard {row.name} req/s")
            check(cells["documents"], op.documents_per_s, f"dashboard {row.name} hits/s")
            for p in ("p50", "p90", "p99", "p99.9", "gmean"):
                check(cells[p], op.latency.get(p), f"dashboard {row.name} {p}")
            check(cells["gstd"], op.latency["gstd"], f"dashboard {row.name} gstd")
            check(cells["req"], op.requests, f"dashboard {row.name} requests")
            assert cells["err"] == "0"

    # the ingest: its bulk operation and the progress panel give the ingest's figures
    rate, bulk = raw_ingest(run)
    snap = model.snapshot(ViewParams(upto=ends[("ingest", None)]), NOW)
    (row,) = snap.ops
    cells = _table_cells(row)["final"]
    check(cells["req/s"], bulk.req_per_s, "dashboard bulk req/s")
    assert documents_label(snap.ops) == "docs/s"
    check(cells["documents"], rate, "dashboard bulk docs/s")
    for upto in (ends[("ingest", None)], None):  # at the ingest's end, and at the run's end
        snap = model.snapshot(ViewParams(upto=upto), NOW)
        panel = _plain(ProgressPanel.renderable_for(snap))
        m = re.search(r"docs  ([\d,.]+) docs/s( now| so far)?", panel)
        assert m is not None and m.group(2) is None, panel  # the ingest's figure, no label
        check(m.group(1), rate, "dashboard ingest panel docs/s")


def _plain(renderable) -> str:
    console = Console(width=200, color_system=None, file=io.StringIO())
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


@pytest.mark.parametrize("run", RUNS)
def test_dashboard_inside_a_step_says_so_far_and_now(run):
    """Inside a step the whole-step figure is the stream's, labelled ``so far``: successful
    requests of the step's records so far / their lengths; ``now`` is the sliding window."""
    model = _dashboard(run)
    intervals = [r for r in raw_records(run) if r["type"] == "interval"]
    inside = [k for k, r in enumerate(intervals) if r["phase"] == "measure" and r["step"] == 0]
    upto = inside[3]
    snap = model.snapshot(ViewParams(upto=upto, window=2.0), NOW)
    (row,) = snap.ops
    cells = _table_cells(row)
    part = [intervals[k] for k in inside if k <= upto]
    name = row.name
    ok = sum(ok_of(r["ops"][name]) for r in part)
    check(cells["so far"]["req/s"], ok / sum(r["elapsed"] for r in part), "so far req/s")
    t = intervals[upto]["t"]
    window = [r for r in part if r["t"] > t - 2.0]
    check(
        cells["now"]["req/s"],
        sum(ok_of(r["ops"][name]) for r in window) / sum(r["elapsed"] for r in window),
        "now req/s",
    )
    assert "final" not in cells


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Each fixture run's report in every format (figures are not numbers: left out)."""
    made = {}
    for run in RUNS:
        out = tmp_path_factory.mktemp(f"report-{run}")
        report = build_report(load_inputs([str(FIXTURES / run)]))
        write_report(report, out, ["md", "html", "csv", "json", "rally"], figures=False)
        made[run] = out
    return made


def _md_table(text: str, title: str) -> list[dict[str, str]]:
    """The rows of the Markdown table under ``## title`` (cells hold no ``|`` here)."""
    lines = text.split(f"## {title}\n", 1)[1].splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("| "))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip().strip("|").split("|")])
    head, _rule, *rows = table
    return [dict(zip(head, row, strict=True)) for row in rows]


def _html_table(text: str, title: str) -> list[dict[str, str]]:
    part = text.split(f"<h2>{title}</h2>", 1)[1].split("</table>", 1)[0]
    head = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", part)]
    body = re.findall(r"<tr>((?:<td>.*?</td>)+)</tr>", part)
    return [
        dict(zip(head, [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)], strict=True))
        for r in body
    ]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("kind", ["md", "html"])
def test_report_documents_print_the_runs_figures(reports, run, kind):
    text = (reports[run] / f"report.{kind}").read_text()
    table = _md_table if kind == "md" else _html_table
    steps = raw_steps(run)
    rows = {row["query"]: row for row in table(text, "Query throughput and latency")}
    assert set(rows) == set(steps)
    for name, op in steps.items():
        row = rows[name]
        value, spread = pm(row["req/s (+- std)"])
        check(value, op.req_per_s, f"report.{kind} {name} req/s")
        check(spread, op.interval_std, f"report.{kind} {name} +- std")
        check(row["hits/s"], op.documents_per_s, f"report.{kind} {name} hits/s")
        assert "docs/s" not in row  # a search's documents are hits
        for header in ("gmean", "p1", "p50", "p99"):
            check(row[f"{header} ms"], op.latency.get(header), f"report.{kind} {name} {header}")
        check(row["gstd"], op.latency["gstd"], f"report.{kind} {name} gstd")
        assert row["errors"] == "0"
    wide = table(text, "Throughput by setup and cluster size (req/s, mean +- std)")
    for name, op in steps.items():
        check(pm(wide[0][name])[0], op.req_per_s, f"report.{kind} wide {name}")
    (ingest,) = table(text, "Ingest")
    check(ingest["docs/s (mean +- std)"], raw_ingest(run)[0], f"report.{kind} ingest docs/s")
    assert "the planned step duration" in text  # the definition these runs used


@pytest.mark.parametrize("run", RUNS)
def test_report_csv_and_json_carry_the_runs_figures(reports, run):
    steps = raw_steps(run)
    with (reports[run] / "report.csv").open() as handle:
        rows = {row["query"]: row for row in csv.DictReader(handle)}
    document = json.loads((reports[run] / "report.json").read_text())
    records = {r["query"]: r for r in document["tables"]["queries"]["records"]}
    runs = {r["query"]: r for r in document["runs"]}
    for name, op in steps.items():
        row, record, per_run = rows[name], records[name], runs[name]
        check(row["requests_per_s"], op.req_per_s, f"report.csv {name} req/s")
        check(row["hits_per_s"], op.documents_per_s, f"report.csv {name} hits/s")
        assert row["docs_per_s"] == ""
        check(row["error_rate"], op.error_rate, f"report.csv {name} error rate")
        for source in (record, per_run):
            assert source["hits_per_s"] == pytest.approx(op.documents_per_s)
            assert source["docs_per_s"] is None
        assert record["throughput_mean"] == pytest.approx(op.req_per_s)
        assert per_run["requests_per_s"] == pytest.approx(op.req_per_s)
        assert "planned step duration" in record["throughput_definition"]
        for key in ("p50", "p90", "p99", "p99.9", "max"):
            column = f"latency_{key.replace('.', '_')}_ms"
            check(row[column], op.latency.get(key), f"report.csv {name} {column}")
            assert per_run[column] == op.latency.get(key)
        assert record["latency_p99_ms"] == op.latency["p99"]
    with (reports[run] / "ingest.csv").open() as handle:
        (ingest,) = list(csv.DictReader(handle))
    check(ingest["docs_per_s"], raw_ingest(run)[0], "ingest.csv docs/s")
    (table,) = document["tables"]["ingest"]["records"]
    assert table["docs_per_s_mean"] == pytest.approx(raw_ingest(run)[0])


@pytest.mark.parametrize("other", RUNS)
def test_compare_prints_the_runs_figures(other):
    run = RUNS[0]
    baseline = load_side(str(FIXTURES / run))
    records = compare(baseline, [load_side(str(FIXTURES / other))])
    mine, theirs = raw_steps(run), raw_steps(other)
    getters = {
        "req/s": lambda op: op.req_per_s,
        "gmean ms": lambda op: op.latency["gmean"],
        "p99 ms": lambda op: op.latency["p99"],
    }
    for record in records:
        get = getters[record["metric"]]
        assert record["baseline"] == pytest.approx(get(mine[record["query"]]))
        assert record["value"] == pytest.approx(get(theirs[record["query"]]))
    text = render(baseline, records, "text").splitlines()
    start = next(k for k, line in enumerate(text) if line.startswith("contender "))
    rows = fixed_width(text[start : start + 2 + len(records)])
    for row in rows:
        get = getters[row["metric"]]
        check(row["baseline"], get(mine[row["query"]]), f"compare {row['query']} {row['metric']}")


@pytest.mark.parametrize("run", RUNS)
def test_rally_json_carries_rallys_figure_by_name_and_esdashs_beside(reports, run):
    document = json.loads((reports[run] / "rally.json").read_text())
    assert document["definitions"]["throughput"].startswith("rally:")
    (only,) = document["runs"]
    entries = {e["task"]: e for e in only["op_metrics"]}
    steps = raw_steps(run)
    rate, bulk = raw_ingest(run)
    assert list(entries) == ["bulk", *steps]
    for index, (name, op) in enumerate(steps.items()):
        entry = entries[name]
        # Rally's throughput, by Rally's definition, says so
        throughput = entry["throughput"]
        assert throughput["definition"].startswith("rally:") and throughput["unit"] == "ops/s"
        samples = rally_samples(run, index, name, docs=False)
        assert throughput["mean"] == pytest.approx(statistics.fmean(samples))
        assert throughput["median"] == pytest.approx(statistics.median(samples))
        assert (throughput["min"], throughput["max"]) == pytest.approx((min(samples), max(samples)))
        # esdash's own figures beside it, under their own names
        assert entry["esdash"]["requests_per_s"] == pytest.approx(op.req_per_s)
        assert entry["esdash"]["hits_per_s"] == pytest.approx(op.documents_per_s)
        assert "planned step duration" in entry["esdash"]["requests_per_s_definition"]
        # latency and service time are esdash's percentiles, and say so
        for series in ("latency", "service_time"):
            assert entry[series]["definition"].startswith("esdash:")
        for key, stat in (("50_0", "p50"), ("90_0", "p90"), ("99_0", "p99"), ("100_0", "max")):
            assert entry["latency"][key] == op.latency[stat]
        assert entry["error_rate"] == op.error_rate
    ingest = entries["bulk"]
    assert ingest["esdash"]["docs_per_s"] == pytest.approx(rate)
    assert ingest["throughput"]["unit"] == "docs/s"
    samples = rally_samples(run, None, "bulk", docs=True)
    assert ingest["throughput"]["mean"] == pytest.approx(statistics.fmean(samples))
    assert ingest["error_rate"] == bulk.error_rate


@pytest.mark.parametrize("run", RUNS)
def test_dashboard_ingest_rate_before_the_results_says_which_it_is(run):
    """Before ``results.json`` exists (a run still going): while ingesting, the panel's rate
    is the window's, ``now``; after it, the stream's ``so far``: documents / the ingest's
    interval records from the first to the last that carried a request."""
    records = [r for r in raw_records(run) if r["type"] != "final"]
    intervals = [r for r in records if r["type"] == "interval"]
    ingest = [r for r in intervals if r["phase"] == "ingest"]
    last_ingest = records.index(ingest[-1])
    typed = RunSource(FIXTURES / run).poll().records  # the same records, read as typed
    typed = [r for r in typed if not isinstance(r, Final)]
    model = RunModel(run)
    model.apply(Update(records=typed[: last_ingest + 1]))
    panel = _plain(ProgressPanel.renderable_for(model.snapshot(ViewParams(window=60.0), NOW)))
    m = re.search(r"docs  now ([\d,.]+) docs/s", panel)
    assert m is not None, panel
    docs = sum(r["ops"]["bulk"]["docs"] for r in ingest if "bulk" in r["ops"])
    check(m.group(1), docs / sum(r["elapsed"] for r in ingest), "ingest now (60 s window)")

    model.apply(Update(records=typed[last_ingest + 1 : last_ingest + 6]))
    panel = _plain(ProgressPanel.renderable_for(model.snapshot(ViewParams(), NOW)))
    m = re.search(r"docs  ([\d,.]+) docs/s so far \(stream\)", panel)
    assert m is not None, panel
    carried = [k for k, r in enumerate(ingest) if r["ops"].get("bulk", {}).get("requests")]
    seconds = sum(r["elapsed"] for r in ingest[carried[0] : carried[-1] + 1])
    check(m.group(1), docs / seconds, "ingest so far")
