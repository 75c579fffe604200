"""Figures of a report, as PNG and SVG (matplotlib, imported only here and only when drawing).

* ``latency-<query>``: the latency distribution of one query, one outline per configuration
  (repetitions merged): share of requests per logarithmic latency bin, from the merged HDR
  histograms in ``results.json``, an empty bin a gap (never a line across it), the p50
  (dotted) and p99 (dashed) marked; both axes logarithmic, so the super-exponential decay
  the paper describes shows as a bending curve.
* ``percentiles-<query>``: the same histograms as a percentile spectrum, HdrHistogram's
  own plot: latency against 1/(1-q), so p90, p99, p99.9 sit one decade apart and the tail
  is as wide as the body; each line ends where its requests stop supporting a percentile.
* ``timeline-<run>``: latency over the whole run as a density view: one column per stream
  interval, one row per logarithmic latency bin, colour = requests (log scale), with the
  interval's p50 and p99 drawn over it.  Bands (e.g. workers that happen to query their own
  host) appear as separate horizontal ridges; steps are marked.  The stream keeps one
  histogram per interval, not single requests, so this is the density view at the stream's
  resolution for runs of any size.
* ``throughput-vs-nodes`` / ``latency-vs-nodes`` and ``...-vs-workers``: one panel per query,
  one line per setup (and the other axis), error bars = the tables' ± (std; for latency the
  gmean's ÷/× gstd range).
* ``ingest-scaling``: docs/s against workers per node and against cluster size.

matplotlib is heavy and only reports need it: never import this module from the run path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from esdash.progress import advance
from esdash.report.tables import group_configs, merged_histogram
from esdash.rundir import hdr
from esdash.rundir.records import JsonMapping
from esdash.view.inputs import Entry, config_label, op_of, queries_of, query_label, setting_label

if TYPE_CHECKING:
    import matplotlib.axis
    import matplotlib.figure
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from esdash.view.intervals import IntervalOp

FORMATS = ("png", "svg")
#: Panels per scaling figure; more queries than this get a second look in the tables.
MAX_PANELS = 12
#: The percentiles a spectrum marks on its axis (1/(1-q) one decade apart).
SPECTRUM_TICKS = (0.0, 90.0, 99.0, 99.9, 99.99, 99.999)
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Figure:
    id: str
    title: str
    caption: str
    files: dict[str, str] = field(default_factory=dict)  # format -> path relative to the report


def _pyplot() -> ModuleType:
    """``matplotlib.pyplot``, set up for files (Agg) and reproducible SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"svg.hashsalt": "esdash", "figure.dpi": 100, "font.size": 9, "axes.titlesize": 9}
    )
    return plt


def readable_log_axis(axis: matplotlib.axis.Axis) -> None:
    """A logarithmic axis labelled in plain numbers (``2 5 10 20 50``), never ``2×10^1``:
    ticks at 1, 2 and 5 of each decade, minor ticks unlabelled so no two labels collide."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def slug(text: str) -> str:
    return _SLUG.sub("-", text).strip("-")[:80] or "x"


class Drawer:
    """Draws into ``<out>/figures/`` and remembers what it drew."""

    def __init__(self, out: Path, formats: Sequence[str] = FORMATS) -> None:
        self.out = out
        self.formats = tuple(formats)
        self.figures: list[Figure] = []
        self.plt = _pyplot()
        (out / "figures").mkdir(parents=True, exist_ok=True)

    def save(self, fig: matplotlib.figure.Figure, name: str, title: str, caption: str) -> None:
        figure = Figure(name, title, caption)
        for fmt in self.formats:
            relative = f"figures/{name}.{fmt}"
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(self.out / relative, format=fmt, metadata=metadata, bbox_inches="tight")
            figure.files[fmt] = relative
        self.plt.close(fig)
        self.figures.append(figure)
        advance(f"{len(self.figures)} drawn, the last {name}")  # the open phase, if any


# -------------------------------------------------------------------- distributions


def _distribution_lines(
    entries: Sequence[Entry],
) -> Iterator[tuple[str, str, list[tuple[str, hdr.Counts]]]]:
    """Per query (its label and figure name): each configuration's merged latency counts."""
    groups = group_configs(entries)
    for step, query in queries_of(entries):
        lines = []
        for group in groups:
            ops = [op for e in group if (op := op_of(e, step, query)) is not None]
            found = merged_histogram(ops)
            if found is not None:
                source = group[0].source
                suffix = f" [{source}]" if source != "esdash" else ""
                lines.append((config_label(group[0].config) + suffix, found[0]))
        if lines:
            yield query_label(step, query), slug(query_label(step, query)), lines


