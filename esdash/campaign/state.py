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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from esdash.boundary import make_dirs
from esdash.campaign.plan import ClusterGroup
from esdash.campaign.spec import Campaign, Point
from esdash.errors import BadInput, EsdashError
from esdash.launch import process
from esdash.paths import runs_dir
from esdash.rundir import files
from esdash.rundir.layout import PASSABLE, CampaignFiles, RunDir
from esdash.rundir.records import (
    CAMPAIGN_SCHEMA,
    CampaignPoint,
    CampaignSummary,
    Counts,
    JobRecord,
    PlannedCluster,
    PointRunner,
    PointState,
    ProcessRecord,
    Runner,
)

STATUSES = ("pending", "running", "completed", "failed", "interrupted", "stale")
#: Seconds without a sign of life after which a point running on another host is abandoned.
ABANDONED_AFTER = 600.0


def default_directory(campaign: Campaign) -> Path:
    return CampaignFiles.default(runs_dir(), campaign.name).path


def _alive_here(runner: Runner | PointRunner) -> bool | None:
    """Whether a sweep process of this host is alive; None for another host (unknown)."""
    if runner.host != socket.gethostname() or not runner.pid:
        return None
    identity = ProcessRecord(pid=runner.pid, host=runner.host, create_time=runner.create_time)
    return process.alive(identity)


def _abandoned(state: PointState) -> bool:
    """Whether a point marked running has no sweep any more.

    On this host the sweep's pid tells.  A sweep on another host (a Slurm job killed after
    its time limit) is presumed gone when its run has written nothing for
    :data:`ABANDONED_AFTER` seconds: a live run appends to its stream every interval.
    """
    runner = state.runner
    alive = _alive_here(runner) if runner is not None else None
    if alive is not None:
        return not alive
    newest = state.started or 0.0
    if state.run:
        run = RunDir(Path(state.run))
        for path in (run.stream_file, run.info_file):
            with contextlib.suppress(OSError):
                newest = max(newest, path.stat().st_mtime)
    return time.time() - newest > ABANDONED_AFTER


