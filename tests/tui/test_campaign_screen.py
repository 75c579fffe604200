"""The campaign screen and the campaigns on the home screen, driven by Textual's Pilot.

``campaign.json`` is written by the sweep's own code (``support/campaign.py``): the test
moves points through their statuses and rewrites the file as ``esdash sweep`` does after
every change, while the dashboard polls it.  The run of the completed point is a copy of a
canned finished run, so ``enter`` on it opens a real live screen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.campaign import write_campaign
from tuihelp import RUN_A, Clock, pilot_test, screen_text, wait_for

from esdash.tui.app import EsdashApp
from esdash.tui.screens.campaign import CampaignScreen
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.live import LiveScreen

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def campaign_shown(pilot, app: EsdashApp) -> CampaignScreen:
    await wait_for(
        pilot, lambda: isinstance(app.screen, CampaignScreen) and app.screen.reading is not None
    )
    screen = app.screen
    await wait_for(pilot, lambda: screen.applied > 0)
    await pilot.pause(0.1)  # drawn
    return screen


def flat(text: str) -> str:
    """Screen text with wrapped lines joined again (long paths wrap in the header)."""
    return " ".join(line.strip() for line in text.splitlines())


def points_table(screen: CampaignScreen) -> dict[str, list[str]]:
    """The points table as {label: [cells]}."""
    table = screen.query_one("#campaign-points")
    rows = [[str(c) for c in table.get_row_at(k)] for k in range(table.row_count)]
    return {row[1]: row for row in rows}


@pilot_test
async def test_the_campaign_screen_shows_counts_and_points_and_follows_the_sweep(
    tmp_path: Path, runs_root: Path
):
    written = write_campaign(tmp_path, runs_root)
    labels = [p.label for p in written.points]
    app = EsdashApp(campaign=written.directory.path, clock=Clock())
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await campaign_shown(pilot, app)
        text = screen_text(app)
        assert "study" in text and "PENDING" in text and "two sizes x two worker counts" in text
        assert "4 points: 0 completed · 0 failed · 0 running · 4 pending" in text
        assert list(points_table(screen)) == labels
        assert "1n-none over loopback" in text and "3n-none over loopback" in text
        assert not screen.query_one("#campaign-current").display

        # the sweep starts the first point: its run is the canned one
        run = runs_root / RUN_A
        written.running(0, run)
        written.summary()
        await wait_for(pilot, lambda: "1 running" in screen_text(app))
        text = screen_text(app)
        assert "RUNNING" in text and "Now running (1)" in text
        assert points_table(screen)[labels[0]][2] == "running"
        assert screen.query_one("#campaign-current").display

        # ... it completes; the next one fails with a reason
        written.ended(0, "completed")
        written.running(1, runs_root / "study-1n-none-2")
        written.ended(1, "failed", "exit 1: warm-up failed in step(s) age")
        written.summary()
        await wait_for(pilot, lambda: "1 completed · 1 failed" in screen_text(app))
        rows = points_table(screen)
        assert rows[labels[0]][2] == "completed" and rows[labels[0]][-1] == RUN_A
        assert rows[labels[1]][2] == "failed"
        assert "exit 1: warm-up failed in step(s) age" in rows[labels[1]]
        assert "1/4 completed (25%)" in screen_text(app)
        assert not screen.query_one("#campaign-current").display

        # enter on the completed point opens its run; escape comes back
        table = screen.query_one("#campaign-points")
        table.focus()
        table.move_to(written.points[0].id)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert app.screen.run_path == run
        await wait_for(pilot, lambda: app.screen.applied > 0)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # a point without a run says so
        table.move_to(written.points[3].id)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("no run yet" in n.message for n in app._notifications))
        assert app.screen is screen


@pilot_test
async def test_a_malformed_campaign_json_shows_the_error_and_recovers(
    tmp_path: Path, runs_root: Path
):
    written = write_campaign(tmp_path, runs_root)
    good = written.summary_file.read_text()
    written.summary_file.write_text('{"schema": "esdash.campaign/1", "points": [')
    app = EsdashApp(campaign=written.summary_file, clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await campaign_shown(pilot, app)
        text = screen_text(app)
        assert "study  UNREADABLE" in text and "not valid JSON" in flat(text)
        assert screen.reading.error.startswith(f"{written.summary_file}: not valid JSON")
        assert any("campaign.json unreadable" in (n.title or "") for n in app._notifications)
        # another file entirely
        written.summary_file.write_text(json.dumps({"schema": "esdash.run/1"}))
        await wait_for(pilot, lambda: "schema 'esdash.run/1'" in flat(screen_text(app)))
        # the sweep writes it again: the error goes, the points come
        written.summary_file.write_text(good)
        await wait_for(pilot, lambda: "4 pending" in screen_text(app))
        text = screen_text(app)
        assert "not a campaign.json" not in text and "UNREADABLE" not in text
        # a later bad write keeps the points on screen, under the error
        written.summary_file.write_text("[]")
        await wait_for(pilot, lambda: "got `array`" in flat(screen_text(app)))
        assert len(points_table(screen)) == 4 and "PENDING" in screen_text(app)


@pilot_test
async def test_the_home_screen_lists_campaigns_and_opens_one(tmp_path: Path, runs_root: Path):
    written = write_campaign(tmp_path, runs_root)
    written.running(0, runs_root / RUN_A)
    written.summary()
    broken = runs_root / "campaigns" / "broken" / "campaign.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{")
    app = EsdashApp(session_dirs=[], runs_root=runs_root, clock=Clock())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        home = app.screen
        await wait_for(pilot, lambda: len(home.campaigns) == 2 and len(home.runs) == 2)
        # drawn once the tables are filled: on a busy machine that is later than a pause
        await wait_for(pilot, lambda: "Campaigns (2, 1 running)" in screen_text(app))
        await wait_for(pilot, lambda: written.points[0].label in screen_text(app))
        text = screen_text(app)
        assert "Campaigns (2, 1 running)" in text
        assert "study" in text and "0/4" in text and written.points[0].label in text
        assert "broken" in text and "unreadable" in text and "not valid JSON" in text
        table = home.query_one("#campaigns")
        table.focus()
        table.move_cursor(row=[r.path for r in home.campaigns].index(written.summary_file))
        await pilot.press("enter")
        screen = await campaign_shown(pilot, app)
        assert screen.campaign_dir == written.directory.path
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is home)


@pilot_test
async def test_without_campaigns_the_home_screen_has_no_campaigns_table(runs_root: Path):
    app = EsdashApp(session_dirs=[], runs_root=runs_root, clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        home = app.screen
        await wait_for(pilot, lambda: len(home.runs) == 2)
        assert not home.query_one("#campaigns").display
        assert "Campaigns" not in screen_text(app)
