"""The command line loads only what the chosen command needs (issue 17).

``esdash --help``, ``doctor``, ``plugins`` or ``cluster down`` must show a sign of life
within a second on a loaded login node; importing the launcher, the plotting stack or a
search client to parse the arguments made them wait.  Each case runs a fresh interpreter
(a module imported by an earlier test would hide a regression), builds the parser, parses
one command line, and lists which of the heavy modules got imported: none may be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from esdash.cli import _defaults

#: Modules no argument parsing may import: the TUI, plotting, numerics, search clients,
#: templates, certificates, and esdash's own launcher and plugin machinery.
HEAVY = (
    "textual",
    "matplotlib",
    "numpy",
    "hdrh",
    "elasticsearch",
    "opensearchpy",
    "jinja2",
    "cryptography",
    "rich.progress",
    "pluggy",
    "esdash.plugin.manager",
    "esdash.session",
    "esdash.run.start",
    "esdash.run.stop",
    "esdash.launch.slurm",
)

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, json, sys

    import esdash.cli

    argv = json.loads(sys.argv[1])
    parser = esdash.cli.build_parser()
    if argv == ["--help"]:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            try:
                esdash.cli.main(argv)
            except SystemExit as exc:
                assert exc.code == 0, exc.code
        assert "COMMAND" in out.getvalue(), out.getvalue()
    else:
        args = parser.parse_args(argv)
        assert callable(args.func), args
    heavy = json.loads(sys.argv[2])
    print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
    """
)

COMMAND_LINES = [
    ["--help"],
    ["doctor"],
    ["plugins"],
    ["cluster", "down", "runs/x"],
    ["cluster", "status", "runs/x"],
    ["cluster", "up", "s.toml"],
    ["run", "s.toml"],
    ["submit", "s.toml"],
    ["session", "check", "s.toml"],
    ["sweep", "c.toml"],
    ["report", "runs/x"],
    ["compare", "runs/x", "runs/y"],
    ["watch", "runs/x"],
    ["tui"],
]


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_parsing_a_command_line_imports_no_heavy_module(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [], done.stdout


def test_the_help_defaults_are_the_launchers() -> None:
    """The copies in :mod:`esdash.cli._defaults` are what the launcher really uses."""
    from esdash.run import start, stop

    assert _defaults.DEFAULT_TIMEOUT == start.DEFAULT_TIMEOUT
    assert _defaults.STOP_GRACE == stop.STOP_GRACE


def test_cluster_down_says_what_it_does_before_anything_else(tmp_path: Path) -> None:
    """Its first line comes before the run directory is read (here: refused, not a run)."""
    missing = tmp_path / "no-such-run"
    done = subprocess.run(
        [sys.executable, "-m", "esdash", "cluster", "down", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[0] == f"esdash: stopping the cluster of {missing} ...", lines
    assert any(line.startswith("esdash: error:") for line in lines[1:]), lines
    assert "Traceback" not in done.stderr
