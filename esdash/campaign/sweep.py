"""``esdash sweep``: run a campaign's points inside one allocation (or on this machine).

For each cluster group of the plan (:mod:`esdash.campaign.plan`) the sweep starts the
cluster once (:func:`esdash.run.start.up`, in this process, on the group's data root)
and runs every pending point of the group as ``esdash run POINT --cluster RUN`` in a child
process, then stops the cluster.  A child process per point, rather than a call, because a
point that crashes or hangs must not take the campaign down, and because ``esdash run``
already knows how to abort its MPI ranks cleanly on SIGINT and still write its results.

Resuming is the normal way to run: a point whose run completed (and whose session has not
changed since) is skipped; a failed point is retried up to ``--retries`` times and otherwise
reported.  Ctrl-C or SIGTERM (a Slurm time limit) is forwarded to the running point, which
is recorded as interrupted; the cluster is stopped; the next sweep starts where this one
ended.  Progress goes to the terminal as lines (batch logs) and to the campaign directory
(``campaign.json``) for the dashboard.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

from esdash.campaign.check import failing, failure_lines, point_findings
from esdash.campaign.plan import (
    EACH,
    FIRST,
    ClusterGroup,
    PlannedPoint,
    matches,
    parse_filters,
    render_plan,
)
from esdash.campaign.plan import plan as make_plan
from esdash.campaign.spec import Campaign, Point
from esdash.campaign.state import CampaignDir, default_directory
from esdash.errors import (
    EXIT_ABORT,
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_THRESHOLD,
    EsdashError,
)
from esdash.launch import process, slurm
from esdash.paths import runs_dir
from esdash.progress import Silent
from esdash.run import start, stop
from esdash.rundir.files import tail
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    Attempt,
    Counts,
    CurrentPoint,
    PointRunner,
    Results,
    RunnerCluster,
)
from esdash.session import load_session

#: Seconds an interrupted point may take to abort before it is asked again, then killed.
INTERRUPT_GRACE = 60.0


class Interrupted(Exception):
    """The user (or Slurm) asked the sweep to stop."""


@dataclass
class SweepOptions:
    retries: int = 1
    fresh: bool = False
    only: tuple[str, ...] = ()
    quiet: bool = False
    timeout: float = start.DEFAULT_TIMEOUT
    dry_run: bool = False
    #: Passed to every point's ``esdash run --reuse-index``.
    reuse_index: str = "auto"
    #: ``--trust-track-code``: the track may run its own code (passed to every point's run).
    trust_track_code: bool = False


@dataclass
class _Cluster:
    run: RunDir
    process: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Sweep:
    campaign: Campaign
    directory: CampaignDir
    points: list[Point]
    options: SweepOptions = field(default_factory=SweepOptions)
    out: TextIO = sys.stdout

    def __post_init__(self) -> None:
        self.groups: list[ClusterGroup] = make_plan(self.points, self.campaign.ingest)
        self.child: subprocess.Popen[str] | None = None
        self.interrupted = False
        self.wiped: set[str] = set()
        self.done = 0
        self.total = 0
        self.failed: list[tuple[Point, str]] = []

    # ------------------------------------------------------------------- output
    def say(self, message: str) -> None:
        print(f"esdash sweep: {message}", file=self.out, flush=True)

    def summary(self) -> None:
        self.directory.write_summary(self.campaign, self.groups)

    # ----------------------------------------------------------------- the run
    def todo(self) -> list[tuple[int, ClusterGroup, list[PlannedPoint]]]:
        """Per group, the selected points that still have to run."""
        filters = parse_filters(self.options.only, self.campaign)
        result = []
        for number, group in enumerate(self.groups, 1):
            pending = []
            for planned in group.points:
                if not matches(planned.point, filters):
                    continue
                status = self.directory.status(planned.point)
                if status == "completed":
                    continue
                if status == "running":
                    runner = self.directory.read_point(planned.point.id).runner
                    pid = runner.pid if runner is not None else None
                    host = runner.host if runner is not None else None
                    self.say(
                        f"{planned.point.label}: skipped, running in another sweep "
                        f"(pid {pid} on {host})"
                    )
                    continue
                pending.append(planned)
            if pending:
                result.append((number, group, pending))
        return result

    def announce(self) -> list[tuple[int, ClusterGroup, list[PlannedPoint]]]:
        """The first line of every sweep (real or dry): points, completed, to run; the todo."""
        todo = self.todo()
        self.total = sum(len(pending) for _n, _g, pending in todo)
        completed = sum(self.directory.status(p) == "completed" for p in self.points)
        self.say(
            f"campaign {self.campaign.name}: {len(self.points)} points, {completed} completed, "
            f"{self.total} to run on {len(todo)} cluster(s); directory {self.directory.path}"
        )
        return todo

    def dry_run(self) -> int:
        """The plan, and every point that would run through ``session check``'s checks.

        Writes nothing (no point session, state, summary, runner or directory): a dry run
        over a campaign whose base session changed must leave its completed points
        completed.  Exit 2 when a point would be refused, naming it and the reason.
        """
        todo = self.announce()
        to_run = [planned.point for _n, _g, pending in todo for planned in pending]
        findings = point_findings(self.campaign, to_run, self.options.trust_track_code)
        status = {p.id: self.directory.status(p) for p in self.points}
        bad = failing(to_run, findings)
        for line in render_plan(self.groups, status, {p.id for p in bad}):
            print(line, file=self.out)
        for problem in failure_lines(to_run, findings):
            print(f"esdash: error: {problem}", file=sys.stderr)
        if bad:
            self.say(
                f"dry run: {len(bad)} of {len(to_run)} point(s) to run would fail their "
                "pre-flight checks; nothing was written"
            )
            return EXIT_BAD_INPUT
        self.say("dry run: every point to run passes its pre-flight checks; nothing was written")
        return EXIT_OK

    def run(self) -> int:
        if self.options.dry_run:
            return self.dry_run()
        self.directory.prepare(self.campaign, self.points)
        todo = self.announce()
        if not todo:
            self.summary()
            return EXIT_OK
        with self.directory.edit_runner() as runner:
            runner.state, runner.only, runner.current = "running", list(self.options.only), None
        self.summary()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        outcome = "finished"
        try:
            for number, group, pending in todo:
                self._run_group(number, group, pending)
        except (Interrupted, KeyboardInterrupt):
            outcome = "interrupted"
        except BaseException:
            outcome = "failed"
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            with self.directory.edit_runner() as runner:
                runner.state, runner.current, runner.cluster = outcome, None, None
            self.summary()
        return self._report(outcome)

    def _report(self, outcome: str) -> int:
        for point, reason in self.failed:
            self.say(f"FAILED {point.label}: {reason}")
        counts = self.directory.write_summary(self.campaign, self.groups).counts or Counts()
        self.say(
            f"{outcome}: {counts.completed}/{counts.total} points completed, "
            f"{counts.failed} failed, {counts.interrupted} interrupted; "
            f"report with: esdash report {self.directory.path}"
        )
        if outcome == "interrupted":
            self.say(f"resume with: {self.resume_command()}")
            return EXIT_ABORT
        return EXIT_FAILURE if self.failed else EXIT_OK

    def resume_command(self) -> str:
        """The command that runs what is left: this one, with its directory and filters."""
        words = ["esdash", "sweep", str(self.campaign.path)]
        if self.directory.path.resolve() != default_directory(self.campaign).resolve():
            words += ["--dir", str(self.directory.path)]
        for only in self.options.only:
            words += ["--only", only]
        if self.options.trust_track_code:
            words.append("--trust-track-code")
        return shlex.join(words)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        first = not self.interrupted
        self.interrupted = True
        child = self.child
        if child is not None and child.poll() is None:
            # `esdash run` aborts its ranks on SIGINT and still writes its results; a second
            # SIGINT makes it kill them.  Ranks that do not react are not waited for forever.
            process.signal_child(child, signal.SIGINT)
            if first:
                self._watchdog(child)
            return
        raise KeyboardInterrupt

    def _watchdog(self, child: subprocess.Popen[str]) -> None:
        """Escalate when an interrupted point does not end: SIGINT again, then SIGKILL."""

        def escalate(sig: int, then: float | None) -> None:
            if child.poll() is not None:
                return
            self.say(f"the interrupted run is still going; sending {signal.Signals(sig).name}")
            process.signal_child(child, sig)
            if then is not None:
                later = threading.Timer(then, escalate, (signal.SIGKILL, None))
                later.daemon = True
                later.start()

        timer = threading.Timer(INTERRUPT_GRACE, escalate, (signal.SIGINT, INTERRUPT_GRACE))
        timer.daemon = True
        timer.start()

    # ------------------------------------------------------------------ a group
    def _run_group(self, number: int, group: ClusterGroup, pending: list[PlannedPoint]) -> None:
        cluster: _Cluster | None = None
        try:
            for index, planned in enumerate(pending):
                attempts = 0
                while True:
                    attempts += 1
                    if cluster is not None and not cluster.alive():
                        self.say(f"cluster {number}: the cluster stopped; starting a new one")
                        self._stop(cluster, "failed")
                        cluster = None
                    if cluster is None:
                        try:
                            cluster = self._start_cluster(number, group, planned.point)
                        except EsdashError as exc:
                            self._cluster_failed(group, pending[index:], str(exc))
                            return
                    outcome = self._run_point(planned, cluster, attempts)
                    if outcome == "completed":
                        break
                    if outcome == "interrupted":
                        raise Interrupted
                    if attempts > self.options.retries:
                        reason = self.directory.read_point(planned.point.id).reason
                        self.failed.append((planned.point, str(reason)))
                        break
                    self.say(f"{planned.point.label}: retrying ({attempts}/{self.options.retries})")
        finally:
            if cluster is not None:
                self._stop(cluster, "stopped")

    def _start_cluster(self, number: int, group: ClusterGroup, point: Point) -> _Cluster:
        """Start the group's cluster (retried like a point); raise if it never comes up."""
        session = load_session(
            self.directory.session_file(point.id), trust_track_code=self.options.trust_track_code
        )
        fresh = self.options.fresh and group.root_label not in self.wiped
        last = ""
        for attempt in range(1, self.options.retries + 2):
            run = RunDir.create(runs_dir(), session.name)
            with run.edit_info() as info:
                info.campaign = str(self.directory.path)
                info.campaign_cluster = number
            self.say(
                f"cluster {number}/{len(self.groups)} ({group.label}): starting "
                f"{session.cluster.nodes} node(s) in {run.path}"
                + (", wiping its data root (--fresh)" if fresh else "")
            )
            with self.directory.edit_runner() as runner:
                runner.cluster = RunnerCluster(number=number, label=group.label, run=str(run.path))
            started = time.monotonic()
            try:
                quiet = Silent() if self.options.quiet else None  # --quiet: the sweep's lines
                run, launcher, _health = start.up(
                    session, fresh, self.options.timeout, run, progress=quiet, owned=True
                )
            except EsdashError as exc:
                last = str(exc)
                self.say(f"cluster {number}: failed to start (attempt {attempt}): {last}")
                continue
            self.wiped.add(group.root_label)
            self.say(f"cluster {number}: up in {time.monotonic() - started:.0f} s")
            return _Cluster(run, launcher)
        raise EsdashError(last)

    def _cluster_failed(
        self, group: ClusterGroup, pending: list[PlannedPoint], reason: str
    ) -> None:
        message = f"its cluster ({group.label}) did not start: {reason.splitlines()[0]}"
        for planned in pending:
            state = self.directory.read_point(planned.point.id)
            state.status, state.reason, state.digest = "failed", message, planned.point.digest
            self.directory.write_point(planned.point, state)
            self.failed.append((planned.point, message))
            self.done += 1
        self.summary()

    def _stop(self, cluster: _Cluster, reason: str) -> None:
        """Stop a cluster; further Ctrl-C waits until it is down (no node is left behind)."""
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.say(f"stopping the cluster {cluster.run.path}")
            stop.stop_cluster(cluster.run, cluster.process, reason=reason)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            with self.directory.edit_runner() as runner:
                runner.cluster = None

    # ------------------------------------------------------------------ a point
    def _run_point(self, planned: PlannedPoint, cluster: _Cluster, attempt: int) -> str:
        point = planned.point
        name = str(point.session["name"])
        run = RunDir.create(runs_dir(), name)
        with run.edit_info() as info:
            info.campaign = str(self.directory.path)
            info.campaign_point = point.id
            info.session_name = name
            info.state = "prepared"
            info.created = time.time()
        started = time.time()
        state = self.directory.read_point(point.id)
        attempts = state.attempts
        attempts.append(
            Attempt(run=str(run.path), cluster_run=str(cluster.run.path), started=started)
        )
        state.status = "running"
        state.run = str(run.path)
        state.cluster_run = str(cluster.run.path)
        state.digest = point.digest
        state.started = started
        state.ended = None
        state.reason = None
        me = process.identify(os.getpid())
        state.runner = PointRunner(host=me.host, pid=me.pid, create_time=me.create_time)
        self.directory.write_point(point, state)
        with self.directory.edit_runner() as runner:
            runner.current = CurrentPoint(
                point=point.id,
                label=point.label,
                run=str(run.path),
                cluster_run=str(cluster.run.path),
                attempt=attempt,
                started=started,
            )
        self.summary()
        # A first point tried before (interrupted or failed, perhaps after its ingest) ingests
        # again: its ingest figures must come from the run that completes.
        reingest = planned.ingest == EACH or (planned.ingest == FIRST and len(attempts) > 1)
        action = (
            "re-ingests"
            if reingest
            else {FIRST: "ingests unless the index is complete"}.get(
                planned.ingest, "reuses the index"
            )
        )
        self.say(f"[{self.done + 1}/{self.total}] {point.label}: running ({action}) in {run.path}")
        command = slurm.python_command(
            "run",
            str(self.directory.session_file(point.id)),
            "--cluster",
            str(cluster.run.path),
            "--run-dir",
            str(run.path),
            *(["--reingest"] if reingest else []),
            f"--reuse-index={self.options.reuse_index}",
            *(["--trust-track-code"] if self.options.trust_track_code else []),
        )
        code = self._child(command, self.directory.log_file(point.id))
        results = _results(run.path)
        status, reason = _outcome(code, results, self.directory.log_file(point.id))
        if self.interrupted:
            status, reason = "interrupted", "interrupted (Ctrl-C or SIGTERM)"
        last = attempts[-1]
        last.ended, last.exit_code, last.status, last.reason = time.time(), code, status, reason
        state.status, state.reason, state.ended = status, reason, time.time()
        self.directory.write_point(point, state)
        with self.directory.edit_runner() as runner:
            runner.current = None
        self.summary()
        seconds = time.time() - started
        if status == "completed":
            self.done += 1
            self.say(
                f"[{self.done}/{self.total}] {point.label}: completed in {seconds:.0f} s; "
                f"{_brief(results)}"
            )
        else:
            self.say(f"{point.label}: {status} after {seconds:.0f} s: {reason}")
            if status == "failed" and attempt > self.options.retries:
                self.done += 1
        return status

    def _child(self, command: list[str], log_path: Path) -> int:
        """Run ``esdash run``; its lines go to the point's log and (indented) to our output."""
        with log_path.open("a") as log:
            log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
            log.flush()
            self.child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,  # signals reach it only through _on_signal
            )
            assert self.child.stdout is not None
            for line in self.child.stdout:
                log.write(line)
                log.flush()
                if not self.options.quiet:
                    self.out.write("    " + line)
                    self.out.flush()
            code = self.child.wait()
        self.child = None
        return code


