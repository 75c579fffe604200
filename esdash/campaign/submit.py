"""``esdash sweep --submit``: from a login node, one Slurm job per cluster size.

Each job gets an allocation for its cluster size and runs ``esdash sweep CAMPAIGN --dir DIR
--only cluster.nodes=N`` in it, so the points of one size share clusters and data roots
inside their job, and the sizes run side by side when the machine has room.  The jobs write
only their own points' state files, so they never conflict (:mod:`esdash.campaign.state`).
A job asks Slurm for the campaign's ``[slurm] time`` (or its base session's); when neither
sets one, for the sum of its points' estimated wall times with the margin of
:func:`esdash.prepare.timelimit.time_limit` (:func:`wall_times`).  A job that hits its time
limit is simply resubmitted: its sweep resumes.  With ``--dry-run`` the scripts are printed
where they would be written; nothing is written or submitted.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from esdash.campaign import plan as campaign_plan
from esdash.campaign.plan import REUSE, PlannedPoint, SizeTime, matches, parse_filters
from esdash.campaign.spec import Campaign, Point
from esdash.campaign.state import CampaignDir
from esdash.errors import BadInput
from esdash.launch import slurm
from esdash.prepare.slurm_job import job_request, session_time
from esdash.prepare.timelimit import slurm_time
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import JobRecord
from esdash.session import parse_session

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet
    from esdash.prepare.walltime import WallTime


@dataclass(frozen=True)
class JobScript:
    """The batch script of one cluster size: where it goes, its text, and its time."""

    nodes: int
    points: int
    path: Path
    text: str
    #: The size's estimated wall time and ``--time`` (None: ``[slurm] time`` set, not needed).
    estimate: SizeTime | None = None


def _to_run(
    campaign: Campaign, directory: CampaignDir, points: Sequence[Point], only: Sequence[str]
) -> dict[int, list[Point]]:
    """Per cluster size, the points selected by ``only`` that are not completed."""
    filters = parse_filters(only, campaign)
    by_nodes: dict[int, list[Point]] = {}
    for point in points:
        if matches(point, filters) and directory.status(point) != "completed":
            by_nodes.setdefault(point.nodes, []).append(point)
    return by_nodes


def _job_session_data(campaign: Campaign, members: Sequence[Point]) -> dict[str, object]:
    """The session a size's job is written from: the most spread-out placement among its
    points (the job needs room for it), with the campaign's ``[slurm]`` table over it."""
    widest = min(members, key=lambda p: int(p.get("cluster.nodes_per_host", 1)))
    data = copy.deepcopy(dict(widest.session))
    data.setdefault("slurm", {}).update(campaign.slurm)
    return data


def wall_times(
    campaign: Campaign,
    directory: CampaignDir,
    points: Sequence[Point],
    only: Sequence[str],
    trust_track_code: bool = False,
    estimated: Callable[[], None] = lambda: None,
) -> list[SizeTime]:
    """Per cluster size with work left, its clusters and points with their estimated wall
    times (:func:`esdash.campaign.plan.wall_times`), and the ``--time`` its job asks for.
    ``estimated`` is called after each point (a progress phase counts them)."""
    from esdash.plugin.manager import get_plugins

    plugins = get_plugins()
    by_nodes = _to_run(campaign, directory, points, only)
    to_run = {point.id for members in by_nodes.values() for point in members}

    def estimate(planned: PlannedPoint) -> WallTime:
        try:
            return point_wall_time(campaign, planned, plugins, trust_track_code)
        finally:
            estimated()

    def own_time(nodes: int) -> str | None:
        data = _job_session_data(campaign, by_nodes[nodes])
        table = data.get("slurm")
        value = table.get("time") if isinstance(table, Mapping) else None
        return None if value is None else str(value)

    groups = campaign_plan.plan(points, campaign.ingest)
    return campaign_plan.wall_times(groups, to_run, estimate, own_time)


def point_wall_time(
    campaign: Campaign, planned: PlannedPoint, plugins: PluginSet, trust_track_code: bool
) -> WallTime:
    """One point's estimated wall time, planned against the distribution its session would
    run (when installed: steps it cannot run take no time); a point that reuses the index
    ingests nothing.  :class:`BadInput` when its session or track does not load."""
    from esdash.cluster.distribution import resolve_home
    from esdash.prepare.walltime import estimate_wall_time

    session = parse_session(
        planned.point.session, campaign.base_path, plugins, trust_track_code=trust_track_code
    )
    try:
        backend = plugins.backend(session.cluster.backend.name)
        distribution = backend.inspect(resolve_home(session))
    except BadInput:  # not installed: the plan refuses nothing for a module
        distribution = None
    track = plugins.track(session.track.name)
    return estimate_wall_time(
        session, track, distribution=distribution, ingest=planned.ingest != REUSE
    )


def job_scripts(
    campaign: Campaign,
    directory: CampaignDir,
    points: Sequence[Point],
    only: Sequence[str],
    extra_args: Sequence[str],
    times: Sequence[SizeTime] | None = None,
    trust_track_code: bool = False,
) -> list[JobScript]:
    """One batch script per cluster size with work left, built in memory (nothing written).

    A size whose campaign and base session set no ``[slurm] time`` asks for its estimated
    sum with the margin (``times``, from :func:`wall_times`; made here when not given); a
    point without an estimate then stops the submit with one line naming it.
    """
    by_nodes = _to_run(campaign, directory, points, only)
    by_size = {size.nodes: size for size in times or ()}
    scripts = []
    for nodes, members in sorted(by_nodes.items()):
        data = _job_session_data(campaign, members)
        session = parse_session(data, campaign.base_path)
        size = by_size.get(nodes)
        if size is None and session_time(session) is None:
            made = wall_times(campaign, directory, points, only, trust_track_code)
            by_size.update({each.nodes: each for each in made})
            size = by_size.get(nodes)
        default = None
        if size is not None and size.job_time.own is None:
            if size.missing:
                first = size.missing[0]
                raise BadInput(
                    f"{campaign.path}: point {first.planned.point.label}: no wall-time "
                    f"estimate for the job's --time ({first.problem}); set [slurm] time in "
                    f"the campaign, or see `esdash sweep {campaign.path} --dry-run`"
                )
            default = size.job_time.limit.text
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
        job_dir = RunDir(directory.files.job_dir(nodes))
        text = slurm.batch_script(job_request(session), job_dir, command, default_time=default)
        script = JobScript(nodes, len(members), directory.files.job_script(nodes), text, size)
        scripts.append(script)
    return scripts


def _time_said(script: JobScript) -> str:
    """``, --time=00:45:00 (...)``: what the job asked Slurm for, and why."""
    size = script.estimate
    if size is None:  # the campaign or its base session sets the time
        return ", --time from [slurm] time"
    if size.job_time.own is not None:
        return f", --time={size.job_time.own} ([slurm] time)"
    return (
        f", --time={size.job_time.text} (the estimated {slurm_time(size.seconds)} "
        f"{size.job_time.limit.margin})"
    )


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
    trust_track_code: bool = False,
    times: Sequence[SizeTime] | None = None,
) -> list[JobRecord]:
    """Write and submit one batch script per cluster size with work left (``times``: see
    :func:`job_scripts`)."""
    scripts = job_scripts(campaign, directory, points, only, extra_args, times, trust_track_code)
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
        print(
            f"submitted job {job.job}: {script.nodes} node(s), {script.points} points"
            f"{_time_said(script)}",
            file=out,
        )
        files.write(directory.files.job_record(script.nodes), job)
        jobs.append(job)
    if not jobs:
        print("nothing to submit: every selected point is completed", file=out)
    return jobs
