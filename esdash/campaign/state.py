"""The campaign directory: what has run, what is running, what is left — on disk.

Layout (``docs/campaign.md`` has the field lists)::

    <runs>/campaigns/<name>/         (or --dir)
      campaign.toml                  the campaign file as the last sweep read it
      campaign.json                  summary for the dashboard and reports (esdash.campaign/1)
      points/<id>/session.toml       the exact session of the point (run with `esdash run`)
      points/<id>/state.json         its status and every attempt (run directory, exit code, why)
      points/<id>/output.log         what `esdash run` printed, all attempts
      runners/<host>-<pid>.json      one per sweep process: its current point and cluster
      jobs/nodes-<N>/job.sbatch      written by `esdash sweep --submit`, with job.json
      data/<root label>/             data roots, one per cluster size and encryption setup

State lives in one file per point (and per sweep process), never in one shared file: the
Slurm jobs of one campaign (one per cluster size) run at the same time on other hosts and
each writes only its own points, so no locking is needed on a shared file system.
``campaign.json`` is derived from those files and rewritten (atomically) after every
change; whichever process wrote it last, it is complete.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.campaign import tomlw
from esdash.campaign.plan import ClusterGroup
from esdash.campaign.spec import Campaign, Point
from esdash.cluster.rundir import read_json, write_json
from esdash.errors import BadInput
from esdash.paths import runs_dir

SCHEMA = "esdash.campaign/1"
POINT_SCHEMA = "esdash.campaign-point/1"
STATUSES = ("pending", "running", "completed", "failed", "interrupted", "stale")
#: Seconds without a sign of life after which a point running on another host is abandoned.
ABANDONED_AFTER = 600.0


def default_directory(campaign: Campaign) -> Path:
    return runs_dir() / "campaigns" / campaign.name


def _alive_here(host: str | None, pid: int | None) -> bool | None:
    """Whether a process of this host is alive; None for another host (unknown)."""
    if host != socket.gethostname() or not pid:
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _abandoned(state: dict[str, Any]) -> bool:
    """Whether a point marked running has no sweep any more.

    On this host the sweep's pid tells.  A sweep on another host (a Slurm job killed after
    its time limit) is presumed gone when its run has written nothing for
    :data:`ABANDONED_AFTER` seconds: a live run appends to its stream every interval.
    """
    runner = state.get("runner") or {}
    alive = _alive_here(runner.get("host"), runner.get("pid"))
    if alive is not None:
        return not alive
    newest = state.get("started") or 0.0
    run = state.get("run")
    if run:
        for name in ("stream.jsonl", "run.json"):
            with contextlib.suppress(OSError):
                newest = max(newest, (Path(run) / name).stat().st_mtime)
    return time.time() - newest > ABANDONED_AFTER


@dataclass(frozen=True)
class CampaignDir:
    path: Path

    @classmethod
    def open(cls, path: str | Path) -> CampaignDir:
        directory = cls(Path(path).resolve())
        if not directory.summary_file.is_file():
            raise BadInput(
                f"{directory.path} is not a campaign directory (no campaign.json); pass the "
                f"directory `esdash sweep` printed"
            )
        return directory

    @property
    def summary_file(self) -> Path:
        return self.path / "campaign.json"

    def point_dir(self, point_id: str) -> Path:
        return self.path / "points" / point_id

    def session_file(self, point_id: str) -> Path:
        return self.point_dir(point_id) / "session.toml"

    def log_file(self, point_id: str) -> Path:
        return self.point_dir(point_id) / "output.log"

    # -------------------------------------------------------------------- points
    def read_point(self, point_id: str) -> dict[str, Any]:
        path = self.point_dir(point_id) / "state.json"
        try:
            return read_json(path)
        except (OSError, ValueError):
            return {}

    def write_point(self, point: Point, **changes: Any) -> dict[str, Any]:
        state = self.read_point(point.id) or {
            "schema": POINT_SCHEMA,
            "id": point.id,
            "attempts": [],
        }
        state.update(
            label=point.label,
            values=dict(point.values),
            repetition=point.repetition,
            nodes=point.nodes,
        )
        state.update(changes)
        state["updated"] = time.time()
        self.point_dir(point.id).mkdir(parents=True, exist_ok=True)
        write_json(self.point_dir(point.id) / "state.json", state)
        return state

    def status(self, point: Point) -> str:
        """``completed`` only if the run finished ok, is still there, and the session is the
        same; a point whose session changed since is ``stale`` and runs again."""
        state = self.read_point(point.id)
        status = state.get("status", "pending")
        if status == "completed":
            if state.get("digest") != point.digest:
                return "stale"
            run = state.get("run")
            if not run or not (Path(run) / "results.json").is_file():
                return "pending"
        if status == "running" and _abandoned(state):
            return "interrupted"  # its sweep died without recording the end
        return status

    def prepare(self, campaign: Campaign, points: Sequence[Point]) -> None:
        """Create the directory; write each point's session unless its run is complete."""
        self.path.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(campaign.path, self.path / "campaign.toml")
        for point in points:
            if self.status(point) == "completed":
                continue
            self.point_dir(point.id).mkdir(parents=True, exist_ok=True)
            text = f"# {point.id}: written by esdash sweep from {campaign.path}\n"
            self.session_file(point.id).write_text(text + tomlw.dumps(point.session))

    # ------------------------------------------------------------------- runners
    def runner_file(self) -> Path:
        return self.path / "runners" / f"{socket.gethostname()}-{os.getpid()}.json"

    def write_runner(self, **changes: Any) -> None:
        path = self.runner_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            data = read_json(path)
        if not data:
            data = {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": time.time(),
                "slurm_job": os.environ.get("SLURM_JOB_ID"),
            }
        data.update(changes, updated=time.time())
        write_json(path, data)

    def runners(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.path / "runners").glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                runner = read_json(path)
                if runner.get("state") == "running":
                    alive = _alive_here(runner.get("host"), runner.get("pid"))
                    if alive is False:
                        runner["state"] = "died"
                found.append(runner)
        return found

    def jobs(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.path / "jobs").glob("*/job.json")):
            with contextlib.suppress(OSError, ValueError):
                found.append(read_json(path))
        return found

    # ------------------------------------------------------------------- summary
    def write_summary(self, campaign: Campaign, groups: Sequence[ClusterGroup]) -> dict[str, Any]:
        """Rebuild ``campaign.json`` from the point, runner and job files."""
        points = []
        counts = dict.fromkeys(STATUSES, 0)
        for number, group in enumerate(groups, 1):
            for planned in group.points:
                point = planned.point
                state = self.read_point(point.id)
                status = self.status(point)
                counts[status] += 1
                attempts = state.get("attempts") or []
                points.append(
                    {
                        "id": point.id,
                        "label": point.label,
                        "values": dict(point.values),
                        "repetition": point.repetition,
                        "nodes": point.nodes,
                        "cluster": number,
                        "ingest": planned.ingest,
                        "status": status,
                        "run": state.get("run"),
                        "cluster_run": state.get("cluster_run"),
                        "attempts": len(attempts),
                        "reason": state.get("reason"),
                        "started": state.get("started"),
                        "ended": state.get("ended"),
                        "session": str(self.session_file(point.id)),
                    }
                )
        runners = self.runners()
        active = [r for r in runners if r.get("state") == "running"]
        total = len(points)
        if active:
            overall = "running"
        elif counts["completed"] == total:
            overall = "finished"
        elif counts["failed"]:
            overall = "failed"
        elif counts["interrupted"] or counts["completed"]:
            overall = "interrupted"
        else:
            overall = "pending"
        summary = {
            "schema": SCHEMA,
            "name": campaign.name,
            "description": campaign.description,
            "file": str(campaign.path.resolve()),
            "base_session": str(campaign.base_path),
            "dir": str(self.path),
            "updated": time.time(),
            "state": overall,
            "axes": {axis.dotted: list(axis.values) for axis in campaign.axes},
            "short_names": {axis.dotted: axis.short for axis in campaign.axes},
            "repetitions": campaign.repetitions,
            "ingest": campaign.ingest,
            "counts": {"total": total, **counts},
            "current": [r["current"] for r in active if r.get("current")],
            "clusters": [
                {
                    "number": number,
                    "label": group.label,
                    "nodes": group.nodes,
                    "root_label": group.root_label,
                    "points": len(group.points),
                }
                for number, group in enumerate(groups, 1)
            ],
            "runners": runners,
            "jobs": self.jobs(),
            "points": points,
        }
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.summary_file, summary)
        return summary
