"""Faults of load ranks and search nodes during `esdash run`: visible in the numbers, nothing lost.

Issue 15, items 2, 3 and 7.  Real 3-node Elasticsearch clusters (the MRI index has 3 shards
and no replicas, so every node holds a third of the data), real MPI ranks, real signals sent
through :mod:`esdash.launch.process` after the target's identity (pid, create time, command
line) is proven.  Each fault is sent when the first measured interval of step 0 appears in
``stream.jsonl``, not after a sleep.

* a load rank killed (SIGKILL): the other ranks finish, rank 0 writes the results itself
  (not rebuilt from the stream), the dead rank is ``lost`` in ``per_rank`` with its data up
  to its last interval kept;
* a load rank frozen (SIGSTOP for a few seconds): ``rank_lost`` then ``rank_back`` from its
  heartbeat, and its step says so;
* a node frozen (SIGSTOP of its server JVM for 20 s): ``node_lost`` ("no answer ... nor to a
  ping"), ``node_back``, requests still open at the step's end counted as ``open`` with
  their time, the node named first in the reason;
* a node killed (SIGKILL of its server JVM): ``node_lost``, the other nodes' partial answers
  counted as ``partial`` errors, per-rank data for every rank, nothing left running.

The rank faults are about esdash's own ranks: they share a 3-node cluster of the static
engine (``support/static_engine.py``: nodes answering with set latencies, no JVM) through
``run --cluster``.  The node faults are about an engine's nodes: the frozen node attaches to
a 3-node Elasticsearch cluster, the killed node runs `esdash run` with its own cluster, as a
user would.  A re-run of the same session after each fault must succeed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from support import static_engine
from support.cli import ESDASH, esdash, java_pids_under, pids_alive, run_dir_from, write_session
from support.nodes import server_jvm
from support.records import as_json

from esdash.launch import process
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ProcessRecord
from esdash.rundir.stream import StreamReader

pytestmark = [pytest.mark.mpi]

NODES = 3
TRACK = 'name = "mri"\ndocuments = 3000\nseed = 11'
#: Two steps of one query, so a fault in step 0 shows how step 1 went on without it.
STEP_SECONDS = 8
#: How long a node stays frozen: longer than a step, shorter than the cluster's own fault
#: detection (3 follower checks of 10 s), so it comes back as the same node.
NODE_FREEZE = 20.0
RANK_FREEZE = 6.0


def steps_file(path: Path, second: int = STEP_SECONDS) -> Path:
    steps = [
        {
            "name": name,
            "search_queries": [
                {"name": "parts", "body": {"query": {"match_all": {}}, "size": 10}},
            ],
            "warmup_time_secs": 1,
            "execution_time_secs": seconds,
        }
        for name, seconds in (("first", STEP_SECONDS), ("second", second))
    ]
    path.write_text(json.dumps(steps))
    return path


def session_for(
    directory: Path, name: str, second: int = STEP_SECONDS, *, static: bool = False
) -> Path:
    """A 3-node session; ``second`` is the second step's length (the frozen node needs time
    to come back before the run ends); ``static``: on the static engine."""
    queries = steps_file(directory / f"{name}-steps.json", second)
    bench = (
        "[benchmark]\nworkers_per_node = 1\nbulk_size = 300\nseed = 5\n"
        f'interval = "1s"\nqueries = "{queries.name}"\n'
    )
    extra = static_engine.cluster_table() if static else ""
    return write_session(
        directory, name, NODES, security=False, track=TRACK, tables=bench, extra_cluster=extra
    )


def cluster_up(shared_tmp: Path, name: str, static: bool) -> Iterator[tuple[Path, Path]]:
    """A 3-node cluster from `esdash cluster up` (its run dir, runs dir), down at the end."""
    runs = shared_tmp / "fault-runs"
    session = session_for(shared_tmp, name, static=static)
    env = static_engine.env() if static else None
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    try:
        yield run, runs
    finally:
        esdash("cluster", "down", str(run), env_runs=runs, env=env)
        assert java_pids_under(run) == [] and static_engine.node_pids_under(run) == []


@pytest.fixture(scope="module")
def trio(shared_tmp: Path) -> Iterator[tuple[Path, Path]]:
    """A 3-node Elasticsearch cluster for the frozen node."""
    yield from cluster_up(shared_tmp, "faultc", static=False)


@pytest.fixture(scope="module")
def static_trio(shared_tmp: Path) -> Iterator[tuple[Path, Path]]:
    """A 3-node static-engine cluster for the faults of load ranks."""
    yield from cluster_up(shared_tmp, "faults", static=True)


def start_run(runs: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ESDASH, "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "ESDASH_RUNS": str(runs)},
    )


def records(run: Path) -> list[dict]:
    stream = run / "stream.jsonl"
    if not stream.exists():
        return []
    return [as_json(record) for record in StreamReader(stream).read_all()]


def wait_for(
    runs: Path, prefix: str, seen: Callable[[list[dict]], bool], proc: subprocess.Popen[str]
) -> Path:
    """The newest run ``prefix-*`` once its stream satisfies ``seen`` (fails if the run ends)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = sorted(runs.glob(f"{prefix}-*"), key=lambda p: p.stat().st_mtime)
        if found and seen(records(found[-1])):
            return found[-1]
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended first ({proc.returncode}):\n{out}\n{err}")
        time.sleep(0.2)
    raise AssertionError(f"run {prefix}-* never got there")


