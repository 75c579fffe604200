"""A small campaign whose ``campaign.json`` is written by esdash's own campaign code.

No cluster runs: the points are planned and their state files written through
:class:`esdash.campaign.state.CampaignDir` the way ``esdash sweep`` writes them (the test
sets each status), and ``campaign.json`` comes from the sweep's own
:meth:`~esdash.campaign.state.CampaignDir.write_summary`.  So readers are tested against the
real writer's output, not a hand-made imitation; ``tests/campaign/test_sweep.py`` checks it
once more after a real sweep.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esdash.campaign.plan import ClusterGroup, plan
from esdash.campaign.spec import Campaign, Point, load_campaign
from esdash.campaign.state import CampaignDir
from esdash.rundir.records import Attempt, CurrentPoint, PointRunner
from support.records import as_json

BASE = """\
name = "base"
[cluster]
heap = "256m"
[track]
name = "mri"
documents = 500
"""
CAMPAIGN = """\
name = "study"
description = "two sizes x two worker counts"
session = "base.toml"

[axes]
cluster.nodes = [1, 3]
benchmark.workers_per_node = [1, 2]
"""


@dataclass
class WrittenCampaign:
    campaign: Campaign
    directory: CampaignDir
    groups: list[ClusterGroup]
    points: list[Point] = field(default_factory=list)  # in run order

    @property
    def summary_file(self) -> Path:
        return self.directory.summary_file

    def summary(self) -> dict[str, Any]:
        """Rewrite ``campaign.json`` from the state files, as the sweep does after a change."""
        return as_json(self.directory.write_summary(self.campaign, self.groups))

    def running(self, index: int, run: Path, cluster_run: Path | None = None) -> None:
        """Point ``index`` starts in ``run``; this process is its sweep (``runners/``)."""
        point = self.points[index]
        started = time.time()
        cluster = str(cluster_run or run.parent / "cluster-run")
        state = self.directory.read_point(point.id)
        state.status, state.run, state.cluster_run = "running", str(run), cluster
        state.digest, state.started, state.ended, state.reason = point.digest, started, None, None
        state.attempts = [Attempt(run=str(run), cluster_run=cluster, started=started)]
        state.runner = PointRunner(host=socket.gethostname(), pid=os.getpid())
        self.directory.write_point(point, state)
        with self.directory.edit_runner() as runner:
            runner.state, runner.only = "running", []
            runner.current = CurrentPoint(
                point=point.id,
                label=point.label,
                run=str(run),
                cluster_run=cluster,
                attempt=1,
                started=started,
            )

    def ended(self, index: int, status: str, reason: str | None = None) -> None:
        """Point ``index`` ends (``completed`` needs ``results.json`` in its run)."""
        point = self.points[index]
        state = self.directory.read_point(point.id)
        state.status, state.reason, state.ended = status, reason, time.time()
        self.directory.write_point(point, state)
        with self.directory.edit_runner() as runner:
            runner.current = None

    def finish(self) -> None:
        with self.directory.edit_runner() as runner:
            runner.state, runner.current, runner.cluster = "finished", None, None


def write_campaign(directory: Path, runs: Path) -> WrittenCampaign:
    """The campaign file in ``directory``, its campaign directory under ``runs``, all pending."""
    (directory / "base.toml").write_text(BASE)
    (directory / "study.toml").write_text(CAMPAIGN)
    campaign = load_campaign(directory / "study.toml")
    state = CampaignDir(runs / "campaigns" / campaign.name)
    points = campaign.points(state.path)
    groups = plan(points, campaign.ingest)
    state.prepare(campaign, points)
    written = WrittenCampaign(campaign, state, groups)
    written.points = [planned.point for group in groups for planned in group.points]
    written.summary()
    return written


def finished_run(path: Path) -> Path:
    """A run directory whose ``results.json`` says ok (enough for a ``completed`` point)."""
    path.mkdir(parents=True, exist_ok=True)
    results = path / "results.json"
    if not results.is_file():
        results.write_text(json.dumps({"status": "ok"}))
    return path
