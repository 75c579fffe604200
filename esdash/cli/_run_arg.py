"""A run named on the command line: its directory, or its name under the runs directory.

``esdash run``, ``cluster up`` and ``submit`` print a run's directory, and its last part is
the name the dashboard lists (``quickstart-20261129-101500``); every command that takes a
run accepts either, so a user can copy whichever they see.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from esdash.errors import BadInput


def add_run(parser: argparse.ArgumentParser, what: str = "run") -> None:
    """The ``RUN`` argument: a run directory or its name."""
    parser.add_argument(
        "run",
        metavar="RUN",
        help=f"{what} directory, or its name under the runs directory ($ESDASH_RUNS, ./runs)",
    )


def resolve_run(value: str) -> Path:
    """A run directory given as a path or as a name under the runs directory."""
    from esdash.paths import runs_dir

    path = Path(value).expanduser()
    if path.is_dir():
        return path.resolve()
    named = runs_dir() / value
    if named.is_dir():
        return named
    raise BadInput(
        f"{value}: no such run directory (nor {named}); pass the directory `esdash run`, "
        f"`esdash submit` or `esdash cluster up` printed, or see `esdash tui` for the list"
    )
