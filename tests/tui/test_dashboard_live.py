"""The dashboard against a real run: launched from the home screen, followed live, stopped.

A real ``esdash run`` (one Elasticsearch node, real MPI ranks) is started with the home
screen's launch action, confirmed on the plan screen it shows first; the live screen opens
by itself once the run directory exists, follows the stream into the measured phase, and
the stop action (confirmed) ends the benchmark as Ctrl-C would: the stream gets its final
record, ``esdash run`` exits and no Elasticsearch process is left.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.cli import java_pids_under, write_session
from tuihelp import pilot_test, wait_for

from esdash.rundir.layout import RunDir
from esdash.tui.app import EsdashApp
from esdash.tui.screens.dialogs import ConfirmScreen
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.live import LiveScreen
from esdash.tui.screens.plan import PlanScreen

pytestmark = [pytest.mark.es, pytest.mark.mpi]

BENCH = '[benchmark]\nwarmup = "1s"\nduration = "60s"\nbulk_size = 200\n'


@pilot_test
async def test_launch_watch_and_stop_a_real_run(shared_tmp: Path, es_user: str):
    base = shared_tmp / "tui-live"
    sessions = base / "sessions"
    sessions.mkdir(parents=True)
    write_session(
        sessions, "tuilive", 1, user=es_user, track='name = "mri"\ndocuments = 1000', tables=BENCH
    )
    runs = base / "runs"
    app = EsdashApp(session_dirs=[sessions], runs_root=runs, fps=4)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.sessions)
        home = app.screen
        home.query_one("#sessions").focus()
        await pilot.press("l")  # the plan first (issue 18); `l` there confirms the launch
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, PlanScreen) and app.screen.plan is not None,
            timeout=60,
        )
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen), timeout=60)
        screen = app.screen
        run = screen.run_path
        assert RunDir(run).run_log.is_file() and RunDir(run).launch_record_file.is_file()
        await wait_for(
            pilot,
            lambda: screen.latest is not None and screen.latest.phase_key == "measure",
            timeout=240,
        )
        snap = screen.shown
        assert snap.ops and snap.ops[0].requests > 0
        assert snap.cluster is not None and snap.cluster.status in ("green", "yellow")
        assert snap.ranks_all == (1,)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.latest.finished, timeout=180)
        assert screen.latest.status == "aborted"
        await wait_for(
            pilot,
            lambda: any("Stopped" in (n.title or "") for n in app._notifications),
            timeout=180,
        )
        # the home screen reaps the process it launched
        await wait_for(pilot, lambda: home.launches == [], timeout=30)
    deadline = time.monotonic() + 60
    while java_pids_under(run) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert java_pids_under(run) == []
