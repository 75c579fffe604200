"""``esdash report RUN_OR_CAMPAIGN...``: the paper's tables and figures from runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from esdash.cli._command import Subcommands, add_command
from esdash.cli._foreign import add_flag as add_foreign_flag
from esdash.cli._foreign import require_trusted

DESCRIPTION = """
Writes a report directory from run directories, campaign directories (or campaign files) and
the authors' result files. INPUT#key=value,... selects campaign points (#setup=abe,nodes=3)
or describes an authors' file (#nodes=3,workers_per_node=1,setup=none,docs=N). Definitions:
docs/campaign.md.
"""


def register(subparsers: Subcommands) -> None:
    summary = "tables, figures, environment and sessions of runs and campaigns"
    parser = add_command(subparsers, "report", run, summary, DESCRIPTION)
    parser.add_argument("inputs", nargs="+", metavar="RUN_OR_CAMPAIGN", help="what to report on")
    parser.add_argument(
        "--format",
        action="append",
        default=[],
        metavar="FMT",
        help=(
            "md, html, csv, json or rally (per-task numbers under Rally's metric names); "
            "repeatable or comma-separated (default md)"
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="report directory (default: <campaign directory>/report when every input is "
        "of one campaign, else ./esdash-report)",
    )
    parser.add_argument(
        "--baseline", default="none", help="setup the overhead is relative to (default none)"
    )
    parser.add_argument("--no-figures", action="store_true", help="tables only, no matplotlib")
    parser.add_argument(
        "--self-contained", action="store_true", help="HTML: embed the figures in the page"
    )
    add_foreign_flag(parser)


def run(args: argparse.Namespace) -> int:
    from esdash.errors import BadInput
    from esdash.progress import CHECKS_GRACE, for_stderr
    from esdash.report.document import REPORT_FORMATS, build_report, write_report
    from esdash.view.inputs import load_inputs

    formats = [f.strip() for spec in (args.format or ["md"]) for f in spec.split(",") if f.strip()]
    unknown = [f for f in formats if f not in REPORT_FORMATS]
    if unknown:
        raise BadInput(f"--format {', '.join(unknown)}: expected {', '.join(REPORT_FORMATS)}")
    for given in args.inputs:
        require_trusted(Path(given.split("#", 1)[0]), "report input", args)
    lines = for_stderr()
    with lines.phase(f"reading {len(args.inputs)} input(s)", announce_after=CHECKS_GRACE):
        inputs = load_inputs(args.inputs)
    if not inputs.entries:
        raise BadInput("no completed runs in the inputs")
    out = args.out
    if out is None:
        dirs = {Path(c.dir) for c in inputs.campaigns if c.dir}
        out = dirs.pop() / "report" if len(dirs) == 1 else Path("esdash-report")
    what = f"computing the tables of {len(inputs.entries)} run(s)"
    with lines.phase(what, announce_after=CHECKS_GRACE):
        report = build_report(inputs, args.baseline)
    drawing = not args.no_figures and bool({"md", "html", "json"} & set(formats))
    what = "drawing the figures and writing" if drawing else "writing"
    with lines.phase(f"{what} {', '.join(formats)}"):
        written = write_report(report, out, formats, not args.no_figures, args.self_contained)
    for path in written:
        print(f"wrote {path}")
    if report.figures:
        print(f"wrote {len(report.figures)} figure(s) in {out / 'figures'}")
    for note in report.notes:
        print(f"note: {note}")
    return 0
