"""Root never acts on a run directory another user controls (finding M1, issue 28 item 4).

A run directory's ``run.json`` names the processes ``cluster down`` signals and the job it
cancels.  Any user can read the pid, create time and command line of root's processes, so
a directory ``nobody`` writes can name one of them exactly: root's ``cluster down`` killed
it.  As root, ``cluster status``, ``cluster down``, ``report``, ``watch`` and
``run --cluster`` now refuse a run directory that another user owns or can rewrite (or that
lies below such a directory), in one line, unless ``--allow-foreign`` is given.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.cli import esdash

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the rule is root's")


@pytest.fixture
def root_process() -> Iterator[psutil.Process]:
    """A root-owned process of its own session: what a foreign run.json names."""
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield psutil.Process(child.pid)
    finally:
        child.kill()
        child.wait()


def foreign_run(where: Path, target: psutil.Process, owner: str = "nobody") -> Path:
    """A run directory ``owner`` made, naming ``target`` as its launcher, exactly."""
    entry = pwd.getpwnam(owner)
    where.mkdir(mode=0o755, parents=True)
    run = where / "r"
    (run / "nodes").mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps(
            {
                "schema": "esdash.run/1",
                "state": "running",
                "launcher": {
                    "pid": target.pid,
                    "host": socket.gethostname(),
                    "command": target.cmdline(),
                    "create_time": target.create_time(),
                },
            }
        )
    )
    for path in (run, run / "nodes", run / "run.json"):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return run


def refused(result: subprocess.CompletedProcess, run: Path) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("esdash: error: ") and f"{run}" in line and "nobody" in line
    assert "--allow-foreign" in line and "Traceback" not in result.stderr
    return line


def test_cluster_down_refuses_a_run_directory_owned_by_nobody(
    tmp_path: Path, root_process: psutil.Process
) -> None:
    run = foreign_run(tmp_path / "shared", root_process)
    result = esdash("cluster", "down", str(run), env_runs=tmp_path / "runs", check=False)
    refused(result, run)
    assert root_process.is_running() and root_process.status() != psutil.STATUS_ZOMBIE


def test_status_report_watch_and_run_refuse_it_too(
    tmp_path: Path, root_process: psutil.Process
) -> None:
    run = foreign_run(tmp_path / "shared", root_process)
    runs = tmp_path / "runs"
    for args in (
        ("cluster", "status", str(run)),
        ("report", str(run)),
        ("watch", str(run)),
    ):
        refused(esdash(*args, env_runs=runs, check=False), run)


def test_a_run_below_a_directory_others_can_rewrite_is_refused(
    tmp_path: Path, root_process: psutil.Process
) -> None:
    """Root's own run directory inside a world-writable (not sticky) directory: anybody
    could have swapped it, so it is refused as well, naming that directory."""
    shared = tmp_path / "open"
    run = foreign_run(shared, root_process, owner="root")
    shared.chmod(0o777)
    result = esdash("cluster", "status", str(run), env_runs=tmp_path / "runs", check=False)
    assert result.returncode == 2
    assert f"{shared} can be rewritten by its group and every user (mode 0777)" in result.stderr


def test_the_flag_lets_root_read_it_and_runs_root_owns_pass(
    tmp_path: Path, root_process: psutil.Process
) -> None:
    run = foreign_run(tmp_path / "shared", root_process)
    runs = tmp_path / "runs"
    allowed = esdash("cluster", "status", str(run), "--allow-foreign", env_runs=runs)
    assert "state running" in allowed.stdout
    for path in (run, run / "nodes", run / "run.json"):
        os.chown(path, 0, 0)
    assert "state running" in esdash("cluster", "status", str(run), env_runs=runs).stdout


def test_root_does_not_create_runs_in_a_runs_directory_nobody_owns(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    runs = tmp_path / "theirs" / "runs"
    runs.mkdir(parents=True)
    os.chown(runs, nobody.pw_uid, nobody.pw_gid)
    from esdash.errors import BadInput
    from esdash.rundir.layout import RunDir

    with pytest.raises(BadInput, match="runs directory .* belongs to nobody"):
        RunDir.create(runs, "s")
    assert list(runs.iterdir()) == []
