"""The "Leakage" section of ``esdash report``, read from the runs' ``leakage.json``.

A run in a client-side mode carries a leakage report; the report shows its threat model,
the per-field table (length classes, the best attack and the majority guess beside it) and
the papers, in Markdown, HTML and JSON, and ``leakage.csv`` has one row per field and
attack.  A damaged file shows as damaged; a run without one (every other mode) adds no
section; a file from before lengths were measured shows dashes there.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

import msgspec
from support import synthetic
from support.leakage import REFERENCES, THREAT_MODEL, before_lengths, report

from esdash.report.document import build_report, md_cell, write_report
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage
from esdash.view.inputs import load_inputs


def abe_run(tmp_path: Path, run_id: str) -> Path:
    return synthetic.write_run(
        tmp_path, run_id, {"s": {"age": synthetic.op([1.0, 2.0, 3.0])}}, {"mode": "abe"}
    )


def test_an_abe_runs_leakage_is_a_section_with_its_table_threat_model_and_papers(
    tmp_path: Path,
) -> None:
    plain = synthetic.write_run(tmp_path, "plain", {"s": {"age": synthetic.op([1.0, 2.0])}})
    run = abe_run(tmp_path, "abe")
    RunDir(run).write_leakage(msgspec.convert(report(), type=Leakage))
    out = tmp_path / "out"
    write_report(
        build_report(load_inputs([str(plain), str(run)])),
        out,
        ["md", "html", "csv", "json"],
        False,
    )
    markdown = (out / "report.md").read_text()
    section = markdown[markdown.index("## Leakage\n") : markdown.index("## Environment\n")]
    assert "### abe\n" in section and "### plain" not in section
    assert (
        "2,000 documents (generated sample of track mri (seed 42)); auxiliary data: a second "
        "sample of the track's generator (seed 43); key mode: per-field. Field names: keyed "
        "PRF (HMAC-SHA256, 64 bits), 23 declared by the schema; the cluster learns equality "
        "of names; not their length.\n" in section
    )
    assert (
        "| field | scheme | learns | distinct | lengths | domain | best attack | exact | "
        "within 1 % | majority guess | majority within 1 % | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n" in section
    )
    assert (
        "| PatientAge | OPE | order | 101 | 2 | 101 | sorting | 100% | 100% | 1.8% | 3.6% | "
        "PatientAge: dense domain of 101 values, 100 % of records recovered by sorting |\n"
        in section
    )
    # the audit's two cases: a 0 % beside a majority guess of half, and length recovering all
    assert (
        "| PatientSex | AES-SIV | equality, length | 2 | 1 | - | length | 49.5% | - | 50.5% | - |"
        in section
    )
    assert (
        "| SequenceType | AES-SIV | equality, length | 3 | 3 | - | length | 100% | - | 36.5% | - |"
        in section
    )
    cells = ["ismrmrdHeader", "AES-SIV", "equality, length", "2,000", "93", "-", "frequency"]
    cells += ["<0.1%", "-", "<0.1%", "-"]  # as the Markdown cells escape them
    assert "| " + " | ".join(map(md_cell, cells)) + " |" in section
    assert f"**Threat model.** {THREAT_MODEL}\n" in section
    assert "".join(f"- {r}\n" for r in REFERENCES) in section
    assert section.endswith("\n\n") and not section.endswith("\n\n\n")
    # the section sits between the tables and the figures/environment
    assert markdown.index("## Leakage\n") > markdown.index("## Ingest")

    page = (out / "report.html").read_text()
    assert "<h2>Leakage</h2>" in page and "<h3>abe</h3>" in page
    assert "<th>lengths</th>" in page and "<th>majority guess</th>" in page
    assert (
        "<tr><td>PatientAge</td><td>OPE</td><td>order</td><td>101</td><td>2</td><td>101</td>"
        "<td>sorting</td><td>100%</td><td>100%</td><td>1.8%</td><td>3.6%</td>" in page
    )
    assert f"<p><b>Threat model.</b> {html.escape(THREAT_MODEL)}</p>" in page
    assert f"<li>{html.escape(REFERENCES[1])}</li>" in page  # O'Neill: escaped

    document = json.loads((out / "report.json").read_text())
    assert document["leakage"] == {"abe": report()}

    # leakage.csv: one row per field and attack, the field's baseline on each (fractions)
    with (out / "leakage.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["run"] for row in rows} == {"abe"}  # the plain run has no leakage report
    assert [(row["field"], row["attack"]) for row in rows] == [
        (item["field"], found["name"]) for item in report()["fields"] for found in item["attacks"]
    ]
    sequence = next(r for r in rows if r["field"] == "SequenceType" and r["attack"] == "length")
    assert sequence["exact"] == "1.0" and sequence["baseline_exact"] == "0.365"
    assert sequence["length_classes"] == "3" and sequence["learns"] == "equality, length"
    assert sequence["within_1pct"] == "" and sequence["error"] == ""
    age = next(r for r in rows if r["field"] == "PatientAge" and r["attack"] == "length")
    assert age["applicable"] == "False" and age["exact"] == ""
    assert (age["baseline_exact"], age["baseline_within_1pct"]) == ("0.018", "0.036")


def test_a_report_from_before_lengths_shows_dashes_and_empty_cells(tmp_path: Path) -> None:
    run = abe_run(tmp_path, "abe")
    RunDir(run).write_leakage(msgspec.convert(before_lengths(), type=Leakage))
    out = tmp_path / "out"
    write_report(build_report(load_inputs([str(run)])), out, ["md", "csv"], False)
    markdown = (out / "report.md").read_text()
    assert (
        "| PatientAge | OPE | order | 101 | - | 101 | sorting | 100% | 100% | - | - |" in markdown
    )
    with (out / "leakage.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(r["length_classes"] == r["baseline_exact"] == "" for r in rows)


def test_a_damaged_leakage_file_shows_as_damaged_and_the_report_is_written(
    tmp_path: Path,
) -> None:
    run = abe_run(tmp_path, "abe")
    RunDir(run).leakage_file.write_text('{"version": 1, "fields": 3}')
    out = tmp_path / "out"
    write_report(build_report(load_inputs([str(run)])), out, ["md", "html", "json"], False)
    markdown = (out / "report.md").read_text()
    assert "## Leakage\n" in markdown
    line = next(x for x in markdown.splitlines() if x.startswith("The leakage report is damaged"))
    assert str(RunDir(run).leakage_file) in line and "$.fields" in line
    assert "The leakage report is damaged: " in (out / "report.html").read_text()
    assert "$.fields" in json.loads((out / "report.json").read_text())["leakage"]["abe"]["error"]
    write_report(build_report(load_inputs([str(run)])), out, ["csv"], False)
    with (out / "leakage.csv").open(newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert row["run"] == "abe" and "$.fields" in row["error"] and row["field"] == ""


def test_runs_without_leakage_add_no_section(tmp_path: Path) -> None:
    plain = synthetic.write_run(tmp_path, "plain", {"s": {"age": synthetic.op([1.0, 2.0])}})
    out = tmp_path / "out"
    write_report(build_report(load_inputs([str(plain)])), out, ["md", "html", "csv", "json"], False)
    assert not (out / "leakage.csv").exists()
    assert "Leakage" not in (out / "report.md").read_text()
    assert "Leakage" not in (out / "report.html").read_text()
    assert json.loads((out / "report.json").read_text())["leakage"] == {}
