"""Polling a run directory for a live view: what changed since the last poll.

One :meth:`RunSource.poll` reads, without ever blocking on a missing or half-written file:

* new complete records of ``stream.jsonl`` (:class:`esdash.rundir.stream.StreamReader`);
* new samples of ``cluster.jsonl`` (complete lines only, garbage skipped);
* ``run.json`` and ``session.toml`` when they changed, the nodes' ``status.json`` files,
  ``results.json`` and ``leakage.json`` when it appears or changes (every ``files_every``
  seconds);
* the Slurm job's state for a submitted run (``squeue``, every ``slurm_every`` seconds);
* the tail of one node's log (every ``log_every`` seconds, only when asked for).

It returns an :class:`esdash.view.model.Update` for :class:`esdash.view.model.RunModel`.
Run it in a thread: a poll may take as long as the file system (or ``squeue``) does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from esdash.errors import EsdashError
from esdash.rundir.files import read_regular
from esdash.rundir.files import tail as tail  # a log's last lines, for viewers to show
from esdash.rundir.layout import RESULTS as RESULTS  # names viewers tell the user
from esdash.rundir.layout import RUN_LOG as RUN_LOG
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ClusterSample, NodeStatus, RunInfo
from esdash.rundir.stream import JsonlFollower, StreamReader
from esdash.view.leakage import read_leakage
from esdash.view.model import Update

#: Lines of a node's log that a view shows.
LOG_LINES = 60


def node_log_file(run_path: Path, rank: int, cluster_name: str | None) -> Path | None:
    """The server log of the node of ``rank``: ``<cluster>.log``, else the newest ``*.log``."""
    node = RunDir(run_path)
    logs = node.node_logs_dir(rank)
    if cluster_name and (logs / f"{cluster_name}.log").is_file():
        return logs / f"{cluster_name}.log"
    try:
        candidates = [
            p for p in logs.glob("*.log") if p.name != "gc.log" and not p.name.startswith("gc")
        ]
    except OSError:
        candidates = []
    if candidates:
        return max(candidates, key=lambda p: p.stat().st_mtime)
    stdout = node.node_stdout(rank)
    return stdout if stdout.is_file() else None


class RunSource:
    """Polls one run directory; see the module docstring.  Not thread-safe: one poller."""

    def __init__(
        self,
        path: str | Path,
        *,
        files_every: float = 1.0,
        slurm_every: float = 10.0,
        log_every: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        job_state: Callable[[str], str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.run = RunDir(self.path)
        self.stream = StreamReader(self.run.stream_file)
        self.cluster = JsonlFollower(self.run.cluster_samples_file, ClusterSample)
        self.files_every = files_every
        self.slurm_every = slurm_every
        self.log_every = log_every
        self._clock = clock
        self._job_state = job_state
        self._next_files = 0.0
        self._next_slurm = 0.0
        self._next_log = 0.0
        self._mtimes: dict[str, float] = {}
        self._stream_exists: bool | None = None
        self._results_read = False
        self._cluster_name: str | None = None
        self._log_rank: int | None = None
        self._nodes: dict[int, NodeStatus] | None = None
        self._last_log: tuple[str, str] | None = None
        self.run_info = RunInfo()

    def _changed(self, path: Path) -> bool:
        """Whether ``path`` changed (by mtime) since the last look."""
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return False
        if self._mtimes.get(path.name) == mtime:
            return False
        self._mtimes[path.name] = mtime
        return True

    def poll(self, log_rank: int | None = None) -> Update:
        """Everything new since the last poll; ``log_rank``: whose log to tail (None: none)."""
        update = Update()
        update.records = self.stream.poll()
        stream = self.run.stream_file
        update.problems = [f"{stream}: {p}" for p in self.stream.new_problems()]
        if self.stream.exists != self._stream_exists:
            self._stream_exists = update.stream_exists = self.stream.exists
        update.cluster = self.cluster.poll()
        now = self._clock()
        if now >= self._next_files or log_rank != self._log_rank:
            self._next_files = now + self.files_every
            self._poll_files(update)
        if now >= self._next_slurm:
            self._next_slurm = now + self.slurm_every
            job = self.run_info.slurm_job
            if job and self.run_info.submitted:
                update.slurm_state = self._slurm_state(job)
        if log_rank is not None and (now >= self._next_log or log_rank != self._log_rank):
            self._next_log = now + self.log_every
            log = self._log(log_rank)
            if log != self._last_log:
                self._last_log = update.log = log
        self._log_rank = log_rank
        return update

    def _poll_files(self, update: Update) -> None:
        run = self.run
        if self._changed(run.info_file):
            try:
                self.run_info = run.read_info()
                update.run_info = self.run_info
            except EsdashError as exc:
                update.problems.append(str(exc))
        if self._changed(run.session_file):
            try:
                update.session = tomllib.loads(read_regular(run.session_file).decode())
            except (OSError, ValueError, RecursionError) as exc:
                update.problems.append(f"{run.session_file}: {exc}")
        if self._cluster_name is None and self._changed(run.topology_file):
            try:
                self._cluster_name = run.read_topology().cluster_name
            except EsdashError:
                self._cluster_name = None
        if run.nodes_dir.is_dir():
            nodes = run.node_statuses()
            if nodes != self._nodes:
                self._nodes = update.nodes = nodes
        over = self.stream.finished or not self.stream.exists
        if not self._results_read and over and run.results_file.is_file():
            try:
                update.results = run.read_results()
                self._results_read = True
            except EsdashError as exc:
                # being written (next time), or damaged: say so once it stays that way
                if self.stream.finished:
                    update.problems.append(str(exc))
                    self._results_read = True
        if self._changed(run.leakage_file):  # written once, at the end of the run
            update.leakage = read_leakage(self.path)

    def _slurm_state(self, job: str) -> str:
        job_state = self._job_state
        if job_state is None:
            from esdash.launch.slurm import job_state as squeue_state

            job_state = squeue_state
        try:
            return job_state(job)
        except Exception as exc:  # squeue hung or vanished: show it, keep going
            return f"UNKNOWN ({type(exc).__name__})"

    def _log(self, rank: int) -> tuple[str, str]:
        path = node_log_file(self.path, rank, self._cluster_name)
        label = f"node {rank}"
        if path is None:
            return label, ""
        return f"{label}: {path.relative_to(self.path)}", tail(path, LOG_LINES)
