"""What ``benchmark.order``/``repetitions`` mean for a session's steps (Session.rounds)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from esdash_plugins.tracks.rally import RallyTrack

from esdash.plugin.manager import get_plugins
from esdash.plugin.values import QueryStep, StepIndexing
from esdash.session import parse_session

BASE = {
    "name": "t",
    "cluster": {"nodes": 1, "heap": "512m", "interconnect": "loopback", "run_as": "esdash"},
    "track": {"name": "mri", "documents": 100},
    "benchmark": {"warmup": "1s", "duration": "2s"},
}


def session(tmp_path: Path, **benchmark):
    data = copy.deepcopy(BASE)
    data["benchmark"].update(benchmark)
    return parse_session(data, tmp_path / "s.toml")


def test_by_default_the_mri_steps_run_in_two_mirrored_rounds(tmp_path):
    chosen = session(tmp_path)
    track = get_plugins().track("mri")
    assert (chosen.benchmark.order, chosen.benchmark.repetitions) == ("auto", None)
    assert chosen.rounds(track, chosen.query_steps(track)) == ("mirrored", 2)


def test_a_rally_schedule_keeps_its_order_unless_a_query_file_replaces_it(tmp_path):
    steps = session(tmp_path).query_steps(get_plugins().track("mri"))
    assert session(tmp_path).rounds(RallyTrack(), steps) == ("listed", 1)
    (tmp_path / "steps.json").write_text(
        json.dumps([{"name": "all", "search_queries": [{"name": "all", "body": {}}]}])
    )
    replaced = session(tmp_path, queries="steps.json")
    assert replaced.rounds(RallyTrack(), replaced.query_steps(RallyTrack())) == ("mirrored", 2)


def test_steps_that_index_while_they_run_keep_their_order(tmp_path):
    track = get_plugins().track("mri")
    steps = (
        QueryStep("write", (), indexing=(StepIndexing("bulk", "logs"),)),
        *session(tmp_path).query_steps(track),
    )
    assert session(tmp_path).rounds(track, steps) == ("listed", 1)
    assert session(tmp_path, order="mirrored").rounds(track, steps) == ("mirrored", 2)


@pytest.mark.parametrize(
    ("benchmark", "expected"),
    [
        ({"order": "listed"}, ("listed", 1)),
        ({"repetitions": 4}, ("mirrored", 4)),
        ({"order": "balanced", "repetitions": 6}, ("balanced", 6)),
    ],
)
def test_what_a_session_says_is_what_it_gets(tmp_path, benchmark, expected):
    chosen = session(tmp_path, **benchmark)
    track = get_plugins().track("mri")
    assert chosen.rounds(track, chosen.query_steps(track)) == expected
