"""The Textual dashboard: ``esdash tui`` and ``esdash watch``.

The only package of esdash that imports Textual, textual-plotext and plotext (a test
enforces it); the command line imports it inside the commands that need it.  What it shows
is folded by the Textual-free :mod:`esdash.view.model` from what
:mod:`esdash.view.source` polls; sessions come from :mod:`esdash.prepare.sessions`, runs
from :mod:`esdash.view.runs`, campaigns from :mod:`esdash.view.campaign`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_home(session_dirs: list[Path], runs_root: Path | None = None, **options: Any) -> None:
    """Open the home screen (sessions, campaigns, runs, plugins)."""
    from esdash.tui.app import EsdashApp

    EsdashApp(session_dirs=session_dirs, runs_root=runs_root, **options).run()


def run_campaign(summary: Path, **options: Any) -> None:
    """Open the campaign screen of a ``campaign.json``."""
    from esdash.tui.app import EsdashApp

    EsdashApp(campaign=summary, **options).run()


def run_watch(run: Path, compare: Path | None = None, **options: Any) -> None:
    """Open the live screen of ``run``, or the comparison of ``run`` and ``compare``."""
    from esdash.tui.app import EsdashApp

    EsdashApp(run=run, compare=compare, **options).run()
