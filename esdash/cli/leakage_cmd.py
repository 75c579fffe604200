"""``esdash leakage SESSION``: what a client-side encryption mode leaks, before any ingest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.cli._command import Subcommands, add_command, add_session
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.errors import EXIT_OK

if TYPE_CHECKING:
    from esdash.rundir.records import Leakage


#: Columns of the table when the output is not a terminal.
PIPE_WIDTH = 160


DESCRIPTION = """
Runs the leakage analysis of `esdash run` before any data is ingested: the session's track,
corpus and key, encrypted on this machine, then the classic inference attacks an
honest-but-curious cluster operator could run on the stored ciphertexts (their lengths
included), each field beside its majority guess (the most frequent value, guessed for every
record). No cluster is started. Exit codes: 0 success, 1 failure, 2 bad input (also a mode
that sends plaintext), 5 a plugin is missing or broken.
"""


def register(subparsers: Subcommands) -> None:
    summary = "what a client-side encryption mode (abe) leaks, measured on a generated sample"
    parser = add_command(subparsers, "leakage", run, summary, DESCRIPTION)
    add_session(parser)
    parser.add_argument(
        "--documents",
        type=_positive,
        metavar="N",
        help="analyse a generated sample of N documents instead of the session's corpus "
        "(generated tracks only)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="also write the report (JSON) to FILE"
    )
    add_trust_flag(parser)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from esdash.progress import for_stderr
    from esdash.run.leakage_sample import analyse_session
    from esdash.rundir import files
    from esdash.session import load_session

    session = load_session(args.session, trust_track_code=trusted(args))

    def say(text: str) -> None:
        print(f"esdash: {text}", file=sys.stderr, flush=True)

    lines = for_stderr()  # the analysis says when it begins; the ticker, that it goes on
    with lines.phase("leakage analysis", announce_after=lines.tick):
        report = analyse_session(session, args.documents, say)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        files.write(args.out, report)
        say(f"leakage: {args.out}")
    if args.json:
        sys.stdout.write(files.encode(report).decode() + "\n")
    else:
        _print_table(report)
    return EXIT_OK


def _print_table(report: Leakage) -> None:
    """The per-field table, the verdicts, the threat model and the papers, readable at 80
    columns: the verdicts are sentences, so they follow the table instead of widening it."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from esdash.view.leakage import COMPACT, NUMERIC, basis_line, names_line, rows

    # a terminal's width is respected; a file or pipe gets whole rows (rich assumes 80) and
    # prose on one line per paragraph, for grep and for whatever shows it
    tty = sys.stdout.isatty()
    console = Console(highlight=False, width=None if tty else PIPE_WIDTH)

    def say(text: str, style: str = "") -> None:
        console.print(Text(text, style=style), soft_wrap=not tty)  # text, never markup

    table = Table(
        title="What the cluster can learn, per encrypted field",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for header in COMPACT:
        numeric = header in NUMERIC
        wrap = header not in ("field", "best attack") and not numeric
        table.add_column(
            header,
            justify="right" if numeric else "left",
            no_wrap=not wrap,
            overflow="fold" if wrap else "ellipsis",
            min_width=8 if wrap else None,
        )
    for cells in rows(report, COMPACT):
        table.add_row(*(Text(cell) for cell in cells))
    say(basis_line(report))
    say(names_line(report))
    console.print(table)
    say("Verdicts", "bold")
    for item in report.fields:
        say(f"- {item.verdict}")
    say("Threat model", "bold")
    say(report.threat_model)
    if report.references:
        say("References", "bold")
        for reference in report.references:
            say(f"- {reference}")
