"""The built-in interconnects: loopback, Ethernet, Omni-Path and InfiniBand.

Each is found on a host by interface name patterns; a session can name the interface
explicitly with ``cluster.interface`` (for sites with unusual names, or test namespaces).
On Omni-Path and InfiniBand Elasticsearch talks TCP over IPoIB, so what matters is the
IPoIB interface's address.
"""

from __future__ import annotations

from esdash.plugin_api import Interconnect, Register, hookimpl


class Loopback(Interconnect):
    name = "loopback"
    description = "all nodes on this machine, over the loopback interface"
    patterns = ("lo",)


class Ethernet(Interconnect):
    name = "ethernet"
    description = "TCP over the site's Ethernet (eth*, en*, em*, bond*)"
    patterns = ("eth*", "en*", "em*", "bond*")


class OmniPath(Interconnect):
    name = "opa"
    description = "TCP over Omni-Path IPoIB (hfi*, opa*, ib*)"
    patterns = ("hfi*", "opa*", "ib*")


class InfiniBand(Interconnect):
    name = "infiniband"
    description = "TCP over InfiniBand IPoIB (ib*)"
    patterns = ("ib*",)


@hookimpl
def esdash_register_interconnects(register: Register[Interconnect]) -> None:
    for interconnect in (Loopback(), Ethernet(), OmniPath(), InfiniBand()):
        register(interconnect)
