"""``esdash run SESSION``: cluster, ingest, query steps, results — headless, for batch jobs."""

from __future__ import annotations

import argparse
from pathlib import Path

from esdash.cli._command import Subcommands, add_command, add_seconds, add_session
from esdash.cli._defaults import DEFAULT_TIMEOUT
from esdash.cli._foreign import add_flag as add_foreign_flag
from esdash.cli._run_arg import resolve_run
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted

DESCRIPTION = """
Exit codes: 0 success, 1 failure, 2 bad input, 3 a threshold failed, 4 the cluster failed,
5 a plugin is missing or broken, 130 aborted by a signal (Ctrl-C, SIGTERM, SIGHUP:
everything started is stopped).
"""


def register(subparsers: Subcommands) -> None:
    summary = "run a session's benchmark headless (starts and stops the cluster)"
    parser = add_command(subparsers, "run", run, summary, DESCRIPTION)
    add_session(parser)
    parser.add_argument(
        "--cluster",
        metavar="RUN",
        help="use the running cluster of this run (its directory, or its name)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--fresh", action="store_true", help="delete reused data of the data root")
    parser.add_argument(
        "--reingest",
        action="store_true",
        help="re-create and ingest the index even when it is the planned one (only an index "
        "esdash created; one it did not is never deleted)",
    )
    parser.add_argument(
        "--reuse-index",
        choices=("auto", "require"),
        default="auto",
        help="an existing index whose fingerprint (corpus, mapping, settings, encryption "
        "layout, document count) differs: auto re-ingests it and says why, require refuses "
        "to run (default %(default)s)",
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help='fail (exit 3) unless e.g. "age:p99<500ms"; repeatable',
    )
    add_seconds(parser, "--timeout", DEFAULT_TIMEOUT, "seconds to wait for a healthy cluster")
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="use this prepared run directory (as the job script of `esdash submit --bench` "
        "and the dashboard's launch do)",
    )
    add_foreign_flag(parser)
    add_trust_flag(parser)


def run(args: argparse.Namespace) -> int:
    from esdash.run.job import RunOptions, run_session  # numpy and more: only when running
    from esdash.session import load_session

    session = load_session(args.session, trust_track_code=trusted(args))
    options = RunOptions(
        cluster=resolve_run(args.cluster) if args.cluster else None,
        keep=args.keep,
        fresh=args.fresh,
        reingest=args.reingest,
        reuse_index=args.reuse_index,
        thresholds=tuple(args.threshold),
        timeout=args.timeout,
        run_dir=args.run_dir,
        allow_foreign=args.allow_foreign,
    )
    return run_session(session, options)
