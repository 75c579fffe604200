"""A Rally task's timing as esdash schedules it, planned without a cluster: iterations
counted, a ramp-up, a parallel block's own ``clients``, and the combinations Rally 2.13's
loader refuses.  The runs are tests/bench/test_rally_iterations.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.tracks import rally

from esdash.errors import BadInput

RED = {"query": {"term": {"colour": "red"}}}


def write_track(directory: Path, schedule: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {"mappings": {"properties": {"colour": {"type": "keyword"}}}}
    (directory / "index.json").write_text(json.dumps(body))
    (directory / "docs.json").write_text('{"colour": "red"}\n')
    track = {
        "version": 2,
        "indices": [{"name": "paint", "body": "index.json"}],
        "corpora": [
            {
                "name": "paint",
                "documents": [
                    {"source-file": "docs.json", "document-count": 1, "target-index": "paint"}
                ],
            }
        ],
        "schedule": [
            {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 10}},
            *schedule,
        ],
    }
    (directory / "track.json").write_text(json.dumps(track, indent=2))
    return directory


def search(name: str, clients: int = 1, **timing: object) -> dict[str, Any]:
    operation = {"name": name, "operation-type": "search", "body": RED}
    return {"operation": operation, "clients": clients, **timing}


def steps(tmp_path: Path, schedule: list[dict[str, Any]], **more: object) -> dict[str, Any]:
    options = {"path": str(write_track(tmp_path / "track", schedule)), **more}
    return {step.name: step for step in rally.RallyTrack().query_steps(options)}


def test_a_task_without_timing_sends_one_request_per_client_and_iterations_are_counted(
    tmp_path,
):
    found = steps(
        tmp_path,
        [
            search("once", 3),
            search("counted", 2, **{"warmup-iterations": 5, "iterations": 20}),
            search("timed", **{"time-period": 4}),
        ],
    )
    assert (found["once"].warmup_iterations, found["once"].iterations) == (0, 1)
    assert (found["counted"].warmup_iterations, found["counted"].iterations) == (5, 20)
    timed = found["timed"]
    assert (timed.iterations, timed.warmup, timed.duration) == (None, 0.0, 4.0)


def test_a_block_of_counted_searches_spreads_their_requests_over_its_clients(tmp_path):
    block = {
        "parallel": {
            "tasks": [search("a", 1, iterations=10), search("b", 3, iterations=2)],
        }
    }
    (step,) = steps(tmp_path, [block]).values()
    # 1 x 10 + 3 x 2 = 16 requests over 4 clients
    assert (step.clients, step.warmup_iterations, step.iterations) == (4, 0, 4)


def test_the_blocks_own_clients_cap_its_searches_clients(tmp_path):
    block = {"parallel": {"clients": 2, "tasks": [search("a", 3, iterations=4), search("b", 1)]}}
    (step,) = steps(tmp_path, [block]).values()
    # 3 x 4 + 1 x 1 = 13 requests on the 2 clients the block allows: 7 each
    assert (step.clients, step.iterations) == (2, 7)
    track = rally.RallyTrack()
    notes = " ".join(track.notes({"path": str(tmp_path / "track")}))
    assert "the block's 'clients' 2 caps its tasks' 4 clients: its searches get 2" in notes


def test_a_ramp_up_is_kept_and_lifted_in_test_mode(tmp_path):
    timing = {"warmup-time-period": 6, "ramp-up-time-period": 4, "time-period": 10}
    found = steps(tmp_path, [search("ramped", 4, **timing)])
    assert (found["ramped"].ramp_up, found["ramped"].warmup) == (4.0, 6.0)
    quick = steps(tmp_path / "quick", [search("ramped", 4, **timing)], test_mode=True)
    assert quick["ramped"].ramp_up == 0.0


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        (
            {"warmup-iterations": 5, "time-period": 10},
            "sets 'warmup-iterations' and 'time-period'; Rally does not allow mixing",
        ),
        (
            {"warmup-time-period": 5, "iterations": 10},
            "sets 'warmup-time-period' and 'iterations'; Rally does not allow mixing",
        ),
        (
            {"ramp-up-time-period": 5, "iterations": 10},
            "sets 'ramp-up-time-period' with iterations",
        ),
        (
            {"ramp-up-time-period": 5, "warmup-time-period": 2, "time-period": 10},
            "sets 'ramp-up-time-period' 5 without a 'warmup-time-period' at least as long",
        ),
    ],
)
def test_what_rallys_loader_refuses_is_a_bad_input_naming_the_task(tmp_path, timing, message):
    with pytest.raises(BadInput, match=r"track\.json:\d+: .*task 'bad'.*" + message):
        steps(tmp_path, [search("bad", **timing)])


def test_a_ramp_up_belongs_on_the_parallel_block(tmp_path):
    ramped = search("a", 1, **{"ramp-up-time-period": 2, "warmup-time-period": 2})
    block = {"parallel": {"time-period": 5, "tasks": [ramped, search("b")]}}
    with pytest.raises(BadInput, match="Rally allows it only on the 'parallel' element"):
        steps(tmp_path, [block])
    timing = {"ramp-up-time-period": 2, "warmup-time-period": 2, "time-period": 5}
    block = {"parallel": {**timing, "tasks": [search("a"), search("b")]}}
    (step,) = steps(tmp_path, [block]).values()
    assert step.ramp_up == 2.0
