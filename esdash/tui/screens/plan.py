"""The plan screen: every task of a session's track, what esdash does with it or why not.

Issue 18: what ``esdash plan SESSION`` prints is also shown in the dashboard before a
launch, so nobody learns after the run that half the track never ran.  The home screen
opens it with `p` on a session, and shows it first when `l` launches one: `l` here then
confirms the launch.  The plan is computed in a worker thread (it inspects the distribution
and the corpus) by :func:`esdash.prepare.preview.session_plan`, the function the CLI prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from esdash.errors import BadInput, EsdashError
from esdash.plugin.planning import PlannedTask
from esdash.prepare.preview import SessionPlan, schedule_text
from esdash.tui.widgets.tables import fill_table
from esdash.view.source import RUN_LOG

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet

PLAN_COLUMNS = ("#", "task", "operation", "clients", "schedule", "status", "reason")
#: Characters of a reason shown in the table; the whole text is below it.
REASON_CELL = 70
STATUS_STYLES = {"run": "green", "refused": "bold red"}


class PlanReady(Message):
    """The worker's answer: the plan, or the one-line error of a session that cannot plan."""

    def __init__(self, plan: SessionPlan | None, error: str | None) -> None:
        super().__init__()
        self.plan, self.error = plan, error


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def task_cells(number: int, task: PlannedTask) -> list[Text | str]:
    """One row of the table: the track's task as given, and its fate."""
    name = task.name + (f" (parallel {task.parallel})" if task.parallel else "")
    why = task.esdash if task.status == "run" else f"[{task.reason_kind}] {task.reason}"
    return [
        str(number),
        Text(name, style="bold"),
        task.operation,
        "-" if task.clients is None else str(task.clients),
        schedule_text(task.schedule) or "-",
        Text(task.status, style=STATUS_STYLES.get(task.status, "")),
        Text(_clip(why, REASON_CELL), style="" if task.status == "run" else "red"),
    ]


def task_detail(task: PlannedTask) -> Text:
    """The selected task in full: what esdash does, or the refusal's kind and reason."""
    text = Text()
    text.append(f"{task.name}", style="bold")
    text.append(f"  {task.operation}", style="dim")
    if task.status == "run":
        text.append("\nrun: ", style="bold green")
        text.append(task.esdash)
    else:
        text.append(f"\nREFUSED [{task.reason_kind}]: ", style="bold red")
        text.append(task.reason or "")
    return text


def refused_everything(plan: SessionPlan) -> bool:
    """Whether no task runs the ingest or a query step (``esdash run`` refuses the session)."""
    return bool(plan.tasks) and not any(
        t.status == "run" and (t.ingest or t.step is not None) for t in plan.tasks
    )


class PlanScreen(Screen[bool]):
    """The tasks of one session's track; before a launch, `l` confirms it."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("l", "launch", "Launch", id="launch"),
    ]

    HELP_TITLE = "A session's plan"
    HELP = f"""\
The **plan** of a session (`esdash plan SESSION`): every task of its track's challenge in
schedule order, parallel blocks included, with the operation, the clients and the schedule
the track asks for, and what esdash does with it (**run**) or why it cannot (**refused**,
with the kind of reason: a module or field type the distribution lacks, an operation esdash
has no equivalent of, Python of the track it does not run).  Refusals are checked against
the distribution the session would run; the lines above the table say which one, how the
bench ranks are the clients and where the corpus is.

