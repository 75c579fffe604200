"""The home screen with a damaged run beside good ones (issue 17, item 1).

A ``results.json`` of ``[]`` or ``{"status": 5}``, or a ``run.json`` whose ``created`` is
``1e308``, crashed the home screen for every run listed beside it.  Now the damaged run is
listed as ``damaged``, with the file and what is wrong with it, the others as before, and
the dashboard keeps working: opening the damaged run shows what could be read of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tuihelp import RUN_A, RUN_B, Clock, pilot_test, screen_text, wait_for

from esdash.tui.app import EsdashApp
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.live import LiveScreen
from esdash.view import runs

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DAMAGES = {
    "results.json": [b"[]", b'{"status": 5}', b"", b'{"started": 1e308}'],
    "run.json": [b'{"created": 1e308}', b"[]", b"\xff"],
}


@pytest.mark.parametrize(
    ("damaged", "content"),
    [(name, content) for name, contents in DAMAGES.items() for content in contents],
)
def test_the_run_list_shows_a_damaged_run_as_damaged(runs_root: Path, damaged: str, content: bytes):
    (runs_root / RUN_B / damaged).write_bytes(content)
    entries = {e.run_id: e for e in runs.list_runs(runs_root)}
    assert entries[RUN_A].state == "finished"
    assert entries[RUN_B].state == runs.DAMAGED
    assert entries[RUN_B].detail.startswith(f"{damaged}: ")
    assert (runs_root / RUN_B / damaged).read_bytes() == content


@pilot_test
async def test_the_home_screen_lists_a_damaged_run_and_keeps_working(
    tmp_path: Path, runs_root: Path
):
    (runs_root / RUN_B / "results.json").write_bytes(b'{"status": 5}')
    info = json.loads((runs_root / RUN_A / "run.json").read_text())
    (runs_root / RUN_A / "run.json").write_text(json.dumps({**info, "created": 1e308}))
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    app = EsdashApp(session_dirs=[sessions], runs_root=runs_root, fps=20, clock=Clock())
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        home = app.screen
        assert isinstance(home, HomeScreen)
        await wait_for(pilot, lambda: len(home.runs) == 2)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert RUN_A in text and RUN_B in text
        assert text.count("damaged") == 2
        assert "results.json: Expected `str | null`, got `int`" in text
        assert "run.json: Expected `float` <= 253402300799.0" in text
        # the damaged run opens: what can be read of it, and its problem
        home.query_one("#runs").focus()
        row = next(k for k, entry in enumerate(home.runs) if entry.run_id == RUN_B)
        for _ in range(row):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        live = app.screen
        assert isinstance(live, LiveScreen) and live.run_path.name == RUN_B
        # the problem of results.json, by what it says: the file's path before it wraps
        # wherever the test's temporary directory ends
        await wait_for(pilot, lambda: "got `int`" in screen_text(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is home)
