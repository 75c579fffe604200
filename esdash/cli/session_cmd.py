"""``esdash session check FILE...``: validate session files before anything is launched."""

from __future__ import annotations

import argparse
import sys

from esdash.errors import EXIT_BAD_INPUT, BadInput
from esdash.session import load_session


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("session", help="work with session files")
    actions = parser.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate session files; errors name file and key")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Keys and values of every file, then the pre-flight checks of the session stage.

    They are the checks every run makes before it launches anything
    (:mod:`esdash.cluster.preflight`), so a session that passes here is not refused later for
    its keys, keys files or passwords on this machine.
    """
    from esdash.cluster import preflight
    from esdash.cluster.ports import describe

    failed = 0
    for file in args.files:
        try:
            session = load_session(file)
        except BadInput as exc:  # SessionError included
            failed += 1
            print(f"esdash: error: {exc}", file=sys.stderr)
            continue
        problems = preflight.findings(session, "session")
        for problem in problems:
            print(f"esdash: error: {problem}", file=sys.stderr)
        if problems:
            failed += 1
            continue
        c = session.cluster
        print(
            f"ok  {file}: {session.name}: {c.nodes} {c.backend.name} node(s) over "
            f"{c.interconnect} (ports http {describe(c.http_port)}, transport "
            f"{describe(c.transport_port)}), encryption {session.encryption.name}, "
            f"track {session.track.name}, {session.benchmark.workers_per_node} worker(s)/node"
        )
    return EXIT_BAD_INPUT if failed else 0
