"""The "Leakage" section of ``esdash report``, read from the runs' ``leakage.json``.

A run in a client-side mode carries a leakage report; the report shows its threat model,
the per-field table and the papers, in Markdown, HTML and JSON.  A damaged file shows as
damaged; a run without one (every other mode) adds no section.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import msgspec
from support import synthetic
from support.leakage import REFERENCES, THREAT_MODEL, report

from esdash.report.document import build_report, write_report
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
        build_report(load_inputs([str(plain), str(run)])), out, ["md", "html", "json"], False
    )
    markdown = (out / "report.md").read_text()
    section = markdown[markdown.index("## Leakage\n") : markdown.index("## Environment\n")]
    assert "### abe\n" in section and "### plain" not in section
    assert (
        "2,000 documents (generated sample of track mri (seed 42)); auxiliary data: a second "
        "sample of the track's generator (seed 43); key mode: per-field. Field names: keyed "
        "PRF (HMAC-SHA256, 64 bits), 23 declared by the schema; the cluster learns equality "
        "of names.\n" in section
    )
    assert (
        "| field | scheme | learns | distinct | domain | best attack | exact | within 1 % | "
        "verdict |\n|---|---|---|---|---|---|---|---|---|\n" in section
    )
    assert (
        "| PatientAge | OPE | order | 101 | 101 | sorting | 100% | 100% | PatientAge: dense "
        "domain of 101 values, 100 % of records recovered by sorting |\n" in section
    )
    assert "| PatientSex | AES-SIV | equality | 2 | - | frequency | 100% | - |" in section
    assert "| ismrmrdHeader | AES-SIV | equality | 2,000 | - | frequency | <0.1% | - |" in section
    assert f"**Threat model.** {THREAT_MODEL}\n" in section
    assert "".join(f"- {r}\n" for r in REFERENCES) in section
    assert section.endswith("\n\n") and not section.endswith("\n\n\n")
    # the section sits between the tables and the figures/environment
    assert markdown.index("## Leakage\n") > markdown.index("## Ingest")

    page = (out / "report.html").read_text()
    assert "<h2>Leakage</h2>" in page and "<h3>abe</h3>" in page
    assert "<tr><td>PatientAge</td><td>OPE</td><td>order</td><td>101</td>" in page
    assert f"<p><b>Threat model.</b> {html.escape(THREAT_MODEL)}</p>" in page
    assert f"<li>{html.escape(REFERENCES[1])}</li>" in page  # O'Neill: escaped

    document = json.loads((out / "report.json").read_text())
    assert document["leakage"] == {"abe": report()}


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


def test_runs_without_leakage_add_no_section(tmp_path: Path) -> None:
    plain = synthetic.write_run(tmp_path, "plain", {"s": {"age": synthetic.op([1.0, 2.0])}})
    out = tmp_path / "out"
    write_report(build_report(load_inputs([str(plain)])), out, ["md", "html", "json"], False)
    assert "Leakage" not in (out / "report.md").read_text()
    assert "Leakage" not in (out / "report.html").read_text()
    assert json.loads((out / "report.json").read_text())["leakage"] == {}
