"""Issue 17, item 6: every long phase says what begins before it blocks, and keeps talking.

The ticker is driven by :class:`FakeClock`, so these tests assert what is printed and in
which order, never how long anything took.  "Before its first blocking call" is checked
with a recorder standing in for that call: it notes what had been printed when it was
entered, then stops the command.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import write_session

from esdash.cli import fetch_cmd, report_cmd
from esdash.progress import Progress
from esdash.run import job, start, stop
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health
from esdash.session import load_session

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"


class FakeClock:
    """The ticker's clock, moved only by the test.

    Why a fake: the ticker speaks after 2 s of silence, and waiting for that for real would
    make the tests slow and their outcome a matter of scheduling.  :meth:`advance` moves the
    time and returns once every ticker that was due has done its work and waits again (it
    waits in real time only for that thread, and fails after 10 s if the ticker died).
    """

    def __init__(self) -> None:
        self.t = 0.0
        self.cond = threading.Condition()
        self.deadlines: dict[int, float] = {}  # tickers inside wait(), by thread
        self.busy: set[int] = set()  # tickers woken and not yet waiting again

    def now(self) -> float:
        with self.cond:
            return self.t

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        me = threading.get_ident()
        with self.cond:
            self.busy.discard(me)
            self.deadlines[me] = self.t + seconds
            self.cond.notify_all()
            try:
                while not stop.is_set() and self.t < self.deadlines[me]:
                    self.cond.wait(0.01)
            finally:
                del self.deadlines[me]
            if stop.is_set():
                return True
            self.busy.add(me)
            return False

    def advance(self, seconds: float) -> None:
        with self.cond:
            self.t += seconds
            self.cond.notify_all()
            limit = time.monotonic() + 10
            while self.busy or any(d <= self.t for d in self.deadlines.values()):
                assert time.monotonic() < limit, "a ticker did not come back to its wait"
                self.cond.wait(0.01)

    def settle(self, tickers: int = 1) -> None:
        """Wait until ``tickers`` threads wait (a phase's ticker starts in its own thread)."""
        limit = time.monotonic() + 10
        with self.cond:
            while len(self.deadlines) < tickers:
                assert time.monotonic() < limit, "the ticker never started"
                self.cond.wait(0.01)


class Blocked(Exception):
    """Raised by a recorder: the command got as far as its blocking call."""


def recorder(seen: dict[str, str], name: str, printed: Callable[[], str]) -> Callable[..., object]:
    """A stand-in for a blocking call: records what was printed when it was entered.

    Why a stand-in: the real calls start clusters, Maven or matplotlib for minutes; what is
    checked is only the order of output and entry, which the stand-in observes exactly.
    """

    def blocking(*_args: object, **_kwargs: object) -> object:
        seen[name] = printed()
        raise Blocked(name)

    return blocking


def lines_of(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


# ------------------------------------------------------------------- the ticker


def test_plain_phase_begins_ticks_after_two_silent_seconds_and_ends():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, tty=False, clock=clock)
    with progress.phase("waiting for the index") as phase:
        assert lines_of(out) == ["esdash: waiting for the index ..."]
        clock.settle()
        clock.advance(2.0)
        assert lines_of(out)[-1] == "esdash: waiting for the index: 2 s so far"
        clock.advance(1.0)
        phase.note("shard 1 of 3 started")  # at 3 s: the silence begins anew
        phase.update("1 of 3 shards")
        clock.advance(1.0)
        assert lines_of(out)[-1] == "esdash: shard 1 of 3 started"
        clock.advance(1.0)
        assert lines_of(out)[-1] == "esdash: waiting for the index: 1 of 3 shards; 5 s so far"
    assert lines_of(out)[-1] == "esdash: waiting for the index: done in 5.0 s (1 of 3 shards)"
    assert all("\x1b" not in line for line in lines_of(out))


def test_a_short_phase_is_one_line_and_a_failed_one_claims_nothing():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, tty=False, clock=clock)
    with progress.phase("reading 1 input(s)"):
        pass
    with pytest.raises(Blocked), progress.phase("drawing"):
        clock.settle()
        clock.advance(2.0)
        raise Blocked("drawing")
    assert lines_of(out) == [
        "esdash: reading 1 input(s) ...",
        "esdash: drawing ...",
        "esdash: drawing: 2 s so far",
    ]


def test_a_phase_of_quick_checks_speaks_only_when_it_is_not_quick():
    """``announce_after``: a refusal within the grace stays the one line of its error."""
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, tty=False, clock=clock)
    with pytest.raises(Blocked), progress.phase("checking session s", announce_after=0.5):
        raise Blocked("refused")
    assert lines_of(out) == []
    with progress.phase("checking session s", announce_after=0.5):
        clock.settle()
        assert lines_of(out) == []
        clock.advance(0.5)
        assert lines_of(out) == ["esdash: checking session s ..."]
        clock.advance(2.0)
        assert lines_of(out)[-1] == "esdash: checking session s: 2 s so far"


