"""The plan screen (issue 18): a session's tasks, run or refused and why, before a launch.

The Rally track is written here: a bulk task, a search and an ES|QL task.  The ES|QL task
is refused whatever distribution is installed (the x-pack-esql module the integ-test-zip
lacks, or, without a distribution, no equivalent in esdash), so what the screen must show
is taken from `esdash plan --json` on the same session: the dashboard and the CLI agree.
Nothing here starts a cluster; the launch itself is covered with a real run in
``test_dashboard_live.py``, here only that `l` on the plan is what hands the session to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import esdash, write_session
from tuihelp import pilot_test, screen_text, wait_for

from esdash.errors import BadInput
from esdash.tui.app import EsdashApp
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.plan import PlanScreen

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")
SIZE = (240, 50)  # wide enough for a whole refusal on one line of the detail pane


def write_track(directory: Path) -> Path:
    """One index, three documents, and a schedule of an ingest, a search and ES|QL."""
    directory.mkdir(parents=True)
    body = {
        "settings": {"index.number_of_shards": 1, "index.number_of_replicas": 0},
        "mappings": {"properties": {"color": {"type": "keyword"}, "size": {"type": "long"}}},
    }
    (directory / "index.json").write_text(json.dumps(body))
    docs = [{"color": c, "size": k} for k, c in enumerate(("red", "blue", "red"))]
    (directory / "documents.json").write_text("".join(json.dumps(d) + "\n" for d in docs))
    search = {"query": {"term": {"color": "red"}}}
    track = {
        "version": 2,
        "indices": [{"name": "items", "body": "index.json"}],
        "corpora": [
            {"name": "items", "documents": [{"source-file": "documents.json", "document-count": 3}]}
        ],
        "schedule": [
            {
                "operation": {"name": "load", "operation-type": "bulk", "bulk-size": 10},
                "clients": 2,
            },
            {
                "operation": {"name": "reds", "operation-type": "search", "body": search},
                "clients": 1,
                "warmup-time-period": 1,
                "time-period": 5,
            },
            {
                "operation": {
                    "name": "esql-count",
                    "operation-type": "esql",
                    "query": "FROM items | STATS count()",
                },
                "iterations": 10,
            },
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def plan_app(tmp_path: Path) -> tuple[EsdashApp, Path, list[dict]]:
    """The dashboard over one session of the track, and that session's `esdash plan --json`."""
    track = write_track(tmp_path / "track")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    session = write_session(
        sessions, "planned", 1, user=NODE_USER, track=f'name = "rally"\npath = "{track}"'
    )
    runs = tmp_path / "runs"
    expected = json.loads(esdash("plan", str(session), "--json", env_runs=runs).stdout)["tasks"]
    app = EsdashApp(session_dirs=[sessions], runs_root=runs, fps=20)
    return app, session, expected


async def home_ready(pilot, app: EsdashApp) -> HomeScreen:
    await wait_for(
        pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.sessions, timeout=120
    )
    home = app.screen
    assert isinstance(home, HomeScreen)
    home.query_one("#sessions").focus()
    return home


async def plan_shown(pilot, app: EsdashApp) -> PlanScreen:
    await wait_for(
        pilot,
        lambda: (
            isinstance(app.screen, PlanScreen)
            and (app.screen.plan is not None or app.screen.error is not None)
        ),
        timeout=120,
    )
    screen = app.screen
    assert isinstance(screen, PlanScreen) and screen.error is None, screen.error
    return screen


def flat(text: str) -> str:
    """Screen text with its line breaks and padding gone (wrapped lines compare whole)."""
    return " ".join(text.split())


@pilot_test
async def test_p_shows_every_task_with_its_fate_and_the_refusal(tmp_path: Path):
    app, session, expected = plan_app(tmp_path)
    assert [(t["name"], t["status"]) for t in expected] == [
        ("load", "run"),
        ("reds", "run"),
        ("esql-count", "refused"),
    ]
    refusal = expected[2]
    assert "esql" in refusal["reason"]
    async with app.run_test(size=SIZE) as pilot:
        await home_ready(pilot, app)
        await pilot.press("p")
        screen = await plan_shown(pilot, app)
        table = screen.query_one("#plan-tasks")
        rows = [[str(c) for c in table.get_row_at(k)] for k in range(table.row_count)]
        # name, operation, clients, status: as the CLI gives them
        assert [(r[1], r[2], r[3], r[5]) for r in rows] == [
            (t["name"], t["operation"], str(t["clients"]), t["status"]) for t in expected
        ]
        assert rows[1][4] == "warmup-time-period=1, time-period=5"
        assert rows[2][6].startswith(f"[{refusal['reason_kind']}] ")
        text = screen_text(app)
        assert str(session) in text and "1 refused" in text
        assert "launches" not in text  # opened to be read: no launch offered
        # the refused task's whole reason, under the table
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: table.cursor_row == 2)
        await wait_for(
            pilot,
            lambda: (
                f"REFUSED [{refusal['reason_kind']}]: {flat(refusal['reason'])}"
                in flat(screen_text(app))
            ),
        )
        await pilot.press("l")  # no launch from a plan opened with p
        assert app.screen is screen
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
    assert not (tmp_path / "runs").exists()


@pilot_test
async def test_launch_shows_the_plan_first_and_l_there_confirms(tmp_path: Path, monkeypatch):
    app, session, expected = plan_app(tmp_path)
    launched: list[Path] = []

    def detach(path: Path, root: Path, **_: object) -> None:
        launched.append(Path(path))
        raise BadInput("not launched by this test")

    monkeypatch.setattr("esdash.run.start.detach", detach)
    async with app.run_test(size=SIZE) as pilot:
        home = await home_ready(pilot, app)
        # the plan comes first; escape goes back and nothing is launched
        await pilot.press("l")
        screen = await plan_shown(pilot, app)
        assert screen.launching
        text = flat(screen_text(app))
        assert "l launches: Run session planned on this machine" in text
        assert "esql-count" in text and "refused" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is home)
        await pilot.pause(0.2)
        assert launched == []
        # again, and `l` on the plan confirms: the session goes to the launch
        await pilot.press("l")
        await plan_shown(pilot, app)
        await pilot.press("l")
        await wait_for(pilot, lambda: app.screen is home)
        await wait_for(pilot, lambda: launched == [session], timeout=60)
        await wait_for(
            pilot,
            lambda: any("not launched by this test" in n.message for n in app._notifications),
            timeout=60,
        )
