"""Sessions and runs as the dashboard's home screen lists them, and what it can do with them.

Textual-free, so it is unit-tested like the rest of the core:

* :func:`list_sessions`: session files of some directories, validated, with key settings;
* :func:`list_runs` / :func:`run_entry`: run directories under ``runs_dir()`` with their state
  (running, finished, failed, aborted, pending in Slurm, stopped, stalled ...), read from
  ``run.json``, ``results.json``, the stream's last record and, for a submitted job, ``squeue``;
* :func:`launch_local`: prepare a run directory and start ``esdash run SESSION --run-dir``
  in it, detached from the dashboard (its own session: quitting never stops it), output to
  ``esdash-run.log`` there;
* :func:`submit`: ``esdash submit SESSION --bench`` (the benchmark as a Slurm job);
* :func:`stop_run`: stop a running benchmark and its cluster, the way Ctrl-C would.

Nothing here is called per record; the functions touch the file system and may run
``squeue`` or wait for processes, so a viewer calls them from a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.cluster.rundir import read_json, tail, write_json
from esdash.errors import EsdashError

#: A stream whose newest record is older than this many intervals (and STALL_MIN s) is stalled.
STALL_INTERVALS = 3
STALL_MIN = 5.0
#: Output of an ``esdash run`` the dashboard launched, and the record of its pid.
LAUNCH_LOG = "esdash-run.log"
LAUNCH_RECORD = "tui-launch.json"


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


def load_entry(path: Path, plugins: Any = None) -> SessionEntry:
    """One session file, validated; an invalid one carries its error message."""
    from esdash.session import load_session

    try:
        session = load_session(path, plugins)
    except EsdashError as exc:
        return SessionEntry(path=path, name=path.stem, error=str(exc))
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
        return "axes" in tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return False  # shown as an invalid session, with the parser's message


def list_sessions(dirs: Iterable[Path], plugins: Any = None) -> list[SessionEntry]:
    """The session files of ``dirs``, validated (campaign files are left out)."""
    entries = []
    for directory in dirs:
        try:
            files = sorted(directory.glob("*.toml"))
        except OSError:
            continue
        entries.extend(load_entry(path, plugins) for path in files if not is_campaign(path))
    return entries


# -------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunEntry:
    path: Path
    run_id: str
    session: str
    state: str  # running, finished, failed, aborted, pending, queued, starting, stopped ...
    detail: str = ""
    created: float | None = None
    slurm_job: str | None = None
    benchmark: bool = False  # a benchmark run (has a stream), not only a cluster

    @property
    def active(self) -> bool:
        """Something may still be running that :func:`stop_run` can stop."""
        return self.state in ("running", "starting", "pending", "queued", "stalled")


def last_line(path: Path, chunk: int = 65536) -> dict[str, Any] | None:
    """The last complete JSON line of a file (None if there is none)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chunk))
            data = handle.read()
    except OSError:
        return None
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a line being written
    for raw in reversed(lines):
        if raw.strip():
            try:
                value = json.loads(raw)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _stream_header(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as handle:
            first = handle.readline(1024 * 1024)
        value = json.loads(first)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and value.get("type") == "header" else None


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _local(info: dict[str, Any]) -> bool:
    return (info.get("launcher") or {}).get("host") == socket.gethostname()


def _describe_record(record: dict[str, Any], header: dict[str, Any] | None) -> str:
    phase = record.get("phase")
    if phase == "ingest":
        ingest = record.get("ingest") or {}
        if ingest.get("docs_total"):
            return f"ingest {ingest.get('docs_done', 0) / ingest['docs_total'] * 100:.0f}%"
        return "ingest"
    steps = (header or {}).get("steps") or []
    step = record.get("step")
    of = f"{(step or 0) + 1}/{len(steps)}" if steps else str((step or 0) + 1)
    label = "warm-up" if phase == "warmup" else "measuring"
    return f"{label} step {of} {record.get('step_name') or ''}".rstrip()


def run_entry(
    path: Path,
    job_state: Callable[[str], str] | None = None,
    now: float | None = None,
) -> RunEntry | None:
    """The state of one run directory (None if it is not one)."""
    now = time.time() if now is None else now
    try:
        info = read_json(path / "run.json")
    except (OSError, ValueError):
        info = None
    stream = path / "stream.jsonl"
    if not isinstance(info, dict):
        if not stream.is_file():
            return None
        info = {}
    header = _stream_header(stream) if stream.is_file() else None
    base = {
        "path": path,
        "run_id": path.name,
        "session": str(
            info.get("session_name") or ((header or {}).get("session") or {}).get("name") or "?"
        ),
        "created": info.get("created") or (header or {}).get("started"),
        "slurm_job": info.get("slurm_job") or (header or {}).get("slurm_job_id"),
        "benchmark": header is not None or "bench_launcher" in info,
    }
    results_file = path / "results.json"
    if results_file.is_file():
        try:
            results = read_json(results_file)
        except (OSError, ValueError):
            results = {}
        status = results.get("status")
        if status:
            state = "finished" if status == "ok" else status
            return RunEntry(state=state, detail=str(results.get("reason") or ""), **base)
    last = last_line(stream) if header is not None else None
    if last is not None and last.get("type") == "final":
        status = last.get("status") or "ok"
        return RunEntry(
            state="finished" if status == "ok" else status,
            detail=str(last.get("reason") or ""),
            **base,
        )
    state = info.get("state")
    if info.get("submitted") and state in ("queued", "starting", "running"):
        job = str(info.get("slurm_job"))
        slurm = _job_state(job, job_state)
        if slurm == "PENDING":
            return RunEntry(state="pending", detail=f"Slurm job {job} pending", **base)
        if slurm == "FINISHED":
            return RunEntry(state="ended", detail=f"Slurm job {job} left the queue", **base)
        if slurm != "RUNNING":
            return RunEntry(state=state or "queued", detail=f"Slurm {slurm}", **base)
    if header is not None:
        interval = float(header.get("interval") or 1.0)
        wall = (last or {}).get("wall") or header.get("started")
        age = now - float(wall) if wall else None
        detail = _describe_record(last, header) if last and last.get("type") == "interval" else ""
        bench = info.get("bench_launcher") or {}
        bench_alive = bool(bench.get("pid")) and _local(info) and pid_alive(int(bench["pid"]))
        if bench_alive or (age is not None and age <= max(STALL_INTERVALS * interval, STALL_MIN)):
            return RunEntry(state="running", detail=detail, **base)
        if _local(info) and bench.get("pid") and "bench_exit" not in info:
            return RunEntry(
                state="stalled", detail="benchmark writer gone, no final record", **base
            )
        if age is not None:
            return RunEntry(state="stalled", detail=f"no record for {age:.0f} s", **base)
    if state in ("starting", "running", "prepared") and info.get("launcher"):
        launcher = info["launcher"]
        if _local(info) and launcher.get("pid") and not pid_alive(int(launcher["pid"])):
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
        try:
            return (
                (path / "run.json").stat().st_mtime
                if (path / "run.json").exists()
                else (path.stat().st_mtime)
            )
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


# ------------------------------------------------------------------------ launch


@dataclass
class Launch:
    """An ``esdash run`` the dashboard started, and the run directory it runs in."""

    session: str
    session_path: Path
    process: subprocess.Popen[bytes]
    run: Path
    started: float

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> Path:
        return self.run / LAUNCH_LOG

    def exit_code(self) -> int | None:
        return self.process.poll()


def _prepare(session: Any, root: Path) -> Path:
    """The run directory, checked and prepared as ``esdash submit`` prepares one."""
    from esdash.cluster.lifecycle import prepare_run
    from esdash.cluster.rundir import RunDir

    run = RunDir.create(root, session.name)
    try:
        prepare_run(session, run)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)  # nothing was launched in it
        raise
    return run.path


