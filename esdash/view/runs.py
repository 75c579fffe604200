"""Runs as the dashboard's home screen lists them.

Textual-free, so it is unit-tested like the rest of the core: :func:`list_runs` /
:func:`run_entry` read run directories under ``runs_dir()`` with their state (running,
finished, failed, aborted, pending in Slurm, stopped, stalled ...) from ``run.json``,
``results.json``, the stream's last record and, for a submitted job, ``squeue``; a run whose
``run.json`` or ``results.json`` is damaged is listed as ``damaged``, with the file and the
problem, beside the others.

Nothing here is called per record; the functions touch the file system and may run
``squeue``, so a viewer calls them from a worker thread.  The session files beside the runs
are :mod:`esdash.prepare.sessions`' (choosing what to start is decided before anything is
launched); starting and stopping runs is :mod:`esdash.run`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from esdash.launch import process
from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Final, Header, Interval, ProcessRecord, RunInfo
from esdash.rundir.stream import read_header, read_last

#: A stream whose newest record is older than this many intervals (and STALL_MIN s) is stalled.
STALL_INTERVALS = 3
STALL_MIN = 5.0


@dataclass(frozen=True)
class RunEntry:
    path: Path
    run_id: str
    session: str
    #: running, finished, failed, aborted, pending, queued, starting, stopped, ... or
    #: damaged (``run.json`` or ``results.json`` cannot be read: ``detail`` says why)
    state: str
    detail: str = ""
    created: float | None = None
    slurm_job: str | None = None
    benchmark: bool = False  # a benchmark run (has a stream), not only a cluster

    @property
    def active(self) -> bool:
        """Something may still be running that :func:`esdash.run.stop.stop_run` can stop."""
        return self.state in ("running", "starting", "pending", "queued", "stalled")


def _alive_here(record: ProcessRecord | None) -> bool:
    """The recorded process runs on this host and is still the one recorded."""
    return process.here(record) and process.alive(record)


def _describe_record(record: Interval, header: Header | None) -> str:
    if record.phase == "ingest":
        ingest = record.ingest
        if ingest is not None and ingest.docs_total:
            return f"ingest {ingest.docs_done / ingest.docs_total * 100:.0f}%"
        return "ingest"
    steps = header.steps if header is not None else []
    step = record.step
    of = f"{(step or 0) + 1}/{len(steps)}" if steps else str((step or 0) + 1)
    label = "warm-up" if record.phase == "warmup" else "measuring"
    return f"{label} step {of} {record.step_name or ''}".rstrip()


#: The state of a run whose ``run.json`` or ``results.json`` cannot be read; the entry's
#: detail says which file and what is wrong with it.
DAMAGED = "damaged"


def _damage(exc: RunFileError) -> str:
    """``results.json: Expected `object`, got `array``` (the row names the run already)."""
    return f"{exc.path.name}: {exc.problem}"


def run_entry(
    path: Path,
    job_state: Callable[[str], str] | None = None,
    now: float | None = None,
) -> RunEntry | None:
    """The state of one run directory (None if it is not one)."""
    now = time.time() if now is None else now
    run = RunDir(path)
    damage: list[str] = []
    try:
        info: RunInfo | None = run.read_info()
    except RunFileError as exc:
        info = None
        if run.info_file.is_file():
            damage.append(_damage(exc))
    stream = run.stream_file
    if info is None:
        if not stream.is_file() and not damage:
            return None
        info = RunInfo()
    header = read_header(stream) if stream.is_file() else None
    base = RunEntry(
        path=path,
        run_id=path.name,
        session=str(
            info.session_name or (header.session.get("name") if header is not None else None) or "?"
        ),
        state="",
        created=info.created or (header.started if header is not None else None),
        slurm_job=info.slurm_job or (header.slurm_job_id if header is not None else None),
        benchmark=header is not None or info.bench_launcher is not None,
    )
    if run.results_file.exists():  # not a regular file: damaged
        try:
            results = run.read_results()
            status, reason = results.status, results.reason
        except RunFileError as exc:  # written atomically: never half-written, so damaged
            status, reason = None, None
            damage.append(_damage(exc))
        if damage:
            return replace(base, state=DAMAGED, detail="; ".join(damage))
        if status:
            finished = "finished" if status == "ok" else status
            return replace(base, state=finished, detail=str(reason or ""))
    if damage:
        return replace(base, state=DAMAGED, detail="; ".join(damage))
    last = read_last(stream) if header is not None else None
    if isinstance(last, Final):
        return replace(
            base,
            state="finished" if last.status == "ok" else last.status,
            detail=str(last.reason or ""),
        )
    state = info.state
    if info.submitted and state in ("queued", "starting", "running"):
        job = str(info.slurm_job)
        slurm = _job_state(job, job_state)
        if slurm == "PENDING":
            return replace(base, state="pending", detail=f"Slurm job {job} pending")
        if slurm == "FINISHED":
            return replace(base, state="ended", detail=f"Slurm job {job} left the queue")
        if slurm != "RUNNING":
            return replace(base, state=state or "queued", detail=f"Slurm {slurm}")
    if header is not None:
        interval = header.interval
        wall = last.wall if last is not None and not isinstance(last, Header) else header.started
        age = now - wall if wall else None
        detail = _describe_record(last, header) if isinstance(last, Interval) else ""
        bench = info.bench_launcher
        bench_alive = _alive_here(bench)
        if bench_alive or (age is not None and age <= max(STALL_INTERVALS * interval, STALL_MIN)):
            return replace(base, state="running", detail=detail)
        if process.here(bench) and info.bench_exit is None:
            return replace(base, state="stalled", detail="benchmark writer gone, no final record")
        if age is not None:
            return replace(base, state="stalled", detail=f"no record for {age:.0f} s")
    if state in ("starting", "running", "prepared") and info.launcher is not None:
        launcher = info.launcher
        if process.here(launcher) and not process.alive(launcher):
            return replace(base, state="dead", detail="the cluster launcher is gone")
        label = "running" if state == "running" else "starting"
        return replace(base, state=label, detail="cluster" if state == "running" else "")
    return replace(base, state=str(state or "unknown"), detail="")


def _job_state(job: str, job_state: Callable[[str], str] | None) -> str:
    if job_state is None:
        from esdash.launch.slurm import job_state as squeue_state

        job_state = squeue_state
    try:
        return job_state(job)
    except Exception as exc:  # squeue missing or hung: say so
        return f"UNKNOWN ({type(exc).__name__})"


def list_runs(
    root: Path,
    limit: int = 50,
    job_state: Callable[[str], str] | None = None,
    now: float | None = None,
) -> list[RunEntry]:
    """The newest ``limit`` run directories under ``root``, newest first."""
    try:
        candidates = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []

    def created(path: Path) -> float:
        info = RunDir(path).info_file
        try:
            return info.stat().st_mtime if info.exists() else path.stat().st_mtime
        except OSError:
            return 0.0

    entries = []
    for path in sorted(candidates, key=created, reverse=True):
        entry = run_entry(path, job_state, now)
        if entry is not None:
            entries.append(entry)
        if len(entries) >= limit:
            break
    entries.sort(key=lambda e: e.created or 0.0, reverse=True)
    return entries
