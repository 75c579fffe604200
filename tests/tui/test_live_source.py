"""Polling a run directory: missing files, half-written lines, garbage, replaced files."""

from __future__ import annotations

import json
from pathlib import Path

from support.records import as_json
from tuihelp import typed, write_records

from esdash.rundir.records import ClusterSample
from esdash.rundir.stream import JsonlFollower
from esdash.view.model import RunModel, ViewParams
from esdash.view.source import RunSource, node_log_file


def test_a_run_that_has_not_started_yet(tmp_path: Path):
    run = tmp_path / "not-yet"
    run.mkdir()
    source = RunSource(run)
    update = source.poll(log_rank=0)
    assert update.records == [] and update.stream_exists is False
    assert update.log == ("node 0", "")
    model = RunModel("not-yet")
    model.apply(update)
    assert model.snapshot(ViewParams(), 0.0).phase == "waiting for the run to start"
    (run / "run.json").write_text(json.dumps({"state": "starting", "session_name": "s"}))
    source._next_files = 0.0
    model.apply(source.poll())
    snap = model.snapshot(ViewParams(), 0.0)
    assert snap.phase == "starting cluster" and snap.session == "s"


def test_only_complete_records_and_garbage_is_reported(live_run):
    run, pending = live_run
    source = RunSource(run)
    assert [type(r).__name__ for r in source.poll().records] == ["Header"]
    stream = run / "stream.jsonl"
    line = json.dumps(pending[0])
    with stream.open("a") as handle:
        handle.write(line[:40])  # the writer is mid-write
    assert source.poll().records == []
    with stream.open("a") as handle:
        handle.write(line[40:] + "\n")
        handle.write("{not json\n")
    update = source.poll()
    assert [as_json(r) for r in update.records] == [as_json(r) for r in typed([pending[0]])]
    assert len(update.problems) == 1 and "not JSON" in update.problems[0]
    assert source.poll().problems == []  # reported once


def test_cluster_samples_survive_truncation_and_bad_lines(tmp_path: Path):
    path = tmp_path / "cluster.jsonl"
    tail = JsonlFollower(path, ClusterSample)
    assert tail.poll() == []
    path.write_text('{"time": 1}\n[1, 2]\n{"time": 2')
    assert [s.time for s in tail.poll()] == [1]
    assert len(tail.problems) == 1
    with path.open("a") as handle:
        handle.write("}\n")
    assert [s.time for s in tail.poll()] == [2]
    path.write_text('{"time": 3}\n')  # replaced by a shorter file
    assert [s.time for s in tail.poll()] == [3]


def test_files_are_read_when_they_change_and_the_log_of_the_chosen_node(finished_run: Path):
    source = RunSource(finished_run)
    first = source.poll(log_rank=0)
    assert first.run_info is not None and first.session is not None
    assert first.nodes is not None and first.nodes[0].state == "stopped"
    assert first.results is not None and first.results.status == "ok"
    label, text = first.log
    assert label.endswith("esdash-dev.log") and text
    source._next_files = source._next_log = 0.0
    again = source.poll(log_rank=0)
    assert again.run_info is None and again.nodes is None and again.log is None
    assert again.results is None  # read once
    assert node_log_file(finished_run, 7, None) is None


def test_a_slurm_job_state_is_polled_for_submitted_runs(finished_run: Path):
    info = json.loads((finished_run / "run.json").read_text())
    info.update(submitted=True, slurm_job="123", state="queued")
    (finished_run / "run.json").write_text(json.dumps(info))
    asked = []

    def job_state(job: str) -> str:
        asked.append(job)
        return "PENDING"

    source = RunSource(finished_run, job_state=job_state, slurm_every=10.0)
    assert source.poll().slurm_state == "PENDING" and asked == ["123"]
    assert source.poll().slurm_state is None and asked == ["123"]  # not before 10 s
    source._next_slurm = 0.0
    assert source.poll().slurm_state == "PENDING" and len(asked) == 2


def test_a_model_follows_appended_records(live_run):
    run, pending = live_run
    source = RunSource(run)
    model = RunModel()
    model.apply(source.poll())
    write_records(run / "stream.jsonl", pending[:10])
    model.apply(source.poll())
    assert len(model.records) == sum(1 for r in pending[:10] if r["type"] == "interval")
    write_records(run / "stream.jsonl", pending[10:])
    model.apply(source.poll())
    assert model.final is not None