def launch_local(
    session_path: Path,
    root: Path,
    python: str = sys.executable,
    prepare: Callable[[Any, Path], Path] = _prepare,
) -> Launch:
    """Prepare a run directory, then start ``esdash run SESSION --run-dir RUN`` detached.

    Preparing checks what ``esdash run`` would check before launching anything (plugins,
    distribution, data root) and raises its error.  The process gets its own session, so
    quitting the dashboard (or its terminal closing) never stops it; its output goes to
    ``esdash-run.log`` in the run directory, and ``tui-launch.json`` records its pid.
    """
    from esdash.session import load_session

    session = load_session(session_path)
    run = prepare(session, root)
    env = {**os.environ, "ESDASH_RUNS": str(root)}
    command = [python, "-m", "esdash", "run", str(session.path), "--run-dir", str(run)]
    started = time.time()
    with (run / LAUNCH_LOG).open("ab") as handle:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    write_json(
        run / LAUNCH_RECORD,
        {
            "pid": process.pid,
            "host": socket.gethostname(),
            "command": command,
            "started": started,
            "output": str(run / LAUNCH_LOG),
        },
    )
    return Launch(session.name, session.path, process, run, started)


def submit(session_path: Path, root: Path, python: str = sys.executable) -> tuple[str, Path]:
    """``esdash submit SESSION --bench``: the whole benchmark as a Slurm job.

    Returns the job id and the run directory.
    """
    env = {**os.environ, "ESDASH_RUNS": str(root)}
    result = subprocess.run(
        [python, "-m", "esdash", "submit", str(session_path), "--bench"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    if result.returncode != 0:
        raise EsdashError(result.stderr.strip() or result.stdout.strip() or "esdash submit failed")
    job, run = None, None
    for line in result.stdout.splitlines():
        if line.startswith("submitted job "):
            job = line.split()[2].rstrip(";")
            run = line.split("run directory:", 1)[1].strip() if "run directory:" in line else run
    if job is None or run is None:
        raise EsdashError(f"unexpected output of esdash submit: {result.stdout.strip()}")
    return job, Path(run)


# -------------------------------------------------------------------------- stop


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def _is_esdash_run(pid: int) -> bool:
    argv = _cmdline(pid)
    joined = " ".join(argv)
    return "esdash" in joined and "run" in argv


def esdash_run_pid(path: Path, info: dict[str, Any]) -> int | None:
    """The pid of the ``esdash run`` that drives this run, on this host (None: not found)."""
    if not _local(info):
        return None
    with contextlib.suppress(OSError, ValueError):
        record = read_json(path / LAUNCH_RECORD)
        pid = int(record.get("pid") or 0)
        here = record.get("host") == socket.gethostname()
        if pid and here and pid_alive(pid) and _is_esdash_run(pid):
            return pid
    for key in ("bench_launcher", "launcher"):
        child = (info.get(key) or {}).get("pid")
        if child and pid_alive(int(child)):
            parent = _parent(int(child))
            if parent and parent > 1 and _is_esdash_run(parent):
                return parent
    return None


def stop_run(path: Path, grace: float = 120.0) -> str:
    """Stop what runs in ``path``, as Ctrl-C would; returns what was done.

    * ``esdash run`` found on this host: SIGINT to it.  It aborts the benchmark (results so
      far are written), then stops the cluster; this waits up to ``grace`` seconds.
    * otherwise the benchmark ranks (SIGINT to their launcher) and the cluster
      (:func:`esdash.cluster.lifecycle.stop`: stop file, launcher signals, ``scancel`` for a
      submitted job).

    May take minutes: call it from a worker thread.
    """
    from esdash.cluster import lifecycle
    from esdash.cluster.rundir import RunDir

    try:
        info = read_json(path / "run.json")
    except (OSError, ValueError) as exc:
        raise EsdashError(f"{path}: cannot read run.json ({exc}); nothing to stop") from None
    pid = esdash_run_pid(path, info)
    if pid is not None:
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.5)
        if pid_alive(pid):
            return f"sent Ctrl-C to esdash run (pid {pid}); it is still stopping"
        return f"stopped esdash run (pid {pid}) and its cluster"
    done = []
    bench = (info.get("bench_launcher") or {}).get("pid")
    if bench and _local(info) and pid_alive(int(bench)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(bench), signal.SIGINT)
            done.append("interrupted the benchmark ranks")
    outcome = lifecycle.stop(RunDir(path), grace=min(grace, 90.0))
    done.append(f"cluster {outcome}")
    return "; ".join(done)


def launch_output_tail(launch: Launch, lines: int = 5) -> str:
    return tail(launch.output, lines)
