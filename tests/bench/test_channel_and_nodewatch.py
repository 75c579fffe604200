"""The file channel between bench ranks and rank 0's node watch, without a cluster.

The node watch decides from evidence it is handed (heartbeats, payloads, status files,
health.json) and from pings; here the pings are functions that answer or not, because the
point is the decision: the real frozen and killed nodes are in ``tests/faults``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from esdash.bench.channel import ChannelReader, ChannelWriter
from esdash.bench.nodewatch import NodeWatch
from esdash.bench.recorder import Recorder
from esdash.bench.sink import _nodes_down
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Health, NodeEvent, NodePlan
from esdash.stats.merge import Merged


def test_a_reader_takes_complete_lines_and_leaves_a_torn_one_for_later(tmp_path: Path) -> None:
    path = tmp_path / "ranks" / "1.jsonl"
    writer, reader = ChannelWriter(path), ChannelReader(path)
    assert reader.read() == []  # not there yet
    writer.write({"kind": "heartbeat", "n": 1})
    with path.open("ab") as handle:
        handle.write(b'{"kind": "interval", "n"')  # a writer in the middle of a line
    assert reader.read() == [{"kind": "heartbeat", "n": 1}]
    with path.open("ab") as handle:
        handle.write(b": 2}\nnot json\n[1]\n")
    assert reader.read() == [{"kind": "interval", "n": 2}]
    assert reader.damaged == 2  # skipped, counted, never raised


def test_writers_in_two_threads_never_interleave_a_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    writer = ChannelWriter(path)

    def write(kind: str) -> None:
        for n in range(500):
            writer.write({"kind": kind, "n": n, "pad": "x" * 300})

    threads = [threading.Thread(target=write, args=(k,)) for k in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = ChannelReader(path).read()
    assert len(got) == 1000
    assert [r["n"] for r in got if r["kind"] == "a"] == list(range(500))


NODES = tuple(
    NodePlan(
        rank=k,
        name=f"node-{k}",
        host="h",
        interface="lo",
        address="127.0.0.1",
        http_port=1 + k,
        transport_port=3 + k,
        master_eligible=True,
    )
    for k in range(2)
)


def watch(tmp_path: Path, answers: dict[str, str | None]) -> NodeWatch:
    run = RunDir(tmp_path)
    (tmp_path / "nodes").mkdir(exist_ok=True)
    return NodeWatch(run, NODES, 1.0, time.time(), ping=lambda node: answers[node.name])


def settle(node_watch: NodeWatch, seconds: float = 2.0) -> list[NodeEvent]:
    """Poll until the pings in flight are done (they run on threads)."""
    events: list[NodeEvent] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        events += node_watch.poll(time.time())
        time.sleep(0.05)
    return events


def test_a_node_is_lost_only_when_its_requests_hang_and_a_ping_gets_no_answer(tmp_path) -> None:
    answers: dict[str, str | None] = {"node-0": None, "node-1": None}
    node_watch = watch(tmp_path, answers)
    # both nodes have a request open for 5 s (a frozen shard holds every search), but
    # node-0 answers its ping: busy, not lost
    node_watch.heartbeat(1, [{"node": "node-0", "seconds": 5.0}])
    node_watch.heartbeat(2, [{"node": "node-1", "seconds": 5.0}])
    answers["node-1"] = "no response within 3 s"
    events = settle(node_watch)
    assert [(e.node, e.kind) for e in events] == [("node-1", "lost")]
    assert "nor to a ping: no response within 3 s" in events[0].cause
    # it answers again: back, once its next ping is answered
    answers["node-1"] = None
    node_watch.heartbeat(2, [])
    events = settle(node_watch, 4.0)
    assert [(e.node, e.kind) for e in events] == [("node-1", "back")]
    assert "back at" in (node_watch.summary() or "")
    node_watch.close()


def test_a_dead_process_or_refused_connections_make_a_node_lost(tmp_path: Path) -> None:
    node_watch = watch(tmp_path, {"node-0": None, "node-1": None})
    run = RunDir(tmp_path)
    with run.edit_node_status(0) as status:
        status.name, status.state, status.exit_code = "node-0", "failed", 137
    recorder = Recorder(1)
    for _ in range(3):
        recorder.record_error("q", "node-1", "connection", None, "refused", 0.001)
    node_watch.payload(Merged().add(recorder.drain(), rank=1))
    events = {e.node: e.cause for e in node_watch.poll(time.time())}
    assert events == {
        "node-0": "its process ended: exited with code 137",
        "node-1": "refusing connections (3 request(s) in the last interval)",
    }
    summary = node_watch.summary() or ""
    assert summary.startswith("node node-0 lost at") and "node node-1 lost" in summary
    node_watch.close()


def test_health_is_kept_once_per_change(tmp_path: Path) -> None:
    node_watch = watch(tmp_path, {"node-0": None, "node-1": None})
    run = RunDir(tmp_path)
    for status, nodes in (("green", 2), ("green", 2), ("red", 1), ("red", 1)):
        run.write_health(Health(ok=True, time=time.time(), status=status, number_of_nodes=nodes))
        node_watch.poll(time.time())
    assert [(h.status, h.number_of_nodes) for h in node_watch.health] == [("green", 2), ("red", 1)]
    os.utime(run.health_file)
    run.write_health(Health(ok=True, time=time.time() - 60, status="red", number_of_nodes=1))
    node_watch.poll(time.time())
    assert (node_watch.health[-1].error or "").startswith("health not updated for")
    node_watch.close()


def test_a_step_is_marked_when_a_node_was_down_during_it() -> None:
    def event(wall: float, kind: str) -> NodeEvent:
        return NodeEvent(t=wall, wall=wall, node="node-1", kind=kind, cause="x")  # type: ignore[arg-type]

    events = [event(10, "lost"), event(20, "back")]
    assert _nodes_down(events, 0, 9) == []
    assert _nodes_down(events, 5, 12) == ["node-1"]
    assert _nodes_down(events, 15, 30) == ["node-1"]
    assert _nodes_down(events, 21, 30) == []
    assert _nodes_down([event(10, "lost")], 40, 50) == ["node-1"]  # never back