@dataclass(frozen=True)
class CampaignDir:
    """A campaign directory and what a sweep keeps in it (the file names: CampaignFiles)."""

    path: Path

    @classmethod
    def open(cls, path: str | Path) -> CampaignDir:
        directory = cls(Path(path).resolve())
        if not directory.summary_file.is_file():
            raise BadInput(
                f"{directory.path} is not a campaign directory (no {directory.summary_file.name}); "
                f"pass the directory `esdash sweep` printed"
            )
        return directory

    @property
    def files(self) -> CampaignFiles:
        return CampaignFiles(self.path)

    @property
    def summary_file(self) -> Path:
        return self.files.summary_file

    def point_dir(self, point_id: str) -> Path:
        return self.files.point_dir(point_id)

    def session_file(self, point_id: str) -> Path:
        return self.files.point_session(point_id)

    def log_file(self, point_id: str) -> Path:
        return self.files.point_output(point_id)

    # -------------------------------------------------------------------- points
    def read_point(self, point_id: str) -> PointState:
        """A point's state; a missing or damaged state file reads as a pending point."""
        try:
            state = self.files.read_point_state(point_id)
        except EsdashError:
            state = None
        return state if state is not None else PointState(id=point_id)

    def write_point(self, point: Point, state: PointState) -> PointState:
        """Write ``state`` (this point's, changed by the caller) with the point's identity."""
        state.id = point.id
        state.label = point.label
        state.values = dict(point.values)
        state.repetition = point.repetition
        state.nodes = point.nodes
        state.updated = time.time()
        self.files.write_point_state(state)
        return state

    def status(self, point: Point) -> str:
        """``completed`` only if the run finished ok, is still there, and the session is the
        same; a point whose session changed since is ``stale`` and runs again."""
        state = self.read_point(point.id)
        status = state.status
        if status == "completed":
            if state.digest != point.digest:
                return "stale"
            if not state.run or not RunDir(Path(state.run)).results_file.is_file():
                return "pending"
        if status == "running" and _abandoned(state):
            return "interrupted"  # its sweep died without recording the end
        return status

    def prepare(self, campaign: Campaign, points: Sequence[Point]) -> None:
        """Create the directory; write each point's session unless its run is complete.

        As root the directory is made passable (0711, like a run directory): the campaign's
        data roots live below it and the node account must reach its own data there.
        """
        make_dirs(self.path, PASSABLE if os.geteuid() == 0 else 0o700)
        shutil.copyfile(campaign.path, self.files.campaign_file)
        for point in points:
            if self.status(point) == "completed":
                continue
            self.point_dir(point.id).mkdir(parents=True, exist_ok=True)
            text = f"# {point.id}: written by esdash sweep from {campaign.path}\n"
            self.session_file(point.id).write_text(text + tomli_w.dumps(point.session))

    # ------------------------------------------------------------------- runners
    def runner_file(self) -> Path:
        return self.files.runner_file(socket.gethostname(), os.getpid())

    def read_runner(self) -> Runner:
        """This sweep process's runner record (a new one the first time)."""
        path = self.runner_file()
        try:
            runner = files.read_optional(path, Runner)
        except EsdashError:
            runner = None
        if runner is None:
            me = process.identify(os.getpid())
            runner = Runner(
                host=socket.gethostname(),
                pid=me.pid,
                create_time=me.create_time,
                started=time.time(),
                slurm_job=os.environ.get("SLURM_JOB_ID"),
            )
        return runner

    @contextlib.contextmanager
    def edit_runner(self) -> Iterator[Runner]:
        """Change this sweep process's runner file by attribute."""
        runner = self.read_runner()
        yield runner
        path = self.runner_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        runner.updated = time.time()
        files.write(path, runner)

    def runners(self) -> list[Runner]:
        found = []
        for path in self.files.runner_files():
            with contextlib.suppress(EsdashError):
                runner = files.read(path, Runner)
                if runner.state == "running" and _alive_here(runner) is False:
                    runner.state = "died"
                found.append(runner)
        return found

    def jobs(self) -> list[JobRecord]:
        found = []
        for path in self.files.job_records():
            with contextlib.suppress(EsdashError):
                found.append(files.read(path, JobRecord))
        return found

    # ------------------------------------------------------------------- summary
    def write_summary(self, campaign: Campaign, groups: Sequence[ClusterGroup]) -> CampaignSummary:
        """Rebuild ``campaign.json`` from the point, runner and job files."""
        points = []
        counts = dict.fromkeys(STATUSES, 0)
        for number, group in enumerate(groups, 1):
            for planned in group.points:
                point = planned.point
                state = self.read_point(point.id)
                status = self.status(point)
                counts[status] += 1
                points.append(
                    CampaignPoint(
                        id=point.id,
                        label=point.label,
                        values=dict(point.values),
                        repetition=point.repetition,
                        nodes=point.nodes,
                        cluster=number,
                        ingest=planned.ingest,
                        status=status,
                        run=state.run,
                        cluster_run=state.cluster_run,
                        attempts=len(state.attempts),
                        reason=state.reason,
                        started=state.started,
                        ended=state.ended,
                        session=str(self.session_file(point.id)),
                    )
                )
        runners = self.runners()
        active = [r for r in runners if r.state == "running"]
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
        summary = CampaignSummary(
            schema=CAMPAIGN_SCHEMA,
            name=campaign.name,
            description=campaign.description,
            file=str(campaign.path.resolve()),
            base_session=str(campaign.base_path),
            dir=str(self.path),
            updated=time.time(),
            state=overall,
            axes={axis.dotted: list(axis.values) for axis in campaign.axes},
            short_names={axis.dotted: axis.short for axis in campaign.axes},
            repetitions=campaign.repetitions,
            ingest=campaign.ingest,
            counts=Counts(total=total, **counts),
            current=[r.current for r in active if r.current is not None],
            clusters=[
                PlannedCluster(
                    number=number,
                    label=group.label,
                    nodes=group.nodes,
                    root_label=group.root_label,
                    points=len(group.points),
                )
                for number, group in enumerate(groups, 1)
            ],
            runners=runners,
            jobs=self.jobs(),
            points=points,
        )
        self.path.mkdir(parents=True, exist_ok=True)
        self.files.write_summary(summary)
        return summary
