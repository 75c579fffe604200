"""What a comparison of runs must be able to show was the same: engine, JVM, heap, index.

Two engines (or two versions) are compared fairly only when each ran the same index with the
same shards, replicas, refresh interval and codec on comparable JVMs and heaps.  Rank 0 reads
these back from the running cluster after settling -- not from the session, which says what
was asked for, not what the engine did with it -- and they go into ``results.json``
(``cluster``), where ``esdash report`` sets them side by side and flags any difference.
"""

from __future__ import annotations

from esdash.plugin.control import ControlClient
from esdash.rundir.records import ClusterFacts, JsonObject, NodeFacts

#: The index settings a comparison shows (read back with the engine's defaults).
INDEX_SETTINGS = (
    "index.number_of_shards",
    "index.number_of_replicas",
    "index.refresh_interval",
    "index.codec",
)


def _setting(flat: JsonObject, name: str) -> str | None:
    for part in ("settings", "defaults"):
        value = (flat.get(part) or {}).get(name)
        if value is not None:
            return str(value)
    return None


def jvm_flags(arguments: object) -> list[str]:
    """The ``-X`` options among a JVM's input arguments, without the ones naming a path
    (they differ from run to run and say nothing about speed)."""
    if not isinstance(arguments, list):
        return []
    return [str(a) for a in arguments if str(a).startswith("-X") and "/" not in str(a)]


def read_facts(control: ControlClient, index: str) -> ClusterFacts:
    """The engine, each node's JVM and heap, and the index's settings, as the cluster says."""
    info = control.info()
    nodes: dict[str, NodeFacts] = {}
    for node in (control.nodes_info(("jvm",)).get("nodes") or {}).values():
        jvm = node.get("jvm") or {}
        name = str(node.get("name") or "?")
        runtime = " ".join(str(jvm[k]) for k in ("vm_vendor", "version") if jvm.get(k))
        nodes[name] = NodeFacts(
            jvm=runtime or None,
            heap_max_bytes=(jvm.get("mem") or {}).get("heap_max_in_bytes"),
            jvm_flags=jvm_flags(jvm.get("input_arguments")),
        )
    flat = control.index_settings(index).get(index) or {}
    return ClusterFacts(
        engine=info.engine,
        version=info.version,
        nodes=dict(sorted(nodes.items())),
        index={name: value for name in INDEX_SETTINGS if (value := _setting(flat, name))},
    )
