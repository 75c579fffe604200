"""What a worker tells rank 0 after the start, and how it hears back.

After the MPI start the ranks talk through files only (:mod:`esdash.bench.channel`): each
worker appends to a channel of its own -- interval payloads (:class:`Reporter`), heartbeats
(:class:`Heartbeat`) and the other records the ``KIND_*`` constants name -- and reads rank 0's
word from the coordinator's channel (:class:`Inbox`).  Rank 0's side of the conversation is
:class:`esdash.bench.coordinator.Coordinator`; the record kinds are named here, once, for both.
"""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.bench.channel import ChannelReader, ChannelWriter
from esdash.bench.rank_state import Aborted, RankState, Schedule
from esdash.cluster.http import Connection
from esdash.rundir.records import JsonObject

if TYPE_CHECKING:
    from esdash.bench.recorder import Recorder

#: Kinds of the records a worker appends to its channel.
KIND_INTERVAL = "interval"
KIND_HEARTBEAT = "heartbeat"
KIND_INGEST_DONE = "ingest_done"
KIND_WARMUP_ROUND = "warmup_round"
KIND_STEP_DONE = "step_done"
KIND_FINAL = "final"
#: How often rank 0 reads the workers' files (seconds).
READ_EVERY = 0.05


class Reporter:
    """Writes interval payloads to this worker's channel: on boundaries and phase changes."""

    def __init__(
        self,
        channel: ChannelWriter,
        rank: int,
        recorder: Recorder,
        schedule: Schedule,
        state: RankState,
    ):
        self.channel, self.rank, self.recorder = channel, rank, recorder
        self.schedule, self.state = schedule, state
        self.sent_through = -1
        self.next_boundary = schedule.boundary(schedule.seq(time.time()))
        self.progress = 0

    def tick(self) -> None:
        """Called between requests: cheap unless an interval boundary has passed."""
        if self.state.aborted:
            raise Aborted(self.state.aborted)
        if time.time() >= self.next_boundary:
            self.flush(partial=False)

    def flush(self, partial: bool) -> None:
        """Send what was recorded; ``partial`` at a phase change inside an interval."""
        now = time.time()
        seq = self.schedule.seq(now)
        closing = seq if partial else seq - 1
        message = {
            "rank": self.rank,
            "seq": closing,
            "from_seq": self.sent_through + 1,
            "partial": partial,
            "phase": self.state.phase,
            "step": self.state.step,
            "docs_done": self.progress,
            "data": self.recorder.drain(),
        }
        self.progress = 0
        if not partial:
            self.sent_through = closing
        self.next_boundary = self.schedule.boundary(seq)
        self.send(message, KIND_INTERVAL)

    def send(self, message: JsonObject, kind: str) -> None:
        self.channel.write({"kind": kind, **message})

    def add_progress(self, docs: int) -> None:
        self.progress += docs


class Heartbeat(threading.Thread):
    """Appends a heartbeat every ``period`` seconds, whatever the load loop is doing.

    A worker blocked in a request to a frozen node is alive: its heartbeat says so, and
    names the request in flight and how long it has been open, which is how rank 0 tells a
    node that stopped answering from a rank that died.  The thread makes no MPI calls.
    """

    def __init__(
        self,
        reporter: Reporter,
        connections: weakref.WeakSet[Connection],
        period: float,
    ) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.reporter, self.connections, self.period = reporter, connections, period
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.beat()
            self.stopped.wait(self.period)

    def beat(self) -> None:
        now = time.monotonic()
        in_flight = []
        for connection in list(self.connections):
            sent = connection.sent_at
            if sent is not None:
                in_flight.append({"node": connection.target.name, "seconds": round(now - sent, 3)})
        state = self.reporter.state
        self.reporter.send(
            {
                "rank": self.reporter.rank,
                "wall": time.time(),
                "phase": state.phase,
                "step": state.step,
                "open": in_flight,
            },
            KIND_HEARTBEAT,
        )

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5.0)


class Inbox:
    """Rank 0's word to the workers, read from the coordinator's channel."""

    def __init__(self, path: Path) -> None:
        self.reader = ChannelReader(path)
        self.received: dict[str, JsonObject] = {}

    def get(self, kind: str) -> JsonObject | None:
        """The latest message of ``kind`` rank 0 wrote, or None (yet)."""
        if kind not in self.received:
            for message in self.reader.read():
                self.received[str(message.get("kind"))] = message
        return self.received.get(kind)
