"""``esdash sweep --submit``: from a login node, one Slurm job per cluster size.

Each job gets an allocation for its cluster size and runs ``esdash sweep CAMPAIGN --dir DIR
--only cluster.nodes=N`` in it, so the points of one size share clusters and data roots
inside their job, and the sizes run side by side when the machine has room.  The jobs write
only their own points' state files, so they never conflict (:mod:`esdash.campaign.state`).
A job that hits its time limit is simply resubmitted: its sweep resumes.  With ``--dry-run``
the scripts are printed where they would be written; nothing is written or submitted.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from esdash.campaign.plan import matches, parse_filters
from esdash.campaign.spec import Campaign, Point
from esdash.campaign.state import CampaignDir
from esdash.launch import slurm
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import JobRecord
from esdash.session import parse_session


@dataclass(frozen=True)
class JobScript:
    """The batch script of one cluster size: where it goes, and its text."""

    nodes: int
    points: int
    path: Path
    text: str


def job_scripts(
    campaign: Campaign,
    directory: CampaignDir,
    points: Sequence[Point],
    only: Sequence[str],
    extra_args: Sequence[str],
) -> list[JobScript]:
    """One batch script per cluster size with work left, built in memory (nothing written)."""
    filters = parse_filters(only, campaign)
    by_nodes: dict[int, list[Point]] = {}
    for point in points:
        if matches(point, filters) and directory.status(point) != "completed":
            by_nodes.setdefault(point.nodes, []).append(point)
    scripts = []
    for nodes, members in sorted(by_nodes.items()):
        # the job needs room for the most spread-out placement among its points
        widest = min(members, key=lambda p: int(p.get("cluster.nodes_per_host", 1)))
        data = copy.deepcopy(dict(widest.session))
        data.setdefault("slurm", {}).update(campaign.slurm)
        session = parse_session(data, campaign.base_path)
        command = slurm.python_command(
            "sweep",
            str(campaign.path.resolve()),
            "--dir",
            str(directory.path),
            *[arg for spec in only for arg in ("--only", spec)],
            "--only",
            f"cluster.nodes={nodes}",
            *extra_args,
        )
        text = slurm.batch_script(session, RunDir(directory.files.job_dir(nodes)), command)
        scripts.append(JobScript(nodes, len(members), directory.files.job_script(nodes), text))
    return scripts


def show_jobs(scripts: Sequence[JobScript], out: TextIO) -> None:
    """``esdash sweep --submit --dry-run``: print each script where it would be written."""
    for job in scripts:
        print(
            f"# {job.path} ({job.nodes} node(s), {job.points} points): "
            "not written, not submitted (dry run)",
            file=out,
        )
        print(job.text, file=out)
    if not scripts:
        print("nothing to submit: every selected point is completed", file=out)


def submit_jobs(
    campaign: Campaign,
    directory: CampaignDir,
    points: Sequence[Point],
    only: Sequence[str],
    extra_args: Sequence[str],
    out: TextIO,
) -> list[JobRecord]:
    """Write and submit one batch script per cluster size with work left."""
    scripts = job_scripts(campaign, directory, points, only, extra_args)
    directory.prepare(campaign, points)
    jobs = []
    for script in scripts:
        script.path.parent.mkdir(parents=True, exist_ok=True)
        script.path.write_text(script.text)
        job = JobRecord(
            nodes=script.nodes, points=script.points, script=str(script.path), written=time.time()
        )
        job.job = slurm.submit(script.path)
        job.submitted = time.time()
        print(f"submitted job {job.job}: {script.nodes} node(s), {script.points} points", file=out)
        files.write(directory.files.job_record(script.nodes), job)
        jobs.append(job)
    if not jobs:
        print("nothing to submit: every selected point is completed", file=out)
    return jobs
