"""The live screen: one run, followed as it happens or replayed with the timeline slider.

Data path (memray's live view): a thread worker wakes on every tick of a fixed timer
(``fps``, 4 Hz by default) — and at once after a key press — polls the run directory
(:class:`esdash.view.source.RunSource`), folds what it found into the
:class:`esdash.view.model.RunModel` and posts a :class:`SnapshotReady`.  The screen applies
the newest snapshot to its widgets; the widgets redraw only when the data or the view changed.
Nothing here reads a file on the UI thread, and a burst of records costs one redraw.

Pause freezes the panels while the worker keeps folding: the header keeps its clock and
counts the records that arrived meanwhile, and unpausing shows the newest state at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer
from textual.worker import get_current_worker

from esdash.tui.messages import SnapshotReady, SourceFailed
from esdash.tui.widgets.charts import LatencyHistogram, SeriesPlot
from esdash.tui.widgets.header import RunHeader, Timeline
from esdash.tui.widgets.panels import ClusterPanel, LeakagePanel, LogPanel, Panel, ProgressPanel
from esdash.tui.widgets.queries import QueryTable
from esdash.view.model import SPANS, WINDOWS, RunModel, Snapshot, ViewParams
from esdash.view.source import RunSource

_UNSET = object()
#: Panels that redraw at most this often (seconds): the plots are the costliest widgets,
#: and cluster samples and logs change every 2 s at most.  The rest follow every tick.
REDRAW_EVERY = {"rate": 0.5, "p99": 0.5, "cluster": 1.0, "progress": 1.0, "log": 1.0}

#: Panels in their key order: (id, title).
PANELS = (
    ("queries", "Queries · latency ms · now = sliding window, final / so far = this step"),
    ("histogram", "Latency histogram"),
    ("rate", "Throughput"),
    ("p99", "p99 latency"),
    ("cluster", "Cluster"),
    ("progress", "Ingest · errors · events"),
    ("log", "Node log"),
    ("leakage", "Leakage · what the cluster can learn, per encrypted field"),
)


class LiveScreen(Screen[None]):
    """Follow or replay one run directory."""

    ALLOW_IN_MAXIMIZED_VIEW = "RunHeader, Timeline, Footer"

    BINDINGS = [
        Binding("space,p", "pause", "Pause", id="pause"),
        Binding("space,p", "resume", "Resume", id="resume"),
        Binding("f", "follow", "Follow", id="follow"),
        Binding("plus,equals_sign", "span(1)", "Wider", id="wider"),
        Binding("minus", "span(-1)", "Narrower", id="narrower"),
        Binding("left_square_bracket", "step(-1)", "Back", show=False),
        Binding("right_square_bracket", "step(1)", "Forward", show=False),
        Binding("w", "window", "Window", show=False),
        Binding("h", "hist_mode", "Hist now/all", show=False),
        Binding("n", "next_node", "Log node", show=False),
        Binding("m", "maximize_panel", "Max", id="maximize"),
        Binding("x", "stop", "Stop run", show=False),
        Binding("escape", "back", "Back", show=False),
        *(
            Binding(str(k + 1), f"toggle_panel('{panel}')", f"Toggle {panel}", show=False)
            for k, (panel, _) in enumerate(PANELS)
        ),
    ]

    HELP_TITLE = "A run, live or replayed"
    HELP = """\
The live screen follows a run as it happens, or replays a finished one.

* **Header**: run, session, track, encryption, interconnect, nodes × bench ranks, Slurm job;
  the phase, elapsed / planned time, and the PAUSED, STALLED (no record for 3 intervals:
  the writer may be dead) and REPLAY badges.
* **Timeline**: the interval records; `[` / `]` (or ←/→ when it has focus) step through
  them, `f` follows the newest again.
