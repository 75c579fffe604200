"""Two runs side by side (e.g. baseline vs ABE): per step and query, their numbers and effects.

Each run's numbers come from its ``results.json`` once it has one (the authoritative
figures, as ``esdash report`` prints them), and from its stream while it still runs; a
worker thread polls both run directories once a second.  Once both runs are finished, every
change is judged as ``esdash compare`` judges it (:func:`esdash.view.compare.screen_cells`):
the ratio B / A with its 95 % interval (block bootstrap over each run's measured intervals of
that step) and a verdict, Holm-corrected over the rows; while a run still goes, the change
in percent, coloured only when it is over 2 %.  The histograms of the selected row share
one log-scaled axis, so the shift of the distribution is visible at a glance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import get_current_worker

from esdash.errors import EsdashError
from esdash.tui.widgets.charts import LatencyHistogram
from esdash.tui.widgets.panels import Panel
from esdash.view import compare
from esdash.view import format as fmt
from esdash.view.model import (
    LatencyCounts,
    RunModel,
    Snapshot,
    StepQuery,
    ViewParams,
    shared_histograms,
    step_counts,
    step_queries,
)
from esdash.view.source import RESULTS, RunSource


@dataclass(frozen=True)
class Side:
    snapshot: Snapshot
    rows: dict[tuple[int, str], StepQuery]
    counts: dict[tuple[int, str], LatencyCounts]


#: The table's metrics and their names in :data:`esdash.view.compare.SCREEN_METRICS`.
SCREEN_NAMES = {"rate": "req/s", "p50": "p50 ms", "p99": "p99 ms", "gmean": "gmean ms"}
#: A verdict as the table shows it, with its colour.
VERDICT_STYLES = {
    "better": ("✓", "green"),
    "worse": ("✗", "red"),
    "equivalent": ("≈", ""),
    "inconclusive": ("?", "dim"),
}

Cells = dict[tuple[int, str], dict[str, "compare.Judged | None"]]


class CompareReady(Message):
    def __init__(self, a: Side, b: Side, cells: Cells | None = None) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.cells = cells

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CompareReady)


def _short(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.3g}"


def _judged_cell(cell: compare.Judged | None) -> Text | None:
    """``0.27 0.08–0.90 ✗``: B / A, its 95 % interval and the verdict (None: no ratio)."""
    if cell is None or cell.effect.ratio is None:
        return None
    found = cell.effect
    word, style = VERDICT_STYLES[cell.verdict]
    text = Text(_short(cell.effect.ratio), justify="right", style=style)
    if found.low is not None and found.high is not None:
        text.append(f" {_short(found.low)}–{_short(found.high)}", style="dim")
    text.append(f" {word}", style=style or "bold")
    return text


def _change_cell(metric: str, a: float | None, b: float | None) -> Text:
    change = compare.relative_change(a, b)
    if change is None:
        return Text(" -", justify="right", style="dim")
    verdict = compare.better(metric, a, b)
    style = "" if verdict is None else ("green" if verdict else "red")
    return Text(" " + fmt.change(change), justify="right", style=style)


def _side_text(label: str, snap: Snapshot) -> Text:
    text = Text()
    text.append(f" {label} ", style="bold reverse")
    text.append(f" {snap.run_id}", style="bold")
    text.append(
        f"\n session {snap.session} · track {snap.track} · enc {snap.encryption} · "
        f"net {snap.interconnect} · {fmt.counted(snap.nodes, 'node')} × "
        f"{fmt.counted(snap.ranks, 'rank')}",
        style="dim",
    )
    status = snap.status or ("running" if snap.count else snap.phase)
    text.append(f"\n {status}", style="green" if status == "ok" else "yellow")
    if snap.reason:
        text.append(f" ({snap.reason})", style="dim")
    return text


class CompareScreen(Screen[None]):
    """Run A (baseline) and run B side by side; changes are B relative to A."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("a", "open('a')", "Watch A"),
        Binding("b", "open('b')", "Watch B"),
    ]

    HELP_TITLE = "Two runs side by side"
    HELP = f"""\
Two runs side by side: **A** is the baseline, **B** the contender. Rows are the measured
query steps, matched by step and query name. Once both runs are finished, each **B/A**
column gives the ratio B / A, its 95 % interval (a block bootstrap over the measured
intervals of that step in each run) and a verdict: **✓** better (green) or **✗** worse
(red) when p < 0.05 after Holm's correction over the rows, **≈** equivalent when the whole
interval lies within ±5 %, **?** when the runs cannot tell (as `esdash compare` judges; for
repetitions, use `esdash compare` on a campaign). While a run still goes, the column shows
the change in percent, coloured when over 2 %.

Numbers come from each run's `{RESULTS}` once it is written, and from its stream while
it still runs. ↑/↓ selects a row; the histograms below show the latency distribution of
that query in both runs on one log-scaled axis. `a` / `b` opens run A / B in the live screen.
"""

    def __init__(
        self,
        a: str | Path,
        b: str | Path,
        *,
        source_factory: Callable[[Path], RunSource] = RunSource,
        clock: Callable[[], float] = time.time,
        every: float = 1.0,
        can_go_back: bool = False,
    ) -> None:
        super().__init__()
        self.paths = (Path(a), Path(b))
        self.sources = tuple(source_factory(p) for p in self.paths)
        self.models = tuple(RunModel(p.name) for p in self.paths)
        self.clock = clock
        self.every = every
        self.can_go_back = can_go_back
        self.sides: tuple[Side, Side] | None = None
        self.keys: list[tuple[int, str]] = []
        self.applied = 0
        #: the verdicts, once both runs are finished (judged once), and whether the table
        #: shows them yet
        self.cells: Cells | None = None
        self.judged = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="compare-sides"):
            yield Static(id="side-a")
            yield Static(id="side-b")
        yield Panel(
            DataTable(id="compare-table", cursor_type="row"),
            title="Per step and query",
            key="",
            id="compare-rows",
        )
        with Horizontal(id="compare-hists"):
            yield Panel(LatencyHistogram(id="hist-a"), title="A latency", key="", id="ph-a")
            yield Panel(LatencyHistogram(id="hist-b"), title="B latency", key="", id="ph-b")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        for label in (
            "step/query", "req/s A", "req/s B", "B/A", "p50 A", "p50 B", "B/A",
            "p99 A", "p99 B", "B/A", "gmean A", "gmean B", "B/A", "err A/B",
        ):  # fmt: skip
            table.add_column(label)
        self.poll()
        table.focus()

    @work(thread=True, exclusive=True, group="compare")
    def poll(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            sides = []
            changed = False
            for source, model in zip(self.sources, self.models, strict=True):
                changed |= model.apply(source.poll())
            finished = all(m.results is not None for m in self.models)
            if changed or self.sides is None or (finished and self.cells is None):
                for model in self.models:
                    rows = {(r.step, r.query): r for r in step_queries(model)}
                    counts = {key: step_counts(model, *key) for key in rows}
                    sides.append(Side(model.snapshot(ViewParams(), self.clock()), rows, counts))
                cells = self._judge() if finished else None
                self.post_message(CompareReady(sides[0], sides[1], cells))
            deadline = time.monotonic() + self.every
            while time.monotonic() < deadline and not worker.is_cancelled:
                time.sleep(0.05)

    def _judge(self) -> Cells:
        """The verdicts of two finished runs (worker thread; judged once, then kept)."""
        if self.cells is None:
            from esdash.view.inputs import load_run

            try:
                self.cells = compare.screen_cells(load_run(self.paths[0]), load_run(self.paths[1]))
            except EsdashError:  # a results file that does not read: figures without verdicts
                self.cells = {}
        return self.cells

    def on_compare_ready(self, message: CompareReady) -> None:
        self.sides = (message.a, message.b)
        self.query_one("#side-a", Static).update(_side_text("A", message.a.snapshot))
        self.query_one("#side-b", Static).update(_side_text("B", message.b.snapshot))
        table = self.query_one("#compare-table", DataTable)
        row_before = table.cursor_row
        keys = sorted(set(message.a.rows) | set(message.b.rows))
        table.clear()
        self.keys = keys
        for key in keys:
            a, b = message.a.rows.get(key), message.b.rows.get(key)
            known = a or b
            name = known.step_name if known else str(key[0])
            # the step's number and name, and the query's where it has another
            label = name if name == key[1] else f"{name}/{key[1]}"
            cells: list[Text | str] = [f"{key[0] + 1} {label}"]
            for metric, convert in (
                ("rate", fmt.rate),
                ("p50", fmt.ms),
                ("p99", fmt.ms),
                ("gmean", fmt.ms),
            ):
                va = getattr(a, metric) if a else None
                vb = getattr(b, metric) if b else None
                judged = (message.cells or {}).get(key, {}).get(SCREEN_NAMES[metric])
                cells += [
                    Text(" " + convert(va), justify="right"),
                    Text(" " + convert(vb), justify="right"),
                    _judged_cell(judged) or _change_cell(metric, va, vb),
                ]
            errors = (fmt.count(side.errors if side else None) for side in (a, b))
            cells.append(Text(" " + "/".join(errors), justify="right"))
            table.add_row(*cells)
        if keys:
            table.move_cursor(row=min(max(row_before, 0), len(keys) - 1), animate=False)
        self._show_histograms()
        # counted once drawn: whoever waits for it (tests) then sees the rows, not a layout
        # still pending
        self.call_after_refresh(self._applied, message.cells is not None)

    def _applied(self, judged: bool) -> None:
        self.judged = judged
        self.applied += 1

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_histograms()

    def on_latency_histogram_resized(self, message: LatencyHistogram.Resized) -> None:
        self._show_histograms()

    def _show_histograms(self) -> None:
        if self.sides is None or not self.keys:
            return
        row = self.query_one("#compare-table", DataTable).cursor_row
        key = self.keys[min(max(row, 0), len(self.keys) - 1)]
        widgets = [self.query_one(f"#hist-{w}", LatencyHistogram) for w in ("a", "b")]
        shown = shared_histograms(
            [side.counts.get(key) for side in self.sides], [w.rows() for w in widgets]
        )
        if shown is None:
            return
        # one scale for both: a bar's length is its share of its run's requests, the
        # largest share of either run a full bar, so equal shares draw equal bars
        full = max((b.count / h.total for h in shown if h.total for b in h.buckets), default=0.0)
        for label, histogram, widget, widget_id in zip(
            ("A", "B"), shown, widgets, ("a", "b"), strict=True
        ):
            widget.buckets = histogram.buckets
            widget.total = histogram.total
            widget.label = f"{label} {key[1]}"
            widget.full_share = full or None
            widget.refresh()
            panel = self.query_one(f"#ph-{widget_id}", Panel)
            panel.border_title = f"{label} latency · step {key[0] + 1} {key[1]}"

    def action_back(self) -> None:
        if self.can_go_back:
            self.dismiss()

    def action_open(self, which: str) -> None:
        path = self.paths[0 if which == "a" else 1]
        self.app.watch_run(path, back=True)  # type: ignore[attr-defined]
