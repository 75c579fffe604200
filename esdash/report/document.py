"""``esdash report``: the tables, figures, environment and sessions, in four formats.

* ``report.md`` — Markdown: tables, links to the figures beside it, every session in a code
  block;
* ``report.html`` — the same as one page, with the figures beside it, or embedded
  (``--self-contained``) so the file can be mailed alone;
* ``report.csv`` — one row per run x query with the run's own numbers (``ingest.csv`` has the
  ingests), for spreadsheets and pandas;
* ``report.json`` — everything, as numbers (schema ``esdash.report/1``).

Figures (PNG and SVG) are drawn for Markdown and HTML; ``--no-figures`` skips them (and
matplotlib).  The tables' definitions are in :mod:`esdash.report.tables`.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from esdash.report.inputs import BASELINE, Inputs
from esdash.report.tables import (
    RUN_FIELDS,
    Table,
    environment,
    environment_table,
    ingest_rows,
    ingest_table,
    notes,
    overhead_rows,
    overhead_table,
    query_rows,
    query_table,
    run_rows,
    wide_tables,
)
from esdash.rundir import files

SCHEMA = "esdash.report/1"
REPORT_FORMATS = ("md", "html", "csv", "json")


@dataclass
class Report:
    title: str
    inputs: Inputs
    tables: list[Table]
    runs: list[dict[str, Any]]
    environment: dict[str, Any]
    notes: list[str]
    ingest_runs: list[dict[str, Any]] = field(default_factory=list)
    figures: list[Any] = field(default_factory=list)

    def table(self, table_id: str) -> Table | None:
        return next((t for t in self.tables if t.id == table_id), None)


def build_report(inputs: Inputs, baseline: str = BASELINE) -> Report:
    entries = inputs.entries
    queries = query_rows(entries, baseline)
    ingests = ingest_rows(entries, baseline)
    overheads = overhead_rows(entries, baseline)
    env = environment(entries)
    tables = [query_table(queries), *wide_tables(queries), ingest_table(ingests)]
    overhead = overhead_table(overheads)
    if not overhead.records:
        setups = {str(e.config.get("setup")) for e in entries}
        overhead.note = (
            f"No overhead: it needs runs of the baseline setup {baseline!r} and of another "
            f"setup with the same cluster size, workers and interconnect (setups here: "
            f"{', '.join(sorted(setups))})."
        )
    tables += [overhead, environment_table(env)]
    names = [c.name for c in inputs.campaigns]
    title = (
        f"campaign {names[0]}"
        if len(names) == 1 and all(e.campaign == names[0] for e in entries)
        else f"{len(entries)} run(s)"
    )
    ingest_runs = [
        {
            "run": e.id,
            "source": e.source,
            "repetition": e.repetition,
            **e.config,
            **{
                k: v
                for k, v in files.to_builtins(e.results.ingest).items()
                if k != "ops" and v is not None
            },
        }
        for e in entries
        if e.results.ingest is not None
    ]
    return Report(
        title, inputs, tables, run_rows(entries), env, notes(entries, inputs.missing), ingest_runs
    )


# ------------------------------------------------------------------------ writers


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_json(report: Report, out: Path) -> Path:
    path = out / "report.json"
    document = {
        "schema": SCHEMA,
        "title": report.title,
        "tables": {
            t.id: {"title": t.title, "note": t.note, "headers": t.headers, "records": t.records}
            for t in report.tables
            if t.id != "environment"
        },
        "runs": report.runs,
        "ingest_runs": report.ingest_runs,
        "figures": [asdict(f) for f in report.figures],
        "notes": report.notes,
        "environment": report.environment,
    }
    path.write_text(json.dumps(_json_safe(document), indent=2) + "\n")
    return path


def write_csv(report: Report, out: Path) -> list[Path]:
    written = []
    extra = sorted({k for row in report.runs for k in row if k not in RUN_FIELDS})
    path = out / "report.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*RUN_FIELDS, *extra], extrasaction="ignore")
        writer.writeheader()
        for row in report.runs:
            writer.writerow(row)
    written.append(path)
    if report.ingest_runs:
        path = out / "ingest.csv"
        fields: list[str] = []
        for row in report.ingest_runs:
            fields += [k for k in row if k not in fields and not isinstance(row[k], dict)]
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            for row in report.ingest_runs:
                writer.writerow(row)
        written.append(path)
    return written


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    lines = [f"## {table.title}", "", table.note, ""]
    if not table.rows:
        return [*lines, "(no data)", ""]
    lines.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return [*lines, ""]


def write_markdown(report: Report, out: Path) -> Path:
    lines = [f"# esdash report: {report.title}", ""]
    lines.append(_inputs_line(report))
    lines.append("")
    if report.notes:
        lines += ["## Notes", ""] + [f"- {_md_cell(n)}" for n in report.notes] + [""]
    for table in report.tables:
        if table.id == "environment":
            continue
        lines += _md_table(table)
    if report.figures:
        lines += ["## Figures", ""]
        for figure in report.figures:
            main = figure.files.get("png") or next(iter(figure.files.values()))
            others = ", ".join(
                f"[{fmt.upper()}]({path})" for fmt, path in figure.files.items() if path != main
            )
            lines += [f"### {figure.title}", "", figure.caption, "", f"![{figure.title}]({main})"]
            lines += (["", others] if others else []) + [""]
    environment_table_ = report.table("environment")
    if environment_table_ is not None:
        lines += _md_table(environment_table_)
    lines += ["## Sessions", "", "The exact session file of every run.", ""]
    for run in report.environment["runs"]:
        if run.get("session"):
            lines += [f"### {run['id']}", "", "```toml", run["session"].rstrip(), "```", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def _inputs_line(report: Report) -> str:
    entries = report.inputs.entries
    campaigns = sorted({e.campaign for e in entries if e.campaign})
    parts = [f"{len(entries)} run(s)"]
    if campaigns:
        parts.append("campaign(s) " + ", ".join(campaigns))
    imported = [e.id for e in entries if e.source != "esdash"]
    if imported:
        parts.append("imported: " + ", ".join(imported))
    return "Inputs: " + "; ".join(parts) + "."


_CSS = """
body { font-family: sans-serif; margin: 2em; max-width: 110em; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; }
td:first-child, th:first-child { text-align: left; }
p.note { color: #444; font-size: 0.9em; max-width: 60em; }
figure { margin: 1em 0; } img { max-width: 100%; }
pre { background: #f7f7f7; padding: 0.5em; font-size: 0.85em; }
"""


def _html_table(table: Table) -> list[str]:
    parts = [
        f"<h2>{html.escape(table.title)}</h2>",
        f'<p class="note">{html.escape(table.note)}</p>',
    ]
    if not table.rows:
        return [*parts, "<p>(no data)</p>"]
    parts.append("<table><thead><tr>")
    parts += [f"<th>{html.escape(h)}</th>" for h in table.headers]
    parts.append("</tr></thead><tbody>")
    for row in table.rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table>")
    return parts


def write_html(report: Report, out: Path, self_contained: bool = False) -> Path:
    title = f"esdash report: {report.title}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(_inputs_line(report))}</p>",
    ]
    if report.notes:
        parts.append("<h2>Notes</h2><ul>")
        parts += [f"<li>{html.escape(n)}</li>" for n in report.notes]
        parts.append("</ul>")
    for table in report.tables:
        if table.id != "environment":
            parts += _html_table(table)
    if report.figures:
        parts.append("<h2>Figures</h2>")
        for figure in report.figures:
            png = figure.files.get("png")
            source = png or next(iter(figure.files.values()))
            if self_contained:
                data = base64.b64encode((out / source).read_bytes()).decode("ascii")
                kind = "png" if source.endswith(".png") else "svg+xml"
                source = f"data:image/{kind};base64,{data}"
            links = (
                ""
                if self_contained
                else " ".join(
                    f'<a href="{html.escape(p)}">{fmt.upper()}</a>'
                    for fmt, p in figure.files.items()
                )
            )
            parts.append(
                f'<figure><img src="{html.escape(source)}" alt="{html.escape(figure.title)}">'
                f"<figcaption><b>{html.escape(figure.title)}</b>: {html.escape(figure.caption)} "
                f"{links}</figcaption></figure>"
            )
    environment_table_ = report.table("environment")
    if environment_table_ is not None:
        parts += _html_table(environment_table_)
    parts.append("<h2>Sessions</h2>")
    for run in report.environment["runs"]:
        if run.get("session"):
            parts.append(
                f"<details><summary>{html.escape(run['id'])}</summary>"
                f"<pre>{html.escape(run['session'])}</pre></details>"
            )
    parts.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts) + "\n")
    return path


def write_report(
    report: Report,
    out: Path,
    formats: Sequence[str],
    figures: bool = True,
    self_contained: bool = False,
) -> list[Path]:
    """Write ``formats`` into ``out``; figures first, since Markdown and HTML link them."""
    out.mkdir(parents=True, exist_ok=True)
    if figures and {"md", "html", "json"} & set(formats):
        from esdash.report.figures import make_figures

        query = report.table("queries")
        ingest = report.table("ingest")
        report.figures = make_figures(
            out,
            report.inputs.entries,
            query.records if query else [],
            ingest.records if ingest else [],
        )
    written: list[Path] = []
    for fmt in formats:
        if fmt == "md":
            written.append(write_markdown(report, out))
        elif fmt == "html":
            written.append(write_html(report, out, self_contained))
        elif fmt == "csv":
            written += write_csv(report, out)
        elif fmt == "json":
            written.append(write_json(report, out))
    return written
