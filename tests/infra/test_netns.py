"""The emulated hosts reach each other over the "opa" link, with distinct eth/opa addresses."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support.net import HttpUnreachable, free_port, http_get
from support.netns import ETH, OPA
from support.procs import stop

pytestmark = pytest.mark.netns


def test_addresses_are_distinct(netns_hosts):
    eth = [h.eth_ip for h in netns_hosts]
    opa = [h.opa_ip for h in netns_hosts]
    assert len(set(eth + opa)) == 2 * len(netns_hosts) == 6
    for host in netns_hosts:
        for link in (ETH, OPA):
            proc = host.run(["ip", "-4", "-o", "addr", "show", "dev", link])
            assert proc.returncode == 0, proc.stderr
            assert [line.split()[3] for line in proc.stdout.splitlines()] == [
                f"{host.ip_of(link)}/24"
            ]


def test_http_over_opa_between_namespaces(netns_hosts, tmp_path):
    server_host, client, third = netns_hosts[0], netns_hosts[1], netns_hosts[2]
    (tmp_path / "probe.txt").write_text("over opa\n")
    port = free_port()  # any port is free in a fresh namespace; this one is just plausible
    server = server_host.popen(
        [sys.executable, "-m", "http.server", "--bind", server_host.opa_ip, str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://{server_host.opa_ip}:{port}/probe.txt"
        body = _retry(lambda: http_get(url, netns=client.netns))
        assert body == b"over opa\n"
        assert http_get(url, netns=third.netns) == b"over opa\n"
        # Bound to the opa address only: the same port on the eth address refuses.
        with pytest.raises(HttpUnreachable):
            http_get(f"http://{server_host.eth_ip}:{port}/probe.txt", netns=client.netns)
        # The root namespace's lo owns 127/8, so it cannot reach the emulated hosts.
        with pytest.raises(HttpUnreachable):
            http_get(url, timeout=2)
    finally:
        stop(server, timeout=10)


def _retry(fetch, attempts: int = 50):
    """The server needs a moment to bind; retry while nothing answers."""
    for _ in range(attempts - 1):
        try:
            return fetch()
        except HttpUnreachable:
            time.sleep(0.1)
    return fetch()