def test_switch_ends_one_step_and_begins_the_next():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, tty=False, clock=clock)
    progress.switch("esdash: downloading Elasticsearch 8.19.21 with Maven")
    clock.settle()
    clock.advance(2.0)
    progress.switch("esdash: unpacking elasticsearch-8.19.21.zip")
    progress.close()
    assert lines_of(out) == [
        "esdash: downloading Elasticsearch 8.19.21 with Maven ...",
        "esdash: downloading Elasticsearch 8.19.21 with Maven: 2 s so far",
        "esdash: downloading Elasticsearch 8.19.21 with Maven: done in 2.0 s",
        "esdash: unpacking elasticsearch-8.19.21.zip ...",
    ]


def test_terminal_display_keeps_notes_and_a_line_per_finished_phase():
    """On a terminal rich draws the phase; what stays on screen is the notes and the ends."""
    out = io.StringIO()
    progress = Progress(out, tty=True, clock=FakeClock())
    with progress.phase("starting 1 node(s)", total=1) as phase:
        phase.note("node-0 (rank 0 of 1) running")
        phase.advance("running")
    text = out.getvalue()
    assert "node-0 (rank 0 of 1) running" in text
    assert "starting 1 node(s): done in 0.0 s (1 of 1 running)" in text


# ------------------------------------------------------------------ cluster start


def _session(tmp_path: Path, nodes: int = 2):
    return load_session(write_session(tmp_path, "progress", nodes, ports=False))


def test_cluster_start_notes_each_node_as_its_status_changes(tmp_path):
    """The ranks' real status and health files, read by the ticker's poll."""
    run = RunDir.create(tmp_path / "runs", "progress")
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, tty=False, clock=clock)
    watch = start.NodeWatch(run, 2)
    with progress.phase("starting 2 node(s)", total=2, poll=watch.poll):
        clock.settle()
        with run.edit_node_status(0) as status:
            status.state, status.name = "starting", "node-0"
        clock.advance(0.5)
        host = run.node_statuses()[0].host
        assert lines_of(out)[-1] == f"esdash: node-0 (rank 0 of 2) starting on {host}"
        with run.edit_node_status(0) as status:
            status.state, status.address, status.http_port, status.pid = (
                "running",
                "127.0.0.1",
                9250,
                4242,
            )
        with run.edit_node_status(1) as status:
            status.state, status.name = "starting", "node-1"
        run.write_health(Health(ok=True, status="yellow", number_of_nodes=1))
        clock.advance(0.5)
        assert lines_of(out)[-2:] == [
            f"esdash: node-0 (rank 0 of 2) running on {host}, http 127.0.0.1:9250, pid 4242",
            f"esdash: node-1 (rank 1 of 2) starting on {host}",
        ]
        clock.advance(2.0)
        assert lines_of(out)[-1] == (
            "esdash: starting 2 node(s): 1 of 2 running, cluster yellow with 1 node(s); 3 s so far"
        )
        with run.edit_node_status(1) as status:
            status.state, status.message = "failed", "node-1 exited with code 1"
    # the last change before the phase ended is not lost
    assert f"esdash: node-1 (rank 1 of 2) failed on {host}: node-1 exited with code 1" in (
        lines_of(out)
    )


def test_cluster_up_says_each_phase_before_it_blocks(tmp_path, monkeypatch, capsys):
    session = _session(tmp_path)
    seen: dict[str, str] = {}
    made = RunDir.create(tmp_path / "runs", "progress")

    def prepare(*_args: object) -> RunDir:
        seen["prepare"] = capsys.readouterr().err
        return made

    monkeypatch.setattr(start, "prepare", prepare)
    monkeypatch.setattr(
        start, "launch_cluster", recorder(seen, "launch", lambda: capsys.readouterr().err)
    )
    with pytest.raises(Blocked):
        start.up(session)
    assert seen["prepare"] == ""  # quick checks: announced only after 0.5 s (see above)
    assert seen["launch"] == (
        f"esdash: run directory: {made.path}\nesdash: starting 2 elasticsearch node(s) ...\n"
    )


# -------------------------------------------------------------------------- run


def test_run_says_it_prepares_the_track_while_the_corpus_is_made(tmp_path, monkeypatch, capsys):
    """The track phase refuses bad keys in one line, so it speaks once it lasts 0.5 s."""
    session = _session(tmp_path)
    clock = FakeClock()
    monkeypatch.setattr(job, "for_stderr", lambda: Progress(sys.stderr, tty=False, clock=clock))
    seen: list[str] = []

    def corpus_being_made(*_args: object) -> object:
        seen.append(capsys.readouterr().err)
        clock.settle()
        clock.advance(0.5)
        seen.append(capsys.readouterr().err)
        raise Blocked("corpus")

    monkeypatch.setattr(job, "prepare_workload", corpus_being_made)
    with pytest.raises(Blocked):
        job.run_session(session, job.RunOptions())
    assert seen == [
        "",
        "esdash: preparing track mri (corpus, offsets, query steps, encryption) ...\n",
    ]


