"""Helpers for the dashboard tests: the canned run directories, a clock, waiting, screen text.

``tests/fixtures/runs/`` holds two short real runs (``trim.py`` there says how they were
made): ``dev-…`` with one bench rank and ``dev2-…`` with two.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from support.records import as_json

from esdash.rundir.records import StreamRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN_A = "dev-20261121-032918"
RUN_B = "dev2-20261121-033750"


def records(run: Path) -> list[dict[str, Any]]:
    """The stream of a run as the JSON objects of its lines."""
    return [json.loads(line) for line in (run / "stream.jsonl").read_text().splitlines()]


def typed(items: list[Any]) -> list[StreamRecord]:
    """Stream lines (JSON objects or records) as the typed records a reader gives."""
    return [
        msgspec.convert(item, StreamRecord) if isinstance(item, dict) else item for item in items
    ]


def write_records(path: Path, items: list[Any], mode: str = "a") -> None:
    with path.open(mode) as handle:
        for record in items:
            data = record if isinstance(record, dict) else as_json(record)
            handle.write(json.dumps(data) + "\n")


class Clock:
    """A settable wall clock for the dashboard (``clock=`` of the app and screens)."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Let the app run until ``condition()`` holds (or fail after ``timeout`` seconds).

    The bound only ends a test that would hang: the suite runs on every core at once, and
    a dashboard that draws in a second alone may take several beside a fuzz campaign."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.05)


def screen_text(app: Any) -> str:
    """What the terminal shows, as plain text (the screenshot without colours)."""
    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def pilot_test(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run an ``async def`` test with ``asyncio.run`` (no async plugin needed)."""
    import asyncio
    import functools

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(function(*args, **kwargs))

    return run


#: The fixed campaign's clock: its last write was 2 s before this.
CAMPAIGN_NOW = 1_800_000_642.0


def fixed_campaign(runs: Path, name: str = "paper") -> Path:
    """A ``campaign.json`` with fixed times, hosts and pids (for snapshots); returns its path.

    Shaped like the sweep's own (``esdash.campaign.state.CampaignDir.write_summary``): two
    Slurm jobs, the 1-node one interrupted by its time limit, the 3-node one running; every
    point status once.
    """
    t0 = CAMPAIGN_NOW - 642.0
    directory = runs / "campaigns" / name
    labels = [
        (nodes, workers, mode) for nodes in (1, 3) for mode in ("none", "abe") for workers in (1, 2)
    ]
    # status, attempts, started, ended, reason
    states = [
        ("completed", 1, 10, 84, None),
        ("completed", 1, 84, 150, None),
        ("failed", 2, 150, 205, "exit 1: warm-up failed in step(s) age"),
        ("interrupted", 1, 205, 230, "interrupted (Ctrl-C or SIGTERM)"),
        ("completed", 1, 300, 371, None),
        ("running", 1, 600, None, None),
        ("stale", 1, 20, 90, None),
        ("pending", 0, None, None, None),
    ]
    clusters = ["1n-none", "1n-abe-2bfcac", "3n-none", "3n-abe-2bfcac"]
    points = []
    for k, ((nodes, workers, mode), (status, attempts, started, ended, reason)) in enumerate(
        zip(labels, states, strict=True)
    ):
        label = f"nodes={nodes} workers_per_node={workers} mode={mode}"
        point_id = label.replace(" ", "__") + "__r1"
        root = clusters[k // 2]
        run = None if status == "pending" else str(runs / f"{name}-{root}-{k:02d}")
        points.append(
            {
                "id": point_id,
                "label": label,
                "values": {
                    "cluster.nodes": nodes,
                    "benchmark.workers_per_node": workers,
                    "encryption.mode": mode,
                },
                "repetition": 1,
                "nodes": nodes,
                "cluster": k // 2 + 1,
                "ingest": "first" if k % 2 == 0 else "reuse",
                "status": status,
                "run": run,
                "cluster_run": None if run is None else str(runs / f"{name}-{root}-cluster"),
                "attempts": attempts,
                "reason": reason,
                "started": None if started is None else t0 + started,
                "ended": None if ended is None else t0 + ended,
                "session": str(directory / "points" / point_id / "session.toml"),
            }
        )
    running = points[5]
    current = {
        "point": running["id"],
        "label": running["label"],
        "run": running["run"],
        "cluster_run": running["cluster_run"],
        "attempt": 1,
        "started": running["started"],
    }
    summary = {
        "schema": "esdash.campaign/1",
        "name": name,
        "description": "1 and 3 nodes x 1 and 2 workers/node x none, abe",
        "file": str(runs.parent / f"{name}.toml"),
        "base_session": str(runs.parent / f"{name}-base.toml"),
        "dir": str(directory),
        "updated": CAMPAIGN_NOW - 2.0,
        "state": "running",
        "axes": {
            "cluster.nodes": [1, 3],
            "benchmark.workers_per_node": [1, 2],
            "encryption.mode": ["none", "abe"],
        },
        "short_names": {
            "cluster.nodes": "nodes",
            "benchmark.workers_per_node": "workers_per_node",
            "encryption.mode": "mode",
        },
        "repetitions": 1,
        "ingest": "once",
        "counts": {
            "total": 8,
            "pending": 1,
            "running": 1,
            "completed": 3,
            "failed": 1,
            "interrupted": 1,
            "stale": 1,
        },
        "current": [current],
        "clusters": [
            {
                "number": k + 1,
                "label": f"{root} over loopback",
                "nodes": 1 if k < 2 else 3,
                "root_label": root,
                "points": 2,
            }
            for k, root in enumerate(clusters)
        ],
        "runners": [
            {
                "host": "node-03",
                "pid": 31337,
                "started": t0,
                "slurm_job": "4241",
                "state": "interrupted",
                "only": ["cluster.nodes=1"],
                "current": None,
                "updated": t0 + 231,
                "cluster": None,
            },
            {
                "host": "node-07",
                "pid": 4711,
                "started": t0 + 240,
                "slurm_job": "4242",
                "state": "running",
                "only": ["cluster.nodes=3"],
                "current": current,
                "updated": CAMPAIGN_NOW - 2.0,
                "cluster": {"number": 3, "label": "3n-none over loopback", "run": "x"},
            },
        ],
        "jobs": [
            {"nodes": 1, "points": 4, "script": "jobs/nodes-1/job.sbatch", "job": "4241"},
            {"nodes": 3, "points": 4, "script": "jobs/nodes-3/job.sbatch", "job": "4242"},
        ],
        "points": points,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "campaign.json"
    path.write_text(json.dumps(summary, indent=2))
    return path
