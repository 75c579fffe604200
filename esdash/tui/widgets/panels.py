"""Panels of the live screen: a focusable, maximisable frame, and the text panels inside."""

from __future__ import annotations

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from esdash.view import format as fmt
from esdash.view import leakage
from esdash.view.model import NOW, SO_FAR, Snapshot

HEALTH_STYLES = {"green": "bold green", "yellow": "bold yellow", "red": "bold red"}
STATE_STYLES = {
    "running": "green",
    "starting": "yellow",
    "stopped": "dim",
    "failed": "bold red",
    "lost": "bold red",
}


class Panel(Vertical, can_focus=True):
    """A titled frame around one view; Tab moves between panels, ``m`` maximises one."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    Panel {
        border: round $primary 40%;
        border-title-color: $text-muted;
        padding: 0 0;
        height: 1fr;
    }
    Panel:focus-within {
        border: round $primary;
        border-title-color: $text;
    }
    """

    def __init__(self, *children: Widget, title: str, key: str, id: str | None = None) -> None:
        super().__init__(*children, id=id)
        self.border_title = f"{key} {title}"
        self.title = title


def rank_strip(snap: Snapshot) -> Text:
    """One cell per bench rank: ■ reporting, ■ (red) missing this interval, ✕ lost."""
    text = Text()
    if not snap.ranks_all:
        text.append("ranks: not started", style="dim")
        return text
    missing, lost = set(snap.ranks_missing), set(snap.ranks_lost)
    text.append("ranks ", style="dim")
    for rank in snap.ranks_all:
        if rank in lost:
            text.append("✕", style="bold red")
        elif rank in missing:
            text.append("■", style="bold red")
        else:
            text.append("■", style="green")
    summary = f"  {len(snap.ranks_all)} ranks"
    if missing:
        summary += f", missing: {','.join(map(str, sorted(missing)))}"
    if lost:
        summary += f", lost: {','.join(map(str, sorted(lost)))}"
    text.append(summary, style="bold red" if missing or lost else "dim")
    return text


class ClusterPanel(Static):
    """Cluster health, one row per node (heap, CPU, GC, rejected tasks), the rank strip.

    The text panels fill their frame (no layout pass per update: that would cost a relayout
    of the whole screen at every redraw); maximise the panel (``m``) to see more rows.
    """

    def show(self, snap: Snapshot) -> None:
        self.update(self.renderable_for(snap), layout=False)

    @staticmethod
    def renderable_for(snap: Snapshot) -> RenderableType:
        parts: list[RenderableType] = []
        cluster = snap.cluster
        head = Text()
        if cluster is None:
            head.append("no cluster samples yet", style="dim")
        else:
            head.append("health ", style="dim")
            head.append(
                str(cluster.status or "?"), style=HEALTH_STYLES.get(cluster.status or "", "")
            )
            if cluster.unassigned:
                head.append(f"  {cluster.unassigned} unassigned shards", style="yellow")
            if snap.following and snap.age is not None and cluster.time and snap.last_wall:
                lag = snap.last_wall - cluster.time
                if lag > 30:
                    head.append(f"  sample {fmt.duration(lag)} old", style="yellow")
        if snap.nodes_lost:
            head.append(f"  lost: {', '.join(snap.nodes_lost)}", style="bold red")
        parts.append(head)
        if cluster is not None and cluster.nodes:
            table = Table(box=None, pad_edge=False, padding=(0, 1), expand=False)
            columns: tuple[tuple[str, JustifyMethod], ...] = (
                ("node", "left"),
                ("state", "left"),
                ("heap", "right"),
                ("cpu", "right"),
                ("gc ms/s", "right"),
                ("segs", "right"),
                ("rejected", "right"),
            )
            for name, justify in columns:
                table.add_column(name, justify=justify, style="", header_style="dim")
            for node in cluster.nodes:
                state = "lost" if node.name in snap.nodes_lost else (node.state or "-")
                heap_style = "bold red" if (node.heap_percent or 0) >= 85 else ""
                rejected = fmt.count(node.rejected)
                if node.rejected_new:
                    rejected += f" +{node.rejected_new}"
                table.add_row(
                    node.name,
                    Text(state, style=STATE_STYLES.get(state, "")),
                    Text(fmt.percent(node.heap_percent), style=heap_style),
                    fmt.percent(node.cpu_percent),
                    fmt.rate(node.gc_ms_per_s),
                    fmt.count(node.segments),
                    Text(rejected, style="bold red" if node.rejected_new else ""),
                )
            parts.append(table)
        parts.append(rank_strip(snap))
        return Group(*parts)


def ingest_rate(docs_per_s: float | None, kind: str) -> str:
    """The ingest's docs/s with which figure it is: ``now`` (while it runs), the run's (the
    results', the summary's), or the stream's ``so far`` until the results are written."""
    rate = f"{fmt.rate(docs_per_s)} docs/s"
    if kind == NOW:
        return f"now {rate}"
    if kind == SO_FAR:
        return f"{rate} so far (stream)"
    return rate


