"""The Markdown and HTML documents of `esdash report`, rendered from Jinja2 templates.

Structure (every table, its headers, a known value), escaping (nothing from a run becomes
HTML markup or breaks a Markdown table) and StrictUndefined (a variable missing from the
context is an error, not an empty string).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import jinja2
import pytest
from markdown_it import MarkdownIt
from support import synthetic

from esdash.report.document import (
    Report,
    build_report,
    document_context,
    md_cell,
    templates,
    write_report,
)
from esdash.report.figures import Figure
from esdash.view import format as fmt
from esdash.view.inputs import load_inputs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
DEV = FIXTURES / "dev-20261121-032918"
SCRIPT = "<script>alert(1)</script>"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def hostile_run(tmp_path: Path) -> Path:
    """A run whose id and session name carry markup and whose query name carries "|"."""
    run = synthetic.write_run(
        tmp_path, "hostile", {"s": {"a|b\nc": synthetic.op([1.0, 2.0, 3.0])}}, {"nodes": 3}
    )
    results = json.loads((run / "results.json").read_text())
    results["run_id"] = f"x{SCRIPT}"
    (run / "results.json").write_text(json.dumps(results))
    session = (run / "session.toml").read_text()
    (run / "session.toml").write_text(session.replace('"synthetic"', f'"s{SCRIPT}"'))
    return run


def fixture_report(tmp_path: Path) -> tuple[Report, Path]:
    """The real (trimmed) dev run next to the hostile one, plus a figure drawn by hand."""
    report = build_report(load_inputs([str(DEV), str(hostile_run(tmp_path))]))
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "f.png").write_bytes(PNG)
    (out / "figures" / "f.svg").write_text("<svg/>")
    report.figures = [
        Figure(
            "f", f"Figure {SCRIPT}", "A caption.", {"png": "figures/f.png", "svg": "figures/f.svg"}
        )
    ]
    return report, out


def write(report: Report, out: Path, formats: list[str], self_contained: bool = False) -> None:
    # figures=False: keep the hand-made figure (and skip matplotlib)
    write_report(report, out, formats, figures=False, self_contained=self_contained)


def test_every_table_with_its_headers_and_a_known_value(tmp_path: Path) -> None:
    report, out = fixture_report(tmp_path)
    write(report, out, ["md", "html"])
    markdown = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    ids = [t.id for t in report.tables]
    assert {"queries", "ingest", "environment"} <= set(ids)
    assert "overhead" not in ids  # one setup (none): nothing to be relative to
    for table in report.tables:
        assert f"\n## {md_cell(table.title)}\n\n{md_cell(table.note)}\n\n" in markdown, table.id
        assert f"<h2>{html.escape(table.title)}</h2>" in page, table.id
        assert f'<p class="note">{html.escape(table.note)}</p>' in page, table.id
        if not table.rows:
            assert f"## {md_cell(table.title)}\n\n{md_cell(table.note)}\n\n(no data)\n" in (
                markdown
            ), table.id
            continue
        cells = [md_cell(h) for h in table.headers]
        separator = "|" + "---|" * len(table.headers)
        assert f"| {' | '.join(cells)} |\n{separator}\n" in markdown, table.id
        headers = "\n".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
        assert f"<table><thead><tr>\n{headers}\n</tr></thead><tbody>" in page, table.id
    # the order of the sections: notes, tables, figures, environment, sessions
    order = [markdown.index(f"## {report.table(i).title}\n") for i in ids if i != "environment"]
    order += [markdown.index("## Figures\n"), markdown.index("## Environment\n")]
    order.append(markdown.index("## Sessions\n"))
    assert order == sorted(order)
    assert markdown.startswith("# esdash report: 2 run(s)\n\nInputs: 2 run(s).\n\n")
    assert markdown.endswith("```\n") and not markdown.endswith("\n\n")
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</body></html>\n")
    assert page.count("<table>") == sum(1 for t in report.tables if t.rows)
    # a known value: the dev run's age query, as its results.json has it
    dev = json.loads((DEV / "results.json").read_text())
    age = dev["steps"][2]["queries"]["age"]
    intervals = age["throughput"]["intervals"]
    rate = f"{fmt.rate(age['throughput']['requests_per_s'])} +- {fmt.rate(intervals['std'])}"
    # the two runs differ in measured settings: each row's setup names the ones that differ
    (record,) = [
        r for r in report.table("queries").records if (r["query"], r["nodes"]) == ("age", 1)
    ]
    assert record["other"].startswith("track.documents=2000, corpus.documents=2000, ")
    setup = f"none · {record['other']}"
    assert f"| {setup} | loopback | 1 | 1 | age | 1 | {age['requests']:,} | {rate} |" in markdown
    cells = [setup, "loopback", "1", "1", "age", "1", f"{age['requests']:,}", rate]
    assert "<tr>" + "".join(f"<td>{c}</td>" for c in cells) in page
    # figures: the PNG shown, the other formats linked
    inert = "&lt;script>alert(1)&lt;/script>"
    assert f"![Figure {inert}](figures/f.png)\n\n[SVG](figures/f.svg)\n" in markdown
    assert '<a href="figures/f.png">PNG</a> <a href="figures/f.svg">SVG</a></figcaption>' in page
    assert f"### x{inert}\n\n```toml\n" in markdown


def test_html_escapes_everything_from_runs(tmp_path: Path) -> None:
    report, out = fixture_report(tmp_path)
    write(report, out, ["html"])
    page = (out / "report.html").read_text()
    assert "<script" not in page and "alert(1)</" not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<summary>x{escaped}</summary>" in page  # the run's id
    assert f"name = &quot;s{escaped}&quot;" in page  # its session, in <pre>
    assert f"<td>x{escaped}</td>" in page  # the environment table
    assert f'alt="Figure {escaped}"' in page and f"<b>Figure {escaped}</b>" in page
    # escaped with html.escape, as before the templates ("'" -> &#x27;, not &#39;)
    assert "The paper&#x27;s throughput table" in page and "&#39;" not in page
    contained = tmp_path / "contained"
    contained.mkdir()
    (contained / "figures").symlink_to(out / "figures")
    write(report, contained, ["html"], self_contained=True)
    page = (contained / "report.html").read_text()
    assert '<img src="data:image/png;base64,iVBORw0KGgo' in page and "<a href=" not in page
    assert "<script" not in page


def test_markdown_cells_cannot_break_a_table(tmp_path: Path) -> None:
    report, out = fixture_report(tmp_path)
    write(report, out, ["md"])
    markdown = (out / "report.md").read_text()
    assert "| s/a\\|b c |" in markdown  # the query column of the hostile run
    assert "a|b" not in markdown and "a\\|b\nc" not in markdown
    for line in markdown.split("```")[0].splitlines():  # before the sessions' code blocks
        if line.startswith("|"):
            assert line.endswith("|"), line


@pytest.mark.parametrize("name", ["report.md.j2", "report.html.j2"])
def test_a_missing_variable_is_an_error(tmp_path: Path, name: str) -> None:
    report, out = fixture_report(tmp_path)
    context = document_context(report, out)
    template = templates().get_template(name)
    assert template.render(context)
    used = [k for k in context if not (k == "self_contained" and name.endswith(".md.j2"))]
    assert "sessions" in used and "tables" in used
    for key in used:
        partial = {k: v for k, v in context.items() if k != key}
        with pytest.raises(jinja2.UndefinedError):
            template.render(partial)
    inputs = {**context["inputs"]}
    del inputs["imported"]
    with pytest.raises(jinja2.UndefinedError, match="imported"):
        template.render({**context, "inputs": inputs})


#: What a track or session could put into a name (issue 28, L3).
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_markdown_from_hostile_tracks_and_sessions_renders_as_inert_text(tmp_path: Path) -> None:
    """report.md rendered by a real CommonMark renderer with raw HTML allowed (markdown-it-py,
    which rich depends on, with GitHub's tables): names, messages and titles from a run show
    as text; no tag, link or image comes from them, no row gains a cell and no session
    escapes its code block."""
    query = f"q{HOSTILE}|[x](javascript:alert(3))\n`code`"
    run = synthetic.write_run(tmp_path, "evil", {f"s{HOSTILE}": {query: synthetic.op([1.0, 2.0])}})
    results = json.loads((run / "results.json").read_text())
    results["steps"][0]["unsupported"] = {f"u{HOSTILE}": f"the server said {HOSTILE}"}
    (run / "results.json").write_text(json.dumps(results))
    session = (run / "session.toml").read_text()
    (run / "session.toml").write_text(session + "# ````\n# <script>alert(4)</script>\n")
    report = build_report(load_inputs([str(run)]))
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "f.png").write_bytes(PNG)
    report.figures = [
        Figure("f", f"Latency of {HOSTILE}", f"caption {HOSTILE}", {"png": "figures/f.png"})
    ]
    write(report, out, ["md"])
    markdown = (out / "report.md").read_text()
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    page = renderer.render(markdown)
    assert "<script" not in page and "<img src=x" not in page
    assert 'href="javascript' not in page and "<code>code</code>" not in page
    assert page.count("<img ") == 1  # the figure itself
    assert html.escape(f"s{HOSTILE}/u{HOSTILE} not run: the server said {HOSTILE}", False) in page
    # every row of every table has exactly as many cells as its header
    tokens = renderer.parse(markdown)
    widths: list[int] = []
    for token in tokens:
        if token.type == "tr_open":
            widths.append(0)
        elif token.type in ("th_open", "td_open"):
            widths[-1] += 1
        elif token.type == "table_close":
            assert len(set(widths)) == 1, widths
            widths = []
    # the session, fence and HTML included, is one code block, shown as it is
    blocks = [t for t in tokens if t.type == "fence"]
    assert [b.content for b in blocks] == [(run / "session.toml").read_text().rstrip() + "\n"]
    assert page.count("alert(4)") == 1
