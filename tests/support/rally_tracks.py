"""Where the data-only copy of elastic/rally-tracks is, for tests that run the real tracks.

The copy lives beside the repository (``../shared/rally-tracks/tracks``), never inside it.
A CI run works in a fresh clone elsewhere, so the place beside the clone's ``origin`` is
looked at too; ``ESDASH_RALLY_TRACKS`` overrides both.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

from support import prereqs
from support.cli import esdash

_REPO = Path(__file__).resolve().parents[2]


def _origin() -> Path | None:
    """The local directory this clone was made from, if it was made from one."""
    try:
        url = subprocess.run(
            ["git", "-C", str(_REPO), "config", "--get", "remote.origin.url"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(url.removeprefix("file://"))
    return path if url and path.is_absolute() and path.is_dir() else None


def real_tracks() -> Path | None:
    """The ``tracks`` directory of the copy, or None when it is nowhere to be found."""
    if os.environ.get("ESDASH_RALLY_TRACKS"):
        return Path(os.environ["ESDASH_RALLY_TRACKS"])
    candidates = [_REPO.parent / "shared" / "rally-tracks" / "tracks"]
    origin = _origin()
    if origin is not None:
        candidates.append(origin.parent / "shared" / "rally-tracks" / "tracks")
    return next((c for c in candidates if c.is_dir()), None)


def copy_track(name: str, scratch: Path) -> Path:
    """A writable copy of one real track (its gzip-stored files unpacked), in ``scratch``.

    Skips the test, or fails it under CI, when the copy of rally-tracks is not there.
    """
    tracks = real_tracks()
    if tracks is None or not (tracks / name).is_dir():
        prereqs.unavailable(
            f"the data-only copy of elastic/rally-tracks (track {name}) is not beside the "
            f"repository; set ESDASH_RALLY_TRACKS to its tracks directory"
        )
    copy = Path(shutil.copytree(tracks / name, scratch / name, dirs_exist_ok=True))
    for packed in copy.rglob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
    return copy


#: Tasks esdash does itself (no metrics of their own): see BY_ESDASH in rally_schedule.
BY_ESDASH = {"delete-index", "create-index", "refresh", "cluster-health"}


def rally_metrics(run: Path, out: Path, runs: Path) -> dict[str, dict]:
    """``esdash report --format rally`` of ``run``: its op_metrics by task name."""
    esdash("report", str(run), "--format", "rally", "--no-figures", "--out", str(out),
           env_runs=runs)  # fmt: skip
    (only,) = json.loads((out / "rally.json").read_text())["runs"]
    return {entry["task"]: entry for entry in only["op_metrics"]}


def errors_of(results: dict | None, step: str) -> dict:
    """The error counts and last messages of ``step``'s operations in results.json, for a
    failure's message (what failed says more than an error rate)."""
    for entry in (results or {}).get("steps", []):
        if entry["name"] == step:
            return {
                name: {k: op.get(k) for k in ("errors", "last_errors", "per_node")}
                for name, op in entry["queries"].items()
                if op.get("failed")
            }
    return {}


def assert_every_task_ran(
    plan: list[dict], metrics: dict[str, dict], results: dict | None = None
) -> None:
    """Each task the plan runs has Rally-named metrics, without errors, with its clients;
    a task it refuses has none."""
    ran = [t for t in plan if t["status"] == "run" and t["operation"] not in BY_ESDASH]
    assert ran
    # a refused task sends nothing: the run does what the plan says
    refused = [t["name"] for t in plan if t["status"] == "refused"]
    assert not [name for name in refused if name in metrics], (refused, sorted(metrics))
    for task in ran:
        if task["operation"] == "bulk":
            continue  # the ingest: checked by documents
        entry = metrics.get(task["name"])
        assert entry is not None, (task["name"], sorted(metrics))
        step = entry["esdash"].get("step", "")
        assert entry["error_rate"] == 0, (task["name"], entry, errors_of(results, step))
        assert "service_time" in entry and "latency" in entry, entry
        if "when" in entry["esdash"]:  # sent once by rank 0 (an untimed raw-request too)
            assert entry["esdash"]["errors"] == [], (task["name"], entry)
        elif task["operation"] in ("search", "index-stats", "node-stats", "raw-request"):
            assert entry["throughput"]["unit"] == "ops/s", entry
            assert entry["esdash"]["clients"] == task["clients"], (task["name"], entry)
