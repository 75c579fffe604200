"""Sessions and runs for the home screen; launching, adopting and stopping runs.

``esdash run`` itself is replaced by a small script in ``launch_local`` tests (the real one
starts Elasticsearch): the script creates a run directory the way ``esdash run`` does and
waits, so the adoption of its output and the stop by SIGINT are real.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.records import as_json, final, header
from tuihelp import RUN_A, RUN_B, write_records

from esdash.errors import EsdashError
from esdash.launch import process
from esdash.prepare import sessions
from esdash.run import start
from esdash.run.stop import stop_run
from esdash.rundir.layout import RunDir
from esdash.rundir.stream import read_last
from esdash.view import runs

SESSION = textwrap.dedent(
    """\
    name = "tiny"
    description = "one node"

    [cluster]
    nodes = 2

    [track]
    name = "mri"
    documents = 100

    [benchmark]
    warmup = "1s"
    duration = "3s"
    """
)


def test_sessions_are_listed_with_their_settings_and_errors(tmp_path: Path):
    (tmp_path / "tiny.toml").write_text(SESSION)
    (tmp_path / "broken.toml").write_text('name = "broken"\n[cluster]\nnodez = 2\n')
    (tmp_path / "sweep.toml").write_text('name = "c"\nsession = "tiny.toml"\n[axes]\n')
    entries = {e.name: e for e in sessions.list_sessions([tmp_path])}
    assert sorted(entries) == ["broken", "tiny"]  # the campaign file is not a session
    tiny = entries["tiny"]
    assert tiny.valid and tiny.nodes == 2 and tiny.track == "mri"
    assert tiny.encryption == "none" and tiny.interconnect == "loopback"
    assert tiny.duration == 3.0
    broken = entries["broken"]
    assert not broken.valid and "nodez" in broken.error


def test_session_dirs_come_from_the_default_the_options_and_the_environment(
    tmp_path: Path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ESDASH_SESSIONS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    dirs = sessions.session_dirs([tmp_path / "x", "sessions"])
    assert dirs == [tmp_path / "sessions", tmp_path / "x", tmp_path / "a", tmp_path / "b"]


def test_run_states(runs_root: Path, live_run):
    run, pending = live_run
    now = json.loads((runs_root / RUN_A / "run.json").read_text())["created"] + 100
    entries = {e.run_id: e for e in runs.list_runs(runs_root, now=now)}
    assert entries[RUN_A].state == "finished" and entries[RUN_B].state == "finished"
    assert entries[RUN_A].benchmark and entries[RUN_A].session == "dev"
    # a stream still being written (fresh record) is running, with its phase
    write_records(run / "stream.jsonl", pending[:3])
    wall = pending[2]["wall"]
    entry = runs.run_entry(run, now=wall + 1)
    assert entry.state == "running" and entry.detail.startswith("ingest")
    assert entry.active
    # no record for a while, no final record: stalled
    assert runs.run_entry(run, now=wall + 600).state == "stalled"
    # the final record without results.json
    write_records(run / "stream.jsonl", pending[3:])
    assert runs.run_entry(run, now=wall + 600).state == "finished"


def test_a_submitted_job_waiting_in_the_queue_is_pending(tmp_path: Path):
    run = tmp_path / "sub"
    run.mkdir()
    (run / "run.json").write_text(
        json.dumps({"session_name": "s", "state": "queued", "submitted": True, "slurm_job": "9"})
    )
    entry = runs.run_entry(run, job_state=lambda job: "PENDING")
    assert entry.state == "pending" and entry.slurm_job == "9" and entry.active
    entry = runs.run_entry(run, job_state=lambda job: "FINISHED")
    assert entry.state == "ended" and not entry.active
    assert runs.run_entry(tmp_path / "nothing") is None


FAKE_RUN = textwrap.dedent(
    """\
    # Stands in for `python -m esdash run SESSION --run-dir RUN`: say so in run.json, wait.
    import json, os, signal, sys, time
    run = sys.argv[sys.argv.index("--run-dir") + 1]
    path = os.path.join(run, "run.json")
    info = json.load(open(path))
    info.update(state="running", launcher={"pid": os.getpid(), "host": os.uname().nodename})
    json.dump(info, open(path, "w"))
    print("cluster up:", run, flush=True)
    signal.signal(signal.SIGINT, lambda *a: sys.exit(130))
    time.sleep(60)
    """
)


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An interpreter stand-in: ``fake -m esdash run S`` runs FAKE_RUN (named like esdash)."""
    script = tmp_path / "python-esdash"
    script.write_text(f"#!{sys.executable}\n{FAKE_RUN}")
    script.chmod(0o755)
    return str(script)


def light_prepare(session, root: Path) -> RunDir:
    """A prepared run directory without the distribution checks (no Elasticsearch here)."""
    run = root / f"{session.name}-prepared"
    run.mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps({"session_name": session.name, "state": "prepared", "created": time.time()})
    )
    return RunDir(run)


def test_launch_runs_detached_in_its_run_directory_and_stop_interrupts_it(
    tmp_path: Path, fake_python: str
):
    root = tmp_path / "runs"
    session = tmp_path / "tiny.toml"
    session.write_text(SESSION)
    launch = start.detach(session, root, python=fake_python, prepare=light_prepare)
    try:
        run = launch.run
        assert run == root / "tiny-prepared"
        record = json.loads(RunDir(run).launch_record_file.read_text())
        assert record["pid"] == launch.pid
        assert record["command"][-2:] == ["--run-dir", str(run)]
        deadline = time.monotonic() + 20
        while "cluster up:" not in launch.output.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "cluster up:" in RunDir(run).run_log.read_text()
        # its own session: a signal to the dashboard's process group does not reach it
        assert os.getpgid(launch.pid) != os.getpgid(0)
        found = process.find(RunDir(run).read_launch_record())
        assert found is not None and found.pid == launch.pid  # identity confirmed by psutil
        assert runs.run_entry(run).state == "running"
        outcome = stop_run(run, grace=10)
        assert f"pid {launch.pid}" in outcome
        assert launch.process.wait(timeout=10) == 130
    finally:
        if launch.process.poll() is None:
            launch.process.send_signal(signal.SIGKILL)
            launch.process.wait()


def test_a_launch_that_cannot_be_prepared_starts_nothing(tmp_path: Path):
    root = tmp_path / "runs"
    session = tmp_path / "bad.toml"
    session.write_text('name = "bad"\n[cluster]\nhome = "/nonexistent"\n[track]\nname = "mri"\n')
    with pytest.raises(EsdashError, match="run_as|home"):  # whichever check comes first
        start.detach(session, root)
    assert not any(root.glob("bad-*"))


def test_the_last_record_is_read_from_complete_lines_only(tmp_path: Path):
    path = tmp_path / "stream.jsonl"
    first = as_json(final(t=1.0, wall=2.0, status="ok"))
    path.write_text(json.dumps(as_json(header())) + "\n" + json.dumps(first) + '\n{"type":')
    last = read_last(path)
    assert last is not None and as_json(last) == first
    assert read_last(tmp_path / "missing") is None
