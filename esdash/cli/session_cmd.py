"""``esdash session check FILE...``: validate session files before anything is launched."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from esdash.cli._command import Subcommands, add_command
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import code_line, trusted
from esdash.errors import EXIT_BAD_INPUT, BadInput

if TYPE_CHECKING:
    from esdash.session import Session

CHECK = """
Reads every file as a run would (a campaign file as a campaign, each point's session
included), reports every problem at once, one line each naming the file and the key, then
runs the checks of the session stage every run makes before it starts anything. Exit codes:
0 every file is valid, 2 a problem was found.
"""


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser("session", help="work with session files")
    actions = parser.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    check = add_command(
        actions, "check", run_check, "validate session files; errors name file and key", CHECK
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="session or campaign files")
    check.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help='check a threshold `esdash run --threshold` would use, e.g. "age:p99<500ms"',
    )
    add_trust_flag(check)


def track_label(session: Session) -> str:
    """The track's name, with the directory it is read from when the session names one
    (every Rally track is track ``rally``: its path tells them apart)."""
    path = session.track.options.get("path")
    return f"{session.track.name} {path}" if path else session.track.name


def run_check(args: argparse.Namespace) -> int:
    """Keys and values of every file, then the pre-flight checks of the session stage.

    They are the checks every run makes before it launches anything
    (:mod:`esdash.prepare.checks`), so a session that passes here is not refused later for
    its keys, keys files or passwords on this machine.
    """
    from esdash.cluster.ports import describe
    from esdash.prepare import checks
    from esdash.prepare.checks.security import secret_warnings
    from esdash.progress import CHECKS_GRACE, for_stderr
    from esdash.session import load_session

    lines = for_stderr()
    failed = 0
    for file in args.files:
        if _is_campaign(file):
            failed += not _check_campaign(file, trusted(args))
            continue
        try:
            with lines.phase(f"reading {file}", announce_after=CHECKS_GRACE):
                session = load_session(file, trust_track_code=trusted(args))
        except BadInput as exc:  # SessionError included
            failed += 1
            print(f"esdash: error: {exc}", file=sys.stderr)
            continue
        what = f"checking {file} (loading track {track_label(session)})"
        with lines.phase(what, announce_after=CHECKS_GRACE):
            problems = checks.findings(session, "session", thresholds=tuple(args.threshold))
        for problem in problems:
            print(f"esdash: error: {problem}", file=sys.stderr)
        for warning in secret_warnings(session):
            print(f"esdash: warning: {warning}", file=sys.stderr)
        code = code_line(session)  # the files that would run, trusted or not
        if problems:
            if code:
                print(f"    {code}")
            failed += 1
            continue
        c = session.cluster
        print(
            f"ok  {file}: {session.name}: {c.nodes} {c.backend.name} node(s) over "
            f"{c.interconnect} (ports http {describe(c.http_port)}, transport "
            f"{describe(c.transport_port)}), encryption {session.encryption.name}, "
            f"track {session.track.name}, {session.benchmark.workers_per_node} worker(s)/node"
        )
        if code:
            print(f"    {code}")
    return EXIT_BAD_INPUT if failed else 0


def _is_campaign(file: str) -> bool:
    from esdash.campaign.spec import is_campaign_file

    return is_campaign_file(file)


def _check_campaign(file: str, trust_track_code: bool = False) -> bool:
    """A campaign file is checked as a campaign: its keys, then every point's session."""
    from pathlib import Path

    from esdash.campaign.check import check_campaign_file

    result = check_campaign_file(Path(file), trust_track_code=trust_track_code)
    for line in result.errors:
        print(f"esdash: error: {line}", file=sys.stderr)
    if result.ok:
        print(result.ok)
    return not result.errors
