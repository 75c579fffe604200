"""``esdash sweep CAMPAIGN``: run a campaign's points, resumably (``docs/campaign.md``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from esdash.cli._command import Subcommands, add_command, add_seconds
from esdash.cli._defaults import DEFAULT_TIMEOUT
from esdash.cli._trust import FLAG as TRUST_FLAG
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.rundir.layout import CAMPAIGNS

if TYPE_CHECKING:
    from esdash.campaign.plan import SizeTime
    from esdash.campaign.sweep import Sweep


DESCRIPTION = """
Runs the points of a campaign file, reusing clusters and ingested indices where the axes
allow. Completed points are skipped, so running it again resumes. Exit codes: 0 every
selected point completed, 1 some failed, 2 bad input, 130 interrupted.
"""


def register(subparsers: Subcommands) -> None:
    summary = "run a campaign: every combination of its axes, resumably"
    parser = add_command(subparsers, "sweep", run, summary, DESCRIPTION)
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
    add_seconds(
        parser, "--timeout", DEFAULT_TIMEOUT, "seconds to wait for each cluster to become healthy"
    )
    add_trust_flag(parser)


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
    if args.dry_run and not args.submit:
        code = sweep.dry_run()
        _show_wall_times(sweep, _wall_times(sweep))
        return code
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
    trust = sweep.options.trust_track_code
    if sweep.options.dry_run:
        code = sweep.dry_run()
        times = _wall_times(sweep)
        _show_wall_times(sweep, times)
        scripts = job_scripts(campaign, directory, sweep.points, only, extra, times, trust)
        show_jobs(scripts, sweep.out)
        return code
    # the campaign's own [slurm] time needs no estimate; job_scripts asks for one otherwise
    estimates = None if campaign.slurm.get("time") else _wall_times(sweep)
    submit_jobs(campaign, directory, sweep.points, only, extra, sweep.out, trust, estimates)
    directory.write_summary(campaign, plan(sweep.points, campaign.ingest))
    print(f"campaign directory: {directory.path}", file=sweep.out)
    return 0


def _wall_times(sweep: Sweep) -> list[SizeTime]:
    """Every point to run estimated (each loads its track: a phase that says so when slow)."""
    from esdash.campaign.submit import wall_times
    from esdash.progress import CHECKS_GRACE, for_stderr

    options = sweep.options
    what = "estimating the wall time of the points to run"
    with for_stderr().phase(what, announce_after=CHECKS_GRACE) as phase:
        return wall_times(
            sweep.campaign,
            sweep.directory,
            sweep.points,
            options.only,
            options.trust_track_code,
            estimated=phase.advance,
        )


def _show_wall_times(sweep: Sweep, sizes: Sequence[SizeTime]) -> None:
    """Per Slurm job (one per cluster size), its clusters and points with their estimated
    wall times, the sum, and the ``--time`` that ``--submit`` asks for."""
    from esdash.cli._time_lines import phases_brief, time_line
    from esdash.view.format import duration

    out = sweep.out
    if not sizes:
        return
    print("wall time of the points to run (bounds at their bound; README: Wall time):", file=out)
    for size in sizes:
        points = sum(len(cluster.points) for cluster in size.clusters)
        missing = f" without {len(size.missing)} point(s) not estimated" if size.missing else ""
        print(
            f"  Slurm job for {size.nodes} node(s): {len(size.clusters)} cluster(s), "
            f"{points} point(s), {duration(size.seconds)}{missing}",
            file=out,
        )
        print(f"    {time_line(size.job_time, 'esdash sweep --submit asks')}", file=out)
        for cluster in size.clusters:
            first = cluster.points[0].wall
            start = first.phase("cluster_start") if first is not None else None
            stop = first.phase("cluster_stop") if first is not None else None
            said = (
                f"start ~{duration(start.seconds)}, stop ~{duration(stop.seconds)}"
                if start is not None and stop is not None
                else "start and stop not estimated"
            )
            print(f"    cluster {cluster.number} ({cluster.group.label}): {said}", file=out)
            for point in cluster.points:
                label = point.planned.point.label or point.planned.point.id
                if point.wall is None:
                    print(f"      {label}: no estimate: {point.problem}", file=out)
                    continue
                print(
                    f"      {label}: {duration(point.wall.run_seconds)} "
                    f"({phases_brief(point.wall, cluster=False)})",
                    file=out,
                )


def _stdout() -> TextIO:
    import sys

    return sys.stdout
