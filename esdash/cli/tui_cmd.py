"""``esdash tui``: the dashboard's home screen — sessions, campaigns, runs, plugins."""

from __future__ import annotations

import argparse
from pathlib import Path

from esdash.cli._command import Subcommands, add_command
from esdash.cli._dashboard import add_fps, check_fps, require_terminal, resolve_campaign
from esdash.errors import BadInput
from esdash.rundir.layout import CAMPAIGN_SUMMARY, CAMPAIGNS

DESCRIPTION = f"""
The dashboard's home screen. Sessions come from ./sessions, every --sessions DIR and
ESDASH_SESSIONS; runs from the runs directory (ESDASH_RUNS, default ./runs), campaigns from
its {CAMPAIGNS}/ and every --campaign. Quitting never stops a run.
"""


def register(subparsers: Subcommands) -> None:
    summary = "open the dashboard: sessions, campaigns, runs, plugins; launch, watch, stop"
    parser = add_command(subparsers, "tui", run, summary, DESCRIPTION)
    parser.add_argument(
        "--sessions",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="another directory of session files (repeatable)",
    )
    parser.add_argument("--runs", type=Path, metavar="DIR", help="runs directory (ESDASH_RUNS)")
    parser.add_argument(
        "--campaign",
        action="append",
        default=[],
        metavar="CAMPAIGN",
        help=(
            f"another campaign to list: its directory, {CAMPAIGN_SUMMARY} or campaign file "
            "(repeatable)"
        ),
    )
    add_fps(parser)


def run(args: argparse.Namespace) -> int:
    from esdash.paths import runs_dir

    runs_root = args.runs.resolve() if args.runs else runs_dir()
    campaigns = []
    for value in args.campaign:
        summary = resolve_campaign(value, runs_root)
        if summary is None:
            raise BadInput(
                f"--campaign {value}: not a campaign directory, {CAMPAIGN_SUMMARY} or campaign "
                f"file; pass the directory `esdash sweep` printed"
            )
        campaigns.append(summary)
    require_terminal("tui")
    from esdash.prepare.sessions import session_dirs
    from esdash.tui import run_home

    run_home(session_dirs(args.sessions), runs_root, fps=check_fps(args.fps), campaigns=campaigns)
    return 0
