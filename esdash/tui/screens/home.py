"""The home screen: sessions to launch, campaigns and recent runs to watch, stop or compare."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import get_current_worker

from esdash.prepare.sessions import SessionEntry, list_sessions, load_entry
from esdash.run import start
from esdash.session import load_session
from esdash.tui.screens.answers import on_yes
from esdash.tui.screens.dialogs import ConfirmScreen
from esdash.tui.screens.plan import PlanScreen
from esdash.tui.widgets.campaign import STATUS_STYLES as CAMPAIGN_STYLES
from esdash.tui.widgets.campaign import bar_widths
from esdash.tui.widgets.tables import fill_table
from esdash.view import format as fmt
from esdash.view import runs
from esdash.view.campaign import CAMPAIGNS, CampaignReading, ProgressFollower, campaign_files
from esdash.view.source import RUN_LOG, tail

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet

STATE_STYLES = {
    "running": "bold green",
    "starting": "yellow",
    "pending": "bold yellow",
    "queued": "yellow",
    "finished": "green",
    "failed": "bold red",
    "aborted": "red",
    "dead": "bold red",
    "stalled": "bold red",
    "stopped": "dim",
    "ended": "dim",
    runs.DAMAGED: "bold red",
}


def _utc(stamp: float | None) -> str:
    """The time as the runs table shows it; ``?`` for one no calendar has (the records bound
    their times, so this only guards the table against a reader that did not)."""
    if not stamp:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(stamp))
    except (OverflowError, OSError, ValueError):
        return "?"


SESSION_COLUMNS = ("session", "nodes", "workers", "track", "encryption", "net", "time", "file")
RUN_COLUMNS = ("run", "session", "state", "detail", "started (UTC)", "job")


CAMPAIGN_COLUMNS = ("campaign", "state", "progress", "failed", "now", "updated (UTC)")
#: Cells of the little progress bar in the campaigns table.
CAMPAIGN_BAR = 12


class RunsListed(Message):
    def __init__(self, entries: list[runs.RunEntry]) -> None:
        super().__init__()
        self.entries = entries


class CampaignsListed(Message):
    def __init__(self, readings: list[CampaignReading]) -> None:
        super().__init__()
        self.readings = readings


class SessionsListed(Message):
    def __init__(self, entries: list[SessionEntry]) -> None:
        super().__init__()
        self.entries = entries


class HomeScreen(Screen[None]):
    """Sessions, campaigns and runs; launch, submit, watch, stop, compare."""

    BINDINGS = [
        Binding("enter", "open", "Open", id="open"),
        Binding("v", "validate", "Validate"),
        Binding("p", "plan", "Plan"),
        Binding("l", "launch", "Launch"),
        Binding("s", "submit", "Submit"),
        Binding("x", "stop", "Stop"),
        Binding("c", "compare", "Compare"),
        Binding("r", "refresh", "Refresh"),
    ]

    HELP_TITLE = "Sessions, runs and campaigns"
    HELP = f"""\
The home screen lists the **sessions** (session files in `./sessions`, `--sessions DIR` and
`ESDASH_SESSIONS`) and the **runs** under the runs directory (`ESDASH_RUNS`, default `./runs`),
newest first, with their state: running, finished, failed, aborted, pending (a Slurm job
waiting in the queue), stopped, stalled (no record for 3 intervals: the writer may be dead).

* On a session: `v` validates it, `p` shows its plan (`esdash plan SESSION`: every task of
  its track, run or refused and why), `l` shows that plan and launches it here when `l` is
  pressed again (`esdash run SESSION`, detached; its output goes to `{RUN_LOG}` in the run
  directory), `s` submits it to Slurm (`esdash submit SESSION`).
* On a campaign (shown when the runs directory has some under `{CAMPAIGNS}/`, or given with
  `esdash tui --campaign`): `enter` opens the campaign screen (its points, what runs now,
  the runs of its points).
