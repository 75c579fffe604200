"""``esdash tui`` and ``esdash watch`` from the command line, in and out of a terminal."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from support.campaign import write_campaign
from tuihelp import RUN_A

ESDASH = [sys.executable, "-m", "esdash"]


def run_cli(*args: str, runs: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if runs is not None:
        env["ESDASH_RUNS"] = str(runs)
    return subprocess.run(
        [*ESDASH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_help_lists_the_dashboard_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "tui" in result.stdout and "watch" in result.stdout
    watch = run_cli("watch", "--help")
    assert "--compare" in watch.stdout and "RUN" in watch.stdout


def test_watch_refuses_a_missing_run_and_a_batch_job(runs_root: Path):
    missing = run_cli("watch", "no-such-run", runs=runs_root)
    assert missing.returncode == 2
    assert "no such run directory" in missing.stderr
    # found by its name under ESDASH_RUNS, but there is no terminal
    batch = run_cli("watch", RUN_A, runs=runs_root)
    assert batch.returncode == 2 and "needs a terminal" in batch.stderr
    tui = run_cli("tui", runs=runs_root)
    assert tui.returncode == 2 and "needs a terminal" in tui.stderr
    fps = run_cli("watch", RUN_A, "--fps", "100", runs=runs_root)
    assert fps.returncode == 2


def test_watch_and_tui_take_a_campaign_as_its_directory_file_or_name(
    tmp_path: Path, runs_root: Path
):
    written = write_campaign(tmp_path, runs_root)
    # resolved (then refused only for want of a terminal): directory, campaign file, name
    for value in (str(written.directory.path), str(tmp_path / "study.toml"), "study"):
        result = run_cli("watch", value, runs=runs_root)
        assert result.returncode == 2 and "needs a terminal" in result.stderr, result.stderr
    compare = run_cli("watch", "study", "--compare", RUN_A, runs=runs_root)
    assert compare.returncode == 2 and "--compare compares runs" in compare.stderr
    (tmp_path / "later.toml").write_text(
        (tmp_path / "study.toml").read_text().replace('name = "study"', 'name = "later"')
    )
    later = run_cli("watch", str(tmp_path / "later.toml"), runs=runs_root)
    assert later.returncode == 2 and "the campaign has not run yet" in later.stderr
    tui = run_cli("tui", "--campaign", str(tmp_path / "base.toml"), runs=runs_root)
    assert tui.returncode == 2 and "not a campaign directory" in tui.stderr
    tui = run_cli("tui", "--campaign", str(written.summary_file), runs=runs_root)
    assert tui.returncode == 2 and "needs a terminal" in tui.stderr


def test_watch_runs_in_a_terminal_and_quits_on_q(runs_root: Path):
    """A pseudo-terminal of 100x30: the dashboard draws the run, `q` ends it with 0."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "ESDASH_RUNS": str(runs_root), "TERM": "xterm-256color"}
    process = subprocess.Popen(
        [*ESDASH, "watch", RUN_A],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    output = b""
    try:
        deadline = time.monotonic() + 60
        # until the run's name and its query table are drawn (not only "age": the panel
        # titles contain it too, "Leakage", and may come first on a loaded machine)
        while not (RUN_A.encode() in output and b"age" in output) and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    output += os.read(leader, 65536)
                except OSError:
                    break
        assert RUN_A.encode() in output, output[-2000:]
        os.write(leader, b"q")
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    os.read(leader, 65536)
                except OSError:
                    break
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
