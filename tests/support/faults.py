"""What the fault tests of `esdash run` share: a quick 1-node session, the phases of a run,
and processes identified by pid *and* create time (a pid alone may name a new process).

Used by ``faults/test_signals.py`` (stop signals esdash can catch) and
``faults/test_orphans.py`` (a killed ``esdash run`` whose ranks must stop by themselves).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psutil

from support import static_engine
from support.cli import java_pids_under, write_session

#: The one query step: long enough that the signal lands inside it, short for CI.
STEP_SECONDS = 4
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 100\n'
    'queries = "steps.json"\n'
)
#: Rank 0 holds the results phase this long: writing results takes milliseconds.
PAUSE = "results=4"


def make_session(directory: Path, name: str, tables: str = "", *, static: bool = False) -> Path:
    """A 1-node session (security off: the start is the shortest) with one match_all step.

    ``static``: on the static engine (``support/static_engine.py``), for the cases about
    esdash's ranks once the cluster is up; its bulk answers take 0.2 s, so the ingest of
    10 batches lasts long enough for a signal to land in it.  Run such a session with
    ``static_engine.env()``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    step = {
        "name": "all",
        "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
        "warmup_time_secs": 0,
        "execution_time_secs": STEP_SECONDS,
    }
    (directory / "steps.json").write_text(json.dumps([step]))
    return write_session(
        directory,
        name,
        1,
        security=False,
        track='name = "mri"\ndocuments = 1000',
        tables=BENCH + tables,
        extra_cluster=static_engine.cluster_table(bulk_latency="200ms") if static else "",
    )


def stream_phases(run: Path) -> list[str]:
    """The phases rank 0 announced so far (its ``phase`` events), in order."""
    found = []
    try:
        text = (run / "stream.jsonl").read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        if '"kind":"phase"' not in line.replace(" ", ""):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        found.append(record["data"]["phase"])
    return found


def cluster_starting(run: Path) -> bool:
    """The cluster start is under way: the node's processes run, the cluster is not ready."""
    try:
        info = json.loads((run / "run.json").read_text())
        node = json.loads((run / "nodes" / "0" / "status.json").read_text())
    except (FileNotFoundError, ValueError):
        return False
    return info.get("state") == "starting" and node.get("state") == "running"


def server_logging(run: Path) -> bool:
    """The server JVM runs and has begun its start (its log file has lines)."""
    logs = run / "nodes" / "0" / "logs"
    started = any(log.stat().st_size > 0 for log in logs.glob("*.log")) if logs.is_dir() else False
    return started and len(java_pids_under(run)) >= 2


def node_pids_under(run: Path) -> list[int]:
    """The node processes of run directory ``run``: both JVMs of an Elasticsearch node, or
    a static-engine node's server."""
    return java_pids_under(run) + static_engine.node_pids_under(run)


#: Processes by pid and create time: a pid alone may name another process a moment later.
Seen = dict[int, float]


def identify(pids: list[int]) -> Seen:
    found = {}
    for pid in pids:
        try:
            found[pid] = psutil.Process(pid).create_time()
        except psutil.Error:
            continue
    return found


def descendants(pid: int) -> Seen:
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    return identify([child.pid for child in below])


def running(seen: Seen) -> dict[int, str]:
    """The processes of ``seen`` still running (same pid and create time, no zombie)."""
    left = {}
    for pid, created in seen.items():
        try:
            found = psutil.Process(pid)
            with found.oneshot():
                if found.status() == psutil.STATUS_ZOMBIE:
                    continue
                if abs(found.create_time() - created) > 0.05:
                    continue  # the pid was given to a new process
                left[pid] = " ".join(found.cmdline())[:200]
        except psutil.Error:
            continue
    return left


def await_phase(
    proc: subprocess.Popen, runs: Path, name: str, phase: str, timeout: float, errors: Path
) -> tuple[Path, Seen]:
    """Wait until the `esdash run` ``proc`` (session ``name``) reaches ``phase`` ("start": its
    cluster is starting; else the stream's phase event); its run directory, and every process
    seen below it by then and the node's JVMs."""
    seen: Seen = {}
    run = None
    before = set(runs.glob(f"{name}-*"))
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"phase {phase} not reached in {timeout} s"
        assert proc.poll() is None, f"esdash run ended before {phase}: {errors.read_text()}"
        seen |= descendants(proc.pid)
        if run is None:
            new = set(runs.glob(f"{name}-*")) - before
            run = new.pop() if new else None
        if run is not None and (
            cluster_starting(run) if phase == "start" else phase in stream_phases(run)
        ):
            return run, seen | descendants(proc.pid) | identify(node_pids_under(run))
        time.sleep(0.05)


def gone_within(seen: Seen, run: Path, since: float, limit: float) -> tuple[float | None, dict]:
    """Seconds from ``since`` until every process of ``seen`` and the run's JVMs were gone
    (None: not within ``limit`` + 15 s), and what was still running at the end."""
    while time.monotonic() - since < limit + 15:
        if not running(seen) and not node_pids_under(run):
            return time.monotonic() - since, {}
        time.sleep(0.05)
    return None, running(seen | identify(node_pids_under(run)))
