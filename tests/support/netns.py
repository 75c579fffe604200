"""Three emulated hosts in network namespaces, each with an "eth" and an "opa" link.

Every namespace gets two veth links onto two bridges in the root namespace, emulating a
site's Ethernet and its fast interconnect (Omni-Path / InfiniBand).  The addresses are from
the loopback range (127.77.0.1N on eth, 127.78.0.1N on opa, N = 1..3) and routed over the
veths (``route_localnet``, ``lo`` reduced to 127.0.0.1/32): Java treats all of 127/8 as
loopback, so Elasticsearch stays in development mode, whose bootstrap checks a runner's
rlimits can pass (see docs/infra notes, section 5).  There is no default route and no
forwarding, so nothing leaves the machine.

Commands run inside a namespace with ``nsenter --net=/run/netns/NAME``; ``ip netns exec``
remounts /sys, which breaks slurmd's cgroup detection.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

from support.procs import run_bounded

ETH = "eth"
OPA = "opa"


def _ip(*args: str) -> None:
    proc = run_bounded(["ip", *args], timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@dataclass(frozen=True)
class NetnsHost:
    """One emulated host: its namespace and its address on each link."""

    index: int  # 1-based, as in the addresses
    netns: str
    eth_ip: str
    opa_ip: str

    def ip_of(self, link: str) -> str:
        return {ETH: self.eth_ip, OPA: self.opa_ip}[link]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed so that it runs inside this host's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, **kwargs: object):
        """Run ``argv`` in the namespace and capture its output (text)."""
        return run_bounded(self.wrap(argv), timeout=timeout, **kwargs)

    def popen(self, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        """Start ``argv`` in the namespace, in its own session so it can be stopped as a group."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(self.wrap(argv), start_new_session=True, **kwargs)


@dataclass
class NetnsHosts:
    """The namespaces and bridges of one test session; :meth:`create` then :meth:`destroy`."""

    tag: str
    hosts: list[NetnsHost] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)  # root-namespace links to delete

    @classmethod
    def create(cls, count: int = 3, tag: str | None = None) -> NetnsHosts:
        """Create ``count`` hosts; names carry ``tag`` (default: our pid) to avoid clashes."""
        self = cls(tag or str(os.getpid()))
        try:
            self._build(count)
        except BaseException:
            self.destroy()
            raise
        return self

    def __iter__(self):
        return iter(self.hosts)

    def __getitem__(self, i: int) -> NetnsHost:
        return self.hosts[i]

    def __len__(self) -> int:
        return len(self.hosts)

    def bridge(self, link: str) -> str:
        """The root-namespace bridge of ``link`` (names are limited to 15 characters)."""
        return f"eb{self.tag}{link[0]}"

    def _build(self, count: int) -> None:
        for link in (ETH, OPA):
            bridge = self.bridge(link)
            _ip("link", "add", bridge, "type", "bridge")
            self._links.append(bridge)
            _ip("link", "set", bridge, "up")
        for n in range(1, count + 1):
            host = NetnsHost(n, f"esdt-{self.tag}-h{n}", f"127.77.0.{10 + n}", f"127.78.0.{10 + n}")
            _ip("netns", "add", host.netns)
            self.hosts.append(host)
            ns = host.netns
            _ip("-n", ns, "link", "set", "lo", "up")
            # lo must not own all of 127/8, or the peers' 127.x addresses would be "local".
            _ip("-n", ns, "addr", "del", "127.0.0.1/8", "dev", "lo")
            _ip("-n", ns, "addr", "add", "127.0.0.1/32", "dev", "lo")
            for link in (ETH, OPA):
                outer = f"ev{self.tag}{n}{link[0]}"
                _ip("link", "add", outer, "type", "veth", "peer", "name", link, "netns", ns)
                self._links.append(outer)
                _ip("link", "set", outer, "master", self.bridge(link), "up")
                _ip("-n", ns, "addr", "add", f"{host.ip_of(link)}/24", "dev", link)
                _ip("-n", ns, "link", "set", link, "up")
            sysctl = ["sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"]
            sysctl += [f"net.ipv4.conf.{link}.route_localnet=1" for link in (ETH, OPA)]
            proc = host.run(sysctl, timeout=30)
            if proc.returncode != 0:
                raise RuntimeError(f"sysctl in {ns}: {proc.stderr.strip()}")

    def destroy(self) -> None:
        """Delete the namespaces (their veth ends go with them) and the root-side links."""
        errors = []
        for host in self.hosts:
            proc = run_bounded(["ip", "netns", "del", host.netns], timeout=30)
            if proc.returncode != 0:
                errors.append(proc.stderr.strip())
        self.hosts.clear()
        for link in reversed(self._links):
            if os.path.exists(f"/sys/class/net/{link}"):
                proc = run_bounded(["ip", "link", "del", link], timeout=30)
                if proc.returncode != 0 and os.path.exists(f"/sys/class/net/{link}"):
                    errors.append(proc.stderr.strip())
        self._links.clear()
        if errors:
            raise RuntimeError("netns teardown: " + "; ".join(errors))