def latency_distributions(drawer: Drawer, entries: Sequence[Entry]) -> None:
    from esdash.stats import bucket_counts

    for label, name, lines in _distribution_lines(entries):
        values = [v for _l, counts in lines for v in hdr.buckets(counts)]
        lowest = min(low for low, _high, _count in values)
        highest = max(high for _low, high, _count in values) * 1.001 + 1e-6
        fig, ax = drawer.plt.subplots(figsize=(6.4, 3.8))
        for line, histogram in lines:
            buckets = bucket_counts(histogram, 40, lowest, highest)
            total = sum(b.count for b in buckets) or 1
            edges = [buckets[0].low * 1000.0] + [b.high * 1000.0 for b in buckets]
            # an empty bin is a gap: NaN breaks the outline instead of bridging the bin
            shares = [b.count / total if b.count else math.nan for b in buckets]
            drawn = ax.stairs(shares, edges, linewidth=1.2, label=line)
            colour = drawn.get_edgecolor()
            marks = hdr.percentiles(histogram, [50.0, 99.0])
            for percentile, style in ((50.0, ":"), (99.0, "--")):
                if percentile in marks:
                    ax.axvline(marks[percentile] * 1000.0, color=colour, linestyle=style, lw=1)
        _log_log(ax)
        readable_log_axis(ax.xaxis)
        _label_log_log(
            ax,
            f"Latency distribution: {label}",
            "latency (ms, log scale)",
            "share of requests per bin (log scale)",
        )
        drawer.save(
            fig,
            f"latency-{name}",
            f"Latency distribution of {label}",
            "Share of successful requests per logarithmic latency bin, per configuration "
            "(repetitions merged), from the merged HDR histograms; an empty bin is a gap. "
            "Dotted: the configuration's p50; dashed: its p99.",
        )


def _log_log(ax: Axes) -> None:
    """Both axes logarithmic: before any tick is placed, since a scale resets them."""
    ax.set_xscale("log")
    ax.set_yscale("log")


