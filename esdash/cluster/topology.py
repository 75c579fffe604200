"""The cluster's shape: which rank runs which node, where, on which ports, in which roles.

Pure functions of what the ranks reported and the session, so they are easy to test and
rank 0 can compute the whole plan once and broadcast it.

Rules (from the paper's setup, with the reference spawner's mistakes fixed):

- master-eligible nodes: the first rank when there are at most 3 nodes, the first three
  otherwise (an odd number, so a majority survives one loss; the reference made four);
- every node holds data;
- seed hosts are the master-eligible nodes' transport addresses;
- a single node uses single-node discovery (no bootstrap voting at all);
- several nodes on one host get ports offset by their node-local rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class RankReport:
    """What one rank found out about itself before the plan is made."""

    rank: int
    host: str
    interface: str
    address: str
    local_rank: int


@dataclass(frozen=True)
class NodePlan:
    """One node of the cluster as rank 0 planned it."""

    rank: int
    name: str
    host: str
    interface: str
    address: str
    http_port: int
    transport_port: int
    master_eligible: bool

    @property
    def transport_address(self) -> str:
        return f"{self.address}:{self.transport_port}"

    @property
    def http_address(self) -> str:
        return f"{self.address}:{self.http_port}"


@dataclass(frozen=True)
class Topology:
    cluster_name: str
    nodes: tuple[NodePlan, ...]

    @property
    def masters(self) -> tuple[NodePlan, ...]:
        return tuple(node for node in self.nodes if node.master_eligible)

    @property
    def seed_hosts(self) -> list[str]:
        return [node.transport_address for node in self.masters]

    @property
    def single_node(self) -> bool:
        return len(self.nodes) == 1

    def to_dict(self) -> dict:
        return {"cluster_name": self.cluster_name, "nodes": [asdict(n) for n in self.nodes]}

    @classmethod
    def from_dict(cls, data: dict) -> Topology:
        return cls(data["cluster_name"], tuple(NodePlan(**n) for n in data["nodes"]))


def master_count(nodes: int) -> int:
    """How many master-eligible nodes a cluster of ``nodes`` gets."""
    return 1 if nodes <= 3 else 3


def plan_topology(
    cluster_name: str,
    reports: Sequence[RankReport],
    http_port: int,
    transport_port: int,
) -> Topology:
    """Assign names, ports and roles to the ranks' reports (ordered by rank)."""
    ordered = sorted(reports, key=lambda r: r.rank)
    masters = master_count(len(ordered))
    nodes = tuple(
        NodePlan(
            rank=r.rank,
            name=f"node-{r.rank}",
            host=r.host,
            interface=r.interface,
            address=r.address,
            http_port=http_port + r.local_rank,
            transport_port=transport_port + r.local_rank,
            master_eligible=r.rank < masters,
        )
        for r in ordered
    )
    clashes = {}
    for node in nodes:
        for port in (node.http_address, node.transport_address):
            if port in clashes:
                raise ValueError(
                    f"{node.name} and {clashes[port]} would both use {port}; "
                    f"give the ranks distinct node-local ranks or addresses"
                )
            clashes[port] = node.name
    return Topology(cluster_name, nodes)
