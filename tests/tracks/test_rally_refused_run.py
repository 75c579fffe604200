"""A session whose track's plan refuses every task is refused before any cluster starts.

Issue 18: ``esdash run`` on a track none of whose tasks esdash can run used to start a
cluster, ingest and measure nothing the track asks for.  The ``plan`` pre-flight check says
so up front, in one line naming the session and the track, and ``esdash session check``
reports the same line.  The track here is written by the test: an ES|QL and an SQL task
and no bulk task.  Both are refused whatever distribution is installed (the module it
lacks, or no equivalent esdash runs without one), so the test does not depend on the cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import esdash, java_pids_under, write_session

NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")
DOCUMENTS = [{"color": "red", "size": 1}, {"color": "blue", "size": 2}]


def write_track(directory: Path, schedule: list[dict]) -> Path:
    """A one-index Rally track with a two-document corpus and ``schedule``."""
    directory.mkdir(parents=True)
    body = {
        "settings": {"index.number_of_shards": 1, "index.number_of_replicas": 0},
        "mappings": {"properties": {"color": {"type": "keyword"}, "size": {"type": "long"}}},
    }
    (directory / "index.json").write_text(json.dumps(body))
    (directory / "documents.json").write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    track = {
        "version": 2,
        "indices": [{"name": "items", "body": "index.json"}],
        "corpora": [
            {
                "name": "items",
                "documents": [{"source-file": "documents.json", "document-count": len(DOCUMENTS)}],
            }
        ],
        "schedule": schedule,
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


REFUSED_ONLY = [
    {
        "operation": {
            "name": "esql-count",
            "operation-type": "esql",
            "query": "FROM items | STATS count()",
        },
        "iterations": 10,
    },
    {
        "operation": {
            "name": "sql-count",
            "operation-type": "sql",
            "body": {"query": "SELECT COUNT(*) FROM items"},
        },
        "iterations": 10,
    },
]


def test_run_refuses_a_track_whose_every_task_is_refused(tmp_path: Path) -> None:
    track = write_track(tmp_path / "esql-only", REFUSED_ONLY)
    session = write_session(
        tmp_path, "allrefused", 1, user=NODE_USER, track=f'name = "rally"\npath = "{track}"'
    )
    runs = tmp_path / "runs"
    expected = (
        f"{session}: track: track rally ({track}): every task is refused; "
        f"see `esdash plan {session}`"
    )

    # the plan says why, task by task
    plan = esdash("plan", str(session), "--json", env_runs=runs)
    tasks = json.loads(plan.stdout)["tasks"]
    assert [(t["name"], t["status"]) for t in tasks] == [
        ("esql-count", "refused"),
        ("sql-count", "refused"),
    ]

    result = esdash("run", str(session), env_runs=runs, check=False)
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in result.stderr, output
    assert [line for line in result.stderr.splitlines() if "refused" in line] == [
        f"esdash: error: {expected}"
    ], output
    assert "cluster up" not in result.stdout, output
    # nothing was started: no run directory, no data root, no node
    assert not runs.exists(), list(runs.rglob("*"))
    assert not (tmp_path / "data-allrefused").exists()
    assert java_pids_under(tmp_path) == []

    # `session check` reports the same line
    check = esdash("session", "check", str(session), env_runs=runs, check=False)
    assert check.returncode == 2, check.stdout + check.stderr
    assert expected in check.stderr


def test_a_track_with_one_task_that_runs_passes_the_check(tmp_path: Path) -> None:
    """One search the distribution answers is enough: the check finds nothing."""
    search = {
        "operation": {
            "name": "match-all",
            "operation-type": "search",
            "index": "items",
            "body": {"query": {"match_all": {}}},
        },
        "iterations": 10,
    }
    track = write_track(tmp_path / "one-search", [*REFUSED_ONLY, search])
    session = write_session(
        tmp_path, "onesearch", 1, user=NODE_USER, track=f'name = "rally"\npath = "{track}"'
    )
    check = esdash("session", "check", str(session), env_runs=tmp_path / "runs", check=False)
    assert "every task is refused" not in check.stderr, check.stderr
    assert check.returncode == 0, check.stdout + check.stderr
