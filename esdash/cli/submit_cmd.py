"""``esdash submit SESSION``: from a login node, run a session's cluster as a Slurm job.

The job asks Slurm for the session's ``[slurm] time``; a session that sets none gets the
run's estimated wall time with a margin (:mod:`esdash.prepare.timelimit`), and the command
says which it used.  ``--dry-run`` also prints the estimate, phase by phase (stderr: the
script alone is on stdout).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from esdash.cli._command import Subcommands, add_command, add_session
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted

if TYPE_CHECKING:
    from esdash.session import Session


DESCRIPTION = """
Writes the job script into a new run directory and submits it with sbatch; the job starts the
cluster (with --bench: runs the whole benchmark) and the dashboard or `esdash cluster status`
follows it through the run directory. Exit codes: 0 submitted (or, with --dry-run, checked
and printed), 1 sbatch refused the job, 2 bad input, 5 a plugin is missing or broken.
"""


def register(subparsers: Subcommands) -> None:
    summary = "submit a session's cluster as a Slurm job"
    parser = add_command(subparsers, "submit", run, summary, DESCRIPTION)
    add_session(parser)
    parser.add_argument("--fresh", action="store_true", help="delete reused data of the data root")
    parser.add_argument(
        "--bench",
        action="store_true",
        help="run the whole benchmark in the job (esdash run), not only the cluster",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run every check a submit runs, print the job script and the estimated wall "
        "time of every phase; write and submit nothing",
    )
    add_trust_flag(parser)


def run(args: argparse.Namespace) -> int:
    from esdash.run import start
    from esdash.session import load_session

    session = load_session(args.session, trust_track_code=trusted(args))
    if args.dry_run:
        return _dry_run(session, args)
    from esdash.cli._time_lines import time_line

    submitted = start.submit(session, bench=args.bench, fresh=args.fresh)
    print(f"submitted job {submitted.job}; run directory: {submitted.run.path}")
    if submitted.job_time is not None:
        print(time_line(submitted.job_time, "the job asked"))
    print(f"follow it with: esdash cluster status {submitted.run.path}")
    return 0


def _dry_run(session: Session, args: argparse.Namespace) -> int:
    """The script on stdout (a valid script: the note is a comment), nothing on disk.

    A dry run writes nothing (no run directory, no ``job.sbatch``), like every esdash dry
    run: the script is shown rather than written, and the note on stderr says where the
    real submit would put it.
    """
    from esdash.cli._time_lines import time_line, wall_time_lines
    from esdash.run import start

    preview = start.preview_submit(session, bench=args.bench, fresh=args.fresh)
    print(preview.script, end="")
    held = "the job holds the cluster; the estimate is for one `esdash run --cluster` on it"
    job = "the job runs the benchmark" if args.bench else held
    print(f"esdash submit: {job}", file=sys.stderr)
    for line in wall_time_lines(preview.wall_time):
        print(line, file=sys.stderr)
    print(f"  {time_line(preview.job_time)}", file=sys.stderr)
    print(
        f"esdash submit: dry run: the checks pass; not written, not submitted (a submit "
        f"writes this to {preview.run.job_script} in a new run directory)",
        file=sys.stderr,
    )
    return 0
