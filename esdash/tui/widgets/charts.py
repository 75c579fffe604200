"""The latency histogram (log-scaled HDR buckets, drawn as bars) and the time-series plots."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.message import Message
from textual.widget import Widget
from textual_plotext import PlotextPlot

from esdash.view import format as fmt
from esdash.view.model import Bucket, OpPoint, Point, Snapshot

BAR = "█"
PARTS = " ▏▎▍▌▋▊▉"


class LatencyHistogram(Widget):
    """One bar per log-scaled latency bucket of the selected query, with its share."""

    DEFAULT_CSS = """
    LatencyHistogram {
        height: 1fr;
        min-height: 3;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.buckets: tuple[Bucket, ...] = ()
        self.total = 0
        self.label = ""
        #: The share (0..1) a full bar stands for; None: this histogram's own largest bar.
        #: Histograms set side by side share one, so equal shares draw equal bars.
        self.full_share: float | None = None

    def show(self, snap: Snapshot) -> None:
        self.buckets = snap.histogram
        self.total = snap.hist_count
        self.label = snap.selected or ""
        self.refresh()

    class Resized(Message):
        """The number of bars that fit changed: the view asks for that many buckets."""

        def __init__(self, histogram: LatencyHistogram, rows: int) -> None:
            super().__init__()
            self.histogram = histogram
            self.rows = rows

    def rows(self) -> int:
        """Bars that fit: the view asks the model for this many buckets."""
        return max(2, self.size.height - 1)

    def on_resize(self) -> None:
        if self.size.height > 0:
            self.post_message(self.Resized(self, self.rows()))

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="crop")
        if not self.buckets or not self.total:
            text.append("no latency samples yet", style="dim")
            return text
        largest = max(b.count for b in self.buckets) / self.total
        full = self.full_share if self.full_share else largest
        label_width = 17
        bar_width = max(4, self.size.width - label_width - 7)
        scale = f"; a full bar is {full * 100:.1f}%" if self.full_share else ""
        text.append(f"{self.label}: {fmt.count(self.total)} samples, ms{scale}", style="dim")
        for bucket in self.buckets:
            text.append("\n")
            text.append(f"{fmt.ms(bucket.low):>7}–{fmt.ms(bucket.high):<8} ", style="dim")
            cells = min(bar_width, bucket.count / self.total / (full or 1) * bar_width)
            whole = int(cells)
            part = PARTS[int((cells - whole) * 8)] if whole < bar_width else ""
            text.append(BAR * whole + part.strip(), style="green")
            share = bucket.count / self.total * 100
            if bucket.count:
                text.append(f" {share:.1f}%" if share >= 0.1 else " <0.1%", style="bold")
        return text


class SeriesPlot(PlotextPlot):
    """Per-query time series over the chart's span: throughput or latency."""

    METRICS: ClassVar[dict[str, tuple[str, Callable[[OpPoint], float | None]]]] = {
        "rate": ("req/s", lambda p: p.rate),
        "p99": ("p99 ms", lambda p: None if p.p99 is None else p.p99 * 1000.0),
        "p50": ("p50 ms", lambda p: None if p.p50 is None else p.p50 * 1000.0),
    }

    def __init__(self, metric: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.metric = metric

    def show(self, snap: Snapshot) -> None:
        self.draw(snap.series, snap.span, snap.t, snap.selected)

    def draw(
        self,
        series: Sequence[Point],
        span: float | None,
        t_end: float | None,
        selected: str | None = None,
    ) -> None:
        label, value = self.METRICS[self.metric]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        names: list[str] = []
        for point in series:
            for name, figures in point.ops.items():
                # bulk requests are not queries: a bulk's req/s among the searches' misleads
                if name not in names and not figures.indexing:
                    names.append(name)
        if selected in names:  # the selected query first, so it gets the first colour
            names.remove(selected)
            names.insert(0, selected)
        drawn = 0
        for name in names[:6]:
            xs, ys = [], []
            for point in series:
                op = point.ops.get(name)
                y = None if op is None else value(op)
                if y is not None:
                    xs.append(point.t)
                    ys.append(y)
            if xs:
                legend = len(names) > 1 and self.size.width >= 60
                plt.plot(xs, ys, label=name if legend else None, marker="braille")
                drawn += 1
        if t_end is not None:
            low = max(0.0, t_end - span) if span is not None else 0.0
            plt.xlim(low, max(t_end, low + 1.0))
        plt.ylabel(label)
        plt.xlabel("s since the run began")
        if not drawn:
            plt.title("no data in this span")
        self.refresh()
