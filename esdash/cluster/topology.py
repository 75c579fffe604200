"""The cluster's shape: which rank runs which node, where, on which ports, in which roles.

Pure functions of what the ranks reported and the session, so they are easy to test and
rank 0 can compute the whole plan once and broadcast it.

Rules (from the paper's setup, with the reference spawner's mistakes fixed):

- master-eligible nodes: the first rank when there are at most 3 nodes, the first three
  otherwise (an odd number, so a majority survives one loss; the reference made four);
- every node holds data;
- seed hosts are the master-eligible nodes' transport addresses;
- a single node uses single-node discovery (no bootstrap voting at all);
- ports are the ones each rank chose and reported (free ports on its own host, the default:
  :mod:`esdash.cluster.ports`); explicit base ports give several nodes on one address (one
  host, or hosts emulated on one machine) ports offset by their index among the nodes on
  that address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from esdash.rundir.records import NodePlan, Topology


@dataclass(frozen=True)
class RankReport:
    """What one rank found out about itself before the plan is made."""

    rank: int
    host: str
    interface: str
    address: str
    #: The ports the rank chose for its node (None: the session's base port + offset).
    http_port: int | None = None
    transport_port: int | None = None


def master_count(nodes: int) -> int:
    """How many master-eligible nodes a cluster of ``nodes`` gets."""
    return 1 if nodes <= 3 else 3


def plan_topology(
    cluster_name: str,
    reports: Sequence[RankReport],
    http_port: int | None = None,
    transport_port: int | None = None,
) -> Topology:
    """Assign names, ports and roles to the ranks' reports (ordered by rank).

    A port a rank reported is its node's; otherwise the base port (``http_port``,
    ``transport_port``) plus the node's index among the nodes on its address.  Raises
    :class:`ValueError` when a rank reported no port and there is no base either.
    """
    ordered = sorted(reports, key=lambda r: r.rank)
    hosts_of: dict[str, set[str]] = {}
    for report in ordered:
        hosts_of.setdefault(report.address, set()).add(report.host)
    for address, hosts in hosts_of.items():
        if len(hosts) > 1:
            raise ValueError(
                f"ranks on hosts {', '.join(sorted(hosts))} all report address {address}: a "
                f"loopback address works only when every node runs on one host; choose the "
                f"ethernet, opa or infiniband interconnect"
            )
    masters = master_count(len(ordered))
    seen: dict[str, int] = {}
    nodes = []
    for r in ordered:
        offset = seen.get(r.address, 0)
        seen[r.address] = offset + 1
        nodes.append(
            NodePlan(
                rank=r.rank,
                name=f"node-{r.rank}",
                host=r.host,
                interface=r.interface,
                address=r.address,
                http_port=_port(r.http_port, http_port, offset, r.rank, "HTTP"),
                transport_port=_port(r.transport_port, transport_port, offset, r.rank, "transport"),
                master_eligible=r.rank < masters,
            )
        )
    return Topology(cluster_name=cluster_name, nodes=tuple(nodes))


def _port(reported: int | None, base: int | None, offset: int, rank: int, kind: str) -> int:
    """A node's port: what its rank reported, else the base port plus the node's offset."""
    if reported is not None:
        return reported
    if base is None:
        raise ValueError(f"rank {rank} reported no {kind} port and the session sets none")
    return base + offset