def measuring(step: int) -> Callable[[list[dict]], bool]:
    def seen(found: list[dict]) -> bool:
        return any(
            r["type"] == "interval" and r["phase"] == "measure" and r["step"] == step for r in found
        )

    return seen


def run_until_measuring(
    runs: Path, session: Path, *args: str, static: bool = False
) -> tuple[subprocess.Popen[str], Path]:
    """`esdash run SESSION ARGS`, returned once step 0's first measured interval is written."""
    proc = start_run(runs, str(session), *args, env=static_engine.env_for(static))
    return proc, wait_for(runs, session.stem, measuring(0), proc)


def bench_rank(run: Path, rank: int) -> ProcessRecord:
    """Bench rank ``rank``'s identity, from the stream header, proven to be that rank."""
    header = records(run)[0]
    pid = next(r["pid"] for r in header["bench"]["per_rank"] if r["rank"] == rank)
    record = process.identify(pid)
    assert "esdash.bench.rank" in record.command and str(run) in record.command, record
    return record


def bench_pids(run: Path) -> list[int]:
    header = records(run)[0]
    pids = [r["pid"] for r in header["bench"]["per_rank"]]
    info = json.loads((run / "run.json").read_text())
    return pids + [info["bench_launcher"]["pid"]]


def events(run: Path, kind: str) -> list[dict]:
    return [r for r in records(run) if r["type"] == "event" and r["kind"] == kind]


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()


def assert_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 15
    while pids_alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids_alive(pids) == [], [psutil.Process(p).cmdline() for p in pids_alive(pids)]


def rerun(session: Path, runs: Path, *args: str, static: bool = False) -> dict:
    """The same session again: it must run through (nothing the fault left gets in the way)."""
    result = esdash(
        "run", str(session), *args, env_runs=runs, timeout=400, env=static_engine.env_for(static)
    )
    run = next(
        Path(line.split(": ", 1)[1]).parent
        for line in result.stdout.splitlines()
        if line.startswith("results: ")
    )
    return json.loads((run / "results.json").read_text())


