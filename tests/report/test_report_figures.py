"""The report's figures read as a reader expects: plain latency ticks that never collide, no
error bar below 0, integer axes at their values, and a percentile spectrum per query.

The drawing is matplotlib's; what is checked is what esdash asks of it: the tick labels it
draws (read back from a drawn figure) and the points it plots.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import synthetic

from esdash.report.figures import (
    Drawer,
    below_zero_clipped,
    latency_distributions,
    percentile_spectra,
    readable_log_axis,
    spectrum_points,
)
from esdash.rundir import hdr
from esdash.view.inputs import load_inputs

LATENCIES = [0.0012, 0.0016, 0.002, 0.0031, 0.0047, 0.009, 0.013, 0.023, 0.041, 0.2]


class KeepingDrawer(Drawer):
    """The report's drawer, keeping each figure's drawn tick labels by figure name."""

    def __init__(self, out: Path) -> None:
        super().__init__(out, ("png",))
        self.labels: dict[str, dict[str, list[str]]] = {}

    def save(self, fig, name, title, caption) -> None:  # type: ignore[no-untyped-def]
        fig.canvas.draw()
        (ax,) = fig.axes
        self.labels[name] = {
            "x": [t.get_text() for t in ax.get_xticklabels() if t.get_text()],
            "y": [t.get_text() for t in ax.get_yticklabels() if t.get_text()],
        }
        super().save(fig, name, title, caption)


def counts_of(seconds: list[float], repeat: int = 1) -> hdr.Counts:
    return hdr.from_mapping(
        {hdr.bucket_index(s * 1e6): repeat for s in seconds}  # one bucket per value
    )


def test_a_log_axis_is_labelled_in_plain_numbers_that_do_not_collide(tmp_path: Path) -> None:
    drawer = Drawer(tmp_path)
    fig, ax = drawer.plt.subplots()
    ax.plot([1.2, 3.0, 7.0], [1, 2, 3])  # less than a decade: matplotlib labels minor ticks
    ax.set_xscale("log")
    readable_log_axis(ax.xaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"\d+(\.\d+)?", label) for label in labels), labels
    assert {"2", "5"} <= set(labels)
    drawer.plt.close(fig)


def test_a_rate_error_bar_ends_at_zero() -> None:
    assert below_zero_clipped([10.0, 3.0, 0.0], [4.0, 5.0, None]) == [
        [4.0, 3.0, 0.0],
        [4.0, 5.0, 0.0],
    ]


def test_the_spectrum_goes_as_far_as_the_sample_supports() -> None:
    counts = counts_of(LATENCIES, repeat=100)  # 1,000 requests: up to p99.9
    points = spectrum_points(counts)
    xs = [x for x, _ms in points]
    assert xs[0] == 1.0 and max(xs) == pytest.approx(1000.0)
    latencies = [ms for _x, ms in points]
    assert latencies == sorted(latencies)
    assert latencies[-1] == pytest.approx(200.0, rel=0.01)  # the slowest request, in ms
    assert spectrum_points(counts_of([0.001])) == []  # one request supports no spectrum


def test_distribution_and_spectrum_figures_have_plain_latency_ticks(tmp_path: Path) -> None:
    run = synthetic.write_run(
        tmp_path, "one", {"s": {"q": synthetic.op([s * 1000 for s in LATENCIES] * 30)}}
    )
    drawer = KeepingDrawer(tmp_path / "out")
    entries = load_inputs([str(run)]).entries
    latency_distributions(drawer, entries)
    percentile_spectra(drawer, entries)
    assert set(drawer.labels) == {"latency-s-q", "percentiles-s-q"}
    plain = re.compile(r"\d+(\.\d+)?")
    assert all(plain.fullmatch(label) for label in drawer.labels["latency-s-q"]["x"])
    assert all(plain.fullmatch(label) for label in drawer.labels["percentiles-s-q"]["y"])
    assert drawer.labels["percentiles-s-q"]["x"] == ["p0", "p90", "p99"]  # 300 requests
    assert (tmp_path / "out" / "figures" / "percentiles-s-q.png").stat().st_size > 0
