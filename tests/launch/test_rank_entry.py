"""Both rank modules read their command line alike and write their files privately."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from esdash.launch.rank_entry import rank_main


def test_the_run_directory_and_the_flags_reach_the_rank_under_umask_077(tmp_path: Path) -> None:
    seen: list[tuple[Path, list[str], int]] = []

    def run(run_dir: Path, flags: list[str]) -> int:
        mask = os.umask(0)
        os.umask(mask)
        seen.append((run_dir, flags, mask))
        return 7

    before = os.umask(0o022)
    try:
        assert rank_main("m RUN_DIR", [str(tmp_path), "--fresh"], run) == 7
        assert os.umask(0o022) == 0o022  # restored once the rank returns
    finally:
        os.umask(before)
    assert seen == [(tmp_path, ["--fresh"], 0o077)]


def test_no_run_directory_is_a_usage_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    def never(run_dir: Path, flags: list[str]) -> int:
        raise AssertionError("the rank must not start without a run directory")

    assert rank_main("python -m esdash.x.rank RUN_DIR", [], never) == 2
    assert capsys.readouterr().err == "usage: python -m esdash.x.rank RUN_DIR\n"


@pytest.mark.parametrize(
    ("module", "usage"),
    [
        ("esdash.bench.rank", "RUN_DIR"),
        ("esdash.cluster.rank", "RUN_DIR [--fresh]"),
    ],
)
def test_each_rank_module_says_its_usage(module: str, usage: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr == f"usage: python -m {module} {usage}\n"
