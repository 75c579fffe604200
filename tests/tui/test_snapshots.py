"""SVG snapshots of the main screens at 80x24 and 160x48 (pytest-textual-snapshot).

A few on purpose: they guard the layout; behaviour is tested in ``test_dashboard.py``.
Snapshots change with Textual releases (the test extra pins the versions they were taken
with).  After a deliberate change, look at the report and update them:

    .venv/bin/pytest tests/tui/test_snapshots.py --snapshot-update

Everything shown is fixed: canned finished runs, a campaign.json with fixed times, hosts
and pids (``tuihelp.fixed_campaign``) and a fixed clock, paths relative to the working
directory, a fixed list of plugins.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tuihelp import CAMPAIGN_NOW, FIXTURES, RUN_A, RUN_B, Clock, fixed_campaign, wait_for

from esdash.plugin.manager import PluginSet, get_plugins
from esdash.tui.app import EsdashApp
from esdash.tui.widgets.charts import LatencyHistogram

SIZES = [(80, 24), (160, 48)]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    """A working directory with ``runs/`` (the canned runs) and ``sessions/``."""
    for name in (RUN_A, RUN_B):
        shutil.copytree(FIXTURES / name, tmp_path / "runs" / name)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for name in ("single-node.toml", "slurm-3nodes-opa.toml"):
        shutil.copyfile(Path(__file__).resolve().parents[2] / "sessions" / name, sessions / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fixed_plugins() -> PluginSet:
    """The real registries (sessions validate), but a fixed list to show."""
    real = get_plugins()
    shown = ("elasticsearch", "encryption-none", "interconnects", "track-mri")
    return PluginSet(
        manager=real.manager,
        plugins={name: real.plugins[name] for name in shown},
        broken=[],
        registries=real.registries,
    )


async def live_ready(pilot) -> None:
    """Data shown, and the histograms drawn for their final size."""
    app = pilot.app
    await wait_for(pilot, lambda: getattr(app.screen, "applied", 0) > 0)

    def histograms_fit() -> bool:
        return all(
            len(h.buckets) == h.rows() for h in app.screen.query(LatencyHistogram) if h.buckets
        )

    await wait_for(pilot, histograms_fit)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_live_screen_of_a_finished_run(snap_compare, workdir: Path, size):
    app = EsdashApp(run=workdir / "runs" / RUN_A, clock=Clock(0.0))
    assert snap_compare(app, terminal_size=size, run_before=live_ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_home_screen(snap_compare, workdir: Path, size):
    app = EsdashApp(
        session_dirs=[Path("sessions")], runs_root=Path("runs"), plugins=fixed_plugins()
    )

    async def ready(pilot) -> None:
        home = pilot.app.screen
        await wait_for(pilot, lambda: len(getattr(home, "runs", ())) == 2)
        await wait_for(pilot, lambda: len(getattr(home, "sessions", ())) == 2)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_compare_screen(snap_compare, workdir: Path):
    app = EsdashApp(run=workdir / "runs" / RUN_A, compare=workdir / "runs" / RUN_B)

    async def judged(pilot) -> None:
        """Both runs read to their results: the B/A cells show compare's verdicts."""
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "judged", False))
        await live_ready(pilot)

    assert snap_compare(app, terminal_size=(160, 48), run_before=judged)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_campaign_screen(snap_compare, workdir: Path, size):
    fixed_campaign(workdir / "runs")
    app = EsdashApp(campaign=Path("runs/campaigns/paper"), clock=Clock(CAMPAIGN_NOW))

    async def ready(pilot) -> None:
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "applied", 0) > 0)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=ready)
