"""The types plugins register: backends, interconnects, encryption modes and tracks.

A plugin module implements one or more ``esdash_register_*`` hooks (see
:mod:`esdash.hookspecs`) and calls ``register(obj)`` with instances of the classes below.
Every registered object has a ``name`` (unique within its kind, used in session files), a
one-line ``description`` (shown by ``esdash plugins`` and the dashboard) and a tuple of
:class:`Option` declarations: the keys a session file may set for it.  esdash validates
those keys before anything runs, so a plugin receives only well-typed, in-range values.

The classes are deliberately small; methods that a kind needs are documented on the class.
Nothing here imports Textual: plugins run on compute nodes.
"""

from __future__ import annotations

import fcntl
import fnmatch
import os
import socket
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from esdash.errors import BadInput, EsdashError

#: Value kinds an :class:`Option` can declare.  ``duration`` accepts ``"30s"``, ``"5m"``,
#: ``"1h"``, ``"250ms"`` or a number of seconds; ``size`` accepts ``"512m"``, ``"2g"``.
OPTION_KINDS = ("str", "int", "float", "bool", "duration", "size", "path", "list[str]")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an option that the session file must set.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Option:
    """One key a plugin accepts in a session file.

    ``kind`` is one of :data:`OPTION_KINDS`; ``choices`` restricts the value to a set;
    ``minimum``/``maximum`` bound numbers (durations in seconds, sizes in bytes).
    """

    name: str
    kind: str
    help: str
    default: Any = None
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in OPTION_KINDS:
            raise ValueError(f"option {self.name!r}: kind {self.kind!r} not in {OPTION_KINDS}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class Registrable(ABC):
    """What every registered object has: a name, a description and its session options."""

    #: Which registry the object belongs to ("backend", "interconnect", ...).
    kind: ClassVar[str]
    name: str
    description: str
    options: tuple[Option, ...] = ()


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class Distribution:
    """A search-engine distribution found on disk, as a backend understood it."""

    home: Path
    version: str
    flavor: str
    modules: tuple[str, ...]
    scripting: bool
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Owner:
    """The unprivileged account a node runs as (and owns its files)."""

    name: str
    uid: int
    gid: int

    @classmethod
    def current(cls) -> Owner:
        import pwd

        entry = pwd.getpwuid(os.geteuid())
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)


@dataclass(frozen=True)
class NodeDirs:
    """A node's directories: config and logs and tmp per run, data per data root."""

    config: Path
    data: Path
    logs: Path
    tmp: Path


@dataclass(frozen=True)
class NodeRequest:
    """Everything a backend needs to configure and run one node.

    ``topology`` is an :class:`esdash.cluster.topology.Topology` and ``node`` the
    :class:`~esdash.cluster.topology.NodePlan` of this node; ``security`` is ``None`` when
    the session turned security off, else the files of :mod:`esdash.cluster.security`.
    """

    distribution: Distribution
    topology: Any
    node: Any
    dirs: NodeDirs
    heap: str
    owner: Owner
    options: Mapping[str, Any]
    security: Any | None = None


@dataclass(frozen=True)
class NodeCommand:
    """The argv, environment and working directory of a node process."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


class Backend(Registrable):
    """A search engine esdash can spawn (e.g. Elasticsearch).

    The cluster layer asks a backend to inspect a distribution directory, render each node's
    configuration from the topology, build the command that runs a node, and talk to the
    running cluster.
    """

    kind = "backend"

    @abstractmethod
    def inspect(self, home: Path) -> Distribution:
        """Read version, flavor and modules of the distribution at ``home``.

        Raise :class:`esdash.errors.BadInput` naming ``home`` and the fix when it is not a
        usable distribution.
        """

    @abstractmethod
    def node_settings(self, request: NodeRequest) -> dict[str, Any]:
        """The node's configuration (for Elasticsearch: the ``elasticsearch.yml`` entries)."""

    @abstractmethod
    def write_node_config(self, request: NodeRequest, settings: Mapping[str, Any]) -> None:
        """Create ``request.dirs.config`` from the distribution's templates and ``settings``."""

    @abstractmethod
    def node_command(self, request: NodeRequest) -> NodeCommand:
        """The command that runs the node in the foreground (bare or inside a container)."""

    @abstractmethod
    def client(self, endpoints: list[str], credentials: Any | None) -> Any:
        """A client for the running cluster's HTTP API at ``endpoints`` (``host:port``)."""

    def explain_exit(self, code: int, log_tail: str) -> str | None:
        """A sentence explaining a node's exit code, with the fix, when the backend knows one."""
        return None


# ----------------------------------------------------------------------- interconnects


class InterconnectError(EsdashError):
    """The host lacks the network a session asked for."""


def interface_addresses() -> dict[str, str]:
    """Map each IPv4-configured interface of this host to its primary address.

    Uses the ``SIOCGIFADDR`` ioctl, which works inside network namespaces and needs no
    external tools.
    """
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # interface without an IPv4 address
            found[name] = socket.inet_ntoa(packed[20:24])
    return found


@dataclass(frozen=True)
class Endpoint:
    """Where a node binds and publishes on one host."""

    interface: str
    address: str


