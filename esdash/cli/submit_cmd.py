"""``esdash submit SESSION``: from a login node, run a session's cluster as a Slurm job."""

from __future__ import annotations

import argparse

from esdash.run import start
from esdash.session import load_session


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("submit", help="submit a session's cluster as a Slurm job")
    parser.add_argument("session", metavar="SESSION", help="session file")
    parser.add_argument("--fresh", action="store_true", help="delete reused data of the data root")
    parser.add_argument(
        "--bench",
        action="store_true",
        help="run the whole benchmark in the job (esdash run), not only the cluster",
    )
    parser.add_argument("--dry-run", action="store_true", help="write the script, do not submit")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    submitted = start.submit(
        load_session(args.session), bench=args.bench, fresh=args.fresh, dry_run=args.dry_run
    )
    if submitted.job is None:
        print(f"wrote {submitted.script} (not submitted)")
        return 0
    print(f"submitted job {submitted.job}; run directory: {submitted.run.path}")
    print(f"follow it with: esdash cluster status {submitted.run.path}")
    return 0
