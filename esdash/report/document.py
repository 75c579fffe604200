"""``esdash report``: the tables, figures, environment and sessions, in four formats.

* ``report.md`` — Markdown: tables, links to the figures beside it, every session in a code
  block;
* ``report.html`` — the same as one page, with the figures beside it, or embedded
  (``--self-contained``) so the file can be mailed alone;
* ``report.csv`` — one row per run x query with the run's own numbers (``ingest.csv`` has the
  ingests, ``leakage.csv`` the leakage reports of client-side encrypted runs, one row per
  field and attack with the field's majority-guess baseline), for spreadsheets and pandas;
* ``report.json`` — everything, as numbers (schema ``esdash.report/1``).

Figures (PNG and SVG) are drawn for Markdown and HTML; ``--no-figures`` skips them (and
matplotlib).  The tables' definitions are in :mod:`esdash.report.tables`.

The Markdown and HTML documents are Jinja2 templates (``templates/report.md.j2``,
``templates/report.html.j2`` and their table macros) so their layout can be read and changed
without Python: this module only gathers what they show (:func:`document_context`).  HTML is
autoescaped, so nothing in a run (names, sessions, notes) can add markup; in Markdown every
text from a run (cells, headings, notes, figure titles) goes through the ``md_cell`` filter,
which makes HTML and Markdown syntax in it inert, and each session sits in a code block
whose fence (``md_fence``) it cannot close; a variable missing from the context is an error
(``StrictUndefined``), never a silently empty string.
"""

from __future__ import annotations

import base64
import csv
import functools
import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import jinja2
from jinja2 import pass_eval_context
from jinja2.nodes import EvalContext
from markupsafe import Markup

from esdash.report.engines import engine_tables
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
from esdash.report.trust import trust_tables
from esdash.rundir import files
from esdash.rundir.records import Interval, JsonObject
from esdash.rundir.stream import StreamReader
from esdash.view import leakage
from esdash.view.inputs import BASELINE, Inputs

if TYPE_CHECKING:
    from esdash.report.figures import Figure

SCHEMA = "esdash.report/1"
REPORT_FORMATS = ("md", "html", "csv", "json", "rally")


@dataclass
class Report:
    title: str
    inputs: Inputs
    tables: list[Table]
    runs: list[JsonObject]
    environment: JsonObject
    notes: list[str]
    ingest_runs: list[JsonObject] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    #: Runs that have a leakage report (client-side encryption): (run id, what was read).
    leakage: list[tuple[str, leakage.LeakageReading]] = field(default_factory=list)

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
    setups = {str(e.config.get("setup")) for e in entries}
    if not overhead.records:
        overhead.note = (
            f"No overhead: it needs runs of the baseline setup {baseline!r} and of another "
            f"setup with the same cluster size, workers and interconnect (setups here: "
            f"{', '.join(sorted(setups))})."
        )
    # one setup has no overhead to show: no table saying "(no data)" about it
    tables += [overhead] if len(setups) > 1 else []
    tables += [*engine_tables(entries), *trust_tables(entries), environment_table(env)]
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
    found = [(e.id, leakage.read_leakage(e.path)) for e in entries if e.source == "esdash"]
    return Report(
        title,
        inputs,
        tables,
        run_rows(entries),
        env,
        notes(entries, inputs.missing),
        ingest_runs,
        leakage=[(run, reading) for run, reading in found if reading is not None],
    )


# ------------------------------------------------------------------------ writers


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_rally(report: Report, out: Path) -> Path:
    """``rally.json``: every run's tasks under Rally's metric names (:mod:`.rally_metrics`);
    Rally's throughput comes from each run's stream (read once per run)."""
    from esdash.report.rally_metrics import RallyRun, rally_document

    path = out / "rally.json"
    runs = [
        RallyRun(entry.id, entry.results, stream_intervals(entry.stream))
        for entry in report.inputs.entries
    ]
    path.write_text(json.dumps(_json_safe(rally_document(runs)), indent=2) + "\n")
    return path


def stream_intervals(stream: Path | None) -> list[Interval] | None:
    """The interval records of a run's stream; None without one (an imported file)."""
    if stream is None or not stream.is_file():
        return None
    return [r for r in StreamReader(stream).read_all() if isinstance(r, Interval)]


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
        "leakage": {
            run: files.to_builtins(reading.record) if reading.record else {"error": reading.error}
            for run, reading in report.leakage
        },
        "notes": report.notes,
        "environment": report.environment,
    }
    path.write_text(json.dumps(_json_safe(document), indent=2) + "\n")
    return path


def write_csv(report: Report, out: Path) -> list[Path]:
    extra = sorted({k for row in report.runs for k in row if k not in RUN_FIELDS})
    written = [_write_rows(out / "report.csv", [*RUN_FIELDS, *extra], report.runs)]
    if report.ingest_runs:
        fields: list[str] = []
        for row in report.ingest_runs:
            fields += [k for k in row if k not in fields and not isinstance(row[k], dict)]
        written.append(_write_rows(out / "ingest.csv", fields, report.ingest_runs))
    if report.leakage:
        rows = [row for run, reading in report.leakage for row in leakage.csv_rows(run, reading)]
        written.append(_write_rows(out / "leakage.csv", leakage.CSV_FIELDS, rows, "raise"))
    return written


