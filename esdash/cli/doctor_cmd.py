"""``esdash doctor``: a pass/warn/fail table of what this machine needs, with a fix for each.

The checks live in :mod:`esdash.host.doctor` and the plugins; this module only picks the
backend, the distribution and the user (:func:`resolve_target`: options, then ``--session``)
and prints; with ``--session`` it adds the checks every run of that session makes before
it starts anything (:func:`session_check`).
Exit code 0 when nothing failed, 1 otherwise, so batch scripts and CI can gate on it;
warnings (e.g. production-mode limits on a laptop) do not fail.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.cli._command import Subcommands, add_command
from esdash.errors import EXIT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from esdash.plugin.host import HostCheck
    from esdash.session import Session

#: How a status looks on a colour terminal.
_STYLES = {"pass": "green", "warn": "yellow", "fail": "red"}


DESCRIPTION = """
Check whether this machine can spawn search clusters: what the backend needs (distribution,
its modules, Java, the node user's access), MPI, Slurm, what the encryption modes need
(FUSE, gocryptfs), vm.max_map_count and the open-files limit. Exits 1 if any check fails.
"""


def register(subparsers: Subcommands) -> None:
    summary = "check Java, the distribution, MPI, Slurm, FUSE, limits and the node user"
    parser = add_command(subparsers, "doctor", run, summary, DESCRIPTION)
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


def resolve_target(args: argparse.Namespace) -> tuple[Path | None, str, str, Session | None]:
    """Distribution, node user and backend to check: options, then the session, then
    defaults; and the session itself (``--session``)."""
    from esdash import paths
    from esdash.host import doctor
    from esdash.session import DEFAULT_BACKEND

    session = None
    session_home = session_user = session_backend = None
    if args.session is not None:
        from esdash.session import load_session

        session = load_session(args.session)
        session_home, session_user = session.cluster.home, session.cluster.run_as
        session_backend = session.cluster.backend.name
    backend = args.backend or session_backend or DEFAULT_BACKEND
    home = args.home or session_home or paths.default_distribution(backend)
    user = args.user or session_user or doctor.default_user()
    return home, user, backend, session


def session_check(session: Session) -> HostCheck:
    """The checks every run of ``session`` makes before it starts anything (its key or
    password files, its track, its ports...), as one doctor row: a machine is not ready
    for a session that ``esdash run`` would refuse."""
    from esdash.plugin.host import HostCheck
    from esdash.prepare import checks

    found = checks.findings(session, "session")
    if not found:
        return HostCheck("session", "pass", f"{session.path}: the checks before a run pass")
    return HostCheck(
        "session",
        "fail",
        "; ".join(found),
        fix=f"as each problem says (one per line: esdash session check {session.path})",
        data={"problems": list(found)},
    )


def _use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def format_table(checks: list[HostCheck], width: int | None = None, colour: bool = False) -> str:
    """``STATUS  CHECK  DETAIL`` rows, each warn/fail's fix under its detail, then a summary.

    ``width`` wraps details and fixes in the DETAIL column (for terminals); ``None`` keeps
    one line each, which suits logs and grep.  ``colour`` marks the statuses (rich styles).
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="")
    grid.add_column("STATUS", no_wrap=True)
    grid.add_column("CHECK", no_wrap=True)
    grid.add_column("DETAIL", overflow="fold" if width else "ignore", no_wrap=width is None)
    for check in checks:
        detail = Text(check.detail)
        if check.status != "pass" and check.fix:
            detail.append(f"\nfix: {check.fix}")
        style = _STYLES[check.status] if colour else ""
        grid.add_row(Text(check.status.upper(), style=style), Text(check.name), detail)
    counts = {status: sum(c.status == status for c in checks) for status in _STYLES}
    verdict = (
        "not ready: fix the failures above"
        if counts["fail"]
        else "ready" + (" (warnings only)" if counts["warn"] else "")
    )
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 10_000,
        color_system="standard" if colour else None,
        force_terminal=colour,
        highlight=False,
    )
    console.print(grid)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    lines.append("")
    lines.append(
        f"{len(checks)} checks: {counts['pass']} pass, {counts['warn']} warn, "
        f"{counts['fail']} fail; {verdict}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from esdash.host import doctor

    home, user, backend, session = resolve_target(args)
    checks = doctor.run_checks(home, user, backend)
    if session is not None:
        checks.append(session_check(session))
    if args.json:
        print(json.dumps([check.as_dict() for check in checks], indent=2))
    else:
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        print(format_table(checks, width=width, colour=_use_colour()))
    return EXIT_FAILURE if doctor.any_failed(checks) else EXIT_OK
