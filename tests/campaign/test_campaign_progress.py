"""Reading ``campaign.json``: what the sweep writes, read back; anything else, a clear error.

The files come from the sweep's own writer (``support/campaign.py``: planned points whose
state files the test sets), plus hand-made variants for what a writer never produces.
"""

from __future__ import annotations

import copy
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.campaign import finished_run, write_campaign

from esdash.rundir.records import CAMPAIGN_SCHEMA as SCHEMA
from esdash.view.campaign import (
    CampaignFileError,
    ProgressFollower,
    campaign_files,
    read_progress,
    shown_state,
    summary_of,
)


def parse_progress(data: Any, path: Path):
    """``data`` written as ``path`` (a campaign.json), read back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return read_progress(path)


@pytest.fixture
def written(tmp_path: Path):
    return write_campaign(tmp_path, tmp_path / "runs")


def test_a_campaign_in_progress_reads_back_as_the_sweep_wrote_it(written, tmp_path: Path):
    runs = tmp_path / "runs"
    first = finished_run(runs / "study-1n-none-1")
    written.running(0, first)
    written.ended(0, "completed")
    written.running(1, runs / "study-1n-none-2")
    written.ended(1, "failed", "exit 1: warm-up failed in step(s) age")
    running_run = runs / "study-3n-none-1"
    written.running(2, running_run)
    data = written.summary()

    progress = read_progress(written.directory.path)  # the directory or the file
    assert progress == read_progress(written.summary_file)
    assert progress.name == "study" and progress.description == "two sizes x two worker counts"
    assert progress.state == "running" and progress.updated == data["updated"]
    assert progress.dir == str(written.directory.path)
    assert progress.axes == {"cluster.nodes": [1, 3], "benchmark.workers_per_node": [1, 2]}
    assert progress.short_names["benchmark.workers_per_node"] == "workers_per_node"
    counts = progress.point_counts
    assert (counts.completed, counts.failed, counts.running, counts.pending) == (1, 1, 1, 1)
    assert counts.total == 4
    assert counts.ended == 2 and counts.fraction == 0.25

    labels = [p.label for p in progress.points]
    assert labels == [p.label for p in written.points]
    done, failed, running, pending = progress.points
    assert done.status == "completed" and done.run == str(first) and done.attempts == 1
    assert done.duration(now=0.0) == pytest.approx(done.ended - done.started)
    assert failed.status == "failed" and failed.reason.startswith("exit 1: warm-up failed")
    assert running.status == "running" and running.ended is None
    assert running.duration(now=running.started + 42) == pytest.approx(42)
    assert pending.status == "pending" and pending.run is None and pending.duration(1e9) is None
    assert pending.session is not None and Path(pending.session).is_file()
    assert [p.cluster for p in progress.points] == [1, 1, 2, 2]

    clusters = [(c.label, c.nodes, c.points) for c in progress.clusters]
    assert clusters == [("1n-none over loopback", 1, 2), ("3n-none over loopback", 3, 2)]
    assert progress.cluster_counts(1).completed == 1 and progress.cluster_counts(2).running == 1

    (current,) = progress.current
    assert current.point == running.id and current.run == str(running_run)
    assert current.attempt == 1
    (runner,) = progress.runners
    assert (runner.host, runner.pid, runner.state) == (socket.gethostname(), os.getpid(), "running")
    assert runner.current is not None and runner.current.label == running.label
    assert shown_state(progress) == "running"  # this process is the "sweep": alive


def test_a_sweep_that_died_shows_as_died(written, tmp_path: Path):
    written.running(0, tmp_path / "runs" / "r")
    written.summary()
    progress = read_progress(written.summary_file)
    assert shown_state(progress, alive=lambda pid: True) == "running"
    assert shown_state(progress, alive=lambda pid: False) == "died"
    # a runner on another host is taken at its word
    assert shown_state(progress, host="elsewhere", alive=lambda pid: False) == "running"


def test_unknown_fields_are_ignored_and_missing_ones_get_empty_values(written):
    data = json.loads(written.summary_file.read_text())
    data["future"] = {"anything": [1, 2]}
    data["points"][0]["future"] = "x"
    data["runners"] = [{"host": "h", "pid": 1, "state": "finished", "gpu": True}]
    progress = parse_progress(data, written.directory.path / "probe.json")
    assert progress.points[0].label == written.points[0].label
    assert progress.runners[0].host == "h"

    minimal = {
        "schema": SCHEMA,
        "name": "x",
        "points": [{"id": "a", "status": "completed"}, {"id": "b"}],
    }
    progress = parse_progress(minimal, written.summary_file.parent / "x" / "campaign.json")
    assert progress.name == "x" and progress.state == "pending"
    assert [p.id for p in progress.points] == ["a", "b"]
    assert progress.points[1].status == "pending"
    assert progress.point_counts.total == 2 and progress.point_counts.completed == 1
    assert progress.current == [] and progress.runners == [] and progress.clusters == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("", "empty file"),
        ("[1, 2]", "Expected `object`, got `array`"),
        ('{"schema": "esdash.run/1", "name": "x"}', "not a campaign.json (schema 'esdash.run/1'"),
        ('{"name": "x"}', "missing required field `schema`"),
        ('{"schema": "esdash.campaign/2", "name": "x"}', "schema 'esdash.campaign/2' is not one"),
        (f'{{"schema": "{SCHEMA}"}}', "missing required field `name`"),
        (f'{{"schema": "{SCHEMA}", "name": "x", "points": {{}}}}', "at `$.points`"),
        (f'{{"schema": "{SCHEMA}", "name": "x", "points": [1]}}', "at `$.points[0]`"),
        (
            f'{{"schema": "{SCHEMA}", "name": "x", "points": [{{"id": "a"}}, '
            f'{{"id": "b", "attempts": "2"}}]}}',
            "Expected `int`, got `str` - at `$.points[1].attempts`",
        ),
        (f'{{"schema": "{SCHEMA}", "name": "x", "counts": {{"total": true}}}}', "$.counts.total"),
        (f'{{"schema": "{SCHEMA}", "name": "x", "updated": "today"}}', "at `$.updated`"),
    ],
)
def test_what_is_not_a_campaign_json_is_an_error_naming_the_file(
    tmp_path: Path, text: str, expected: str
):
    path = tmp_path / "campaign.json"
    path.write_text(text)
    with pytest.raises(CampaignFileError) as caught:
        read_progress(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and expected in message, message


def test_a_missing_or_binary_file_is_an_error_too(tmp_path: Path):
    with pytest.raises(CampaignFileError, match="no such file"):
        read_progress(tmp_path)
    (tmp_path / "campaign.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CampaignFileError, match=f"{tmp_path / 'campaign.json'}: not valid JSON"):
        read_progress(tmp_path)


def _leaves(data: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(data, dict):
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(data, list):
        return [leaf for k, value in enumerate(data) for leaf in _leaves(value, (*path, k))]
    return [path]


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), junk=JUNK)
def test_any_broken_field_reads_or_is_a_clear_error(written, data, junk):
    """Replace any one value of a real campaign.json by junk: a reading, or an error naming
    the file — never another exception."""
    document = json.loads(written.summary_file.read_text())
    leaves = _leaves(document)
    path = data.draw(st.sampled_from(leaves))
    broken = copy.deepcopy(document)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = junk
    probe = written.directory.path / "probe.json"
    try:
        parse_progress(broken, probe)
    except CampaignFileError as exc:
        assert str(exc).startswith(f"{probe}: ")


def test_the_follower_reads_again_only_after_a_change(written, tmp_path: Path):
    follower = ProgressFollower(written.directory.path)
    first = follower.reading()
    assert first is not None and first.progress.point_counts.pending == 4 and first.error is None
    assert follower.reading() is None  # nothing changed
    written.running(0, tmp_path / "runs" / "r")
    written.summary()
    second = follower.reading()
    assert second is not None and second.progress.point_counts.running == 1
    assert second.state == "running"
    # a broken write keeps the last good progress and says why
    written.summary_file.write_text("{")
    broken = follower.reading()
    assert broken.progress is second.progress and "not valid JSON" in broken.error
    assert follower.reading() is None
    written.summary()
    assert follower.reading().error is None
    # nothing readable ever: the state says so
    lonely = ProgressFollower(tmp_path / "nowhere" / "campaign.json").reading()
    assert lonely.state == "unreadable" and "no such file" in lonely.error


def test_campaigns_are_found_under_the_runs_directory_and_named_on_the_command_line(
    written, tmp_path: Path
):
    runs = tmp_path / "runs"
    summary = written.summary_file.resolve()
    assert campaign_files(runs) == [written.summary_file]
    assert campaign_files(tmp_path / "no-runs") == []
    assert summary_of(str(written.directory.path), runs) == summary
    assert summary_of(str(written.summary_file), runs) == summary
    assert summary_of(str(tmp_path / "study.toml"), runs) == summary  # the campaign file
    assert summary_of("study", runs) == written.summary_file  # a name under runs/campaigns
    assert summary_of(str(tmp_path / "base.toml"), runs) is None  # a session
    assert summary_of(str(tmp_path), runs) is None
    (runs / "study").mkdir()  # a run of that name wins over the campaign's name
    assert summary_of("study", runs) is None
