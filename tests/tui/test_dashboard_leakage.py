"""The live screen of a finished run shows its leakage report, only when the run has one.

The canned run plays an ABE run whose ``leakage.json`` the orchestrator wrote at its end;
a damaged file shows as damaged and the dashboard keeps working.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from support.leakage import report
from tuihelp import Clock, pilot_test, screen_text, wait_for

from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage
from esdash.tui.app import EsdashApp
from esdash.tui.screens.live import LiveScreen
from esdash.tui.widgets.panels import LeakagePanel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def shown(pilot, app: EsdashApp) -> LiveScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.applied > 0)
    return app.screen


def app_for(run: Path) -> EsdashApp:
    return EsdashApp(run=run, fps=20, clock=Clock(1_800_000_000.0))


@pilot_test
async def test_a_finished_abe_run_shows_its_leakage_table(finished_run: Path):
    RunDir(finished_run).write_leakage(msgspec.convert(report(), type=Leakage))
    app = app_for(finished_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await shown(pilot, app)
        panel = screen.query_one("#leakage")
        await wait_for(pilot, lambda: panel.display and screen.shown.leakage is not None)
        await wait_for(pilot, lambda: "PatientAge" in screen_text(app))
        text = screen_text(app)
        assert "8 Leakage" in text and "best attack" in text and "within 1 %" in text
        row = next(line for line in text.splitlines() if "PatientAge" in line)
        cells = row.split("PatientAge", 1)[1].split()[:7]
        assert cells == ["OPE", "order", "101", "101", "sorting", "100%", "100%"]
        assert "<0.1%" in text  # the text field nothing recovers
        assert "Field names: keyed PRF" in text
        await pilot.press("8")  # hidden on request, back on request
        assert not panel.display and "leakage" in screen.hidden
        await pilot.press("8")
        assert panel.display


@pilot_test
async def test_a_damaged_leakage_file_shows_as_damaged(finished_run: Path):
    RunDir(finished_run).leakage_file.write_text('{"version": 1, "fields": "x"}')
    app = app_for(finished_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await shown(pilot, app)
        await wait_for(pilot, lambda: screen.query_one("#leakage").display)
        await wait_for(pilot, lambda: "leakage report damaged" in screen_text(app))
        rendered = str(LeakagePanel.renderable_for(screen.shown))
        assert str(RunDir(finished_run).leakage_file) in rendered and "$.fields" in rendered
        # the rest of the screen keeps working
        await pilot.press("5")
        assert not screen.query_one("#cluster").display


@pilot_test
async def test_a_run_without_a_leakage_report_has_no_leakage_panel(finished_run: Path):
    app = app_for(finished_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await shown(pilot, app)
        await wait_for(pilot, lambda: screen.shown.finished)
        assert not screen.query_one("#leakage").display
        assert "Leakage" not in screen_text(app)
        await pilot.press("8")  # nothing to show: it says so and stays away
        assert not screen.query_one("#leakage").display