class ProgressPanel(Static):
    """Ingest progress (docs/s, ETA), errors by class with the last message, recent events."""

    def show(self, snap: Snapshot) -> None:
        self.update(self.renderable_for(snap), layout=False)

    @staticmethod
    def renderable_for(snap: Snapshot) -> RenderableType:
        text = Text(no_wrap=False, overflow="fold")
        ingest = snap.ingest
        if ingest is None:
            text.append("ingest: ", style="dim")
            text.append("not started" if snap.count == 0 else "none in this run", style="dim")
        else:
            text.append("ingest ", style="bold")
            if ingest.docs_total:
                share = min(1.0, ingest.docs_done / ingest.docs_total)
                width = 20
                text.append("█" * int(share * width) + "░" * (width - int(share * width)), "blue")
                text.append(f" {share * 100:.0f}% ")
            text.append(f"{fmt.count(ingest.docs_done)}")
            if ingest.docs_total:
                text.append(f"/{fmt.count(ingest.docs_total)}")
            text.append(" docs")
            if ingest.docs_per_s is not None:
                text.append(f"  {ingest_rate(ingest.docs_per_s, ingest.rate_kind)}")
            if ingest.done:
                text.append("  done", style="green")
            elif ingest.eta is not None:
                text.append(f"  ETA {fmt.duration(ingest.eta)}")
        text.append("\n")
        if not snap.errors:
            text.append("errors: none", style="dim")
        else:
            text.append("errors by class", style="bold red")
            for line in snap.errors[:6]:
                text.append("\n")
                text.append(f" {line.error_class:<22}", style="red")
                text.append(f" {fmt.count(line.count):>8}")
                if line.message:
                    where = f" [{line.node}]" if line.node else ""
                    text.append(f"\n   {line.message[:200]}{where}", style="dim")
        if snap.events:
            text.append("\nevents", style="bold")
            for event in snap.events[-6:]:
                style = {"warning": "yellow", "error": "bold red"}.get(event.level, "dim")
                text.append(f"\n {fmt.duration(event.t):>6} ", style="dim")
                text.append(f"{event.kind}: {event.message}", style=style)
        if snap.trust:
            text.append("\ncan these numbers be trusted?", style="bold")
            for said in snap.trust:
                flagged = any(
                    word in said for word in ("not steady", "NOT", "cache", "ended early", "lost")
                )
                text.append(f"\n {said}", style="yellow" if flagged else "")
        if snap.problems:
            text.append("\nunreadable stream lines", style="bold yellow")
            for problem in snap.problems[-3:]:
                text.append(f"\n {problem}", style="yellow")
        return text


class LogPanel(Static):
    """The tail of the chosen node's log (``n`` picks the next node)."""

    DEFAULT_CSS = """
    LogPanel {
        height: 1fr;
    }
    """

    def show(self, snap: Snapshot) -> None:
        if snap.log is None:
            self.update(Text("no node log yet (n: next node)", style="dim"), layout=False)
            return
        label, body = snap.log
        lines = body.splitlines()[-max(1, self.size.height - 1) :] if body else []
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(label, style="bold")
        for line in lines:
            text.append("\n")
            style = (
                "red"
                if " ERROR" in line or '"ERROR"' in line
                else ("yellow" if " WARN" in line or '"WARN"' in line else "")
            )
            text.append(line, style=style)
        if not lines:
            text.append("\n(empty)", style="dim")
        self.update(text, layout=False)


#: Shares of records an attack recovered from which a row is shown in red, and in yellow.
LEAKAGE_RED, LEAKAGE_YELLOW = 0.5, 0.05


class LeakagePanel(Static):
    """The run's leakage report, compact: one row per encrypted field, the best attack.

    Shown only for a run that has ``leakage.json`` (client-side encryption); verdicts,
    threat model and papers are in ``esdash report``.  A damaged file shows as damaged.
    """

    DEFAULT_CSS = """
    LeakagePanel {
        height: auto;
    }
    """

    def show(self, snap: Snapshot) -> None:
        self.update(self.renderable_for(snap))

    @staticmethod
    def renderable_for(snap: Snapshot) -> RenderableType:
        reading = snap.leakage
        if reading is None:
            return Text("no leakage report for this run", style="dim")
        record = reading.record
        if record is None:
            return Text(
                f"leakage report damaged: {reading.error}",
                style="bold red",
                no_wrap=True,
                overflow="ellipsis",
            )
        table = Table(box=None, pad_edge=False, padding=(0, 1), expand=False)
        for name in leakage.COMPACT:
            justify: JustifyMethod = "right" if name in leakage.NUMERIC else "left"
            table.add_column(name, justify=justify, header_style="dim", no_wrap=True)
        for item, cells in zip(record.fields, leakage.rows(record, leakage.COMPACT), strict=True):
            best = item.best_attack()
            exact = (best.exact or 0.0) if best is not None else 0.0
            style = (
                "bold red" if exact >= LEAKAGE_RED else "yellow" if exact >= LEAKAGE_YELLOW else ""
            )
            table.add_row(*(Text(cell) for cell in cells), style=style)
        # one line each, whatever the width: the grid sizes the panel's row before it knows
        # that the panel spans every column
        head = Text(leakage.names_line(record), style="dim", no_wrap=True, overflow="ellipsis")
        basis = Text(leakage.basis_line(record), style="dim", no_wrap=True, overflow="ellipsis")
        return Group(basis, head, table)