class Interconnect(Registrable):
    """A network the nodes talk over, found on a host by interface name patterns.

    ``patterns`` are shell-style patterns (``ib*``, ``hfi1_*``); the first interface of this
    host that matches and has an IPv4 address wins.  A session may name the interface
    explicitly (``cluster.interface``), which then must exist.
    """

    kind = "interconnect"
    patterns: tuple[str, ...] = ()

    def resolve(self, interface: str | None = None) -> Endpoint:
        """Find this host's endpoint on the interconnect, or explain why there is none."""
        addresses = interface_addresses()
        host = socket.gethostname()
        if interface:
            if interface not in addresses:
                raise InterconnectError(
                    f"{self.name}: interface {interface!r} has no IPv4 address on host {host} "
                    f"(interfaces here: {', '.join(sorted(addresses)) or 'none'}); set "
                    f"cluster.interface to one of them or remove it to match {self.patterns}"
                )
            return Endpoint(interface, addresses[interface])
        for pattern in self.patterns:
            for name in sorted(addresses):
                if fnmatch.fnmatch(name, pattern):
                    return Endpoint(name, addresses[name])
        raise InterconnectError(
            f"{self.name}: no interface on host {host} matches {', '.join(self.patterns)} "
            f"(interfaces here: {', '.join(sorted(addresses)) or 'none'}); choose another "
            f"interconnect or set cluster.interface explicitly"
        )


# ---------------------------------------------------------------------- encryption


class EncryptionMode(Registrable):
    """How data is protected: where a node's data lives and how the client transforms it.

    ``storage_kind`` tells the cluster layer whether data directories are plain or an
    encrypted mount; client-side modes transform documents, mappings and queries.
    """

    kind = "encryption"
    #: True when documents are encrypted on the client before they are sent.
    client_side: bool = False

    @contextmanager
    def node_storage(
        self, data_dir: Path, owner: Owner, options: Mapping[str, Any]
    ) -> Iterator[Path]:
        """Yield the directory a node keeps its data in, and undo any setup afterwards.

        The default is a plain directory owned by ``owner``; a mode such as GoCryptFS mounts
        an encrypted file system there before the node starts and unmounts it after the node
        stopped, also when the node failed.
        """
        data_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(data_dir, owner.uid, owner.gid)
        yield data_dir


# --------------------------------------------------------------------------- tracks


@dataclass(frozen=True)
class FieldSpec:
    """One field of a track's schema: its type and, for numbers and dates, its range.

    Client-side encryption needs the ranges to choose order-preserving domains.
    """

    path: str
    type: str
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None


@dataclass(frozen=True)
class Query:
    """One search request of a query step.

    ``body`` is the ``_search`` request body.  ``requires`` names distribution capabilities
    the query needs (``"scripting"``); on a distribution without them the query is reported
    as unsupported by that distribution, never silently skipped.
    """

    name: str
    body: Mapping[str, Any]
    index: str | None = None
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueryStep:
    """Queries sent together for a warm-up and a measured duration.

    ``None`` for warm-up, duration or target throughput means: the session's default.

    ``think_time`` (seconds) is a pause each rank makes after every response before it sends
    its next request, in warm-up and measurement alike: a closed loop with think time, the
    authors' ``sleep_between_requests_secs``.  It is not a rate: a rank's throughput is then
    ``1 / (think_time + latency)`` and falls as the cluster slows down, whereas a target
    throughput schedules sends at fixed moments (open loop).  A step with think time therefore
    runs as a closed loop even when the session sets a target throughput, and a step cannot
    set both.
    """

    name: str
    queries: tuple[Query, ...]
    warmup: float | None = None
    duration: float | None = None
    target_throughput: float | None = None
    think_time: float = 0.0

    def __post_init__(self) -> None:
        if self.think_time < 0:
            raise ValueError(f"step {self.name!r}: think_time must be >= 0")
        if self.think_time and self.target_throughput is not None:
            raise ValueError(
                f"step {self.name!r}: set think_time (closed loop) or target_throughput "
                "(open loop), not both"
            )


@dataclass(frozen=True)
class Corpus:
    """Documents to ingest: an NDJSON file, one document per line (Rally's format).

    With ``includes_action_and_meta_data`` every document line is preceded by its bulk
    action line, as in some Rally corpora.
    """

    path: Path
    documents: int | None = None
    includes_action_and_meta_data: bool = False


class Track(Registrable):
    """A workload: index settings and mapping, a corpus, a field schema and query steps."""

    kind = "track"
    #: The index the track's documents go to (queries may name another).
    index: str = ""
    fields: tuple[FieldSpec, ...] = ()

    def index_name(self, options: Mapping[str, Any]) -> str:
        """The index the documents go to; tracks whose index depends on options override it."""
        return self.index or self.name

    @abstractmethod
    def index_body(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The settings and mappings of the track's index, as sent to ``PUT /<index>``."""

    @abstractmethod
    def corpus(self, options: Mapping[str, Any], cache_dir: Path) -> Corpus:
        """The corpus to ingest; a generator writes it under ``cache_dir`` once per options."""

    @abstractmethod
    def query_steps(self, options: Mapping[str, Any]) -> tuple[QueryStep, ...]:
        """The query steps, in the order they run."""


@dataclass
class PluginInfo:
    """A loaded plugin and what it registered (shown by ``esdash plugins``)."""

    name: str
    distribution: str | None
    version: str | None
    registered: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to import, to validate or to register; the others still load."""

    name: str
    distribution: str | None
    version: str | None
    error: str


__all__ = [
    "REQUIRED",
    "Backend",
    "BadInput",
    "BrokenPlugin",
    "Distribution",
    "EncryptionMode",
    "Endpoint",
    "FieldSpec",
    "Interconnect",
    "InterconnectError",
    "NodeCommand",
    "NodeDirs",
    "NodeRequest",
    "Owner",
    "Option",
    "Corpus",
    "Query",
    "QueryStep",
    "PluginInfo",
    "Track",
    "interface_addresses",
]
