"""``esdash watch RUN [--compare RUN2]``: follow a run live, replay it, or compare two runs;
``esdash watch CAMPAIGN``: follow a campaign's points."""

from __future__ import annotations

import argparse

from esdash.cli._command import Subcommands, add_command
from esdash.cli._dashboard import add_fps, check_fps, require_terminal, resolve_campaign
from esdash.cli._foreign import add_flag as add_foreign_flag
from esdash.cli._foreign import require_trusted
from esdash.cli._run_arg import add_run, resolve_run
from esdash.errors import BadInput
from esdash.rundir.layout import CAMPAIGN_SUMMARY, CAMPAIGNS

DESCRIPTION = f"""
RUN is a run directory, or the name of one in the runs directory (ESDASH_RUNS). A run that is
over opens with its timeline at the end, ready to replay. A campaign (its directory, its
{CAMPAIGN_SUMMARY}, the campaign file, or its name under RUNS/{CAMPAIGNS}) opens the campaign
screen. Quitting never stops the run.
"""


def register(subparsers: Subcommands) -> None:
    summary = "follow a run or a campaign in the dashboard, replay a run, or compare two"
    parser = add_command(subparsers, "watch", run, summary, DESCRIPTION)
    add_run(parser, "run or campaign")
    parser.add_argument(
        "--compare", metavar="RUN2", help="show RUN (baseline) and RUN2 side by side"
    )
    add_fps(parser)
    add_foreign_flag(parser)


def run(args: argparse.Namespace) -> int:
    campaign = resolve_campaign(args.run)
    if campaign is not None:
        if args.compare:
            raise BadInput(f"--compare compares runs; {args.run} is a campaign")
        require_terminal("watch")
        from esdash.tui import run_campaign

        run_campaign(campaign, fps=check_fps(args.fps))
        return 0
    run_path = resolve_run(args.run)
    other = resolve_run(args.compare) if args.compare else None
    for path in (run_path, other):
        if path is not None:
            require_trusted(path, "run directory", args)
    require_terminal("watch")
    from esdash.tui import run_watch

    run_watch(run_path, other, fps=check_fps(args.fps))
    return 0
