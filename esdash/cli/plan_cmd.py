"""``esdash plan SESSION [--json]``: every task of the session's track, before a cluster starts.

For each task in order (inside ``parallel`` blocks too): its operation, clients and schedule
as the track gives them, and what esdash does with it, or why it cannot (``refused`` with a
reason kind: ``module``, ``mapper``, ``field_type``, ``track_py``, ``unsupported_operation``,
``encryption``), checked against the distribution and the encryption mode the session would
run.  Then how long a run takes: every
phase with its time, whether that is fixed by the session, an estimate (and from what) or a
bound, each query step, the total, and the ``--time`` ``esdash submit`` would ask Slurm for.
``--json`` prints one JSON object: ``tasks`` (one object per task), ``wall_time`` (``total``,
``phases``, ``steps``) and ``slurm_time``; the distribution line then goes to stderr.  Exit
code 2 when the track does not load (the message names the file or the session key).
"""

from __future__ import annotations

import argparse
import json
import sys

from esdash.cli._command import Subcommands, add_command, add_session, doc_body
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import code_line, trusted
from esdash.errors import BadInput


def register(subparsers: Subcommands) -> None:
    summary = "show what each task of a session's track will run, or why not (no cluster)"
    parser = add_command(subparsers, "plan", run, summary, doc_body(__doc__))
    add_session(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: the tasks, the wall-time estimate and the Slurm time limit",
    )
    add_trust_flag(parser)


def run(args: argparse.Namespace) -> int:
    from esdash.cli._time_lines import time_line, wall_time_lines
    from esdash.prepare.checks.track import track_finding
    from esdash.prepare.preview import schedule_text, session_plan
    from esdash.progress import CHECKS_GRACE, for_stderr
    from esdash.session import load_session

    lines = for_stderr()
    with lines.phase(f"reading {args.session}", announce_after=CHECKS_GRACE):
        session = load_session(args.session, trust_track_code=trusted(args))
    try:
        what = f"loading track {session.track.name} and planning its tasks"
        with lines.phase(what, announce_after=CHECKS_GRACE):
            plan = session_plan(session)
    except BadInput as exc:
        raise BadInput(str(track_finding(session, exc))) from None
    code = code_line(session)  # the files that would run, trusted or not
    if args.json:
        print(plan.distribution_line, file=sys.stderr)
        for line in (*plan.corpus_lines, *([code] if code else [])):
            print(line, file=sys.stderr)
        document = {
            "tasks": [task.to_json() for task in plan.tasks],
            "wall_time": plan.wall_time.to_json() if plan.wall_time else None,
            "slurm_time": plan.job_time.to_json() if plan.job_time else None,
        }
        print(json.dumps(document, indent=2))
        return 0
    refused = sum(1 for task in plan.tasks if task.status == "refused")
    print(
        f"plan of {session.path}: track {session.track.name}, {len(plan.tasks)} task(s), "
        f"{len(plan.tasks) - refused} run, {refused} refused"
    )
    print(f"  {plan.distribution_line}")
    print(f"  {plan.esdash_line}")
    if code:
        print(f"  {code}")
    for line in plan.corpus_lines:
        print(f"  {line}")
    for number, task in enumerate(plan.tasks, 1):
        block = f"[parallel block {task.parallel}] " if task.parallel else ""
        clients = f"{task.clients} client{'s' if task.clients != 1 else ''}"
        schedule = schedule_text(task.schedule)
        print(
            f"{number:3d}. {block}{task.name} ({task.operation}, {clients}"
            f"{'; ' + schedule if schedule else ''})"
        )
        if task.status == "run":
            print(f"     run: {task.esdash}")
        else:
            print(f"     REFUSED [{task.reason_kind}]: {task.reason}")
    if plan.wall_time is not None:
        for line in wall_time_lines(plan.wall_time):
            print(line)
    if plan.job_time is not None:
        print(f"  {time_line(plan.job_time)}")
    return 0
