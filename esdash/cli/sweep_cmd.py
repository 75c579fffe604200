"""``esdash sweep CAMPAIGN``: run a campaign's points, resumably (``docs/campaign.md``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from esdash.cli._defaults import DEFAULT_TIMEOUT
from esdash.cli._trust import FLAG as TRUST_FLAG
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.rundir.layout import CAMPAIGNS

if TYPE_CHECKING:
    from esdash.campaign.sweep import Sweep


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a campaign: every combination of its axes, resumably",
        description=(
            "Runs the points of a campaign file, reusing clusters and ingested indices where "
            "the axes allow. Completed points are skipped, so running it again resumes. "
            "Exit codes: 0 every selected point completed, 1 some failed, 2 bad input, "
            "130 interrupted."
        ),
    )
    parser.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML)")
    parser.add_argument(
        "--dir",
        type=Path,
        help=f"campaign directory (default: <runs>/{CAMPAIGNS}/<name>)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run only points with this axis value, e.g. nodes=3; repeatable",
    )
    parser.add_argument(
        "--retries", type=int, default=1, help="extra attempts for a failed point (default 1)"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="wipe each data root before its first cluster starts (re-ingests everything)",
    )
    parser.add_argument(
        "--reuse-index",
        choices=("auto", "require"),
        default="auto",
        help="passed to every point's esdash run: an existing index that differs from the "
        "point's is re-ingested (auto) or the point fails (require) (default %(default)s)",
    )
    parser.add_argument(
        "--submit",
        action="store_true",
        help="from a login node: submit one Slurm job per cluster size instead of running",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan, check every point to run as `esdash session check` does "
        "(with --submit: print the job scripts) and write nothing; exit 2 if a point would "
        "be refused",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="only the sweep's own lines, not each run's output"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for each cluster to become healthy (default %(default)s)",
    )
    add_trust_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from esdash.campaign.plan import parse_filters
    from esdash.campaign.spec import load_campaign
    from esdash.campaign.state import CampaignDir, default_directory
    from esdash.campaign.sweep import Sweep, SweepOptions
    from esdash.errors import BadInput

    if args.retries < 0:
        raise BadInput("--retries must be 0 or more")
    campaign = load_campaign(args.campaign)
    parse_filters(args.only, campaign)  # a bad --only stops before anything is written
    directory = CampaignDir((args.dir or default_directory(campaign)).resolve())
    points = campaign.points(directory.path)
    options = SweepOptions(
        retries=args.retries,
        fresh=args.fresh,
        only=tuple(args.only),
        quiet=args.quiet,
        timeout=args.timeout,
        dry_run=args.dry_run,
        reuse_index=args.reuse_index,
        trust_track_code=trusted(args),
    )
    sweep = Sweep(campaign, directory, points, options, _stdout())
    if not args.submit:
        return sweep.run()
    extra = ["--retries", str(args.retries), f"--reuse-index={args.reuse_index}"] + (
        ["--fresh"] if args.fresh else []
    )
    extra += [TRUST_FLAG] if trusted(args) else []
    return _submit(sweep, extra)


def _submit(sweep: Sweep, extra: list[str]) -> int:
    """``--submit``: one Slurm job per cluster size; with ``--dry-run`` their scripts, printed."""
    from esdash.campaign.plan import plan
    from esdash.campaign.submit import job_scripts, show_jobs, submit_jobs

    campaign, directory, only = sweep.campaign, sweep.directory, list(sweep.options.only)
    if sweep.options.dry_run:
        code = sweep.dry_run()
        show_jobs(job_scripts(campaign, directory, sweep.points, only, extra), sweep.out)
        return code
    submit_jobs(campaign, directory, sweep.points, only, extra, sweep.out)
    directory.write_summary(campaign, plan(sweep.points, campaign.ingest))
    print(f"campaign directory: {directory.path}", file=sweep.out)
    return 0


def _stdout() -> TextIO:
    import sys

    return sys.stdout
