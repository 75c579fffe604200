"""What ``esdash tui`` and ``esdash watch`` share: a terminal, the fps limit, campaigns."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from esdash.errors import BadInput


def require_terminal(command: str) -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInput(
            f"esdash {command} needs a terminal; in a batch job use `esdash run` (headless "
            f"progress) and read the run directory later with `esdash watch`"
        )


def add_fps(parser: argparse.ArgumentParser) -> None:
    """``--fps``: how often the dashboard redraws (checked by :func:`check_fps`)."""
    parser.add_argument(
        "--fps", type=float, default=4.0, help="redraws per second (default %(default)s)"
    )


def check_fps(fps: float) -> float:
    if not 0.5 <= fps <= 30:
        raise BadInput(f"--fps {fps:g}: use 0.5 to 30 redraws per second")
    return fps


def resolve_campaign(value: str, runs_root: Path | None = None) -> Path | None:
    """The ``campaign.json`` ``value`` names, or None if it names no campaign.

    A campaign file that has not run yet is an error: there is nothing to show.
    """
    from esdash.paths import runs_dir
    from esdash.view.campaign import summary_of

    summary = summary_of(value, runs_root or runs_dir())
    if summary is not None and not summary.is_file():
        raise BadInput(
            f"{value}: the campaign has not run yet ({summary.parent} has no {summary.name}); "
            f"start it with `esdash sweep {value}`, or pass the directory of `sweep --dir`"
        )
    return summary
