"""The dashboard application: screens, global keys, command palette, theme, screenshots."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from esdash.tui.screens.answers import on_yes
from esdash.tui.screens.campaign import CampaignScreen
from esdash.tui.screens.compare import CompareScreen
from esdash.tui.screens.dialogs import ConfirmScreen, HelpScreen
from esdash.tui.screens.home import HomeScreen
from esdash.tui.screens.live import LiveScreen
from esdash.view.source import RESULTS, RunSource

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet

ESDASH_THEME = Theme(
    name="esdash",
    primary="#4C9BE8",
    secondary="#7AA2F7",
    accent="#E0AF68",
    warning="#E0AF68",
    error="#F7768E",
    success="#9ECE6A",
    foreground="#D8DEE9",
    background="#1A1B26",
    surface="#1F2335",
    panel="#24283B",
    dark=True,
)


class _ScreenOptions(TypedDict):
    """What the app hands every screen that reads runs."""

    source_factory: Callable[[Path], RunSource]
    clock: Callable[[], float]


class EsdashApp(App[None]):
    """``esdash tui`` (home screen), ``esdash watch RUN [--compare RUN2]`` and
    ``esdash watch CAMPAIGN`` (the campaign screen)."""

    CSS_PATH = "app.tcss"
    TITLE = "esdash"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("f1,question_mark", "help", "Help", id="help"),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False, id="screenshot"),
    ]

    def __init__(
        self,
        *,
        run: str | Path | None = None,
        compare: str | Path | None = None,
        campaign: str | Path | None = None,
        campaigns: Iterable[Path] = (),
        session_dirs: Iterable[Path] = (),
        runs_root: Path | None = None,
        plugins: PluginSet | None = None,
        fps: float = 4.0,
        clock: Callable[[], float] = time.time,
        source_factory: Callable[[Path], RunSource] = RunSource,
        job_state: Callable[[str], str] | None = None,
        screenshot_dir: Path | None = None,
        theme: str = "esdash",
    ) -> None:
        super().__init__()
        self.start_run = Path(run) if run is not None else None
        self.start_compare = Path(compare) if compare is not None else None
        self.start_campaign = Path(campaign) if campaign is not None else None
        self.campaigns = list(campaigns)
        self.session_dirs = list(session_dirs)
        if runs_root is None:
            from esdash.paths import runs_dir

            runs_root = runs_dir()
        self.runs_root = runs_root
        self.plugins = plugins
        self.fps = fps
        self.clock = clock
        self.source_factory = source_factory
        self.job_state = job_state
        self.screenshot_dir = screenshot_dir
        self.register_theme(ESDASH_THEME)
        self.theme = theme

    def on_mount(self) -> None:
        if self.start_campaign is not None:
            self.push_screen(self._campaign(self.start_campaign, back=False))
        elif self.start_run is not None and self.start_compare is not None:
            self.push_screen(CompareScreen(self.start_run, self.start_compare, **self._kw()))
        elif self.start_run is not None:
            self.push_screen(self._live(self.start_run, back=False))
        else:
            self.push_screen(
                HomeScreen(
                    self.session_dirs,
                    self.runs_root,
                    plugins=self.plugins,
                    job_state=self.job_state,
                    campaigns=self.campaigns,
                )
            )

    def _kw(self) -> _ScreenOptions:
        return {"source_factory": self.source_factory, "clock": self.clock}

    def _live(self, path: Path, back: bool) -> LiveScreen:
        return LiveScreen(
            path,
            source=self.source_factory(path),
            fps=self.fps,
            clock=self.clock,
            can_go_back=back,
        )

    def _campaign(self, path: Path, back: bool) -> CampaignScreen:
        return CampaignScreen(path, clock=self.clock, can_go_back=back)

    # ------------------------------------------------------------------ navigation
    def watch_run(self, path: Path, back: bool = True) -> None:
        self.push_screen(self._live(path, back))

    def open_campaign(self, path: Path, back: bool = True) -> None:
        """The campaign screen of a campaign directory or its ``campaign.json``."""
        self.push_screen(self._campaign(path, back))

    def compare_runs(self, a: Path, b: Path, back: bool = True) -> None:
        self.push_screen(CompareScreen(a, b, can_go_back=back, **self._kw()))

    # ------------------------------------------------------------------ actions
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of this view, named after its run or campaign and the time, in the
        screenshot directory (``filename`` and ``path``, Textual's arguments, when given)."""
        screen = self.screen
        name = getattr(screen, "run_path", None) or getattr(screen, "campaign_dir", None)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        prefix = f"esdash-{Path(name).name}" if name is not None else "esdash"
        directory = str(self.screenshot_dir) if self.screenshot_dir else None
        saved = self.save_screenshot(
            filename=filename or f"{prefix}-{stamp}.svg", path=path or directory
        )
        self.notify(saved, title="Screenshot saved")

    def confirm_stop(self, run_path: Path) -> None:
        """Ask, then stop the run in a worker thread (it may take a minute or two)."""
        message = (
            f"Stop {run_path.name}? A running benchmark is interrupted as by Ctrl-C (what "
            f"was measured so far is kept in {RESULTS}), then its cluster is stopped; "
            f"a Slurm job is cancelled."
        )

        def stop() -> None:
            self.notify(f"stopping {run_path.name}…", title="Stop")
            self._stop(run_path)

        self.push_screen(ConfirmScreen("Stop this run?", message), on_yes(stop))

    @work(thread=True, group="stop")
    def _stop(self, run_path: Path) -> None:
        from esdash.run.stop import stop_run

        try:
            outcome = stop_run(run_path)
        except Exception as exc:
            self.call_from_thread(
                self.notify, f"{type(exc).__name__}: {exc}", title="Stop failed", severity="error"
            )
            return
        self.call_from_thread(self.notify, outcome, title=f"Stopped {run_path.name}")

    # ------------------------------------------------------------------ palette
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The built-ins (theme, keys, quit) and every action the current screen offers."""
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Screenshot", "Save an SVG screenshot of this view", self.action_screenshot
        )
        yield SystemCommand("Help", "Show what this screen shows and its keys", self.action_help)
        seen = {"quit", "help", "screenshot", "command_palette"}
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.description or binding.action in seen or not active.enabled:
                continue
            seen.add(binding.action)
            keys = self.get_key_display(binding)
            yield SystemCommand(
                binding.description,
                f"{binding.tooltip or binding.action} (key: {keys})",
                lambda action=binding.action, node=active.node: self.call_next(
                    self.run_action, action, node
                ),
            )
