"""Interconnect plugins: nodes bind and publish on the chosen link, or fail clearly.

Three emulated hosts live in network namespaces, each with an "eth" and an "opa" link (see
``tests/support/netns.py``).  ``mpiexec`` places one rank in each namespace through its
MPMD syntax (``-n 1 nsenter ... : -n 1 nsenter ...``): the rank program, topology, plugins
and supervision are esdash's own; only the launcher command differs from `esdash cluster
up`, because ``mpiexec`` alone cannot put ranks into namespaces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import java_pids_under, write_session

from esdash.cluster.health import wait_ready
from esdash.errors import ClusterError
from esdash.launch import process
from esdash.launch.mpi import mpiexec
from esdash.plugin.manager import get_plugins
from esdash.plugin_api import InterconnectError
from esdash.run import start, stop
from esdash.rundir.layout import RunDir
from esdash.session import load_session

pytestmark = [pytest.mark.es, pytest.mark.mpi, pytest.mark.netns]


def launch_in_namespaces(run: RunDir, hosts, fresh: bool = False) -> subprocess.Popen:
    command = [mpiexec()]
    for i, host in enumerate(hosts):
        if i:
            command.append(":")
        rank = [sys.executable, "-m", "esdash.cluster.rank", str(run.path)]
        command += ["-n", "1", *host.wrap(rank + (["--fresh"] if fresh else []))]
    launcher, record = process.start(command, output=run.launcher_log, cwd=run.path)
    with run.edit_info() as info:
        info.launcher = record
    return launcher


def link_rx_bytes(host, link: str) -> int:
    result = host.run(["ip", "-j", "-s", "link", "show", link])
    return json.loads(result.stdout)[0]["stats64"]["rx"]["bytes"]


def test_interconnect_without_matching_interface_fails_clearly() -> None:
    infiniband = get_plugins().interconnect("infiniband")
    with pytest.raises(InterconnectError, match=r"no interface on host .* matches ib\*"):
        infiniband.resolve()
    with pytest.raises(InterconnectError, match="interface 'nope0' has no IPv4 address"):
        infiniband.resolve("nope0")


def test_cluster_forms_over_the_opa_link(netns_hosts, shared_tmp: Path, monkeypatch) -> None:
    monkeypatch.setenv("ESDASH_RUNS", str(shared_tmp / "runs"))
    session = load_session(write_session(shared_tmp, "opa3", 3, interconnect="opa"))
    run = start.prepare(session)
    before = {h.netns: (link_rx_bytes(h, "opa"), link_rx_bytes(h, "eth")) for h in netns_hosts}
    launcher = launch_in_namespaces(run, netns_hosts)
    try:
        health = wait_ready(run, 3, launcher, timeout=300)
        assert health.status == "green" and health.number_of_nodes == 3
        topology = json.loads(run.topology_file.read_text())
        assert [n["interface"] for n in topology["nodes"]] == ["opa"] * 3
        assert [n["address"] for n in topology["nodes"]] == [h.opa_ip for h in netns_hosts]
        # the transport (and HTTP) traffic went over opa: its counters moved, eth's hardly
        first = netns_hosts[0]
        opa_delta = link_rx_bytes(first, "opa") - before[first.netns][0]
        eth_delta = link_rx_bytes(first, "eth") - before[first.netns][1]
        assert opa_delta > 20 * max(eth_delta, 1000), (opa_delta, eth_delta)
        # the node is not reachable at the host's eth address
        node = topology["nodes"][1]
        probe = (
            "import socket,sys\n"
            "s=socket.socket(); s.settimeout(3)\n"
            "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))\n"
        )
        on_eth = netns_hosts[0].run(
            [sys.executable, "-c", probe, netns_hosts[1].eth_ip, str(node["transport_port"])]
        )
        on_opa = netns_hosts[0].run(
            [sys.executable, "-c", probe, netns_hosts[1].opa_ip, str(node["transport_port"])]
        )
        assert on_opa.returncode == 0 and on_eth.returncode != 0
    finally:
        stop.stop_cluster(run, launcher)
    assert java_pids_under(run.path) == []


def test_host_without_the_interconnect_fails_before_any_node_starts(
    netns_hosts, shared_tmp: Path, monkeypatch
) -> None:
    monkeypatch.setenv("ESDASH_RUNS", str(shared_tmp / "runs"))
    session = load_session(write_session(shared_tmp, "ib1", 1, interconnect="infiniband"))
    run = start.prepare(session)
    launcher = launch_in_namespaces(run, netns_hosts[:1])
    try:
        with pytest.raises(ClusterError, match=r"no interface on host .* matches ib\*"):
            wait_ready(run, 1, launcher, timeout=120)
    finally:
        stop.stop_cluster(run, launcher)
    assert java_pids_under(run.path) == []


def test_bootstrap_check_failure_is_explained(netns_hosts, shared_tmp: Path, monkeypatch):
    """A non-loopback transport address enforces the bootstrap checks; exit 78 is explained.

    Two nodes bind a private address on a veth pair that exists only in this test's
    namespace (traffic to it never leaves the namespace), with the
    open-files limit lowered for the ranks so the check fails on any machine.
    """
    host = netns_hosts[2]
    address = "10.199.0.1"
    for step in (
        ["link", "add", "eth9", "type", "veth", "peer", "name", "eth9p"],
        ["addr", "add", f"{address}/24", "dev", "eth9"],
        ["link", "set", "eth9p", "up"],
        ["link", "set", "eth9", "up"],
    ):
        subprocess.run(["ip", "-n", host.netns, *step], check=True)
    monkeypatch.setenv("ESDASH_RUNS", str(shared_tmp / "runs"))
    session = load_session(
        write_session(
            shared_tmp,
            "prod2",
            2,
            interconnect="ethernet",
            security=False,
            # a namespace-private veth pair; security off off loopback needs the session's word
            extra_cluster='interface = "eth9"\ninsecure_ok = true',
        )
    )
    run = start.prepare(session)
    rank = ["prlimit", "--nofile=4096:4096", sys.executable, "-m", "esdash.cluster.rank"]
    command = [mpiexec(), "-n", "2", *host.wrap([*rank, str(run.path)])]
    launcher, record = process.start(command, output=run.launcher_log, cwd=run.path)
    with run.edit_info() as run_info:
        run_info.launcher = record
    try:
        with pytest.raises(ClusterError) as info:
            wait_ready(run, 2, launcher, timeout=180)
    finally:
        stop.stop_cluster(run, launcher)
    message = str(info.value)
    assert "exited with code 78" in message
    assert "bootstrap checks failed" in message and "max file descriptors [4096]" in message
    assert "ulimit -n 65535" in message
    assert java_pids_under(run.path) == []
