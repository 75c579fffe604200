"""The dashboard driven by Textual's Pilot (``App.run_test``) against canned and live run dirs.

Live runs are played by appending the records of a canned run to a stream file while the
dashboard polls it, as the benchmark's rank 0 would; the wall clock is injected so the
STALLED badge does not depend on when the test runs.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from rich.console import Console
from support.records import header as header_record
from support.records import interval as interval_record
from tuihelp import RUN_A, RUN_B, Clock, pilot_test, screen_text, wait_for, write_records

from esdash.plugin.manager import load_plugins
from esdash.plugin_api import hookimpl
from esdash.tui.app import EsdashApp
from esdash.tui.screens.compare import CompareScreen, _short
from esdash.tui.screens.dialogs import ConfirmScreen, HelpScreen
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.live import LiveScreen
from esdash.tui.widgets.queries import QueryTable
from esdash.view import compare
from esdash.view.inputs import load_run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def live_app(run: Path, clock: Clock | None = None, **kwargs) -> EsdashApp:
    return EsdashApp(run=run, fps=20, clock=clock or Clock(), **kwargs)


async def shown(pilot, app: EsdashApp) -> LiveScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.applied > 0)
    return app.screen


def table_cells(screen: LiveScreen) -> list[list[str]]:
    table = screen.query_one(QueryTable)
    return [[str(c) for c in table.get_row_at(k)] for k in range(table.row_count)]


@pilot_test
async def test_pause_freezes_the_view_while_data_keeps_arriving(live_run):
    run, pending = live_run
    intervals = [k for k, r in enumerate(pending) if r["type"] == "interval"]
    write_records(run / "stream.jsonl", pending[: intervals[5] + 1])
    clock = Clock(pending[intervals[5]]["wall"] + 0.5)
    app = live_app(run, clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await shown(pilot, app)
        await wait_for(pilot, lambda: screen.shown.count == 6)
        await pilot.press("space")
        assert screen.paused
        frozen, cells = screen.shown, table_cells(screen)
        more = pending[intervals[5] + 1 : intervals[15] + 1]
        write_records(run / "stream.jsonl", more)
        clock.now = more[-1]["wall"] + 0.5
        # the data keeps arriving: the model folds it and the header counts it ...
        await wait_for(pilot, lambda: screen.latest.count == 16)
        await wait_for(pilot, lambda: "PAUSED +10 new" in screen_text(app))
        # ... while the panels stay as they were
        assert screen.shown is frozen and table_cells(screen) == cells
        assert "Resume" in screen_text(app)
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.shown.count == 16)
        assert not screen.paused and "PAUSED" not in screen_text(app)


@pilot_test
async def test_a_dead_writer_shows_stalled_and_a_finished_run_does_not(live_run, finished_run):
    run, pending = live_run
    write_records(run / "stream.jsonl", pending[:8])
    clock = Clock(pending[7]["wall"] + 1.0)
    app = live_app(run, clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await shown(pilot, app)
        assert not screen.latest.stalled
        clock.now += 120  # no record for two minutes
        await wait_for(pilot, lambda: screen.latest.stalled)
        await wait_for(pilot, lambda: "STALLED 2m" in screen_text(app))
    app = live_app(finished_run, Clock(pending[-1]["wall"] + 86400))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await shown(pilot, app)
        assert not screen.latest.stalled and "STALLED" not in screen_text(app)
        assert " done " in screen_text(app)


def synthetic_run(root: Path, ranks: int, missing: list[int]) -> Path:
    """A run of ``ranks`` bench ranks whose last interval misses some of them."""
    from esdash.bench.recorder import Recorder
    from esdash.stats.merge import Merged

    run = root / "synthetic"
    run.mkdir()
    started = 1_800_000_000.0
    header = header_record(
        run_id="synthetic",
        session={"name": "wide", "track": {"name": "mri"}},
        plugins={},
        topology_={"nodes": [{"name": f"node-{k}"} for k in range(4)]},
        bench_ranks=[{"rank": r, "host": "h", "target": None} for r in range(1, ranks + 1)],
        slurm_job_id=None,
        started=started,
        interval=1.0,
        steps=[{"name": "s", "queries": ["q"], "warmup": 0, "duration": 60}],
    )
    items = [header]
    for seq in range(3):
        merged = Merged()
        present = [r for r in range(1, ranks + 1) if seq < 2 or r not in missing]
        for rank in present:
            recorder = Recorder(rank=rank)
            for k in range(20):
                recorder.record("q", "node-0", 0.002 + k * 1e-4, 0.002)
            merged.add(recorder.drain())
        items.append(
            interval_record(
                seq=seq,
                t=seq + 1.0,
                wall=started + seq + 1,
                phase="measure",
                step=0,
                step_name="s",
                elapsed=1.0,
                ops=merged.to_payload().ops,
                ranks=present,
                missing_ranks=missing if seq == 2 else [],
            )
        )
    write_records(run / "stream.jsonl", items, mode="w")
    return run


@pilot_test
async def test_the_rank_strip_shows_missing_ranks(tmp_path: Path):
    run = synthetic_run(tmp_path, ranks=16, missing=[3, 11])
    app = live_app(run, Clock(1_800_000_003.5))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await shown(pilot, app)
        assert screen.shown.ranks_missing == (3, 11)
        text = screen_text(app)
        assert "16 ranks, missing: 3,11" in text
        assert "■■■" in text
        # the replay of an earlier interval: nobody missing
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.shown.position == 1)
        assert "missing" not in screen_text(app).split("5 Cluster")[1]


class TypoPlugin:
    """A plugin with a misspelt hook: it must show up as broken on the home screen."""

    @hookimpl
    def esdash_register_trakcs(self, register):  # the typo is the point
        pass


def home_app(tmp_path: Path, runs_root: Path, **kwargs) -> EsdashApp:
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    (sessions / "tiny.toml").write_text(
        textwrap.dedent(
            """\
            name = "tiny"
            description = "one node"
            [cluster]
            nodes = 2
            [track]
            name = "mri"
            """
        )
    )
    (sessions / "broken.toml").write_text('name = "broken"\n[cluster]\nnodez = 1\n')
    return EsdashApp(session_dirs=[sessions], runs_root=runs_root, fps=20, clock=Clock(), **kwargs)


@pilot_test
async def test_the_home_screen_lists_sessions_runs_and_warns_about_broken_plugins(
    tmp_path: Path, runs_root: Path
):
    plugins = load_plugins(extra=[("typo-plugin", TypoPlugin())])
    assert [b.name for b in plugins.broken] == ["typo-plugin"]
    app = home_app(tmp_path, runs_root, plugins=plugins)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        home = app.screen
        await wait_for(pilot, lambda: len(home.sessions) == 2 and len(home.runs) == 2)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "broken plugin typo-plugin" in text and "unknown hook" in text
        assert any("Broken plugins" in (n.title or "") for n in app._notifications)
        assert "tiny" in text and "invalid" in text and "finished" in text
        assert RUN_A in text and RUN_B in text
        # validate the selected session (the invalid one sorts first)
        await pilot.press("v")
        assert any("nodez" in n.message for n in app._notifications)
        # open a run from the runs table, and come back
        home.query_one("#runs").focus()
        await pilot.press("enter")
        screen = await shown(pilot, app)
        assert screen.run_path.name in (RUN_A, RUN_B)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is home)
        # compare: mark one run, then the other
        await pilot.press("c")
        await pilot.press("down")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))


@pilot_test
async def test_help_lists_the_active_keys_and_the_palette_offers_the_actions(finished_run):
    app = live_app(finished_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await shown(pilot, app)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = screen_text(app)
        assert "A run, live or replayed" in text and "STALLED" in text
        assert "LiveScreen" not in text  # the screen's title, not its class
        assert "Pause" in text and "Wider" in text and "Quitting never stops" in text
        # every key of the screen, the hidden ones too, and no table cursor keys
        assert "Keys of this screen" in text
        table = app.screen.query_one("#help-keys").content
        console = Console(width=100, record=True)
        console.print(table)
        keys = console.export_text()
        for action in ("Back", "Forward", "Window", "Hist now/all", "Log node", "Stop run"):
            assert action in keys, action
        assert "Page Up" not in keys and "Cursor" not in keys
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for expected in ("Theme", "Screenshot", "Pause", "Wider", "Max"):
            assert expected in titles


@pilot_test
async def test_the_timeline_replays_a_finished_run(finished_run):
    app = live_app(finished_run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await shown(pilot, app)
        count = screen.shown.count
        assert screen.shown.following and "END" in screen_text(app)
        for _ in range(5):
            await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.shown.position == count - 6)
        assert not screen.shown.following
        assert f"REPLAY {count - 5}/{count}" in screen_text(app)
        screen.query_one("#timeline").focus()
        await pilot.press("home")
        await wait_for(pilot, lambda: screen.shown.position == 0)
        assert screen.shown.phase == "ingest"
        await pilot.press("right", "right")
        await wait_for(pilot, lambda: screen.shown.position == 2)
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.shown.following)
        assert screen.shown.phase == "done"


@pilot_test
async def test_panels_toggle_maximise_and_a_screenshot(finished_run, tmp_path: Path):
    app = live_app(finished_run, screenshot_dir=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await shown(pilot, app)
        await pilot.press("5")
        assert not screen.query_one("#cluster").display and "cluster" in screen.hidden
        await pilot.press("5")
        assert screen.query_one("#cluster").display
        await pilot.press("m")
        assert screen.maximized is not None and screen.maximized.id == "queries"
        await pilot.press("m")
        assert screen.maximized is None
        await pilot.press("plus")
        await wait_for(pilot, lambda: screen.shown.span == 300.0)
        await pilot.press("minus", "minus")
        await wait_for(pilot, lambda: screen.shown.span == 60.0)
        await pilot.press("ctrl+s")
        shots = list(tmp_path.glob("esdash-*.svg"))
        assert len(shots) == 1 and "<svg" in shots[0].read_text()[:200]


@pilot_test
async def test_stop_asks_first(live_run, monkeypatch):
    run, pending = live_run
    write_records(run / "stream.jsonl", pending[:5])
    stopped = []
    monkeypatch.setattr("esdash.run.stop.stop_run", lambda path: stopped.append(path) or "ok")
    app = live_app(run, Clock(pending[4]["wall"] + 1))
    async with app.run_test(size=(120, 40)) as pilot:
        await shown(pilot, app)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert stopped == []
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: stopped == [run])


@pilot_test
async def test_compare_shows_both_runs_and_their_differences(runs_root: Path):
    app = EsdashApp(run=runs_root / RUN_A, compare=runs_root / RUN_B, clock=Clock())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.applied > 0 and screen.judged)
        assert len(screen.keys) == 3
        text = screen_text(app)
        assert RUN_A in text and RUN_B in text
        # both runs finished: every B/A cell is compare's judgement (ratio, interval, verdict)
        judged = compare.screen_cells(load_run(runs_root / RUN_A), load_run(runs_root / RUN_B))
        assert screen.cells == judged
        p99 = judged[(0, "body_part")]["p99 ms"]
        assert p99 is not None and p99.effect.low is not None
        assert f"{_short(p99.effect.ratio)} {_short(p99.effect.low)}–" in text
        assert {"?", "✗"} & set(text)
        results_a = json.loads((runs_root / RUN_A / "results.json").read_text())
        first = results_a["steps"][0]
        ((query, op),) = first["queries"].items()
        assert f"{op['throughput']['requests_per_s']:,.0f}" in text
        hist_a = screen.query_one("#hist-a")
        hist_b = screen.query_one("#hist-b")
        assert hist_a.total == op["latency"]["count"]
        assert hist_a.buckets[0].low == hist_b.buckets[0].low  # one axis
        # one scale: a full bar is the largest share of either run, so equal shares draw
        # equal bars (each side scaled to its own largest bar would not compare)
        largest = max(b.count / h.total for h in (hist_a, hist_b) for b in h.buckets if h.total)
        assert hist_a.full_share == hist_b.full_share == largest
        assert f"a full bar is {largest * 100:.1f}%" in hist_a.render().plain
        await pilot.press("down")
        await pilot.pause(0.1)
        assert hist_a.label.endswith(screen.keys[1][1])
