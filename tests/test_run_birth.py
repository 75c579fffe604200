"""A new run's ``run.json`` records its session and its birth alike, whichever way it starts."""

from __future__ import annotations

import time
from pathlib import Path

from support.cli import write_session

from esdash.run.start import new_run_info
from esdash.rundir.layout import RunDir
from esdash.session import load_session


def test_the_session_state_and_creation_time_are_recorded_with_the_callers_fields(
    tmp_path: Path,
) -> None:
    session = load_session(write_session(tmp_path, "born", 1))
    run = RunDir.create(tmp_path / "runs", session.name)
    before = time.time()
    with new_run_info(run, session, "running") as info:
        info.engine = "elasticsearch"
    info = run.read_info()
    assert (info.session_name, info.session_path) == ("born", str(session.path.resolve()))
    assert (info.state, info.engine) == ("running", "elasticsearch")
    assert info.created is not None and before <= info.created <= time.time()
