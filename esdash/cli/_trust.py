"""``--trust-track-code``: let the session's track run its own code, for this command.

A Rally track's ``track.py`` (an OpenSearch Benchmark workload's ``workload.py``) and the
modules beside it are code the track's author wrote.  esdash runs them only when the session
trusts them: ``trust_code = true`` in its ``[track]`` table, or this flag on every command
that loads the track (``session check``, ``plan``, ``submit``, ``run``, ``cluster up``,
``sweep``, ``leakage``, ``export-rally``).  The code then runs in a child process, as
``nobody`` when esdash runs as root (``docs/rally.md``).  A command that starts another
esdash (a sweep's runs, a submitted job) passes the flag on.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from esdash.errors import BadInput

if TYPE_CHECKING:
    from esdash.session import Session

#: The flag, as a command line spells it.
FLAG = "--trust-track-code"


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FLAG,
        dest="trust_track_code",
        action="store_true",
        help="run the track's own code (a Rally track's track.py, an OpenSearch Benchmark "
        "workload's workload.py, and the modules beside them), as trust_code = true in "
        "[track] does: in a child process, as nobody when esdash runs as root; without "
        "it, the tasks that need the code are refused",
    )


def trusted(args: argparse.Namespace) -> bool:
    """Whether the command line trusts the track's code."""
    return bool(getattr(args, "trust_track_code", False))


def code_line(session: Session) -> str | None:
    """The track's own line on its code (the files that would run, and whether they run),
    or None when it runs none; a track that does not load says so in its own error."""
    from esdash.plugin.manager import get_plugins

    try:
        return get_plugins().track(session.track.name).own_code(session.track.options)
    except BadInput:
        return None