def _results(run: Path) -> Results | None:
    try:
        return RunDir(run).read_results()
    except EsdashError:
        return None


def _outcome(code: int, results: Results | None, log: Path) -> tuple[str, str | None]:
    """``completed`` needs exit 0 (or 3: thresholds are not the sweep's business) and a
    results.json whose status is ok."""
    if code == EXIT_ABORT:
        return "interrupted", "the run was aborted"
    if code in (EXIT_OK, EXIT_THRESHOLD) and results and results.status == "ok":
        return "completed", None
    if results and results.reason:
        return "failed", f"exit {code}: {results.reason}"
    last = [line for line in tail(log, 5).splitlines() if line.strip()]
    return "failed", f"exit {code}: {last[-1].strip() if last else 'no output'}"


def _brief(results: Results | None) -> str:
    """One line of numbers for the log: ingest and the first few queries."""
    if not results:
        return "no results"
    parts = []
    ingest = results.ingest
    if ingest is not None and ingest.docs:
        parts.append(f"ingest {ingest.docs:,} docs {ingest.docs_per_s or 0:,.0f} docs/s")
    queries = [(name, op) for step in results.steps for name, op in step.queries.items()]
    for name, op in queries[:3]:
        rate = op.throughput.requests_per_s
        gmean = op.latency.gmean
        parts.append(
            f"{name} {rate or 0:,.1f} req/s gmean {gmean if gmean is not None else '-'} ms"
        )
    if len(queries) > 3:
        parts.append(f"+{len(queries) - 3} more queries")
    return "; ".join(parts) or "no queries"
