"""``esdash compare BASELINE CONTENDER...``: per-query differences between runs."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="per-query differences of one or more contenders against a baseline",
        description=(
            "Each argument is a run directory, a campaign directory narrowed to one "
            "configuration (DIR#setup=abe,nodes=3: its repetitions), or an authors' result "
            "file. A '~' note marks a difference inside the spread: the [min, max] ranges of "
            "repeated runs overlap, or, for two single runs, the difference is no larger than "
            "the larger interval-to-interval standard deviation. A run whose session "
            "declares [references] is judged against them (within / better / worse); a "
            "missed reference exits 3."
        ),
    )
    parser.add_argument("baseline", metavar="BASELINE")
    parser.add_argument("contenders", nargs="+", metavar="CONTENDER")
    parser.add_argument(
        "--format", choices=("text", "md", "json"), default="text", help="default text"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from esdash.errors import EXIT_OK, EXIT_THRESHOLD
    from esdash.report.references import judge, misses, render_references
    from esdash.report.trust import session_references
    from esdash.view.compare import compare, load_side, render

    baseline = load_side(args.baseline)
    contenders = [load_side(spec) for spec in args.contenders]
    print(render(baseline, compare(baseline, contenders), args.format), end="")
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