* **Queries**: per query of the current step, *now* (the sliding window, `w` changes it)
  and the whole step: *final* once it is over (the figures of the run's results, the summary's
  and the report's) or *so far* (from the stream, until then): requests, errors, req/s,
  hits/s (documents the searches returned; docs/s: documents a bulk operation indexed),
  percentiles (shown only when enough samples support them: p99 needs 100, p99.9 needs
  1000), gmean and gstd.
  ↑/↓ selects the query the histogram shows.
* **Charts**: throughput and p99 per interval; `+` / `-` widen and narrow the time span.
* **Leakage** (a run in a client-side encryption mode, once its leakage report is
  written at the end): per encrypted field its scheme, what the cluster learns, and the
  share of records the best inference attack recovered; `esdash report` has the verdicts.
* Panels: `1`–`8` show or hide one, Tab moves between them, `m` maximises the focused one.
* `space` pauses the view (data keeps arriving), `x` stops the run (asks first),
  `ctrl+s` saves a screenshot. Quitting never stops a run.
"""

    def __init__(
        self,
        run_path: str | Path,
        *,
        source: RunSource | None = None,
        model: RunModel | None = None,
        fps: float = 4.0,
        clock: Callable[[], float] = time.time,
        can_go_back: bool = False,
    ) -> None:
        super().__init__()
        self.run_path = Path(run_path)
        self.source = source if source is not None else RunSource(self.run_path)
        self.model = model if model is not None else RunModel(self.run_path.name)
        self.fps = fps
        self.clock = clock
        self.can_go_back = can_go_back
        self.params = ViewParams()
        self.paused = False
        self.latest: Snapshot | None = None
        self.shown: Snapshot | None = None
        self.shown_params: ViewParams | None = None
        self.hidden: set[str] = set()
        self.log_rank = 0
        self.applied = 0  # snapshots applied to the panels (tests and bench/tui_load.py)
        self.on_display: Callable[[Snapshot], None] | None = None
        self._wake = threading.Event()
        self._binding_state: tuple[bool, bool, bool] | None = None
        self._drawn: dict[str, object] = {}  # what each panel shows now
        self._drawn_at: dict[str, float] = {}
        self._due_timer: Timer | None = None

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield Timeline(id="timeline")
        with VerticalScroll(id="body"), Grid(id="panels"):
            yield Panel(QueryTable(id="queries-table"), title=PANELS[0][1], key="1", id="queries")
            yield Panel(LatencyHistogram(id="hist"), title=PANELS[1][1], key="2", id="histogram")
            yield Panel(SeriesPlot("rate", id="rate-plot"), title=PANELS[2][1], key="3", id="rate")
            yield Panel(SeriesPlot("p99", id="p99-plot"), title=PANELS[3][1], key="4", id="p99")
            yield Panel(ClusterPanel(id="cluster-view"), title=PANELS[4][1], key="5", id="cluster")
            yield Panel(
                ProgressPanel(id="progress-view"), title=PANELS[5][1], key="6", id="progress"
            )
            yield Panel(LogPanel(id="log-view"), title=PANELS[6][1], key="7", id="log")
            yield Panel(LeakagePanel(id="leakage-view"), title=PANELS[7][1], key="8", id="leakage")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunHeader).show(None)
        self.query_one("#leakage", Panel).display = False  # until the run has a report
        self.set_interval(1.0 / self.fps, self._wake.set, name="tick")
        self._layout(self.app.size.width, self.app.size.height)
        self.follow()
        self._wake.set()
        self.query_one(QueryTable).focus()

    def on_resize(self) -> None:
        self._layout(self.app.size.width, self.app.size.height)
        self._drawn.clear()
        if self.shown is not None and self.shown_params is not None:
            self.call_after_refresh(self._apply, self.shown, self.shown_params)

    def _layout(self, width: int, height: int) -> None:
        columns = 3 if width >= 140 else 2 if width >= 80 else 1
        for n in (1, 2, 3):
            self.set_class(columns == n, f"-cols-{n}")
        self.set_class(height < 40, "-short")

    def on_latency_histogram_resized(self, message: LatencyHistogram.Resized) -> None:
        self._set_params(replace(self.params, hist_rows=min(40, message.rows)))

    # ------------------------------------------------------------------ worker
    @work(thread=True, exclusive=True, group="follow", name="follow")
    def follow(self) -> None:
        """Poll, fold and post snapshots at the tick rate until the screen goes away."""
        worker = get_current_worker()
        failures = 0
        while not worker.is_cancelled:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if worker.is_cancelled:
                break
            try:
                update = self.source.poll(log_rank=None if "log" in self.hidden else self.log_rank)
                self.model.apply(update)
                params = self.params
                snapshot = self.model.snapshot(params, self.clock())
                failures = 0
            except Exception as exc:  # a bug or an odd file: tell once, keep going
                failures += 1
                if failures == 1:
                    self.post_message(SourceFailed(f"{type(exc).__name__}: {exc}"))
                continue
            self.post_message(SnapshotReady(snapshot, params, source="live"))

    def on_source_failed(self, message: SourceFailed) -> None:
        self.notify(message.error, title="Reading the run failed", severity="error")

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        message.stop()
        snap = message.snapshot
        self.latest = snap
        behind = 0
        if self.paused and self.shown is not None:
            behind = max(0, snap.count - self.shown.count)
        self.query_one(RunHeader).show(
            snap if not self.paused or self.shown is None else self._paused_header(snap),
            paused=self.paused,
            behind=behind,
        )
        if self.paused and self.shown is not None and message.params == self.shown_params:
            return
        if (
            self.shown is not None
            and snap.version == self.shown.version
            and message.params == self.shown_params
        ):
            return
        self._apply(snap, message.params)

    def _paused_header(self, snap: Snapshot) -> Snapshot:
        """The frozen snapshot, with the live clock and stall state of the newest one."""
        shown = self.shown
        assert shown is not None
        return replace(
            shown,
            elapsed=snap.elapsed,
            stalled=snap.stalled,
            age=snap.age,
            slurm_state=snap.slurm_state,
        )

    def _apply(self, snap: Snapshot, params: ViewParams) -> None:
        # the user changed the view: every panel follows at once (no redraw throttling)
        asked = params != self.shown_params
        self.shown, self.shown_params = snap, params
        # "last 120 s" of a 21 s run would promise what is not there
        whole = snap.span is None or (snap.t is not None and snap.t <= snap.span)
        span = f"all {snap.t or 0:.0f} s" if whole else f"last {int(snap.span or 0)} s"
        last_point = snap.series[-1] if snap.series else None
        which = "all of this step" if params.hist_cumulative else "sliding window"
        # What each panel shows; a panel redraws only when its part changed.
        parts = {
            "queries": snap.ops,
            "histogram": (snap.histogram, snap.hist_count, snap.selected, which),
            "rate": (last_point, len(snap.series), snap.span, snap.t, snap.selected),
            "cluster": (snap.cluster, snap.ranks_all, snap.ranks_missing, snap.ranks_lost),
            "progress": (
                snap.ingest,
                snap.errors,
                snap.events,
                snap.problems,
                snap.trust,
                snap.count == 0,
            ),
            "log": snap.log,
            "leakage": snap.leakage,
        }
        parts["p99"] = parts["rate"]
        now = time.monotonic()
        with self.app.batch_update():
            self.query_one(Timeline).show(snap)
            self._show_leakage_panel(snap)
            for panel, _ in PANELS:
                if panel in self.hidden or self._drawn.get(panel, _UNSET) == parts[panel]:
                    continue
                wait = self._drawn_at.get(panel, 0.0) + REDRAW_EVERY.get(panel, 0.0) - now
                if wait > 0 and not asked:  # drawn not long ago: again when due
                    if self._due_timer is None:
                        self._due_timer = self.set_timer(wait, self._redraw_due)
                    continue
                self._drawn_at[panel] = now
                self._drawn[panel] = parts[panel]
                if panel == "queries":
                    self.query_one(QueryTable).show(snap)
                elif panel == "histogram":
                    self.query_one(LatencyHistogram).show(snap)
                    self.query_one(
                        "#histogram", Panel
                    ).border_title = f"2 Latency histogram · {snap.selected or '-'} · {which}"
                elif panel == "rate":
                    self.query_one("#rate-plot", SeriesPlot).show(snap)
                    self.query_one("#rate", Panel).border_title = f"3 Throughput req/s · {span}"
                elif panel == "p99":
                    self.query_one("#p99-plot", SeriesPlot).show(snap)
                    self.query_one("#p99", Panel).border_title = f"4 p99 latency ms · {span}"
                elif panel == "cluster":
                    self.query_one(ClusterPanel).show(snap)
                elif panel == "progress":
                    self.query_one(ProgressPanel).show(snap)
                elif panel == "log":
                    self.query_one(LogPanel).show(snap)
                    self.query_one("#log", Panel).border_title = "7 Node log · n: next node"
                elif panel == "leakage":
                    self.query_one(LeakagePanel).show(snap)
        self.applied += 1
        if self.on_display is not None:
            self.on_display(snap)
        state = (self.paused, params.upto is None, snap.finished)
        if state != self._binding_state:  # the footer rebuilds itself: only on change
            self._binding_state = state
            self.refresh_bindings()

    def _show_leakage_panel(self, snap: Snapshot | None) -> None:
        """The leakage panel is there only for a run with a report, and not hidden."""
        panel = self.query_one("#leakage", Panel)
        wanted = snap is not None and snap.leakage is not None and "leakage" not in self.hidden
        if panel.display != wanted:
            panel.display = wanted
            self.set_class(wanted, "-leakage")

    def _redraw_due(self) -> None:
        self._due_timer = None
        if self.shown is not None and self.shown_params is not None:
            self._apply(self.shown, self.shown_params)

    # ------------------------------------------------------------------ params
    def _set_params(self, params: ViewParams) -> None:
        """Ask for ``params`` (the current ones with a change); a change wakes the model."""
        if params != self.params:
            self.params = params
            self._wake.set()

    def on_timeline_moved(self, message: Timeline.Moved) -> None:
        self._set_params(replace(self.params, upto=message.index))

    def on_query_table_selected(self, message: QueryTable.Selected) -> None:
        self._set_params(replace(self.params, selected=message.name))

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        if action == "follow":
            return self.params.upto is not None or None
        if action == "stop":
            return self.latest is not None and not self.latest.finished or None
        return True

    def action_pause(self) -> None:
        self.paused = True
        self.refresh_bindings()
        if self.latest is not None:
            self.query_one(RunHeader).show(self.latest, paused=True)

    def action_resume(self) -> None:
        self.paused = False
        self.refresh_bindings()
        if self.latest is not None:
            self._apply(self.latest, self.params)
        self._wake.set()

    def action_follow(self) -> None:
        self._set_params(replace(self.params, upto=None))

    def action_step(self, delta: int) -> None:
        self.query_one(Timeline).action_move(delta)

    def action_span(self, direction: int) -> None:
        index = SPANS.index(self.params.span) if self.params.span in SPANS else 3
        index = min(max(0, index + direction), len(SPANS) - 1)
        self._set_params(replace(self.params, span=SPANS[index]))

    def action_window(self) -> None:
        index = WINDOWS.index(self.params.window) if self.params.window in WINDOWS else 0
        self._set_params(replace(self.params, window=WINDOWS[(index + 1) % len(WINDOWS)]))
        self.notify(f"sliding window: {self.params.window:g} s", timeout=2)

    def action_hist_mode(self) -> None:
        self._set_params(replace(self.params, hist_cumulative=not self.params.hist_cumulative))

    def action_next_node(self) -> None:
        ranks = sorted(self.model.nodes) or [0]
        later = [r for r in ranks if r > self.log_rank]
        self.log_rank = later[0] if later else ranks[0]
        self._wake.set()

    def action_toggle_panel(self, panel: str) -> None:
        widget = self.query_one(f"#{panel}", Panel)
        if panel in self.hidden:
            self.hidden.discard(panel)
            widget.display = True
            self._drawn.pop(panel, None)
            if self.shown is not None and self.shown_params is not None:
                self.call_after_refresh(self._apply, self.shown, self.shown_params)
        else:
            self.hidden.add(panel)
            widget.display = False
        if panel == "leakage":
            self._show_leakage_panel(self.shown)
            if panel not in self.hidden and (self.shown is None or self.shown.leakage is None):
                self.notify("this run has no leakage report (client-side encryption only)")

    def action_maximize_panel(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        if focused is None or not self.maximize(focused):
            self.maximize(self.query_one("#queries", Panel))

    def action_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.can_go_back:
            self.dismiss()

    def action_stop(self) -> None:
        self.app.confirm_stop(self.run_path)  # type: ignore[attr-defined]

    def on_screen_suspend(self) -> None:
        self._wake.set()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "follow")
        self._wake.set()
