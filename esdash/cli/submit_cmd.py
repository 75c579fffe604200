"""``esdash submit SESSION``: from a login node, run a session's cluster as a Slurm job."""

from __future__ import annotations

import argparse

from esdash.cluster import lifecycle
from esdash.launch import slurm
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
    session = load_session(args.session)
    run_dir = lifecycle.prepare_run(session)
    fresh = ["--fresh"] if args.fresh else []
    session_path = str(session.path.resolve())
    if args.bench:
        command = slurm.python_command("run", session_path, "--run-dir", str(run_dir.path), *fresh)
    else:
        command = slurm.python_command(
            "cluster", "up", session_path, "--run-dir", str(run_dir.path), "--foreground", *fresh
        )
    script = run_dir.job_script
    script.write_text(slurm.batch_script(session, run_dir, command))
    if args.dry_run:
        with run_dir.edit_info() as info:
            info.state, info.script = "prepared", str(script)
        print(f"wrote {script} (not submitted)")
        return 0
    job = slurm.submit(script)
    with run_dir.edit_info() as info:
        info.state, info.submitted, info.slurm_job, info.script = "queued", True, job, str(script)
    print(f"submitted job {job}; run directory: {run_dir.path}")
    print(f"follow it with: esdash cluster status {run_dir.path}")
    return 0
