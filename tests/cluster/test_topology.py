"""The cluster plan: roles, ports, seeds and discovery follow the rules for every size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esdash.cluster.topology import RankReport, Topology, master_count, plan_topology
from esdash.rundir import files


def reports(n: int, hosts: int = 1) -> list[RankReport]:
    per_host = -(-n // hosts)
    return [
        RankReport(r, f"h{r // per_host}", "lo", f"127.0.0.{1 + r // per_host}") for r in range(n)
    ]


@pytest.mark.parametrize(("n", "masters"), [(1, 1), (2, 1), (3, 1), (4, 3), (7, 3), (15, 3)])
def test_master_eligible_nodes(n: int, masters: int) -> None:
    topology = plan_topology("c", reports(n), 9250, 9350)
    assert master_count(n) == masters
    assert [node.rank for node in topology.masters] == list(range(masters))
    assert topology.seed_hosts == [node.transport_address for node in topology.masters]


def test_single_node_and_ports_by_local_rank() -> None:
    assert plan_topology("c", reports(1), 9250, 9350).single_node
    topology = plan_topology("c", reports(6, hosts=2), 9250, 9350)
    assert not topology.single_node
    assert [n.http_port for n in topology.nodes] == [9250, 9251, 9252] * 2
    assert [n.transport_port for n in topology.nodes] == [9350, 9351, 9352] * 2
    assert {n.address for n in topology.nodes} == {"127.0.0.1", "127.0.0.2"}


def test_emulated_hosts_sharing_an_address_get_distinct_ports() -> None:
    """Slurm nodes emulated on one machine: same host name and address, distinct ports."""
    same = [RankReport(r, "vm", "lo", "127.0.0.1") for r in range(3)]
    topology = plan_topology("c", same, 9250, 9350)
    assert [n.http_port for n in topology.nodes] == [9250, 9251, 9252]


def test_one_loopback_address_on_several_hosts_is_refused() -> None:
    spread = [RankReport(r, f"host{r}", "lo", "127.0.0.1") for r in range(2)]
    with pytest.raises(ValueError, match="works only when every node runs on one host"):
        plan_topology("c", spread, 9250, 9350)


def test_round_trip_through_json_dict() -> None:
    topology = plan_topology("c", reports(4), 9250, 9350)
    written = json.loads(files.encode(topology))
    assert files.convert(written, Topology, Path("topology.json")) == topology
