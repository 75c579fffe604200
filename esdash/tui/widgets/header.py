"""The live screen's header (run, phase, clock, badges) and its timeline slider."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from esdash.view import format as fmt
from esdash.view.model import Snapshot

PHASE_STYLES = {
    "queued": "bold black on yellow",
    "starting": "bold black on yellow",
    "waiting": "bold black on yellow",
    "ingest": "bold white on blue",
    "warmup": "bold black on cyan",
    "measure": "bold black on green",
    "done": "bold black on green",
    "failed": "bold white on red",
    "aborted": "bold white on red",
    "ended": "bold white on grey37",
}


def _gauge(done: float, total: float, width: int) -> str:
    share = 0.0 if total <= 0 else min(1.0, max(0.0, done / total))
    full = int(share * width)
    return "█" * full + "░" * (width - full)


class RunHeader(Static):
    """Two lines: what the run is, and where it stands (PAUSED / STALLED / REPLAY badges)."""

    DEFAULT_CSS = """
    RunHeader {
        height: 2;
        padding: 0 1;
        background: $panel;
    }
    """

    def show(self, snap: Snapshot | None, *, paused: bool = False, behind: int = 0) -> None:
        wide = self.size.width >= 110 or not self.size.width
        text = self.render_text(snap, paused=paused, behind=behind, wide=wide)
        if text != self._shown:  # the clock moves once a second, the tick is faster
            self._shown = text
            self.update(text, layout=False)

    _shown: Text | None = None

    @staticmethod
    def render_text(
        snap: Snapshot | None, *, paused: bool = False, behind: int = 0, wide: bool = True
    ) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if snap is None:
            text.append("esdash ", style="bold")
            text.append("reading the run directory…", style="dim")
            return text
        text.append(snap.run_id or "?", style="bold")
        text.append("  ")
        nodes = "?" if snap.nodes is None else str(snap.nodes)
        ranks = "?" if snap.ranks is None else str(snap.ranks)
        parts = [
            ("session " if wide else "", snap.session),
            ("", snap.engine),
            ("track " if wide else "", snap.track),
            ("enc ", snap.encryption),
            ("net " if wide else "", snap.interconnect),
            (
                "",
                f"{fmt.counted(snap.nodes, 'node')} × {fmt.counted(snap.ranks, 'rank')}"
                if wide
                else f"{nodes}n×{ranks}r",
            ),
        ]
        if snap.slurm_job:
            state = f" {snap.slurm_state}" if snap.slurm_state else ""
            parts.append(("job ", f"{snap.slurm_job}{state}"))
        for k, (label, value) in enumerate(parts):
            if k:
                text.append(" │ ", style="dim")
            text.append(label, style="dim")
            text.append(value)
        text.append("\n")
        text.append(f" {snap.phase} ", style=PHASE_STYLES.get(snap.phase_key, "reverse"))
        text.append("  ")
        if snap.elapsed is not None:
            text.append(fmt.duration(snap.elapsed), style="bold")
            if snap.planned:
                text.append(f" / ~{fmt.duration(snap.planned)} ", style="dim")
                text.append(_gauge(snap.elapsed, snap.planned, 10), style="green")
        text.append(f"  window {fmt.duration(snap.window)}", style="dim")
        if not snap.following and snap.count:
            text.append("  ")
            text.append(f" REPLAY {snap.position + 1}/{snap.count} ", style="bold black on magenta")
        if paused:
            text.append("  ")
            label = " PAUSED " + (f"+{behind} new " if behind else "")
            text.append(label, style="bold black on yellow")
        if snap.stalled:
            text.append("  ")
            text.append(f" STALLED {fmt.duration(snap.age)} ", style="bold white on red")
        if snap.problems:
            text.append(f"  {len(snap.problems)} bad lines", style="yellow")
        return text


class Timeline(Widget, can_focus=True):
    """A time slider over the run's interval records: where the view stands, LIVE at the end."""

    DEFAULT_CSS = """
    Timeline {
        height: 1;
        padding: 0 1;
    }
    Timeline:focus {
        background: $boost;
    }
    """

    BINDINGS = [
        Binding("left", "move(-1)", "Back", show=False),
        Binding("right", "move(1)", "Forward", show=False),
        Binding("shift+left,pageup", "move(-10)", "Back 10", show=False),
        Binding("shift+right,pagedown", "move(10)", "Forward 10", show=False),
        Binding("home", "start", "Start", show=False),
        Binding("end", "end", "Live", show=False),
    ]

    position: reactive[int] = reactive(-1)
    count: reactive[int] = reactive(0)
    following: reactive[bool] = reactive(True)
    finished: reactive[bool] = reactive(False)
    t: reactive[float | None] = reactive(None)
    t_end: reactive[float | None] = reactive(None)

    class Moved(Message):
        """The user moved the slider: ``index`` of the record to show, None to follow."""

        def __init__(self, index: int | None) -> None:
            super().__init__()
            self.index = index

    def show(self, snap: Snapshot) -> None:
        with self.app.batch_update():
            self.count = snap.count
            self.position = snap.position
            self.following = snap.following
            self.finished = snap.finished
            self.t = snap.t
            self.t_end = snap.t_end

    def _bar_width(self) -> int:
        return max(10, self.size.width - 34)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.count <= 0:
            text.append("timeline: no interval records yet", style="dim")
            return text
        width = self._bar_width()
        share = self.position / max(1, self.count - 1)
        knob = min(width - 1, int(round(share * (width - 1))))
        text.append("t ")
        text.append(f"{fmt.duration(self.t):>6}", style="bold")
        text.append(" ◀ ")
        text.append("━" * knob, style="magenta" if not self.following else "green")
        text.append("●", style="bold")
        text.append("─" * (width - knob - 1), style="dim")
        text.append(" ▶ ")
        text.append(f"{fmt.duration(self.t_end):>6} ")
        if self.following:
            label = " END " if self.finished else " LIVE "
            text.append(label, style="bold black on green")
        else:
            text.append(" f: follow ", style="bold black on magenta")
        return text

    def action_move(self, delta: int) -> None:
        if self.count <= 0:
            return
        current = self.position if self.position >= 0 else self.count - 1
        index = min(max(0, current + delta), self.count - 1)
        self.post_message(self.Moved(None if index >= self.count - 1 else index))

    def action_start(self) -> None:
        if self.count > 0:
            self.post_message(self.Moved(0 if self.count > 1 else None))

    def action_end(self) -> None:
        self.post_message(self.Moved(None))

    def on_click(self, event: events.Click) -> None:
        if self.count <= 0:
            return
        width = self._bar_width()
        x = event.x - 1 - 2 - 6 - 3  # padding, "t ", time, " ◀ "
        if 0 <= x < width:
            index = int(round(x / max(1, width - 1) * (self.count - 1)))
            self.post_message(self.Moved(None if index >= self.count - 1 else index))
