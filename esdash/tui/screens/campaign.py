"""The campaign screen: one ``esdash sweep`` campaign, followed while it runs.

Data path, as on the live screen: a thread worker polls ``campaign.json`` (its inode, size
and mtime; the sweep rewrites it atomically after every change) through
:class:`esdash.view.campaign.ProgressFollower` and posts each new
:class:`~esdash.view.campaign.CampaignReading`; the screen keeps the newest one in a
reactive attribute and redraws from it at most every ``redraw_every`` seconds (a burst of
writes costs one redraw; the tables change only the cells that changed).  A once-a-second
tick moves the clocks of running points.  Nothing here reads a file on the UI thread.

A file that is not a campaign.json (bad JSON, another schema) is shown as an error in the
header; the last good reading stays on screen, and the next good write replaces both.

From a point with a run directory (or a current point) ``enter`` opens the run's live
screen, which ``escape`` leaves again: the campaign screen only points at runs, it does not
duplicate what the live screen shows about them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer
from textual.worker import get_current_worker

from esdash.tui.messages import CampaignRead
from esdash.tui.widgets.campaign import STATUS_STYLES, CampaignHeader, utc_time
from esdash.tui.widgets.tables import Cell, SyncedTable
from esdash.view import format as fmt
from esdash.view.campaign import (
    CAMPAIGN_SUMMARY,
    CampaignPoint,
    CampaignReading,
    CampaignSummary,
    ProgressFollower,
)

POINT_COLUMNS = ("#", "point", "status", "tries", "time", "reason", "cluster", "run")
CURRENT_COLUMNS = ("point", "attempt", "running for", "cluster run", "run")
CLUSTER_COLUMNS = ("#", "cluster", "nodes", "completed", "failed", "running")
RUNNER_COLUMNS = ("host", "pid", "state", "slurm job", "doing", "updated (UTC)")
#: Reasons are cut to this many cells in the table (the full text is in the point's state).
REASON_WIDTH = 60


def _styled(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _run_name(path: str | None) -> Text | str:
    return Path(path).name if path else Text(fmt.NA, style="dim")


def point_rows(progress: CampaignSummary, now: float) -> list[tuple[str, list[Cell]]]:
    rows: list[tuple[str, list[Cell]]] = []
    for number, point in enumerate(progress.points, 1):
        reason = (point.reason or "").splitlines()[0] if point.reason else ""
        if len(reason) > REASON_WIDTH:
            reason = reason[: REASON_WIDTH - 1] + "…"
        cells: list[Cell] = [
            Text(str(number), style="dim"),
            Text(point.label, style="bold" if point.status == "running" else ""),
            _styled(point.status),
            str(point.attempts) if point.attempts else Text("0", style="dim"),
            Text(fmt.duration(point.duration(now)), justify="right"),
            Text(reason, style="red" if point.status == "failed" else "dim"),
            str(point.cluster) if point.cluster is not None else fmt.NA,
            _run_name(point.run),
        ]
        rows.append((point.id, cells))
    return rows


def current_rows(progress: CampaignSummary, now: float) -> list[tuple[str, list[Cell]]]:
    return [
        (
            current.point,
            [
                Text(current.label, style="bold"),
                str(current.attempt) if current.attempt is not None else fmt.NA,
                fmt.duration(now - current.started) if current.started else fmt.NA,
                _run_name(current.cluster_run),
                _run_name(current.run),
            ],
        )
        for current in progress.current
    ]


def cluster_rows(progress: CampaignSummary) -> list[tuple[str, list[Cell]]]:
    rows: list[tuple[str, list[Cell]]] = []
    for cluster in progress.clusters:
        counts = progress.cluster_counts(cluster.number)
        total = counts.total or cluster.points
        done = f"{counts.completed}/{total}"
        rows.append(
            (
                str(cluster.number),
                [
                    Text(str(cluster.number), style="dim"),
                    cluster.label,
                    str(cluster.nodes) if cluster.nodes is not None else fmt.NA,
                    Text(done, style="green" if total and counts.completed == total else ""),
                    _styled(str(counts.failed)) if counts.failed else Text("0", style="dim"),
                    Text(str(counts.running), style="bold yellow")
                    if counts.running
                    else Text("0", style="dim"),
                ],
            )
        )
    return rows


def runner_rows(progress: CampaignSummary) -> list[tuple[str, list[Cell]]]:
    rows: list[tuple[str, list[Cell]]] = []
    for runner in progress.runners:
        current = runner.current.label or runner.current.point if runner.current else ""
        cluster = runner.cluster.label or runner.cluster.number if runner.cluster else None
        doing = current or (f"cluster {cluster}" if cluster else "")
        rows.append(
            (
                f"{runner.host}-{runner.pid}",
                [
                    runner.host,
                    str(runner.pid) if runner.pid is not None else fmt.NA,
                    _styled(runner.state),
                    runner.slurm_job or fmt.NA,
                    Text(doing or fmt.NA, style="" if doing else "dim"),
                    utc_time(runner.updated),
                ],
            )
        )
    return rows


class RunTable(SyncedTable):
    """A table whose rows have run directories: ``enter`` opens one (and says so)."""

    BINDINGS = [Binding("enter", "select_cursor", "Watch run")]


class CampaignScreen(Screen[None]):
    """Follow one campaign directory's ``campaign.json``; open the runs of its points."""

    BINDINGS = [
        Binding("f", "current", "Current point", id="current"),
        Binding("escape", "back", "Back", id="back"),
    ]

    HELP_TITLE = "A campaign and its points"
    HELP = f"""\
The campaign screen follows one `esdash sweep` campaign through its `{CAMPAIGN_SUMMARY}`, which
the sweep rewrites after every change (also from Slurm jobs on other hosts: only the shared
file system is needed).

* **Header**: name, state (running, finished, failed, interrupted, pending; *died* when the
  file says running but the sweep's process on this host is gone), description, directory,
  the points per status and a bar with one colour per status.
* **Now running**: what the sweeps are doing, with the point's run and its cluster's run.
* **Points**, in run order: status, attempts, the time of the latest attempt, its cluster,
  why it failed, its run directory.
* **Clusters** in run order, and the **runners** (one per `esdash sweep` process: host,
  pid, state, Slurm job, what it does now).

`enter` on a point (or a running one) opens its run in the live screen, `escape` comes
back. `f` moves to the point running now. A {CAMPAIGN_SUMMARY} that cannot be read is shown as
an error; the last good reading stays.
"""

    reading: reactive[CampaignReading | None] = reactive(None, init=False)

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        every: float = 0.5,
        redraw_every: float = 0.5,
        can_go_back: bool = False,
        follower: ProgressFollower | None = None,
    ) -> None:
        super().__init__()
        self.follower = follower if follower is not None else ProgressFollower(path)
        self.summary_path = self.follower.path
        self.campaign_dir = self.summary_path.parent
        self.clock = clock
        self.every = every
        self.redraw_every = redraw_every
        self.can_go_back = can_go_back
        self.applied = 0  # readings drawn (tests)
        self._wake = threading.Event()
        self._drawn_at = 0.0
        self._due: Timer | None = None
        self._placed = False
        self._error_told: str | None = None

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield CampaignHeader(id="campaign-header")
        yield RunTable(id="campaign-current", zebra_stripes=True)
        yield RunTable(id="campaign-points", zebra_stripes=True)
        with Horizontal(id="campaign-bottom"):
            yield SyncedTable(id="campaign-clusters", zebra_stripes=True)
            yield SyncedTable(id="campaign-runners", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#campaign-current").display = False
        for table_id, title in (
            ("campaign-current", "Now running"),
            ("campaign-points", "Points"),
            ("campaign-clusters", "Clusters"),
            ("campaign-runners", "Runners"),
        ):
            self.query_one(f"#{table_id}", SyncedTable).border_title = title
        self.query_one(CampaignHeader).update(
            Text(f"reading {fmt.short_path(self.summary_path)}…", style="dim")
        )
        self.on_resize()
        self.set_interval(1.0, self._schedule_draw, name="clock")
        self.follow()
        self.query_one("#campaign-points").focus()

    def on_resize(self) -> None:
        """Under 40 rows the tables below the points get less room."""
        self.set_class(self.app.size.height < 40, "-short")

    # ------------------------------------------------------------------ reading
    @work(thread=True, exclusive=True, group="campaign", name="campaign")
    def follow(self) -> None:
        """Poll campaign.json every ``every`` seconds; post what changed."""
        worker = get_current_worker()
        while not worker.is_cancelled:
            try:
                reading = self.follower.reading()
            except Exception as exc:  # a bug, not a bad file: tell, keep polling
                reading = CampaignReading(
                    self.summary_path,
                    self.follower.latest.progress,
                    f"{type(exc).__name__}: {exc}",
                    self.follower.latest.state,
                )
            if reading is not None:
                self.post_message(CampaignRead(reading))
            self._wake.wait(self.every)
            self._wake.clear()

    def on_campaign_read(self, message: CampaignRead) -> None:
        message.stop()
        self.reading = message.reading

    def watch_reading(self, reading: CampaignReading | None) -> None:
        if reading is not None and reading.error and reading.error != self._error_told:
            self.notify(reading.error, title=f"{CAMPAIGN_SUMMARY} unreadable", severity="error")
        self._error_told = reading.error if reading is not None else None
        self._schedule_draw()

    # ------------------------------------------------------------------ drawing
    def _schedule_draw(self) -> None:
        """Draw now, or when ``redraw_every`` has passed since the last draw."""
        if self.reading is None:
            return
        wait = self._drawn_at + self.redraw_every - time.monotonic()
        if wait <= 0:
            self._draw()
        elif self._due is None:
            self._due = self.set_timer(wait, self._draw_due)

    def _draw_due(self) -> None:
        self._due = None
        self._draw()

    def _draw(self) -> None:
        reading = self.reading
        if reading is None:
            return
        self._drawn_at = time.monotonic()
        now = self.clock()
        progress = reading.progress
        with self.app.batch_update():
            self.query_one(CampaignHeader).show(
                progress,
                state=reading.state,
                error=reading.error,
                where=fmt.short_path(self.campaign_dir),
                now=now,
            )
            if progress is not None:
                self._draw_tables(progress, now)
        self.applied += 1

    def _draw_tables(self, progress: CampaignSummary, now: float) -> None:
        current = self.query_one("#campaign-current", SyncedTable)
        current.display = bool(progress.current)
        current.show(CURRENT_COLUMNS, current_rows(progress, now))
        current.border_title = f"Now running ({len(progress.current)})"
        points = self.query_one("#campaign-points", SyncedTable)
        points.show(POINT_COLUMNS, point_rows(progress, now))
        points.border_title = f"Points ({progress.point_counts.total})"
        clusters = self.query_one("#campaign-clusters", SyncedTable)
        clusters.show(CLUSTER_COLUMNS, cluster_rows(progress))
        clusters.border_title = f"Clusters ({len(progress.clusters)})"
        runners = self.query_one("#campaign-runners", SyncedTable)
        runners.show(RUNNER_COLUMNS, runner_rows(progress))
        runners.border_title = f"Runners ({len(progress.runners)})"
        if not self._placed and progress.points:
            self._placed = True
            self.call_after_refresh(points.move_to, self._interesting(progress).id)

    @staticmethod
    def _interesting(progress: CampaignSummary) -> CampaignPoint:
        """Where the cursor starts: the running point, else the first one not completed."""
        running = next((p for p in progress.points if p.status == "running"), None)
        if running is not None:
            return running
        return next((p for p in progress.points if p.status != "completed"), progress.points[0])

    # ------------------------------------------------------------------ actions
    def _selected_run(self) -> tuple[str, Path | None] | None:
        """The label and run directory of the row under the cursor of the focused table."""
        progress = self.reading.progress if self.reading is not None else None
        focused = self.focused
        if progress is None or not isinstance(focused, SyncedTable):
            return None
        key = focused.cursor_key
        if key is None:
            return None
        if focused.id == "campaign-current":
            current = next((c for c in progress.current if c.point == key), None)
            if current is None:
                return None
            return current.label or current.point, Path(current.run) if current.run else None
        if focused.id == "campaign-points":
            point = progress.point(key)
            if point is None:
                return None
            return point.label or point.id, Path(point.run) if point.run else None
        return None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "campaign-clusters":
            self._go_to_cluster(event.row_key.value)
        else:
            self.action_watch_point()

    def _go_to_cluster(self, number: str | None) -> None:
        progress = self.reading.progress if self.reading is not None else None
        if progress is None or number is None:
            return
        first = next((p for p in progress.points if str(p.cluster) == number), None)
        if first is not None:
            points = self.query_one("#campaign-points", SyncedTable)
            points.move_to(first.id)
            points.focus()

    def action_watch_point(self) -> None:
        selected = self._selected_run()
        if selected is None:
            return
        label, run = selected
        if run is None:
            self.notify(f"{label}: no run yet", timeout=4)
        elif not run.is_dir():
            self.notify(f"{label}: its run directory is gone ({run})", severity="warning")
        else:
            self.app.watch_run(run, back=True)  # type: ignore[attr-defined]

    def action_current(self) -> None:
        progress = self.reading.progress if self.reading is not None else None
        if progress is None or not progress.current:
            self.notify("nothing is running", timeout=3)
            return
        points = self.query_one("#campaign-points", SyncedTable)
        points.move_to(progress.current[0].point)
        points.focus()

    def action_back(self) -> None:
        if self.can_go_back:
            self.dismiss()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.can_go_back
        return True

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "campaign")
        self._wake.set()