* On a run: `enter` watches it (live, or replayed when it is over), `x` stops it (asks
  first: the benchmark is interrupted like Ctrl-C would, then its cluster stopped),
  `c` marks it for comparison — `c` on a second run opens both side by side.
* `r` refreshes now (the list refreshes itself every few seconds); Tab switches tables.

Plugins that failed to load are shown in red under the tables; sessions that need them fail
validation.
"""

    def __init__(
        self,
        session_dirs: list[Path],
        runs_root: Path,
        plugins: PluginSet | None = None,
        refresh_every: float = 3.0,
        job_state: Callable[[str], str] | None = None,
        campaigns: list[Path] | None = None,
    ) -> None:
        super().__init__()
        self.session_dirs = session_dirs
        self.runs_root = runs_root
        self.plugins = plugins
        self.refresh_every = refresh_every
        self.job_state = job_state
        self.sessions: list[SessionEntry] = []
        self.runs: list[runs.RunEntry] = []
        self.launches: list[start.Launch] = []
        self.compare_first: Path | None = None
        self.extra_campaigns = list(campaigns or [])
        self.campaigns: list[CampaignReading] = []
        self._followers: dict[Path, ProgressFollower] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="home-title")
        with Vertical(id="home-body"):
            yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="campaigns", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield Static(id="plugins")
            yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        sessions = self.query_one("#sessions", DataTable)
        sessions.border_title = "Sessions"
        fill_table(sessions, SESSION_COLUMNS, [])
        campaigns = self.query_one("#campaigns", DataTable)
        campaigns.border_title = "Campaigns"
        campaigns.display = False  # until there is one
        table = self.query_one("#runs", DataTable)
        table.border_title = "Runs"
        fill_table(table, RUN_COLUMNS, [])
        dirs = ", ".join(self._short(d) for d in self.session_dirs) or "-"
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(" esdash ", style="bold reverse")
        title.append(f"  runs: {self._short(self.runs_root)}   sessions: {dirs}", style="dim")
        self.query_one("#home-title", Static).update(title)
        self._show_plugins()
        self.load_sessions()
        self.watch_runs()
        sessions.focus()

    # ------------------------------------------------------------------ plugins
    def _plugin_set(self) -> PluginSet:
        if self.plugins is None:
            from esdash.plugin.manager import get_plugins

            self.plugins = get_plugins()
        return self.plugins

    def _show_plugins(self) -> None:
        plugin_set = self._plugin_set()
        text = Text()
        text.append("plugins ", style="bold")
        names = sorted(plugin_set.plugins.values(), key=lambda p: p.name)
        text.append(", ".join(f"{p.name} {p.version or ''}".strip() for p in names) or "none")
        if plugin_set.broken:
            for broken in plugin_set.broken:
                text.append("\n⚠ broken plugin ", style="bold red")
                text.append(f"{broken.name}", style="bold red")
                text.append(f" ({broken.distribution or '-'}): {broken.error}", style="red")
            self.notify(
                f"{len(plugin_set.broken)} plugin(s) failed to load: "
                + ", ".join(b.name for b in plugin_set.broken),
                title="Broken plugins",
                severity="warning",
                timeout=8,
            )
        self.query_one("#plugins", Static).update(text)

    # ------------------------------------------------------------------ workers
    @work(thread=True, exclusive=True, group="sessions")
    def load_sessions(self) -> None:
        entries = list_sessions(self.session_dirs, self._plugin_set())
        self.post_message(SessionsListed(entries))

    @work(thread=True, exclusive=True, group="runs")
    def watch_runs(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            if self.is_current or self._refresh_now or self.launches:
                self._refresh_runs()
            deadline = time.monotonic() + self.refresh_every
            while time.monotonic() < deadline and not worker.is_cancelled:
                if self._refresh_now:
                    break
                time.sleep(0.1)
            self._refresh_now = False

    _refresh_now = False
    _marks_changed = False

    def _refresh_runs(self) -> None:
        for launch in list(self.launches):
            code = launch.exit_code()  # also reaps it: launched processes are our children
            if code is not None:
                self.launches.remove(launch)
                if code not in (0, 130):  # 130: stopped (Ctrl-C, or the stop action)
                    self.app.call_from_thread(self._launch_failed, launch, code)
        self.post_message(CampaignsListed(self._read_campaigns()))
        entries = runs.list_runs(self.runs_root, job_state=self.job_state)
        self.post_message(RunsListed(entries))

    def _read_campaigns(self) -> list[CampaignReading]:
        """Every campaign's reading; a file is read again only when it changed."""
        paths = campaign_files(self.runs_root)
        paths += [p for p in self.extra_campaigns if p not in paths]
        readings = []
        for path in paths:
            follower = self._followers.get(path)
            if follower is None:
                follower = self._followers[path] = ProgressFollower(path)
            follower.reading()
            readings.append(follower.latest)
        readings.sort(key=lambda r: -(r.progress.updated or 0.0) if r.progress else 0.0)
        return readings

    def _launch_failed(self, launch: start.Launch, code: int) -> None:
        self.notify(
            f"exit code {code}: {tail(launch.output, 6)}",
            title=f"esdash run {launch.session} ended with an error",
            severity="error",
            timeout=15,
        )

    # ------------------------------------------------------------------ tables
    def on_sessions_listed(self, message: SessionsListed) -> None:
        self.sessions = message.entries
        table = self.query_one("#sessions", DataTable)
        rows: list[tuple[str, list[Text | str]]] = []
        for entry in self.sessions:
            cells: list[Text | str]
            if entry.valid:
                cells = [
                    Text(entry.name, style="bold"),
                    str(entry.nodes),
                    str(entry.workers_per_node),
                    entry.track or "-",
                    entry.encryption or "-",
                    entry.interconnect or "-",
                    f"{fmt.duration(entry.warmup)}+{fmt.duration(entry.duration)}",
                ]
            else:
                cells = [Text(entry.name, style="bold red"), Text("invalid", style="red")] + [
                    ""
                ] * 5
            cells.append(Text(self._short(entry.path), style="dim"))
            rows.append((str(entry.path), cells))
        row = table.cursor_row
        fill_table(table, SESSION_COLUMNS, rows)
        if rows:
            table.move_cursor(row=min(max(row, 0), len(rows) - 1), animate=False)
        table.border_title = f"Sessions ({len(self.sessions)})"

    @staticmethod
    def _short(path: Path) -> str:
        return fmt.short_path(path)

    def on_campaigns_listed(self, message: CampaignsListed) -> None:
        if message.readings == self.campaigns:
            return
        self.campaigns = message.readings
        table = self.query_one("#campaigns", DataTable)
        selected = self._selected_campaign()
        rows: list[tuple[str, list[Text | str]]] = []
        for reading in self.campaigns:
            progress = reading.progress
            state = Text(reading.state, style=CAMPAIGN_STYLES.get(reading.state, ""))
            error = (reading.error or "").removeprefix(f"{reading.path}: ")  # the row says which
            if progress is None:
                name = reading.path.parent.name
                cells: list[Text | str] = [Text(name, style="bold red"), state, "", "", "", ""]
                cells[4] = Text(error[:80], style="red")
            else:
                counts = progress.point_counts
                bar = Text()
                for status, width in bar_widths(counts, CAMPAIGN_BAR):
                    bar.append("━" * width, style=CAMPAIGN_STYLES.get(status, ""))
                bar.append(f" {counts.completed}/{counts.total}")
                now = error[:80] or ", ".join(c.label or c.point for c in progress.current) or "-"
                cells = [
                    Text(progress.name, style="bold" if reading.state == "running" else ""),
                    state,
                    bar,
                    Text(str(counts.failed), style="bold red") if counts.failed else "0",
                    Text(now, style="red" if reading.error else ""),
                    _utc(progress.updated),
                ]
            rows.append((str(reading.path), cells))
        fill_table(table, CAMPAIGN_COLUMNS, rows)
        if table.display != bool(rows):  # shown only when there are campaigns
            table.display = bool(rows)
            self.call_after_refresh(table.refresh, layout=True)  # sized once it has rows
        if selected is not None:
            for index, reading in enumerate(self.campaigns):
                if reading.path == selected.path:
                    table.move_cursor(row=index, animate=False)
        running = sum(1 for r in self.campaigns if r.state == "running")
        table.border_title = f"Campaigns ({len(self.campaigns)}, {running} running)"

    def on_runs_listed(self, message: RunsListed) -> None:
        if message.entries == self.runs and not self._marks_changed:
            return
        self._marks_changed = False
        self.runs = message.entries
        table = self.query_one("#runs", DataTable)
        current = self._selected_run()
        rows: list[tuple[str, list[Text | str]]] = []
        for entry in self.runs:
            mark = "▶ " if self.compare_first == entry.path else ""
            cells: list[Text | str] = [
                Text(mark + entry.run_id, style="bold" if entry.active else ""),
                entry.session,
                Text(entry.state, style=STATE_STYLES.get(entry.state, "")),
                Text(entry.detail[:60], style="dim"),
                _utc(entry.created),
                entry.slurm_job or "-",
            ]
            rows.append((str(entry.path), cells))
        fill_table(table, RUN_COLUMNS, rows)
        if current is not None:
            for index, entry in enumerate(self.runs):
                if entry.path == current.path:
                    table.move_cursor(row=index, animate=False)
        active = sum(1 for e in self.runs if e.active)
        table.border_title = f"Runs ({len(self.runs)}, {active} active)"

    def _selected_session(self) -> SessionEntry | None:
        table = self.query_one("#sessions", DataTable)
        if not self.sessions or table.cursor_row < 0 or table.cursor_row >= len(self.sessions):
            return None
        return self.sessions[table.cursor_row]

    def _selected_campaign(self) -> CampaignReading | None:
        table = self.query_one("#campaigns", DataTable)
        if not self.campaigns or not 0 <= table.cursor_row < len(self.campaigns):
            return None
        return self.campaigns[table.cursor_row]

    def _selected_run(self) -> runs.RunEntry | None:
        table = self.query_one("#runs", DataTable)
        if not self.runs or table.cursor_row < 0 or table.cursor_row >= len(self.runs):
            return None
        return self.runs[table.cursor_row]

    def _focus_is(self, table_id: str) -> bool:
        return self.focused is not None and self.focused.id == table_id

    def _status(self, text: Text | str) -> None:
        self.query_one("#status", Static).update(text)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        on_sessions = self._focus_is("sessions")
        on_runs = self._focus_is("runs")
        if action in ("validate", "plan", "launch", "submit"):
            return on_sessions or None
        if action in ("stop", "compare"):
            return on_runs or None
        return True

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        if self._focus_is("runs"):
            entry = self._selected_run()
            if entry is not None:
                self.app.watch_run(entry.path, back=True)  # type: ignore[attr-defined]
        elif self._focus_is("campaigns"):
            reading = self._selected_campaign()
            if reading is not None:
                self.app.open_campaign(reading.path, back=True)  # type: ignore[attr-defined]
        elif self._focus_is("sessions"):
            self.action_validate()

    def action_refresh(self) -> None:
        self._refresh_now = True
        self.load_sessions()

    def action_validate(self) -> None:
        entry = self._selected_session()
        if entry is None:
            return
        fresh = load_entry(entry.path, self._plugin_set(), checked=True)
        if fresh.valid:
            self._status(Text(f"✓ {entry.path}: valid", style="green"))
            self.notify(f"{fresh.name}: valid", title="Session check")
        else:
            self._status(Text(f"✗ {fresh.error}", style="red"))
            self.notify(str(fresh.error), title="Session invalid", severity="error", timeout=10)

    def _valid_selection(self, refusal: str) -> SessionEntry | None:
        """The selected session, loaded and checked afresh (a launch or a submit starts only
        from one that passes); None when none is selected or, said under ``refusal``, when
        it does not pass."""
        entry = self._selected_session()
        if entry is None:
            return None
        fresh = load_entry(entry.path, self._plugin_set(), checked=True)
        if not fresh.valid:
            self.notify(str(fresh.error), title=refusal, severity="error", timeout=10)
            return None
        return fresh

    def action_launch(self) -> None:
        fresh = self._valid_selection("Cannot launch")
        if fresh is None:
            return
        message = (
            f"Run session {fresh.name} on this machine: a {fresh.nodes}-node cluster, "
            f"then the benchmark ({fresh.track}). It runs detached: quitting the dashboard "
            f"does not stop it. Output: {RUN_LOG} in its run directory under "
            f"{self._short(self.runs_root)}."
        )

        def launch() -> None:
            self.notify(f"preparing {fresh.name}…", title="Launch", timeout=3)
            self._launch(fresh)

        # the plan first (issue 18): `l` there confirms, escape goes back
        plan = PlanScreen(fresh.path, self._plugin_set(), launch_message=message)
        self.app.push_screen(plan, on_yes(launch))

    def action_plan(self) -> None:
        """The selected session's plan, to read (nothing is launched from it)."""
        entry = self._selected_session()
        if entry is not None:
            self.app.push_screen(PlanScreen(entry.path, self._plugin_set()))

    @work(thread=True, group="launch")
    def _launch(self, entry: SessionEntry) -> None:
        try:
            launch = start.detach(entry.path, self.runs_root)
        except Exception as exc:
            self.app.call_from_thread(
                self.notify, str(exc), title="Cannot launch", severity="error", timeout=15
            )
            return
        self.launches.append(launch)
        self._refresh_now = True
        self.app.call_from_thread(self._launched, launch)

    def _launched(self, launch: start.Launch) -> None:
        self.notify(
            f"esdash run {launch.session} (pid {launch.pid}): {launch.run}", title="Launched"
        )
        if self.is_current:
            self.app.watch_run(launch.run, back=True)  # type: ignore[attr-defined]

    def action_submit(self) -> None:
        fresh = self._valid_selection("Cannot submit")
        if fresh is None:
            return
        message = (
            f"Submit session {fresh.name} as a Slurm job (esdash submit --bench: cluster "
            f"and benchmark): {fresh.nodes} node(s), time limit {fresh.slurm_time}. The "
            f"dashboard follows it through its run directory."
        )
        confirm = ConfirmScreen(f"Submit {fresh.name}?", message)
        self.app.push_screen(confirm, on_yes(lambda: self._submit(fresh)))

    @work(thread=True, group="submit")
    def _submit(self, entry: SessionEntry) -> None:
        try:
            session = load_session(entry.path)
            submitted = start.submit(session, bench=True, root=self.runs_root)
        except Exception as exc:
            self.app.call_from_thread(
                self.notify, str(exc), title="Submit failed", severity="error", timeout=15
            )
            return
        job, run = submitted.job, submitted.run.path
        self.app.call_from_thread(self.notify, f"job {job}: {run}", title="Submitted")
        self._refresh_now = True
        self.app.call_from_thread(self.app.watch_run, run, True)  # type: ignore[attr-defined]

    def action_stop(self) -> None:
        entry = self._selected_run()
        if entry is None:
            return
        if not entry.active:
            self.notify(f"{entry.run_id} is {entry.state}: nothing to stop", timeout=4)
            return
        self.app.confirm_stop(entry.path)  # type: ignore[attr-defined]

    def action_compare(self) -> None:
        entry = self._selected_run()
        if entry is None:
            return
        if self.compare_first is None or self.compare_first == entry.path:
            self.compare_first = entry.path
            self._status(f"compare: {entry.run_id} marked; press c on a second run")
            self._refresh_now = self._marks_changed = True
            return
        first, self.compare_first = self.compare_first, None
        self._status("")
        self.app.compare_runs(first, entry.path, back=True)  # type: ignore[attr-defined]
