"""``esdash doctor``: a pass/warn/fail table of what this machine needs, with a fix for each.

The checks live in :mod:`esdash.host.doctor` and the plugins; this module only picks the
backend, the distribution and the user (:func:`resolve_target`: options, then ``--session``)
and prints.
Exit code 0 when nothing failed, 1 otherwise, so batch scripts and CI can gate on it;
warnings (e.g. production-mode limits on a laptop) do not fail.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

from esdash.errors import EXIT_FAILURE, EXIT_OK

_COLOURS = {"pass": "32", "warn": "33", "fail": "31"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check Java, the distribution, MPI, Slurm, FUSE, limits and the node user",
        description="Check whether this machine can spawn search clusters: what the backend "
        "needs (distribution, its modules, Java, the node user's access), MPI, Slurm, what "
        "the encryption modes need (FUSE, gocryptfs), vm.max_map_count and the open-files "
        "limit. Exits 1 if any check fails.",
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        metavar="PATH",
        help="distribution to check (default: the backend's newest one in the esdash cache)",
    )
    parser.add_argument(
        "--user",
        default=None,
        metavar="NAME",
        help="user the nodes run as (default: $ESDASH_USER, else 'esdash' when running "
        "as root, else you)",
    )
    parser.add_argument(
        "--session",
        type=Path,
        help="take the distribution (cluster.home) and user (cluster.run_as) from a session",
    )
    parser.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help="the search engine to check for (default: the session's, else elasticsearch)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of checks")
    parser.set_defaults(func=run)


def resolve_target(args: argparse.Namespace) -> tuple[Path | None, str, str]:
    """Distribution, node user and backend to check: options, then the session, then defaults."""
    from esdash import paths
    from esdash.host import doctor
    from esdash.session import DEFAULT_BACKEND

    session_home = session_user = session_backend = None
    if args.session is not None:
        from esdash.session import load_session

        session = load_session(args.session)
        session_home, session_user = session.cluster.home, session.cluster.run_as
        session_backend = session.cluster.backend.name
    backend = args.backend or session_backend or DEFAULT_BACKEND
    home = args.home or session_home or paths.default_distribution(backend)
    user = args.user or session_user or doctor.default_user()
    return home, user, backend


def _use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def format_table(checks: list, width: int | None = None, colour: bool = False) -> str:
    """``STATUS  CHECK  DETAIL`` rows, each warn/fail followed by its fix, then a summary.

    ``width`` wraps details and fixes under the DETAIL column (for terminals); ``None``
    keeps one line each, which suits logs and grep.
    """
    name_width = max([len("CHECK")] + [len(check.name) for check in checks])
    indent = " " * (len("STATUS") + 2 + name_width + 2)

    def wrap(text: str, first: str) -> list[str]:
        if width is None:
            return [first + text]
        return textwrap.wrap(
            text,
            width=max(width, len(indent) + 30),
            initial_indent=first,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )

    lines = [f"{'STATUS':<6}  {'CHECK':<{name_width}}  DETAIL"]
    for check in checks:
        label = f"{check.status.upper():<6}"
        rows = wrap(check.detail, f"{label}  {check.name:<{name_width}}  ")
        if colour:  # after wrapping, so escape codes do not count towards the width
            rows[0] = f"\033[{_COLOURS[check.status]}m{label}\033[0m" + rows[0][len(label) :]
        lines += rows
        if check.status != "pass" and check.fix:
            lines += wrap(check.fix, f"{indent}fix: ")
    counts = {status: sum(c.status == status for c in checks) for status in _COLOURS}
    verdict = (
        "not ready: fix the failures above"
        if counts["fail"]
        else "ready" + (" (warnings only)" if counts["warn"] else "")
    )
    lines.append("")
    lines.append(
        f"{len(checks)} checks: {counts['pass']} pass, {counts['warn']} warn, "
        f"{counts['fail']} fail; {verdict}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from esdash.host import doctor

    home, user, backend = resolve_target(args)
    checks = doctor.run_checks(home, user, backend)
    if args.json:
        print(json.dumps([check.as_dict() for check in checks], indent=2))
    else:
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        print(format_table(checks, width=width, colour=_use_colour()))
    return EXIT_FAILURE if doctor.any_failed(checks) else EXIT_OK