def _write_rows(
    path: Path,
    fields: Sequence[str],
    rows: Iterable[Mapping[str, object]],
    extras: Literal["ignore", "raise"] = "ignore",
) -> Path:
    """``rows`` as a CSV file with a header; keys outside ``fields`` are left out, or refused
    where every key must have its column (``extras="raise"``)."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction=extras)
        writer.writeheader()
        writer.writerows(rows)
    return path


# Markdown and HTML: templates/*.j2 (see the module docstring); here only their context.


#: Where Markdown would read HTML: ``<`` before a tag name, ``/``, ``!`` or ``?`` opens a tag,
#: comment, declaration or autolink (CommonMark's raw HTML and autolinks); ``&`` before a
#: name or number and ``;`` is a character reference.  Elsewhere (``<0.1%``, ``a & b``) both
#: are plain text and stay as they are, readable in the raw file too.
_MD_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_MD_REFERENCE = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
#: Markdown punctuation a value could use to end a cell, open a code span or make a link or
#: an image; CommonMark shows a backslash-escaped punctuation character as itself.
_MD_PUNCTUATION = re.compile(r"([\\|`\[\]])")
_MD_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def md_cell(text: object) -> str:
    """Text from a run (a query, task or session name, a server's message) as inert Markdown.

    Tracks and sessions are written by others, and a Markdown viewer renders raw HTML:
    every ``<`` that would open a tag becomes ``&lt;`` (and ``&`` that would start a
    character reference ``&amp;``), so ``<script>`` or ``<img onerror=...>`` is shown as
    text, never as markup.  ``\\``, ``|``, backticks and brackets are backslash-escaped: no
    value ends a table cell, opens a code span or makes a link or an image.  Line breaks
    become spaces, so no value ends a row or a paragraph.  Used for cells, headings, notes
    and figure titles.
    """
    result = _MD_REFERENCE.sub("&amp;", str(text))
    result = _MD_TAG.sub("&lt;", result)
    result = _MD_PUNCTUATION.sub(r"\\\1", result)
    return _MD_LINE_BREAK.sub(" ", result)


def md_fence(text: object) -> str:
    """A code fence for ``text``: more backticks than its longest run of them (at least
    three), so no line of it (a session file) can close the block and be read as Markdown."""
    longest = max((len(run) for run in re.findall(r"`+", str(text))), default=0)
    return "`" * max(3, longest + 1)


@pass_eval_context
def _finalize(eval_ctx: EvalContext, value: object) -> object:
    """Escape HTML output with :func:`html.escape`, as the pages always were.

    Autoescaping is on for ``*.html.j2`` (its escape would give ``&#39;``/``&#34;`` where
    :func:`html.escape` gives ``&#x27;``/``&quot;``); escaping here first keeps the pages
    byte for byte what they were.  Markup (macro output) is left alone; Markdown untouched.
    """
    if eval_ctx.autoescape and not hasattr(value, "__html__"):
        return Markup(html.escape(str(value)))
    return value


@functools.cache
def templates() -> jinja2.Environment:
    """The report templates: HTML autoescaped, a missing variable an error, not ``""``."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("esdash.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_cell"] = md_cell
    env.filters["md_fence"] = md_fence
    return env


def _figure_context(figure: Figure, out: Path, embed: bool) -> JsonObject:
    main = figure.files.get("png") or next(iter(figure.files.values()))
    src = main
    if embed:
        data = base64.b64encode((out / main).read_bytes()).decode("ascii")
        kind = "png" if main.endswith(".png") else "svg+xml"
        src = f"data:image/{kind};base64,{data}"
    return {
        "title": figure.title,
        "caption": figure.caption,
        "main": main,  # the file shown: the PNG if there is one
        "src": src,  # what HTML's <img> loads: ``main``, or its data: URI when embedded
        "files": [{"format": fmt, "path": path} for fmt, path in figure.files.items()],
    }


def _leakage_context(run: str, reading: leakage.LeakageReading) -> JsonObject:
    """One run's leakage section: what was analysed, the per-field table, threat model."""
    record = reading.record
    if record is None:
        return {"run": run, "error": reading.error or f"{reading.path}: unreadable"}
    return {
        "run": run,
        "error": None,
        "basis": leakage.basis_line(record),
        "names": leakage.names_line(record),
        "headers": list(leakage.HEADERS),
        "rows": leakage.rows(record),
        "threat_model": record.threat_model,
        "references": list(record.references),
    }


def document_context(report: Report, out: Path, self_contained: bool = False) -> JsonObject:
    """What report.md.j2 and report.html.j2 show; figures are read from ``out`` if embedded."""
    entries = report.inputs.entries
    return {
        "title": report.title,
        "inputs": {
            "runs": len(entries),
            "campaigns": sorted({e.campaign for e in entries if e.campaign}),
            "imported": [e.id for e in entries if e.source != "esdash"],
        },
        "notes": report.notes,
        "tables": [t for t in report.tables if t.id != "environment"],
        "figures": [_figure_context(f, out, self_contained) for f in report.figures],
        "environment_table": report.table("environment"),
        "leakage": [_leakage_context(run, reading) for run, reading in report.leakage],
        "sessions": [
            {"id": run["id"], "session": run["session"]}
            for run in report.environment["runs"]
            if run.get("session")
        ],
        "self_contained": self_contained,
    }


def write_markdown(report: Report, out: Path) -> Path:
    path = out / "report.md"
    path.write_text(templates().get_template("report.md.j2").render(document_context(report, out)))
    return path


def write_html(report: Report, out: Path, self_contained: bool = False) -> Path:
    path = out / "report.html"
    context = document_context(report, out, self_contained)
    path.write_text(templates().get_template("report.html.j2").render(context))
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
            notes=report.notes,
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
        elif fmt == "rally":
            written.append(write_rally(report, out))
    return written
