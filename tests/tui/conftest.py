"""Fixtures for the dashboard tests: copies of the canned run directories.

Tests copy the fixtures into a temporary directory, because some append to or cut their
streams to play a live run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from tuihelp import FIXTURES, RUN_A, RUN_B, records, write_records


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    for name in (RUN_A, RUN_B):
        shutil.copytree(FIXTURES / name, root / name)
    return root


@pytest.fixture
def finished_run(runs_root: Path) -> Path:
    return runs_root / RUN_A


@pytest.fixture
def live_run(runs_root: Path) -> tuple[Path, list[dict[str, Any]]]:
    """An unfinished copy of run A: no results, the stream cut to its header.

    Returns the run directory and the records not written yet (intervals and events, the
    final record last), for the test to append as a writer would.
    """
    source = runs_root / RUN_A
    run = runs_root / "live-run"
    shutil.copytree(source, run)
    (run / "results.json").unlink()
    items = records(source)
    write_records(run / "stream.jsonl", items[:1], mode="w")
    return run, items[1:]
