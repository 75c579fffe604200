"""The campaign screen's header: what the campaign is, where it stands, and a progress bar.

The bar is stacked, one colour per point status, rather than a single fill: a failed point
must stay visible next to a hundred completed ones.
"""

from __future__ import annotations

import time
from pathlib import PurePath

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from esdash.view import format as fmt
from esdash.view.campaign import STATUSES, CampaignSummary, Counts

#: Point statuses and campaign states, as the screens colour them.
STATUS_STYLES = {
    "completed": "green",
    "finished": "bold green",
    "failed": "bold red",
    "running": "bold yellow",
    "pending": "dim",
    "interrupted": "#BB9AF7",
    "stale": "cyan",
    "died": "bold red",
    "unreadable": "bold red",
}
#: The bar's order: done first, then what is going on, then what is left.
BAR_ORDER = ("completed", "failed", "interrupted", "running", "stale", "pending")
BAR_STYLES = {**STATUS_STYLES, "pending": "grey37", "failed": "red", "running": "yellow"}


def utc_time(stamp: float | None) -> str:
    if not stamp:
        return fmt.NA
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp))


def bar_widths(counts: Counts, width: int) -> list[tuple[str, int]]:
    """Cells per status for a bar ``width`` wide; every status with points gets one at least."""
    present = [(s, counts.of(s)) for s in BAR_ORDER if counts.of(s) > 0]
    total = sum(n for _, n in present)
    if not present or width <= 0:
        return [("pending", max(0, width))]
    cells = [(s, max(1, round(n / total * width))) for s, n in present]
    excess = sum(c for _, c in cells) - width
    while excess != 0:  # give or take from the widest segment
        widest = max(range(len(cells)), key=lambda k: cells[k][1])
        status, wide = cells[widest]
        step = 1 if excess < 0 else -1
        if wide + step < 1:
            break
        cells[widest] = (status, wide + step)
        excess += step
    return cells


def progress_bar(counts: Counts, width: int) -> Text:
    """The stacked bar and ``done/total (percent)`` after it, ``width`` cells in all."""
    label = f" {counts.completed}/{counts.total} completed ({fmt.percent(counts.fraction * 100)})"
    text = Text(no_wrap=True, overflow="ellipsis")
    for status, cells in bar_widths(counts, max(4, width - len(label))):
        text.append("━" * cells, style=BAR_STYLES.get(status, ""))
    text.append(label, style="bold")
    return text


def counts_line(counts: Counts, compact: bool = False) -> Text:
    """``8 points: 2 completed · 1 failed · ...``, each count in its status' colour.

    ``compact`` (a narrow terminal) leaves out the statuses no point has.
    """
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{counts.total} points: ", style="bold")
    shown = [s for s in STATUSES if counts.of(s) or not compact] or ["pending"]
    for k, status in enumerate(shown):
        if k:
            text.append(" · ", style="dim")
        number = counts.of(status)
        text.append(str(number), style=STATUS_STYLES[status] if number else "dim")
        text.append(f" {status}", style="" if number else "dim")
    return text


class CampaignHeader(Static):
    """Name and state; description, directory, Slurm jobs; the counts; the bar; a read error."""

    DEFAULT_CSS = """
    CampaignHeader {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    """

    def show(
        self,
        progress: CampaignSummary | None,
        *,
        state: str,
        error: str | None,
        where: str,
        now: float,
    ) -> None:
        """Draw the header for ``progress`` (None: no summary read yet) at ``now``."""
        width = max(20, (self.size.width or 80) - 2)
        lines: list[Text] = []
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(" campaign ", style="bold reverse")
        name = progress.name if progress is not None else PurePath(where).name
        title.append(f" {name or '?'} ", style="bold")
        title.append(f" {state.upper()} ", style=f"{STATUS_STYLES.get(state, '')} reverse")
        if progress is not None and progress.updated:
            ago = fmt.duration(now - progress.updated)
            title.append(f"  updated {utc_time(progress.updated)} UTC ({ago} ago)", style="dim")
        lines.append(title)
        about = Text(no_wrap=True, overflow="ellipsis")
        if progress is not None and progress.description:
            about.append(progress.description)
            about.append("  ")
        about.append(where, style="dim")
        if progress is not None and progress.jobs:
            about.append("  Slurm jobs ", style="dim")
            about.append(
                ", ".join(f"{job.job or 'not submitted'} ({job.nodes}n)" for job in progress.jobs)
            )
        lines.append(about)
        if progress is not None:
            lines.append(counts_line(progress.point_counts, compact=width < 88))
            lines.append(progress_bar(progress.point_counts, width))
        if error is not None:
            lines.append(Text(f"⚠ {error}", style="bold red"))  # wraps: all of it matters
        self.update(Group(*lines))