↑/↓ selects a task; its whole text is shown under the table.  Opened from a launch (`l` on
the home screen), `l` here launches the session (detached; its output goes to `{RUN_LOG}`
in its run directory) and escape goes back without launching.  A session whose every task
is refused is not launched: `esdash run` would refuse it.
"""

    def __init__(
        self,
        session_path: Path,
        plugins: PluginSet | None = None,
        *,
        launch_message: str | None = None,
    ) -> None:
        super().__init__()
        self.session_path = Path(session_path)
        self.plugins = plugins
        #: Set when the screen stands before a launch: what launching does.
        self.launch_message = launch_message
        self.plan: SessionPlan | None = None
        self.error: str | None = None

    @property
    def launching(self) -> bool:
        return self.launch_message is not None

    def compose(self) -> ComposeResult:
        yield Static(id="plan-title")
        yield Static(id="plan-lines")
        yield DataTable(id="plan-tasks", cursor_type="row", zebra_stripes=True)
        yield Static(id="plan-detail")
        yield Static(id="plan-launch")
        yield Footer()

    def on_mount(self) -> None:
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(" plan ", style="bold reverse")
        title.append(f"  {self.session_path}", style="bold")
        self.query_one("#plan-title", Static).update(title)
        self.query_one("#plan-lines", Static).update(Text("planning…", style="dim"))
        table = self.query_one("#plan-tasks", DataTable)
        table.border_title = "Tasks"
        fill_table(table, PLAN_COLUMNS, [])
        self.query_one("#plan-launch", Static).display = self.launching
        table.focus()
        self.compute()

    @work(thread=True, exclusive=True, group="plan")
    def compute(self) -> None:
        """The plan, off the event loop: the distribution and the corpus are looked at."""
        from esdash.prepare.checks.track import track_finding
        from esdash.prepare.preview import session_plan
        from esdash.session import load_session

        plan: SessionPlan | None = None
        error: str | None = None
        try:
            session = load_session(self.session_path, self.plugins)
            try:
                plan = session_plan(session, self.plugins)
            except BadInput as exc:  # a track that does not load: the file or key named
                error = str(track_finding(session, exc))
        except EsdashError as exc:
            error = str(exc)
        self.post_message(PlanReady(plan, error))

    def on_plan_ready(self, message: PlanReady) -> None:
        self.plan, self.error = message.plan, message.error
        lines = self.query_one("#plan-lines", Static)
        if message.plan is None:
            lines.update(Text(f"✗ {message.error}", style="red"))
            self._show_launch()
            self.refresh_bindings()
            return
        plan = message.plan
        refused = sum(1 for t in plan.tasks if t.status == "refused")
        text = Text()
        text.append(
            f"track {plan.session.track.name}: {len(plan.tasks)} task(s), "
            f"{len(plan.tasks) - refused} run, ",
            style="bold",
        )
        text.append(f"{refused} refused", style="bold red" if refused else "bold")
        for line in (plan.distribution_line, plan.esdash_line, *plan.corpus_lines):
            text.append(f"\n{line}", style="dim")
        lines.update(text)
        table = self.query_one("#plan-tasks", DataTable)
        rows = [(str(k), task_cells(k, task)) for k, task in enumerate(plan.tasks, 1)]
        fill_table(table, PLAN_COLUMNS, rows)
        table.border_title = f"Tasks ({len(plan.tasks)}, {refused} refused)"
        self._show_detail()
        self._show_launch()
        self.refresh_bindings()

    def _show_launch(self) -> None:
        if not self.launching:
            return
        text = Text()
        if self.plan is None or refused_everything(self.plan):
            why = "every task is refused" if self.plan is not None else "no plan"
            text.append(f"Not launched: {why}. ", style="bold red")
            text.append("escape goes back.")
        else:
            text.append("l", style="bold reverse")
            text.append(" launches: ", style="bold")
            text.append(str(self.launch_message))
            text.append("  escape goes back without launching.", style="dim")
        self.query_one("#plan-launch", Static).update(text)

    def _show_detail(self) -> None:
        if self.plan is None or not self.plan.tasks:
            return
        row = self.query_one("#plan-tasks", DataTable).cursor_row
        task = self.plan.tasks[min(max(row, 0), len(self.plan.tasks) - 1)]
        self.query_one("#plan-detail", Static).update(task_detail(task))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launch":
            if not self.launching:
                return False  # not offered: this plan was opened to be read
            ready = self.plan is not None and not refused_everything(self.plan)
            return True if ready else None  # shown greyed until the plan allows it
        return True

    def action_launch(self) -> None:
        if self.check_action("launch", ()):
            self.dismiss(True)

    def action_back(self) -> None:
        self.dismiss(False)
