"""``esdash session check FILE...``: validate session files before anything is launched."""

from __future__ import annotations

import argparse
import sys

from esdash.errors import EXIT_BAD_INPUT
from esdash.session import SessionError, load_session


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("session", help="work with session files")
    actions = parser.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate session files; errors name file and key")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    failed = 0
    for file in args.files:
        try:
            session = load_session(file)
        except SessionError as exc:
            failed += 1
            print(f"esdash: error: {exc}", file=sys.stderr)
            continue
        c = session.cluster
        print(
            f"ok  {file}: {session.name}: {c.nodes} {c.backend.name} node(s) over "
            f"{c.interconnect}, encryption {session.encryption.name}, "
            f"track {session.track.name}, {session.benchmark.workers_per_node} worker(s)/node"
        )
    return EXIT_BAD_INPUT if failed else 0