class SteppingClock(FakeClock):
    """A clock that moves one second every time it is read.

    Why: ``follow`` loops every 0.1 s until the bench launcher ends; this makes every turn
    of the loop see time pass, so the quiet-stream line is due within a few turns.
    """

    def now(self) -> float:
        with self.cond:
            self.t += 1.0
            return self.t


def test_a_quiet_stream_says_what_the_run_awaits(tmp_path):
    """A real launcher process that writes no stream, followed like a bench step."""
    session = _session(tmp_path)
    run = RunDir.create(tmp_path / "runs", "progress")
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    record = job.process.identify(launcher.pid)
    out = io.StringIO()
    lines = Progress(out, tty=False, clock=SteppingClock())
    interrupted = job.follow(run, launcher, record, out, session, stop.Interrupts(), None, lines)
    assert not interrupted
    said = [line for line in lines_of(out) if line.startswith("esdash: ")]
    assert said, out.getvalue()
    assert said[0].startswith("esdash: starting 3 bench rank(s) (no record yet): no record for ")
    assert job.awaited("settle", session) == "settling the index"


def _stopped_cluster(tmp_path: Path, session_path: Path) -> RunDir:
    run = RunDir.create(tmp_path / "runs", "progress")
    with run.edit_info() as info:
        info.state = "stopped"
        info.reason = "stop requested (esdash cluster down)"
        info.session_path = str(session_path)
    run.write_health(Health(ok=True, status="green", number_of_nodes=3, active_shards=6))
    return run


def test_run_against_a_stopped_cluster_is_one_line(tmp_path):
    session_path = write_session(tmp_path, "progress", 2, ports=False)
    run = _stopped_cluster(tmp_path, session_path)
    proc = subprocess.run(
        [sys.executable, "-m", "esdash", "run", str(session_path), "--cluster", str(run.path)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.splitlines() == [
        f"esdash: error: the cluster of {run.path} is not running (state stopped: stop "
        f"requested (esdash cluster down)); start one with `esdash cluster up {session_path}` "
        "and pass the run directory it prints to --cluster"
    ]
    assert proc.stdout == ""
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run.path.name]  # no new run


def test_cluster_status_after_down_shows_the_recorded_state(tmp_path, capsys):
    from esdash.cli.cluster_cmd import run_status

    run = _stopped_cluster(tmp_path, tmp_path / "s.toml")
    run_status(argparse.Namespace(run=str(run.path), json=False))
    out = capsys.readouterr().out
    assert "health   none: the cluster is stopped; its last answer was green, 3 node(s)" in out
    assert "active shard" not in out


# ----------------------------------------------------------------- report, fetch


def test_report_says_it_draws_before_it_draws(tmp_path, monkeypatch, capsys):
    """Real runs are read and tabled; the stand-in takes the place of drawing and writing.

    The fake clock never moves here, so the quick phases (reading, tables) stay silent
    however loaded the machine is, and the drawing phase's line is all there is.
    """
    import esdash.progress
    import esdash.report.document

    clock = FakeClock()
    monkeypatch.setattr(
        esdash.progress, "for_stderr", lambda: Progress(sys.stderr, tty=False, clock=clock)
    )
    seen: dict[str, str] = {}
    printed = lambda: capsys.readouterr().err  # noqa: E731
    monkeypatch.setattr(esdash.report.document, "write_report", recorder(seen, "draw", printed))
    args = argparse.Namespace(
        inputs=[str(p) for p in sorted(FIXTURE_RUNS.glob("dev*"))],
        format=["md"],
        out=tmp_path,
        baseline="none",
        no_figures=False,
        self_contained=False,
    )
    with pytest.raises(Blocked):
        report_cmd.run(args)
    assert seen["draw"] == "esdash: drawing the figures and writing md ...\n"


def test_each_figure_drawn_moves_the_open_phase_on(tmp_path):
    """The report's figures report to the phase ``esdash report`` opened (real matplotlib)."""
    from esdash.report.figures import Drawer

    out = io.StringIO()
    progress = Progress(out, tty=False, clock=FakeClock())
    with progress.phase("drawing the figures") as phase:
        drawer = Drawer(tmp_path, ("svg",))
        fig, _ax = drawer.plt.subplots()
        drawer.save(fig, "ingest-scaling", "Ingest", "caption")
        assert (phase.done, phase.detail) == (1, "1 drawn, the last ingest-scaling")


def test_fetch_says_it_downloads_before_maven_runs(tmp_path, monkeypatch, capsys):
    from support.prereqs import find_tool, unavailable

    from esdash.plugin import jvm_distribution  # where the backend's fetch calls Maven

    if find_tool("mvn") is None:
        unavailable("mvn is not installed (scripts/provision installs maven)")
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    seen: dict[str, str] = {}
    printed = lambda: capsys.readouterr().err  # noqa: E731
    monkeypatch.setattr(jvm_distribution, "maven_copy", recorder(seen, "maven", printed))
    with pytest.raises(Blocked):
        fetch_cmd.run(argparse.Namespace(backend="elasticsearch", version="8.19.3"))
    assert seen["maven"] == "esdash: downloading Elasticsearch 8.19.3 with Maven ...\n"
    assert capsys.readouterr().err == ""  # a failed step claims no "done"
