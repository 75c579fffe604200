"""``esdash compare BASELINE CONTENDER...``: per-query effects with intervals and verdicts."""

from __future__ import annotations

import argparse

from esdash.cli._command import Subcommands, add_command

#: The default margin of equivalence, in percent (esdash.stats.verdicts.MARGIN; not
#: imported: parsing the arguments must not load numpy).
MARGIN_PCT = 5.0


def _percent(text: str) -> float:
    """A percentage from 0 (exclusive) to 100 (exclusive), e.g. ``5`` or ``2.5``."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a percentage such as 5, found {text!r}"
        ) from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage above 0 and below 100: {text}")
    return value


DESCRIPTION = """
Each argument is a run directory, a campaign directory narrowed to one configuration
(DIR#setup=abe,nodes=3: its repetitions; a side whose runs differ in any measured setting is
refused, naming the settings), or an authors' result file. Every cell gives the ratio
contender / baseline with its 95 % interval (bootstrap over a side's runs or rounds, or over
blocks of a single run's intervals), a verdict -- equivalent (the interval within +-MARGIN),
better or worse (p < 0.05 after Holm's correction over the queries), else inconclusive -- and
the repetitions per side an interval of +-PRECISION needs. Percentiles of several runs come
from their merged histograms. A run whose session declares [references] is judged against
them (within / better / worse); a missed reference exits 3. Details: docs/campaign.md.
"""


def register(subparsers: Subcommands) -> None:
    summary = "per-query effects of one or more contenders against a baseline, with verdicts"
    parser = add_command(subparsers, "compare", run, summary, DESCRIPTION)
    parser.add_argument(
        "baseline",
        metavar="BASELINE",
        help="what the others are judged against: a run, a campaign configuration or an "
        "authors' result file (see above)",
    )
    parser.add_argument(
        "contenders",
        nargs="+",
        metavar="CONTENDER",
        help="one or more of the same kinds, each judged against BASELINE",
    )
    parser.add_argument(
        "--format", choices=("text", "md", "json"), default="text", help="default text"
    )
    parser.add_argument(
        "--margin",
        type=_percent,
        default=MARGIN_PCT,
        metavar="PCT",
        help=f"a change within +-PCT %% is 'equivalent' (default {MARGIN_PCT:g})",
    )
    parser.add_argument(
        "--precision",
        type=_percent,
        metavar="PCT",
        help="the interval width, +-PCT %%, the repetitions needed are for (default: the margin)",
    )


def run(args: argparse.Namespace) -> int:
    from esdash.errors import EXIT_OK, EXIT_THRESHOLD
    from esdash.report.trust import session_references
    from esdash.view.compare import compare, load_side, render
    from esdash.view.references import judge, misses, render_references

    baseline = load_side(args.baseline)
    contenders = [load_side(spec) for spec in args.contenders]
    precision = None if args.precision is None else args.precision / 100.0
    records = compare(baseline, contenders, args.margin / 100.0, precision)
    print(render(baseline, records, args.format, contenders), end="")
    missed = 0
    for side in (baseline, *contenders):
        for entry in side.entries:
            references = session_references(entry)
            if not references:
                continue
            judged = judge(entry.results, references)
            missed += len(misses(judged))
            if args.format != "json":
                print(f"\n{entry.id}: " + "\n".join(render_references(judged)))
    return EXIT_THRESHOLD if missed else EXIT_OK