def _label_log_log(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    """The labels, a light grid and the legend: what the two latency figures of a query
    share (their axes made logarithmic first: :func:`_log_log`, which resets ticks)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)


def spectrum_points(counts: hdr.Counts) -> list[tuple[float, float]]:
    """``(1/(1-q), latency in ms)`` from p0 up to the highest percentile the sample supports
    (n requests support q while 1/(1-q) <= n), ten points a decade."""
    count = hdr.total(counts)
    if count < 2:
        return []
    decades = math.log10(count)
    wanted = [100.0 * (1.0 - 10.0 ** (-k / 10.0)) for k in range(int(decades * 10) + 1)]
    found = hdr.percentiles(counts, wanted)
    return [(1.0 / (1.0 - p / 100.0), found[p] * 1000.0) for p in wanted if p in found]


def percentile_spectra(drawer: Drawer, entries: Sequence[Entry]) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    for label, name, lines in _distribution_lines(entries):
        drawn = [(line, points) for line, counts in lines if (points := spectrum_points(counts))]
        if not drawn:
            continue
        fig, ax = drawer.plt.subplots(figsize=(6.4, 3.8))
        for line, points in drawn:
            ax.plot(*zip(*points, strict=True), linewidth=1.2, label=line)
        _log_log(ax)
        furthest = max(x for _line, points in drawn for x, _y in points)
        ticks = [p for p in SPECTRUM_TICKS if 1.0 / (1.0 - p / 100.0) <= furthest * 1.0001]
        ax.xaxis.set_major_locator(FixedLocator([1.0 / (1.0 - p / 100.0) for p in ticks]))
        ax.set_xticklabels([f"p{p:g}" if p else "p0" for p in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        _label_log_log(
            ax,
            f"Latency by percentile: {label}",
            "percentile (axis: 1/(1-q), log scale)",
            "latency (ms, log scale)",
        )
        readable_log_axis(ax.yaxis)
        drawer.save(
            fig,
            f"percentiles-{name}",
            f"Latency by percentile of {label}",
            "Latency at each percentile, per configuration (repetitions merged), on "
            "HdrHistogram's axis 1/(1-q): p90, p99 and p99.9 one decade apart; a line ends "
            "at the highest percentile its requests support.",
        )


# ------------------------------------------------------------------------- timeline


def timeline(drawer: Drawer, entry: Entry, bins: int = 60, name: str | None = None) -> None:
    """The density view of one run's latency over time (see the module docstring), saved as
    ``name`` (default ``timeline-<run id>``)."""
    from matplotlib.colors import LogNorm

    from esdash.stats import bucket_counts
    from esdash.view.intervals import read_intervals

    _header, ops = read_intervals(entry.stream)
    ops = [o for o in ops if o.phase in ("warmup", "measure") and o.counts.size]
    if not ops:
        return
    values = [v for o in ops for v in hdr.buckets(o.counts)]
    lowest = max(min(v[0] for v in values), 1e-6)
    highest = max(v[1] for v in values) * 1.001 + 1e-6
    columns: dict[tuple[float, float], list[IntervalOp]] = {}
    for o in ops:
        columns.setdefault((round(o.t - o.elapsed, 3), round(o.t, 3)), []).append(o)
    spans = sorted(columns)
    edges = [
        math.exp(math.log(lowest) + k * (math.log(highest / lowest) / bins))
        for k in range(bins + 1)
    ]
    grid = [[0.0] * len(spans) for _ in range(bins)]
    p50: list[float | None] = []
    p99: list[float | None] = []
    for column, span in enumerate(spans):
        merged = hdr.empty()
        for o in columns[span]:
            for row, bucket in enumerate(bucket_counts(o.counts, bins, lowest, highest)):
                grid[row][column] += bucket.count
            merged = hdr.add(merged, o.counts)
        count = hdr.total(merged)
        wanted = [p for p, need in ((50.0, 2), (99.0, 100)) if count >= need]
        found = hdr.percentiles(merged, wanted)
        p50.append(found.get(50.0))
        p99.append(found.get(99.0))
    xs = [span[0] for span in spans] + [spans[-1][1]]
    for k in range(1, len(xs) - 1):  # close tiny gaps between records
        xs[k] = max(xs[k], xs[k - 1] + 1e-3)
    masked = [[value if value > 0 else float("nan") for value in row] for row in grid]
    fig, ax = drawer.plt.subplots(figsize=(8.0, 4.0))
    peak = max((v for row in grid for v in row), default=1.0) or 1.0
    mesh = ax.pcolormesh(
        xs,
        [e * 1000.0 for e in edges],
        masked,
        norm=LogNorm(vmin=1, vmax=max(peak, 2.0)),
        cmap="viridis",
        shading="flat",
    )
    middles = [(a + b) / 2 for a, b in spans]
    for series, label, style in ((p50, "p50", "w-"), (p99, "p99", "r-")):
        points = [(x, v * 1000.0) for x, v in zip(middles, series, strict=True) if v is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, linewidth=0.8, label=label)
    seen = set()
    for o in sorted(ops, key=lambda o: o.t - o.elapsed):
        key = (o.phase, o.step)
        if key in seen:
            continue
        seen.add(key)
        start = o.t - o.elapsed
        ax.axvline(
            start, color="0.15", linewidth=0.9, linestyle=":" if o.phase == "warmup" else "-"
        )
        if o.phase == "measure":
            ax.annotate(
                f" {o.step_name}",
                (start, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                va="bottom",
                ha="left",
                annotation_clip=False,
            )
    ax.set_yscale("log")
    readable_log_axis(ax.yaxis)
    ax.set_xlabel("time since start (s); dotted: warm-up begins, solid: measurement begins")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(f"Latency over time: {entry.id} ({config_label(entry.config)})", pad=14)
    fig.colorbar(mesh, ax=ax, label="requests per interval and bin")
    ax.legend(fontsize=7, loc="lower right")
    drawer.save(
        fig,
        name or f"timeline-{slug(entry.id)}",
        f"Latency over time, {entry.id}",
        "Density of request latencies per stream interval (colour, log scale) with the "
        "interval's p50 (white) and p99 (red); bands show as horizontal ridges. Dotted "
        "lines: a warm-up begins; solid lines: a measurement begins (its step named above).",
    )


# -------------------------------------------------------------------------- scaling


def _series_key(record: JsonMapping, axis: str) -> str:
    parts = [str(record.get("setup"))]
    if record.get("source") != "esdash":
        parts.append(f"[{record.get('source')}]")
    for name in ("interconnect", "nodes", "workers_per_node"):
        value = record.get(name)
        if name != axis and value is not None:
            parts.append(setting_label(name, value))
    if record.get("other"):  # the settings that tell configurations apart
        parts.append(str(record["other"]))
    return ", ".join(parts)


def scaling(drawer: Drawer, records: Sequence[JsonMapping], axis: str) -> None:
    """Throughput and latency against ``axis`` (``nodes`` or ``workers_per_node``)."""
    values: set[float] = {value for r in records if isinstance(value := r.get(axis), int | float)}
    if len(values) < 2:
        return
    queries: list[tuple[str, str]] = []
    for r in records:
        if (r["step"], r["query"]) not in queries:
            queries.append((r["step"], r["query"]))
    queries = queries[:MAX_PANELS]
    columns = min(3, len(queries))
    rows = math.ceil(len(queries) / columns)
    name = {"nodes": "cluster size (nodes)", "workers_per_node": "workers per node"}[axis]
    for metric in ("throughput", "latency"):
        fig, axes = drawer.plt.subplots(
            rows, columns, figsize=(3.4 * columns, 2.6 * rows), squeeze=False
        )
        for index, (step, query) in enumerate(queries):
            ax = axes[index // columns][index % columns]
            series: dict[str, list[JsonMapping]] = {}
            for r in records:
                if (r["step"], r["query"]) == (step, query) and isinstance(
                    r.get(axis), int | float
                ):
                    series.setdefault(_series_key(r, axis), []).append(r)
            for label, points in series.items():
                points = sorted(points, key=lambda r: r[axis])
                xs = [r[axis] for r in points]
                if metric == "throughput":
                    ys = [r["throughput_mean"] for r in points]
                    errors = below_zero_clipped(ys, [r["throughput_std"] for r in points])
                    ax.errorbar(
                        xs, ys, yerr=errors, marker="o", capsize=2, linewidth=1, label=label
                    )
                else:
                    ys = [r["latency_gmean_ms"] for r in points]
                    low = [
                        (g - g / s) if g and s else 0.0
                        for g, s in zip(ys, [r["latency_gstd"] for r in points], strict=True)
                    ]
                    high = [
                        (g * s - g) if g and s else 0.0
                        for g, s in zip(ys, [r["latency_gstd"] for r in points], strict=True)
                    ]
                    ax.errorbar(
                        xs, ys, yerr=[low, high], marker="o", capsize=2, linewidth=1, label=label
                    )
            ax.set_title(query_label(step, query))
            ax.set_xlabel(name)
            ax.set_xticks(sorted(values))
            ax.grid(True, alpha=0.3)
            if metric == "latency":
                ax.set_yscale("log")
                readable_log_axis(ax.yaxis)
        for index in range(len(queries), rows * columns):
            axes[index // columns][index % columns].axis("off")
        unit = "req/s (mean +- std)" if metric == "throughput" else "latency gmean ms (x/ gstd)"
        fig.supylabel(unit)
        legend_below(fig, axes)
        short = "nodes" if axis == "nodes" else "workers"
        drawer.save(
            fig,
            f"{metric}-vs-{short}",
            f"{metric.capitalize()} against {name}",
            f"{unit} per query against {name}; one line per setup and the other axes.",
        )


def legend_below(fig: matplotlib.figure.Figure, axes: Sequence[Sequence[Axes]]) -> None:
    """One legend for all panels, under them, each label wrapped to a short line: a series
    named by many settings must not push the panels off the figure."""
    import textwrap

    legend: dict[str, Artist] = {}  # label -> its first handle
    for row in axes:
        for ax in row:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                legend.setdefault(label, handle)
    labels = [textwrap.fill(label, 70) for label in legend]
    lines = sum(label.count("\n") + 1 for label in labels)
    columns = 1 if any("\n" in label for label in labels) else min(3, len(labels) or 1)
    below = min(0.5, 0.06 + 0.035 * math.ceil(lines / columns))
    fig.legend(list(legend.values()), labels, loc="lower center", ncol=columns, fontsize=7)
    fig.tight_layout(rect=(0, below, 1, 1))


def below_zero_clipped(
    means: Sequence[float], spreads: Sequence[float | None]
) -> list[list[float]]:
    """``[lower, upper]`` error bars of mean +- std with the lower bar ending at 0: a rate
    is never negative, whatever a wide spread of few repetitions says."""
    upper = [spread or 0.0 for spread in spreads]
    lower = [min(spread, max(mean, 0.0)) for mean, spread in zip(means, upper, strict=True)]
    return [lower, upper]


def ingest_scaling(drawer: Drawer, records: Sequence[JsonMapping]) -> None:
    axes_used = [
        axis
        for axis in ("workers_per_node", "nodes")
        if len({r.get(axis) for r in records if isinstance(r.get(axis), int | float)}) >= 2
    ]
    if not axes_used:
        return
    fig, axes = drawer.plt.subplots(
        1, len(axes_used), figsize=(4.2 * len(axes_used), 3.2), squeeze=False
    )
    for ax, axis in zip(axes[0], axes_used, strict=True):
        series: dict[str, list[JsonMapping]] = {}
        for r in records:
            if isinstance(r.get(axis), int | float) and r.get("docs_per_s_mean") is not None:
                series.setdefault(_series_key(r, axis), []).append(r)
        for label, points in series.items():
            points = sorted(points, key=lambda r: r[axis])
            ys = [r["docs_per_s_mean"] for r in points]
            ax.errorbar(
                [r[axis] for r in points],
                ys,
                yerr=below_zero_clipped(ys, [r["docs_per_s_std"] for r in points]),
                marker="o",
                capsize=2,
                linewidth=1,
                label=label,
            )
        ax.set_xlabel(
            {"nodes": "cluster size (nodes)", "workers_per_node": "workers per node"}[axis]
        )
        ax.set_xticks(sorted({r[axis] for points in series.values() for r in points}))
        ax.set_ylabel("ingest docs/s")
        ax.grid(True, alpha=0.3)
    legend_below(fig, [axes[0]])
    drawer.save(
        fig,
        "ingest-scaling",
        "Ingest scaling",
        "Documents per second of the ingest (mean +- std over repetitions) against workers "
        "per node and cluster size.",
    )


def make_figures(
    out: Path,
    entries: Sequence[Entry],
    query_records: Sequence[JsonMapping],
    ingest_records: Sequence[JsonMapping],
    formats: Sequence[str] = FORMATS,
    max_timelines: int = 24,
    notes: list[str] | None = None,
) -> list[Figure]:
    """Every figure of the report.  A timeline per run with a stream (repetitions too: a
    figure of an input run is never dropped), at most ``max_timelines`` of them; the runs
    left out, and the esdash runs without a stream, are said in ``notes``."""
    drawer = Drawer(out, formats)
    latency_distributions(drawer, entries)
    percentile_spectra(drawer, entries)
    streams = [e for group in group_configs(entries) for e in group if e.stream is not None]
    names: set[str] = set()
    for entry in streams[:max_timelines]:
        # two runs may carry one id (a copied run directory): each keeps a figure of its own
        name = base = f"timeline-{slug(entry.id)}"
        while name in names:
            name = f"{base}-{len(names) + 1}"
        names.add(name)
        timeline(drawer, entry, name=name)
    said: list[str] = []
    if len(streams) > max_timelines:
        left = [e.id for e in streams[max_timelines:]]
        said.append(
            f"latency-over-time figures drawn for {max_timelines} of {len(streams)} runs; "
            f"not drawn: {', '.join(left)} (report them on their own for theirs)"
        )
    without = [e.id for e in entries if e.source == "esdash" and e.stream is None]
    if without:
        said.append(f"no latency-over-time figure (no stream recorded): {', '.join(without)}")
    if notes is not None:
        notes += [note for note in said if note not in notes]
    scaling(drawer, query_records, "nodes")
    scaling(drawer, query_records, "workers_per_node")
    ingest_scaling(drawer, ingest_records)
    return drawer.figures
