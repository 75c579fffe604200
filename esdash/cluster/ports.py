"""Node ports: free ones chosen per host by default, explicit ones checked before a start.

Fixed default ports let two sessions on one machine collide, so a session that sets no
``cluster.http_port`` / ``cluster.transport_port`` gets ports chosen by each rank on its own
host, on the address its node will bind (the session's interconnect), before any node starts
(:func:`reserve`).  The ranks exchange them with the rest of their report and rank 0 puts
them into the topology, so ``topology.json`` and the nodes' ``status.json`` say which ports
were chosen and everything that reads them (health, control clients, viewers) keeps working.

Choosing is racy by nature: a port that is free now may be taken before the engine's JVM
binds it seconds later.  Three things keep that rare and harmless:

- ports are drawn at random from below the kernel's ephemeral range, so neither another
  esdash nor an outgoing connection is likely to pick the same one;
- a rank *holds* its ports (bound sockets without ``SO_REUSEADDR``, which no other bind can
  share) from the moment it chooses them until just before its node starts, so concurrent
  ranks and sessions never choose the same port;
- a node that exits because one of its automatic ports was taken in between is recorded
  with the session key of that port (``NodeStatus.port_in_use``), and the start is retried
  once with newly chosen ports (:func:`retry_reason`, :func:`forget_failed_start`).

Explicit ports keep today's meaning (node-local rank *k* uses base + *k*).  A port of theirs
already in use is one line naming the key, the port and the process holding it
(:func:`clash_line`): found by the launch-stage pre-flight check on this host, by every rank
on its own host before any node starts, and after a node exit that a clash explains.
"""

from __future__ import annotations

import contextlib
import errno
import random
import shutil
import socket
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from esdash.rundir.layout import RunDir
from esdash.session import Session

#: The session keys of the two ports, as messages name them.
HTTP_KEY = "cluster.http_port"
TRANSPORT_KEY = "cluster.transport_port"

#: Lowest automatic port: above the well-known and the usual service ports (9200, 8080, ...).
AUTO_LOW = 20000
#: Highest automatic port when the kernel's ephemeral range cannot be read.
AUTO_HIGH = 32767
#: Fewest ports an automatic range must offer before the ephemeral range is allowed in.
MIN_RANGE = 1000

_EPHEMERAL = "/proc/sys/net/ipv4/ip_local_port_range"


def auto_range() -> tuple[int, int]:
    """The inclusive range automatic ports are drawn from on this host (see :func:`below`)."""
    return below(_ephemeral_range())


def below(ephemeral: tuple[int, int] | None) -> tuple[int, int]:
    """The automatic range for a host whose ephemeral range is ``ephemeral`` (None: unknown).

    Below the ephemeral range (``ip_local_port_range``), because the kernel hands those ports
    to outgoing connections at any moment and one of them could take a chosen port before
    the node binds it.  A host whose ephemeral range leaves fewer than :data:`MIN_RANGE`
    ports below it gets ``AUTO_LOW .. AUTO_HIGH`` anyway: a rare clash is retried.
    """
    high = AUTO_HIGH if ephemeral is None else min(AUTO_HIGH, ephemeral[0] - 1)
    if high - AUTO_LOW + 1 < MIN_RANGE:
        high = AUTO_HIGH
    return AUTO_LOW, high


def _ephemeral_range() -> tuple[int, int] | None:
    try:
        low, high = Path(_EPHEMERAL).read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return None


@dataclass
class Reservation:
    """Ports this process holds, bound but not listening, until :meth:`release`.

    Held without ``SO_REUSEADDR``: Linux lets no other socket bind such a port, not even one
    with ``SO_REUSEADDR`` (as the engines' are), so nobody else can choose it meanwhile.
    """

    ports: tuple[int, ...]
    _sockets: list[socket.socket] = field(default_factory=list, repr=False)

    def release(self) -> None:
        """Let go of the ports; call right before the node that uses them starts."""
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()


