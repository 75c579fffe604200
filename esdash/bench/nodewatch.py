"""Rank 0's watch over the search nodes during the benchmark: node lost, node back, health.

A dead node does not stop a benchmark: the other nodes answer for the shards they hold, and
without this watch the run would report fast, error-free numbers of part of the data.  So
rank 0 decides once per interval, per node, whether it is *lost*, from three kinds of
evidence that need no request of its own:

* its process ended: the cluster rank that supervises it wrote ``failed`` or ``stopped`` in
  ``nodes/<rank>/status.json`` (within half a second of the exit, with the exit code);
* it stopped answering: a worker's heartbeat reports a request to it open for an interval
  or longer, so rank 0 pings it (``GET /``, answered by any live node at once however busy
  its search and write pools are), and the ping gets no answer within :data:`PING_TIMEOUT`
  seconds (a frozen JVM, a network partition; a bulk request that is merely slow on a
  saturated machine is not a lost node).  While it is lost it is pinged every
  :data:`PING_EVERY` seconds; it is back when a ping is answered;
* it refuses connections: in the last interval every request to it failed with a
  connection error.

A node is *back* when none of them holds any more (a frozen node that answers again).  Each
change is one :class:`~esdash.rundir.records.NodeEvent`; the cluster's health, which the
cluster's monitor writes to ``health.json`` once a second, is kept as one point per change.
Both go into ``results.json``; the events also into the stream, as they happen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from esdash.cluster.http import Connection, RequestFailed, Target
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir
from esdash.rundir.records import HealthPoint, NodeEvent, NodePlan
from esdash.stats.merge import Merged

#: Error classes that say the node could not be reached at all.
UNREACHABLE = frozenset({"connection"})
#: A health answer older than this is reported as stale (the cluster monitor is gone).
HEALTH_STALE = 10.0
#: A node with a request open this long (at least one interval) is pinged.
SUSPECT_FLOOR = 1.0
#: Seconds a ping of a suspected node may take, and between two pings of one node.
PING_TIMEOUT = 3.0
PING_EVERY = 3.0

#: Pings a node; returns None when it answered, else what went wrong.
Ping = Callable[[NodePlan], str | None]


def http_ping(credentials: Credentials | None) -> Ping:
    """A ping over HTTP(S): ``GET /`` on a fresh connection; any answer below 500 is life."""

    def ping(node: NodePlan) -> str | None:
        target = Target(node.name, node.http_address, credentials is not None)
        connection = Connection(target, credentials, PING_TIMEOUT)
        try:
            status, _ = connection.request("GET", "/")
        except RequestFailed as exc:
            return str(exc)
        finally:
            connection.close()
        return None if status < 500 else f"HTTP {status}"

    return ping


class NodeWatch:
    """Per-node evidence from heartbeats, intervals and the cluster's files; events out."""

    def __init__(
        self,
        cluster_run: RunDir,
        nodes: Iterable[NodePlan],
        interval: float,
        t0: float,
        ping: Ping | None = None,
    ) -> None:
        self.cluster_run = cluster_run
        self.nodes = {node.name: node for node in nodes}
        self.ranks = {node.name: k for k, node in enumerate(self.nodes.values())}
        self.interval = interval
        self.t0 = t0
        #: node -> {worker rank: seconds its current request to the node has been open}
        self.open: dict[str, dict[int, float]] = {name: {} for name in self.nodes}
        #: node -> (requests, unreachable) of the interval(s) since the last poll
        self.answers: dict[str, list[int]] = {name: [0, 0] for name in self.nodes}
        self.lost: dict[str, str] = {}
        self.events: list[NodeEvent] = []
        self.health: list[HealthPoint] = []
        self._last_health: tuple[object, ...] | None = None
        self.ping = ping
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ping")
        #: node -> (when it was sent, the ping in flight or done), and the one before it
        self._pings: dict[str, tuple[float, Future[str | None]]] = {}
        self._last: dict[str, Future[str | None]] = {}
        self.suspect_after = max(SUSPECT_FLOOR, interval)

    # ------------------------------------------------------------------ evidence
    def heartbeat(self, rank: int, open_requests: Iterable[Mapping[str, object]]) -> None:
        """What a worker's heartbeat says is in flight (replaces its previous report)."""
        for pending in self.open.values():
            pending.pop(rank, None)
        for item in open_requests:
            node, seconds = item.get("node"), item.get("seconds")
            if isinstance(node, str) and node in self.open and isinstance(seconds, int | float):
                self.open[node][rank] = float(seconds)

    def forget_rank(self, rank: int) -> None:
        """A worker that is gone reports nothing in flight any more."""
        for pending in self.open.values():
            pending.pop(rank, None)

    def payload(self, decoded: Merged) -> None:
        """Count, per node, the requests of one payload and those that reached nobody."""
        for data in decoded.ops.values():
            for name, node in data.nodes.items():
                if name in self.answers:
                    counts = self.answers[name]
                    counts[0] += node.requests
                    counts[1] += sum(n for c, n in node.errors.items() if c in UNREACHABLE)

    # ------------------------------------------------------------------ decision
    def poll(self, now: float) -> list[NodeEvent]:
        """Decide every node's state; return the changes (each also kept in ``events``)."""
        statuses = self._statuses()
        changes: list[NodeEvent] = []
        for name in self.nodes:
            cause = self._cause(name, statuses.get(name))
            was = self.lost.get(name)
            if cause is not None and was is None:
                self.lost[name] = cause
                changes.append(self._event(now, name, "lost", cause))
            elif cause is None and was is not None:
                del self.lost[name]
                changes.append(self._event(now, name, "back", f"answering again (was: {was})"))
        for counts in self.answers.values():
            counts[0] = counts[1] = 0
        self._sample_health(now)
        return changes

    def _cause(self, name: str, status: tuple[str | None, str | None] | None) -> str | None:
        if status is not None and status[0] in ("failed", "stopped"):
            return f"its process ended: {status[1] or status[0]}"
        pending = self.open[name]
        longest = max(pending.values(), default=0.0)
        suspected = longest >= self.suspect_after
        was_silent = self.lost.get(name, "").startswith("no answer")
        if suspected or was_silent:
            self._ping_if_due(name)
            silent = self._ping_failed(name)
            if silent is not None:
                ranks = ", ".join(str(r) for r in sorted(pending)) or "none now"
                return (
                    f"no answer to requests (open for up to {longest:.0f} s, rank(s) {ranks}) "
                    f"nor to a ping: {silent}"
                )
            if was_silent and name in self._pings and not self._pings[name][1].done():
                return self.lost[name]  # the next ping decides
        else:
            self._pings.pop(name, None)  # a later suspicion starts with a new ping
            self._last.pop(name, None)
        requests, unreachable = self.answers[name]
        if requests and unreachable == requests:
            return f"refusing connections ({requests} request(s) in the last interval)"
        # no requests to it in this interval: keep what was decided before
        if not requests and name in self.lost and not was_silent:
            return self.lost[name]
        return None

    def _ping_if_due(self, name: str) -> None:
        """Ping ``name`` unless a ping of it runs or ran less than :data:`PING_EVERY` s ago.

        Pings run on their own threads, so the loop that calls :meth:`poll` never waits.
        """
        if self.ping is None:
            return
        now = time.monotonic()
        sent = self._pings.get(name)
        if sent is None or (sent[1].done() and now - sent[0] >= PING_EVERY):
            self._pings[name] = (now, self._pool.submit(self.ping, self.nodes[name]))
            if sent is not None and sent[1].done():
                self._last[name] = sent[1]

    def _ping_failed(self, name: str) -> str | None:
        """Why the latest finished ping of ``name`` got no answer; None if it answered."""
        if self.ping is None:
            return None
        sent = self._pings.get(name)
        done = sent[1] if sent is not None and sent[1].done() else self._last.get(name)
        if done is None:
            return None
        try:
            return done.result() or None
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _statuses(self) -> dict[str, tuple[str | None, str | None]]:
        """Node name -> (state, message) from the cluster run's status files."""
        found: dict[str, tuple[str | None, str | None]] = {}
        try:
            statuses = self.cluster_run.node_statuses()
        except Exception:  # a damaged status file is no evidence either way
            return found
        for rank, status in statuses.items():
            name = status.name or next((n for n, k in self.ranks.items() if k == rank), None)
            if name is not None:
                message = status.message
                if status.exit_code is not None and message is None:
                    message = f"exited with code {status.exit_code}"
                found[name] = (status.state, message)
        return found

    def _event(self, now: float, node: str, kind: str, cause: str) -> NodeEvent:
        event = NodeEvent(
            t=round(max(0.0, now - self.t0), 3),
            wall=now,
            node=node,
            kind=kind,  # type: ignore[arg-type]
            cause=cause,
        )
        self.events.append(event)
        return event

    def _sample_health(self, now: float) -> None:
        try:
            health = self.cluster_run.read_health()
        except Exception:
            health = None
        if health is None:
            return
        error = health.error if not health.ok else None
        if health.time is not None and now - health.time > HEALTH_STALE:
            error = f"health not updated for {now - health.time:.0f} s"
        key = (
            health.status,
            health.number_of_nodes,
            health.active_shards,
            health.unassigned_shards,
            error,
        )
        if key == self._last_health:
            return
        self._last_health = key
        self.health.append(
            HealthPoint(
                t=round(max(0.0, now - self.t0), 3),
                status=health.status if error is None else None,
                number_of_nodes=health.number_of_nodes if error is None else None,
                active_shards=health.active_shards if error is None else None,
                unassigned_shards=health.unassigned_shards if error is None else None,
                error=error,
            )
        )

    # ------------------------------------------------------------------ results
    def summary(self) -> str | None:
        """The node losses in one phrase, for the run's reason (None: no node was lost)."""
        lost = [e for e in self.events if e.kind == "lost"]
        if not lost:
            return None
        parts = []
        for event in lost:
            back = next(
                (
                    e
                    for e in self.events
                    if e.node == event.node and e.kind == "back" and e.t >= event.t
                ),
                None,
            )
            text = f"node {event.node} lost at {event.t:.1f} s ({event.cause})"
            if back is not None:
                text += f", back at {back.t:.1f} s"
            parts.append(text)
        return "; ".join(parts)