@pytest.mark.static_engine
def test_a_killed_load_rank_leaves_the_others_and_its_own_numbers(
    static_trio: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster, runs = static_trio
    session = session_for(shared_tmp, "rankkill", static=True)
    proc, run = run_until_measuring(runs, session, "--cluster", str(cluster), static=True)
    victim = bench_rank(run, 2)
    pids = bench_pids(run)
    assert process.send(victim, signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == 1, out + err
    results = json.loads((run / "results.json").read_text())
    assert results["recovered_from_stream"] is False  # rank 0 lived and wrote them
    assert results["missing_ranks"] == [2]
    assert "rank(s) [2] lost" in results["reason"]
    assert sorted(results["per_rank"]) == ["1", "2", "3"]
    assert results["per_rank"]["2"]["status"] == "lost"
    assert results["per_rank"]["2"]["intervals"] > 0
    first, second = results["steps"][0]["queries"]["parts"], results["steps"][1]["queries"]["parts"]
    assert "2" in first["per_rank"] and first["per_rank"]["2"]["requests"] > 0  # kept
    assert sorted(second["per_rank"]) == ["1", "3"] and second["ok"] > 0  # the others went on
    assert [e["data"]["rank"] for e in events(run, "rank_lost")] == [2]
    assert "rank(s) [2] lost" in out
    assert_gone(pids)
    assert rerun(session, runs, "--cluster", str(cluster), static=True)["status"] == "ok"


@pytest.mark.static_engine
def test_a_frozen_load_rank_is_lost_then_back_by_its_heartbeat(
    static_trio: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster, runs = static_trio
    session = session_for(shared_tmp, "rankfreeze", static=True)
    proc, run = run_until_measuring(runs, session, "--cluster", str(cluster), static=True)
    victim = bench_rank(run, 3)
    pids = bench_pids(run)
    assert process.send(victim, signal.SIGSTOP)
    try:
        wait_for(runs, "rankfreeze", lambda found: bool(events(run, "rank_lost")), proc)
        time.sleep(max(0.0, RANK_FREEZE - 3.0))
    finally:
        assert process.send(victim, signal.SIGCONT)
    out, err = finish(proc)
    results = json.loads((run / "results.json").read_text())
    assert [e["data"]["rank"] for e in events(run, "rank_lost")] == [3]
    assert [e["data"]["rank"] for e in events(run, "rank_back")] == [3]
    assert results["missing_ranks"] == []  # it came back and reported
    assert results["per_rank"]["3"]["status"] == "ok"
    assert "silent" in results["steps"][0]["status"], results["steps"][0]["status"]
    # every rank reported to the end: the run is complete, its frozen step flagged
    assert proc.returncode == 0, out + err
    assert "rank(s) silent: 3" in out
    assert_gone(pids)
    assert rerun(session, runs, "--cluster", str(cluster), static=True)["status"] == "ok"


@pytest.mark.es
def test_a_frozen_node_is_lost_then_back_and_its_open_requests_stay_in_the_numbers(
    trio: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster, runs = trio
    session = session_for(shared_tmp, "nodefreeze", second=int(NODE_FREEZE))
    proc, run = run_until_measuring(runs, session, "--cluster", str(cluster))
    jvm = server_jvm(RunDir(cluster), 2)
    assert process.send(jvm, signal.SIGSTOP)
    try:
        time.sleep(NODE_FREEZE)
    finally:
        assert process.send(jvm, signal.SIGCONT)
    out, err = finish(proc)
    assert proc.returncode == 1, out + err
    results = json.loads((run / "results.json").read_text())
    lost = [e for e in results["node_events"] if e["kind"] == "lost"]
    assert [e["node"] for e in lost] == ["node-2"], results["node_events"]
    assert "no answer" in lost[0]["cause"] and "ping" in lost[0]["cause"]
    assert any(e["kind"] == "back" and e["node"] == "node-2" for e in results["node_events"])
    assert results["reason"].startswith("node node-2 lost"), results["reason"]
    assert events(run, "node_lost") and events(run, "node_back")
    first = results["steps"][0]
    assert first["status"].startswith("node lost: node-2"), first["status"]
    query = first["queries"]["parts"]
    assert query["errors"].get("open", 0) > 0, query["errors"]  # still open at the step's end
    assert query["error_time_max"] >= 2000, query  # ms: the slowest requests did not vanish
    assert "node node-2 lost" in out
    assert rerun(session, runs, "--cluster", str(cluster))["status"] == "ok"  # it is back


@pytest.mark.es
def test_a_killed_node_is_named_first_and_partial_answers_are_errors(shared_tmp: Path) -> None:
    runs = shared_tmp / "fault-runs"
    session = session_for(shared_tmp, "nodekill")
    proc, run = run_until_measuring(runs, session)
    jvm = server_jvm(RunDir(run), 1)
    assert process.send(jvm, signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == 1, out + err
    results = json.loads((run / "results.json").read_text())
    assert results["reason"].startswith("node node-1 lost"), results["reason"]
    lost = [e for e in results["node_events"] if e["kind"] == "lost"]
    assert [e["node"] for e in lost] == ["node-1"]
    errors = results["steps"][0]["queries"]["parts"]["errors"]
    assert errors.get("partial", 0) > 0, errors  # answers of 2 of 3 shards are not successes
    assert sorted(results["per_rank"]) == ["1", "2", "3"]
    assert all(r["status"] == "ok" for r in results["per_rank"].values())
    assert any(h["number_of_nodes"] == NODES for h in results["cluster_health"])
    assert "node node-1 lost" in out
    assert java_pids_under(run) == []
    assert rerun(session, runs)["status"] == "ok"