def reserve(
    address: str,
    count: int,
    *,
    port_range: tuple[int, int] | None = None,
    rng: random.Random | None = None,
    attempts: int = 500,
    exclude: Collection[int] = (),
) -> Reservation:
    """Choose and hold ``count`` distinct free ports on ``address``, none of ``exclude``.

    ``exclude`` keeps a session's explicit ports (of the other kind) out of the choice: a
    rank must not take a port another rank of the same cluster is about to check as its own.

    Raises :class:`OSError` when ``address`` is not one of this host's, or when no free port
    turned up in ``attempts`` tries (a range that is all but full).
    """
    low, high = port_range or auto_range()
    rng = rng or random.SystemRandom()
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        for _ in range(attempts):
            if len(ports) == count:
                break
            port = rng.randint(low, high)
            if port in ports or port in exclude:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((address, port))
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRINUSE:
                    raise  # not this host's address, or no permission: no port will do
                continue
            held.append(sock)
            ports.append(port)
        if len(ports) < count:
            raise OSError(
                errno.EADDRINUSE,
                f"no free port on {address} between {low} and {high} after {attempts} tries",
            )
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return Reservation(tuple(ports), held)


def in_use(address: str, port: int) -> bool:
    """Whether a node could not bind ``address:port`` right now.

    The test bind uses ``SO_REUSEADDR`` as the engines do, so connections of an earlier node
    lingering in TIME_WAIT do not count, and a listener (on this address or on all
    addresses) does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


@dataclass(frozen=True)
class Holder:
    """The process holding a port (``pid`` None: not visible, e.g. another user's)."""

    pid: int | None
    name: str | None = None

    def __str__(self) -> str:
        """What follows "is in use" in a message."""
        if self.pid is None:
            return (
                "; its holder is not visible here (another user's process, or a socket bound "
                "without listening)"
            )
        return f" by PID {self.pid}" + (f" ({self.name})" if self.name else "")


def holder(address: str, port: int) -> Holder:
    """Who holds ``address:port``, from the kernel's socket tables (psutil).

    A listener wins over a connection that merely uses the port as its local end.  Only the
    sockets of this user's processes carry a PID (all of them for root).
    """
    matching = {address, "0.0.0.0", "::", f"::ffff:{address}"}
    found = []
    with contextlib.suppress(psutil.Error, OSError):
        found = [
            conn
            for conn in psutil.net_connections(kind="tcp")
            if conn.laddr and conn.laddr.port == port and conn.laddr.ip in matching
        ]
    found.sort(key=lambda conn: (conn.status != psutil.CONN_LISTEN, conn.pid is None))
    if not found or found[0].pid is None:
        return Holder(None)
    best = found[0]
    name = None
    with contextlib.suppress(psutil.Error):
        name = psutil.Process(best.pid).name()
    return Holder(best.pid, name)


def clash_line(key: str, port: int, address: str, offset: int = 0) -> str:
    """The one line a port already in use is reported with: key, port, address, holder."""
    which = f"port {port}" + (f" ({port - offset} + node-local rank {offset})" if offset else "")
    return f"{key}: {which} on {address} is in use{holder(address, port)}"


def explicit_ports(session: Session) -> dict[str, int]:
    """The session's explicit base ports by key (an automatic one is left out)."""
    found = {HTTP_KEY: session.cluster.http_port, TRANSPORT_KEY: session.cluster.transport_port}
    return {key: port for key, port in found.items() if port is not None}


#: Highest TCP port.
MAX_PORT = 65535


def nodes_per_address(session: Session) -> int:
    """How many nodes share one address, so use base + 0 .. base + this - 1 of a port.

    The loopback interconnect puts every node on one address; a network interconnect puts
    ``nodes_per_host`` nodes on each host's address (the placement a Slurm job gets).
    """
    cluster = session.cluster
    if cluster.interconnect == "loopback":
        return cluster.nodes
    return min(cluster.nodes, cluster.nodes_per_host)


def _span(base: int, count: int) -> str:
    return str(base) if count == 1 else f"{base}-{base + count - 1}"


def static_problems(session: Session) -> list[str]:
    """What is wrong with the explicit ports whatever runs on the host, as ``key: message``.

    Node-local rank *k* uses base + *k*, so each explicit port is a range as wide as the
    nodes on one address: it must end at or below 65535, and the HTTP and transport ranges
    must not overlap (with equal bases the engine fails to bind after its JVM booted).
    """
    explicit = explicit_ports(session)
    count = nodes_per_address(session)
    lines = []
    for key, base in explicit.items():
        if base + count - 1 > MAX_PORT:
            lines.append(
                f"{key}: {count} node(s) on one address use ports {_span(base, count)}, past "
                f"{MAX_PORT}; set {key} to at most {MAX_PORT - count + 1} or leave it unset (auto)"
            )
    if len(explicit) == 2:
        http, transport = explicit[HTTP_KEY], explicit[TRANSPORT_KEY]
        if abs(http - transport) < count:
            lines.append(
                f"{TRANSPORT_KEY} = {transport} gives the {count} node(s) on one address "
                f"port(s) {_span(transport, count)}, which overlap {HTTP_KEY} = {http} "
                f"({_span(http, count)}); set {TRANSPORT_KEY} = "
                f"{http + count} (or another port at least {count} away from {http}), or "
                f"leave it unset (auto)"
            )
    return lines


def check_explicit(session: Session, address: str, offsets: Sequence[int]) -> list[str]:
    """One line per explicit port of the nodes at ``offsets`` on ``address`` that is in use."""
    lines = []
    for key, base in explicit_ports(session).items():
        for offset in offsets:
            if in_use(address, base + offset):
                lines.append(clash_line(key, base + offset, address, offset))
    return lines


def local_offset(rank: int, addresses: Sequence[str | None]) -> int:
    """The index of ``rank`` among the ranks sharing its address (the node-local rank).

    The same rule as :func:`esdash.cluster.topology.plan_topology` uses for explicit ports:
    nodes on one address are numbered by rank.
    """
    mine = addresses[rank]
    return sum(1 for other in addresses[:rank] if other == mine)


# --------------------------------------------------------------- after a node exited


def node_clash(address: str, ports: dict[str, int], offsets: dict[str, int]) -> tuple[str, str]:
    """The first of a failed node's ``ports`` (key -> port) now held by another process.

    Returns ``(key, line)``, or ``("", "")`` when every port is free: the node exited for
    another reason (or its port's holder is gone again, which nothing can tell apart).
    """
    for key, port in ports.items():
        with contextlib.suppress(OSError):
            if in_use(address, port):
                return key, clash_line(key, port, address, offsets.get(key, 0))
    return "", ""


def retry_reason(run: RunDir, session: Session) -> str:
    """Why a failed start is worth one more try with newly chosen ports ('' if it is not).

    Only when a node recorded a port in use that esdash chose itself: an explicit port stays
    taken whatever is retried, and any other failure would fail again.
    """
    automatic = {HTTP_KEY, TRANSPORT_KEY} - set(explicit_ports(session))
    return "; ".join(
        f"node {rank}: {status.message}"
        for rank, status in sorted(run.node_statuses().items())
        if status.state == "failed" and status.port_in_use in automatic
    )


def forget_failed_start(run: RunDir) -> None:
    """Undo what a stopped, failed start left in ``run``, so the ranks can start again there.

    Called only once every rank of the failed start is gone: removes the stop request, the
    nodes' status files, the health, the topology and the PKI with its credentials (rank 0
    plans them anew for the new ports, and refuses to overwrite a PKI, rightly so while a
    cluster may run on it).  The nodes' logs stay; their next lines belong to the retry.
    ``run.json``'s ``data_reuse`` stays too: it says what the first attempt found.
    """
    for _, path in run.node_status_files():
        path.unlink(missing_ok=True)
    for path in (run.stop_file, run.health_file, run.topology_file, run.credentials_file):
        path.unlink(missing_ok=True)
    shutil.rmtree(run.pki_dir, ignore_errors=True)
    with run.edit_info() as info:
        info.stopped = None
        info.reason = None


def describe(port: int | None) -> str:
    """A session port as listings show it: the number, or ``auto``."""
    return "auto" if port is None else str(port)
