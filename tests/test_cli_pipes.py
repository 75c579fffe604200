"""Output to a reader that went away ends quietly (issue 17, item 1).

``esdash doctor --json | head -1`` printed a BrokenPipeError traceback: ``head`` exits after
its line, and esdash's next write to the pipe fails.  Each command here runs as a real
process whose standard output is a pipe with no reader left -- its read end is closed before
esdash starts, so every write fails, as the write after ``head`` exits does, without
depending on when ``head`` would have exited.  The rule: nothing on standard error (no
traceback, no "Exception ignored"), exit code 1; and the same commands into a pipe that is
read still succeed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CAMPAIGN = """\
name = "pipes"
session = "base.toml"

[axes]
benchmark.workers_per_node = [1, 2, 3]
"""
BASE = """\
name = "base"
[cluster]
run_as = "esdash"
[track]
name = "mri"
documents = 500
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A campaign file (for ``sweep --dry-run``) and runs/cache directories of the test."""
    (tmp_path / "base.toml").write_text(BASE)
    (tmp_path / "pipes.toml").write_text(CAMPAIGN)
    return tmp_path


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ESDASH_RUNS": str(workdir / "runs"),
        "ESDASH_CACHE": str(workdir / "cache"),
        "ESDASH_PROGRESS": "plain",
    }


def _into_closed_pipe(args: list[str], workdir: Path) -> subprocess.CompletedProcess[bytes]:
    """``esdash ARGS`` writing into a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "esdash", *args],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=_env(workdir),
            timeout=120,
        )
    finally:
        os.close(write_end)


COMMANDS = [
    ["--help"],
    ["plugins", "--json"],
    ["plugins"],
    ["doctor", "--json"],
    ["sweep", "pipes.toml", "--dry-run"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_output_to_a_closed_pipe_ends_quietly(args: list[str], workdir: Path):
    done = _into_closed_pipe(args, workdir)
    assert done.stderr.decode() == ""
    assert done.returncode == 1


@pytest.mark.parametrize("args", [["plugins", "--json"], ["sweep", "pipes.toml", "--dry-run"]])
def test_the_same_commands_into_a_pipe_that_is_read_still_succeed(args: list[str], workdir: Path):
    done = subprocess.run(
        [sys.executable, "-m", "esdash", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=workdir,
        env=_env(workdir),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout and "Traceback" not in done.stderr.decode()
