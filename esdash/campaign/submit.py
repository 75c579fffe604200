"""``esdash sweep --submit``: from a login node, one Slurm job per cluster size.

Each job gets an allocation for its cluster size and runs ``esdash sweep CAMPAIGN --dir DIR
--only cluster.nodes=N`` in it, so the points of one size share clusters and data roots
inside their job, and the sizes run side by side when the machine has room.  The jobs write
only their own points' state files, so they never conflict (:mod:`esdash.campaign.state`).
A job that hits its time limit is simply resubmitted: its sweep resumes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import TextIO

from esdash.campaign.plan import matches, parse_filters
from esdash.campaign.spec import Campaign, Point
from esdash.campaign.state import CampaignDir
from esdash.launch import slurm
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import JobRecord
from esdash.session import parse_session


def submit_jobs(
    campaign: Campaign,
    directory: CampaignDir,
    points: Sequence[Point],
    only: Sequence[str],
    extra_args: Sequence[str],
    out: TextIO,
    dry_run: bool = False,
) -> list[JobRecord]:
    """Write (and unless ``dry_run`` submit) one batch script per cluster size with work left."""
    filters = parse_filters(only, campaign)
    by_nodes: dict[int, list[Point]] = {}
    for point in points:
        if matches(point, filters) and directory.status(point) != "completed":
            by_nodes.setdefault(point.nodes, []).append(point)
    directory.prepare(campaign, points)
    jobs = []
    for nodes, members in sorted(by_nodes.items()):
        # the job needs room for the most spread-out placement among its points
        widest = min(members, key=lambda p: int(p.get("cluster.nodes_per_host", 1)))
        data = copy.deepcopy(dict(widest.session))
        data.setdefault("slurm", {}).update(campaign.slurm)
        session = parse_session(data, campaign.base_path)
        job_dir = directory.files.job_dir(nodes)
        job_dir.mkdir(parents=True, exist_ok=True)
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
        script = directory.files.job_script(nodes)
        script.write_text(slurm.batch_script(session, RunDir(job_dir), command))
        job = JobRecord(nodes=nodes, points=len(members), script=str(script), written=time.time())
        if dry_run:
            print(f"wrote {script} ({len(members)} points, not submitted)", file=out)
        else:
            job.job = slurm.submit(script)
            job.submitted = time.time()
            print(f"submitted job {job.job}: {nodes} node(s), {len(members)} points", file=out)
        files.write(directory.files.job_record(nodes), job)
        jobs.append(job)
    if not jobs:
        print("nothing to submit: every selected point is completed", file=out)
    return jobs
