"""Sessions and runs as the dashboard's home screen lists them.

Textual-free, so it is unit-tested like the rest of the core:

* :func:`list_sessions`: session files of some directories, validated, with key settings;
* :func:`list_runs` / :func:`run_entry`: run directories under ``runs_dir()`` with their state
  (running, finished, failed, aborted, pending in Slurm, stopped, stalled ...), read from
  ``run.json``, ``results.json``, the stream's last record and, for a submitted job, ``squeue``;
  a run whose ``run.json`` or ``results.json`` is damaged is listed as ``damaged``, with the
  file and the problem, beside the others.

Starting and stopping runs is :mod:`esdash.run`'s.  Nothing here is called per record; the
functions touch the file system and may run ``squeue``, so a viewer calls them from a worker
thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.errors import EsdashError
from esdash.launch import process
from esdash.rundir import files
from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Final, Header, Interval, ProcessRecord, RunInfo
from esdash.rundir.stream import read_header, read_last

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet

#: A stream whose newest record is older than this many intervals (and STALL_MIN s) is stalled.
STALL_INTERVALS = 3
STALL_MIN = 5.0


# ---------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionEntry:
    path: Path
    name: str
    description: str = ""
    nodes: int | None = None
    workers_per_node: int | None = None
    track: str | None = None
    encryption: str | None = None
    interconnect: str | None = None
    warmup: float | None = None
    duration: float | None = None
    slurm_time: str | None = None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None


def session_dirs(extra: Iterable[str | Path] = ()) -> list[Path]:
    """``./sessions``, ``ESDASH_SESSIONS`` (``:``-separated) and ``extra``, without repeats."""
    found: list[Path] = []
    candidates = [Path("sessions"), *(Path(p) for p in extra)]
    candidates += [Path(p) for p in os.environ.get("ESDASH_SESSIONS", "").split(":") if p]
    for candidate in candidates:
        path = candidate.expanduser().resolve()
        if path not in found:
            found.append(path)
    return found


def load_entry(path: Path, plugins: PluginSet | None = None, checked: bool = False) -> SessionEntry:
    """One session file, validated; an invalid one carries its error message.

    ``checked`` also runs the pre-flight checks of the session stage (the ones
    ``esdash session check`` runs): the dashboard's validate and launch keys.
    """
    from esdash.cluster import preflight
    from esdash.session import load_session

    try:
        session = load_session(path, plugins)
        problems = preflight.findings(session, "session", plugins=plugins) if checked else []
    except EsdashError as exc:
        return SessionEntry(path=path, name=path.stem, error=str(exc))
    if problems:
        return SessionEntry(path=path, name=session.name, error="\n".join(problems))
    return SessionEntry(
        path=path,
        name=session.name,
        description=session.description,
        nodes=session.cluster.nodes,
        workers_per_node=session.benchmark.workers_per_node,
        track=session.track.name,
        encryption=session.encryption.name,
        interconnect=session.cluster.interconnect,
        warmup=session.benchmark.warmup,
        duration=session.benchmark.duration,
        slurm_time=session.slurm.time,
    )


def is_campaign(path: Path) -> bool:
    """A campaign file (``esdash sweep``: it has ``[axes]``) lives among sessions too."""
    from esdash.session import tomllib

    try:
        return "axes" in tomllib.loads(files.read_regular(path).decode())
    except (OSError, ValueError, RecursionError):
        return False  # shown as an invalid session, with the parser's message


def list_sessions(dirs: Iterable[Path], plugins: PluginSet | None = None) -> list[SessionEntry]:
    """The session files of ``dirs``, validated (campaign files are left out)."""
    entries = []
    for directory in dirs:
        try:
            found = sorted(directory.glob("*.toml"))
        except OSError:
            continue
        entries.extend(load_entry(path, plugins) for path in found if not is_campaign(path))
    return entries


# -------------------------------------------------------------------------- runs


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
    base = {
        "path": path,
        "run_id": path.name,
        "session": str(
            info.session_name or (header.session.get("name") if header is not None else None) or "?"
        ),
        "created": info.created or (header.started if header is not None else None),
        "slurm_job": info.slurm_job or (header.slurm_job_id if header is not None else None),
        "benchmark": header is not None or info.bench_launcher is not None,
    }
    if run.results_file.exists():  # not a regular file: damaged
        try:
            results = run.read_results()
            status, reason = results.status, results.reason
        except RunFileError as exc:  # written atomically: never half-written, so damaged
            status, reason = None, None
            damage.append(_damage(exc))
        if damage:
            return RunEntry(state=DAMAGED, detail="; ".join(damage), **base)
        if status:
            state = "finished" if status == "ok" else status
            return RunEntry(state=state, detail=str(reason or ""), **base)
    if damage:
        return RunEntry(state=DAMAGED, detail="; ".join(damage), **base)
    last = read_last(stream) if header is not None else None
    if isinstance(last, Final):
        return RunEntry(
            state="finished" if last.status == "ok" else last.status,
            detail=str(last.reason or ""),
            **base,
        )
    state = info.state
    if info.submitted and state in ("queued", "starting", "running"):
        job = str(info.slurm_job)
        slurm = _job_state(job, job_state)
        if slurm == "PENDING":
            return RunEntry(state="pending", detail=f"Slurm job {job} pending", **base)
        if slurm == "FINISHED":
            return RunEntry(state="ended", detail=f"Slurm job {job} left the queue", **base)
        if slurm != "RUNNING":
            return RunEntry(state=state or "queued", detail=f"Slurm {slurm}", **base)
    if header is not None:
        interval = header.interval
        wall = last.wall if last is not None and not isinstance(last, Header) else header.started
        age = now - wall if wall else None
        detail = _describe_record(last, header) if isinstance(last, Interval) else ""
        bench = info.bench_launcher
        bench_alive = _alive_here(bench)
        if bench_alive or (age is not None and age <= max(STALL_INTERVALS * interval, STALL_MIN)):
            return RunEntry(state="running", detail=detail, **base)
        if process.here(bench) and info.bench_exit is None:
            return RunEntry(
                state="stalled", detail="benchmark writer gone, no final record", **base
            )
        if age is not None:
            return RunEntry(state="stalled", detail=f"no record for {age:.0f} s", **base)
    if state in ("starting", "running", "prepared") and info.launcher is not None:
        launcher = info.launcher
        if process.here(launcher) and not process.alive(launcher):
            return RunEntry(state="dead", detail="the cluster launcher is gone", **base)
        label = "running" if state == "running" else "starting"
        return RunEntry(state=label, detail="cluster" if state == "running" else "", **base)
    return RunEntry(state=str(state or "unknown"), detail="", **base)


def _job_state(job: str, job_state: Callable[[str], str] | None) -> str:
    if job_state is None:
        from esdash.launch.slurm import job_state
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
