"""The cluster monitor: health and node statistics, into the run directory.

Runs as a thread on rank 0 of the cluster step, next to its node, so it reaches the cluster
over the interconnect even when the orchestrator and the viewers cannot (another host, the
root network namespace).  It writes:

- ``health.json``: the latest ``_cluster/health`` answer (replaced atomically each second);
- ``cluster.jsonl``: one record (schema ``esdash.cluster/1``) per sample with the health and,
  per node, heap, CPU, GC, segments and rejected thread-pool tasks.
"""

from __future__ import annotations

import threading
import time

import msgspec

from esdash.plugin.control import ControlClient
from esdash.rundir.layout import RunDir
from esdash.rundir.records import ClusterSample, Health, JsonObject, NodeSample, SampleHealth
from esdash.rundir.stream import JsonlWriter

#: The ``_nodes/stats`` metrics a sample needs.
STATS = ("jvm", "os", "process", "thread_pool", "indices")


def node_sample(stats: JsonObject) -> NodeSample:
    """The figures the dashboard shows for one node, from its ``_nodes/stats`` entry."""
    jvm = stats.get("jvm", {})
    collectors = jvm.get("gc", {}).get("collectors", {})
    pools = stats.get("thread_pool", {})
    return NodeSample(
        name=stats.get("name"),
        host=stats.get("host"),
        heap_used_percent=jvm.get("mem", {}).get("heap_used_percent"),
        heap_used_bytes=jvm.get("mem", {}).get("heap_used_in_bytes"),
        cpu_percent=stats.get("process", {}).get("cpu", {}).get("percent"),
        os_cpu_percent=stats.get("os", {}).get("cpu", {}).get("percent"),
        gc_count=sum(c.get("collection_count", 0) for c in collectors.values()),
        gc_millis=sum(c.get("collection_time_in_millis", 0) for c in collectors.values()),
        segments=stats.get("indices", {}).get("segments", {}).get("count"),
        docs=stats.get("indices", {}).get("docs", {}).get("count"),
        rejected={
            name: pool.get("rejected", 0)
            for name, pool in pools.items()
            if name in ("search", "write", "get", "management")
        },
    )


class ClusterMonitor(threading.Thread):
    """Samples health each second and node statistics every ``stats_every`` seconds."""

    def __init__(self, run: RunDir, control: ControlClient, stats_every: float = 2.0) -> None:
        super().__init__(name="esdash-cluster-monitor", daemon=True)
        self.rundir = run
        self.control = control
        self.stats_every = stats_every
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self._sample()
        finally:
            self.control.close()

    def _sample(self) -> None:
        next_stats = 0.0
        with JsonlWriter[ClusterSample](self.rundir.cluster_samples_file, fsync=False) as log:
            while not self.done.wait(1.0):
                now = time.time()
                try:
                    health = msgspec.structs.replace(self.control.health(), time=now)
                except Exception as exc:  # starting or gone: record and keep going
                    health = Health(ok=False, error=f"{type(exc).__name__}: {exc}"[:500], time=now)
                self.rundir.write_health(health)
                if now < next_stats or not health.ok:
                    continue
                next_stats = now + self.stats_every
                try:
                    nodes = self.control.node_stats(STATS).get("nodes", {})
                except Exception:
                    continue
                log.write(
                    ClusterSample(
                        time=now,
                        health=SampleHealth(
                            status=health.status,
                            number_of_nodes=health.number_of_nodes,
                            active_shards=health.active_shards,
                            unassigned_shards=health.unassigned_shards,
                        ),
                        nodes={s.get("name", nid): node_sample(s) for nid, s in nodes.items()},
                    )
                )
