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
    """Keys and values of every file, then what its encryption mode refuses.

    The mode's check is the one every run makes before it launches anything
    (:func:`esdash.cluster.lifecycle.check_encryption`), so a session that passes here is not
    refused later for its ``[encryption]`` table on this machine.
    """
    from esdash.cluster.lifecycle import check_encryption

    failed = 0
    for file in args.files:
        try:
            session = load_session(file)
            check_encryption(session)
        except BadInput as exc:  # SessionError included
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
