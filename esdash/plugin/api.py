"""The types plugins register: backends, interconnects, encryption modes and tracks.

A plugin module implements one or more ``esdash_register_*`` hooks (see
:mod:`esdash.plugin.spec`) and calls ``register(obj)`` with instances of the classes below
(plugins import them from :mod:`esdash.plugin_api`, the one module they use).
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
import json
import os
import socket
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from esdash.boundary import Dir
from esdash.errors import BadInput, EsdashError
from esdash.plugin.control import ControlClient
from esdash.plugin.host import HostProbe
from esdash.plugin.planning import REASON_KINDS, CorpusStatus, PlannedTask, plan_of_steps
from esdash.plugin.security import Credentials, NodeSecurity
from esdash.rundir.records import JsonMapping, JsonObject, NodePlan, PlannedRequest, Topology

#: Value kinds an :class:`Option` can declare.  ``duration`` accepts ``"30s"``, ``"5m"``,
#: ``"1h"``, ``"250ms"`` or a number of seconds; ``size`` accepts ``"512m"``, ``"2g"``.
OPTION_KINDS = ("str", "int", "float", "bool", "duration", "size", "path", "list[str]")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an option that the session file must set.
REQUIRED: Final = _Required()

#: A value an :class:`Option` declares or converts to, by kind: ``str`` and ``path`` (a
#: :class:`~pathlib.Path` once converted), ``int``, ``float`` and ``duration`` (seconds),
#: ``bool``, ``size`` (bytes), ``list[str]`` (a tuple once converted), or None.
OptionValue = str | int | float | bool | Path | tuple[str, ...] | None

#: A plugin's options as esdash hands them over: validated and converted
#: (:func:`esdash.plugin.options.validate`), every declared key present (defaults filled
#: in).  Each value has its option's kind, so a plugin reads them without checking.
OptionValues = Mapping[str, Any]


@dataclass(frozen=True)
class Option:
    """One key a plugin accepts in a session file.

    ``kind`` is one of :data:`OPTION_KINDS`; ``choices`` restricts the value to a set;
    ``minimum``/``maximum`` bound numbers (durations in seconds, sizes in bytes).
    """

    name: str
    kind: str
    help: str
    default: OptionValue | _Required = None
    choices: tuple[OptionValue, ...] = ()
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
    """A search-engine distribution found on disk, as a backend understood it.

    ``plugins`` are the engine plugins installed beside the modules (OpenSearch's security
    plugin) and ``mappers`` the field types it can map, where the backend knows them (empty:
    not reported), so a plan can refuse a mapping the distribution cannot hold.
    """

    home: Path
    version: str
    flavor: str
    modules: tuple[str, ...]
    scripting: bool
    problems: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    mappers: tuple[str, ...] = ()


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
    """A node's directories: config and logs and tmp per run, data per data root.

    ``jvm``: where the JVM writes heap dumps, crash (``hs_err``) files and GC logs, when the
    encryption mode keeps them with the data (:meth:`EncryptionMode.node_scratch`); None:
    in ``logs``.
    """

    config: Path
    data: Path
    logs: Path
    tmp: Path
    jvm: Path | None = None


@dataclass(frozen=True)
class NodeRequest:
    """Everything a backend needs to configure and run one node.

    ``topology`` is the cluster's plan and ``node`` this node's part of it; ``security`` is
    ``None`` when the session turned security off, else the node's TLS files and the
    cluster's credentials, which the backend installs the way its engine wants.
    """

    distribution: Distribution
    topology: Topology
    node: NodePlan
    dirs: NodeDirs
    heap: str
    owner: Owner
    options: OptionValues
    security: NodeSecurity | None = None


@dataclass(frozen=True)
class NodeCommand:
    """The argv, environment and working directory of a node process."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


class Backend(Registrable):
    """A search engine esdash can spawn (Elasticsearch, OpenSearch).

    Everything engine-specific lives behind this class: where distributions come from
    (:meth:`fetch`), what they are (:meth:`inspect`), how a node is configured and started,
    what the doctor checks (:meth:`doctor`) and how esdash controls a running cluster
    (:meth:`control_client`).  The core speaks of a "search cluster" and asks the backend.
    """

    kind = "backend"
    #: The version ``esdash fetch <backend>`` gets when none is given (None: it cannot fetch).
    default_version: ClassVar[str | None] = None

    @abstractmethod
    def inspect(self, home: Path) -> Distribution:
        """Read version, flavor and modules of the distribution at ``home``.

        Raise :class:`esdash.errors.BadInput` naming ``home`` and the fix when it is not a
        usable distribution.
        """

    def fetch(self, version: str, cache: Path, say: Callable[[str], None]) -> Path:
        """Put distribution ``version`` into ``cache`` (if not there yet) and return its home.

        The home must be ``cache / f"{name}-{version}"`` (sessions without ``cluster.home``
        take the newest such directory), readable by every user.  ``say`` reports progress
        (downloads take minutes).  :mod:`esdash.plugin.fetching` has the Maven, unzip and
        atomic-install helpers.  The default cannot fetch and says so.
        """
        raise BadInput(
            f"backend {self.name} cannot download distributions; unpack one and set "
            "cluster.home in the session"
        )

    def doctor(self, home: Path | None, user: str, cache: Path) -> list[HostProbe]:
        """The checks ``esdash doctor`` runs for this engine (distribution, Java, node user).

        ``home`` is the distribution to check (None: there is none in ``cache``), ``user``
        the account the nodes run as.  Probes run in parallel threads; each returns a
        :class:`~esdash.plugin.host.HostCheck`.
        """
        return []

    @abstractmethod
    def node_settings(self, request: NodeRequest) -> JsonObject:
        """The node's configuration (for Elasticsearch: the ``elasticsearch.yml`` entries)."""

    @abstractmethod
    def write_node_config(self, request: NodeRequest, settings: JsonMapping) -> None:
        """Create ``request.dirs.config`` from the distribution's templates and ``settings``.

        With ``request.security`` set, install the TLS files and the superuser there too.
        """

    @abstractmethod
    def node_command(self, request: NodeRequest) -> NodeCommand:
        """The command that runs the node in the foreground (bare or inside a container)."""

    @abstractmethod
    def control_client(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float = 30.0
    ) -> ControlClient:
        """A :class:`~esdash.plugin.control.ControlClient` for the cluster at ``endpoints``.

        ``endpoints`` are ``host:port`` HTTP addresses; ``credentials`` is None when the
        cluster runs without security (plain HTTP), else HTTPS with the cluster's CA and
        superuser.  ``timeout`` bounds each request (waits add their own time).
        """

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

    def resolve(
        self, interface: str | None = None, addresses: Mapping[str, str] | None = None
    ) -> Endpoint:
        """Find this host's endpoint on the interconnect, or explain why there is none.

        ``addresses`` is the host's interface table (name -> IPv4 address); by default it is
        read from the host (:func:`interface_addresses`).  Tests of hardware this machine
        lacks pass a table.
        """
        if addresses is None:
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


class QueryNotSupported(EsdashError):
    """A query (or mapping) part a client-side encryption mode cannot express on ciphertexts.

    ``part`` locates it in the request body, dotted with list indices
    (``query.bool.filter.script``, ``aggs.weight.histogram``); ``reason`` says why.  The
    orchestrator turns it into the query's ``unsupported`` reason ("not possible under
    ABE: ..."), so the query is reported as not run instead of failing the benchmark.
    """

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(f"{part}: {reason}")
        self.part = part
        self.reason = reason


class ClientCodec:
    """What a client-side encryption mode does to everything between esdash and the cluster.

    The orchestrator (``esdash run``) asks the mode for a codec once, before anything is
    launched, and uses it at plan time: the index body and every query are encoded once and
    written into ``bench.json`` (queries are never rewritten per request).  Every bench
    worker rebuilds the codec from :meth:`spec` (keys are derived once per process) and
    encodes the documents it ingests, so encryption is part of the measured ingest, and,
    when :attr:`decode_responses` is true, decodes every successful response inside the
    measured service time: a real client has to decrypt what it reads.

    Every method defaults to no transformation.  A codec must never log, print or put key
    material into :meth:`spec`.
    """

    #: Shown in "not possible under <label>: ..." reasons.
    label: str = "client-side encryption"
    #: Whether bench workers decode each successful response while measuring.
    decode_responses: bool = False

    def encode_index_body(self, body: JsonMapping) -> JsonObject:
        """The settings and mappings to create the index with (e.g. encrypted field names)."""
        return dict(body)

    def encode_document(self, doc: JsonObject) -> JsonObject:
        """One document as it is sent to the cluster."""
        return doc

    def encode_documents(self, docs: list[JsonObject]) -> list[JsonObject]:
        """A bulk request's documents; override to batch work across documents."""
        return [self.encode_document(doc) for doc in docs]

    def encode_lines(self, docs: list[JsonObject]) -> list[bytes]:
        """The documents as compact JSON lines (without line ends), ready for ``_bulk``."""
        dumps = json.dumps
        return [dumps(doc, separators=(",", ":")).encode() for doc in self.encode_documents(docs)]

    def encode_raw_lines(self, lines: list[bytes]) -> list[bytes | None]:
        """An optional fast path: per raw corpus line its encoded line, or ``None``.

        Called per bulk request before :meth:`encode_lines`, with the corpus lines as read
        (no action lines).  Lines left ``None`` are parsed, checked (errors name the file
        and line) and passed to :meth:`encode_lines`; a codec that encodes a line here must
        write exactly what :meth:`encode_lines` would.  The default leaves every line.
        """
        return [None] * len(lines)

    def encode_query(self, body: JsonMapping) -> JsonObject:
        """A ``_search`` body as sent to the cluster.

        Raises :class:`QueryNotSupported` naming the part that cannot be expressed.
        """
        return dict(body)

    def decode_response(self, body: JsonObject, request: JsonMapping | None = None) -> JsonObject:
        """A ``_search`` response as the plaintext query would have returned it.

        ``request`` is the *encoded* request body (it says which aggregations and sort
        values to decode).
        """
        return body

    def spec(self) -> JsonObject:
        """JSON-serialisable, secret-free state from which bench ranks rebuild the codec."""
        return {}

    def close(self) -> None:
        """Drop caches (they are as sensitive as the key) and key material."""


class EncryptionMode(Registrable):
    """How data is protected: where a node's data lives and how the client transforms it.

    :meth:`node_storage` decides whether data directories are plain or an encrypted mount;
    client-side modes (``client_side = True``) return a :class:`ClientCodec` from
    :meth:`client_codec` that transforms documents, mappings and queries and decodes
    responses.
    """

    kind = "encryption"
    #: True when documents are encrypted on the client before they are sent.
    client_side: bool = False
    #: What a node's directory in the data root (``<root>/<rank>``) holds: ``"plain"`` (the
    #: node's own files) or a mode's word for what it keeps there instead (gocryptfs:
    #: ``"gocryptfs-cipher"``).  Recorded with the mode's name in the data root's marker
    #: (``esdash-data.json``); a run in another mode on that root is refused.
    node_data: str = "plain"

    def check_options(self, options: OptionValues, owner: Owner) -> None:
        """Refuse what the option declarations cannot express, before anything starts.

        "Exactly one of two keys", a key file others may read, a command that is not there:
        raise :class:`esdash.errors.BadInput` whose message starts with the key
        (``encryption.password_file: ...``) and says how to fix it; esdash puts the session
        file's name in front.  ``esdash session check`` calls this, and so does every run
        before it launches anything, so the two never disagree.  ``owner`` is the account
        nodes run as.  Change nothing: create no file, run no command that may ask a person.
        """

    def client_codec(
        self,
        options: OptionValues,
        track: Track,
        *,
        track_options: OptionValues | None = None,
        data_root: Path | None = None,
    ) -> ClientCodec | None:
        """The codec for ``track`` (None: documents and queries go out unchanged).

        Called once by the orchestrator before the cluster starts, so a missing key fails
        early.  ``data_root`` is where the nodes' data lives (a mode may keep non-secret
        state there, e.g. a key-derivation salt).  Raise :class:`esdash.errors.BadInput`
        for unusable options or keys.
        """
        return None

    def codec_from_spec(self, spec: JsonMapping) -> ClientCodec | None:
        """Rebuild, in a bench rank, the codec whose :meth:`ClientCodec.spec` is ``spec``."""
        return None

    def doctor(self, user: str) -> list[HostProbe]:
        """The checks ``esdash doctor`` runs for this mode (tools, devices) for node ``user``.

        A mode's missing prerequisite is a ``warn``: only sessions using the mode need it.
        """
        return []

    @contextmanager
    def node_storage(self, data_dir: Path, owner: Owner, options: OptionValues) -> Iterator[Path]:
        """Yield the directory a node keeps its data in, and undo any setup afterwards.

        The default is a private plain directory (0700) of ``owner``, made through the
        privilege boundary (:class:`esdash.boundary.Dir`: a link in its place is refused, an
        existing one must be ``owner``'s); a mode such as GoCryptFS mounts an encrypted file
        system there before the node starts and unmounts it after the node stopped, also
        when the node failed.  ``data_dir``'s parent (the data root) exists and is root's.
        """
        with Dir.trusted(data_dir.parent) as root:
            root.make(data_dir.name, 0o700, (owner.uid, owner.gid)).close()
        yield data_dir

    def node_scratch(self, storage: Path) -> Path | None:
        """Where the node's JVM keeps its temporary files, heap dumps, crash (``hs_err``)
        files and GC logs, when they must be protected like the data; None (the default):
        in the run directory (``nodes/<rank>/tmp`` and ``logs``).

        ``storage`` is what :meth:`node_storage` yielded, and the directory returned must
        exist and belong to the node account by then.  A heap dump holds every document the
        node had in memory, so a mode that encrypts the data keeps these inside too.
        """
        return None


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

    ``request_cache`` is what the request asks of the shard request cache: ``False`` (the
    default) sends ``request_cache=false``, so repeated queries measure the search and not a
    cache lookup; ``True`` sends ``request_cache=true``; ``None`` sends nothing and leaves it
    to the index setting, which is what Rally does for a task without ``cache``.

    A query with a ``path`` is a request other than a search, timed like one: Rally's
    ``index-stats`` (``GET /INDEX/_stats``), ``node-stats`` (``GET /_nodes/stats``) and
    ``raw-request``.  It is sent to ``path`` with ``method``, without a body when ``body`` is
    empty; ``index`` and ``request_cache`` do not apply, and a client-side encryption mode
    never rewrites it (one with a body is refused under such a mode: its plaintext would
    not match the encrypted index).

    ``variants`` are further bodies of the same search (a Rally parameter source's samples,
    ``body`` being the first): each client cycles through them from its own, reproducible
    starting point, so one query name stands for many different requests.  ``pages`` makes
    the query a scroll search (Rally's ``scroll-search``): the first request opens a
    scroll, the following ones fetch up to ``pages`` pages in all (:data:`ALL_PAGES`: until
    the hits run out) and the scroll is cleared; the whole exchange is timed as one
    request.  ``body`` then carries the page size as ``size``.  With ``paging =
    "search_after"`` (Rally's ``paginated-search``) the pages are fetched by repeating the
    search with ``search_after`` set to the last hit's sort values instead (the body needs
    a ``sort``); no scroll is opened.
    """

    name: str
    body: JsonMapping
    index: str | None = None
    requires: tuple[str, ...] = ()
    request_cache: bool | None = False
    method: str = "POST"
    path: str | None = None
    variants: tuple[JsonObject, ...] = ()
    pages: int | None = None
    paging: str = "scroll"

    def __post_init__(self) -> None:
        if self.paging not in PAGING:
            raise ValueError(f"query {self.name!r}: paging must be one of {', '.join(PAGING)}")


#: ``Query.pages`` of a scroll that fetches every page (Rally's ``"pages": "all"``).
ALL_PAGES = -1
#: How a query with ``pages`` fetches them (``Query.paging``).
PAGING = ("scroll", "search_after")


@dataclass(frozen=True)
class StepIndexing:
    """Bulk indexing that runs during a query step, beside its queries.

    ``name`` is what its bulk requests are recorded under (a Rally bulk task's name) and
    the key of its documents in :meth:`Track.step_corpora`; they go to ``index`` (an index
    or data stream of the track).  ``clients`` send them at once, over all bench ranks,
    each its own part of the documents; ``bulk_size`` documents per request (None: the
    session's ``benchmark.bulk_size``); ``target_throughput`` is bulk requests per second
    of all clients together (None: as fast as they can).  ``pipeline`` is sent as
    ``?pipeline=``; ``looped`` starts a client's part again when it is sent (else the
    client stops); ``ingest_percentage`` sends only that share of each client's part.
    """

    name: str
    index: str
    clients: int = 1
    bulk_size: int | None = None
    target_throughput: float | None = None
    pipeline: str | None = None
    looped: bool = False
    ingest_percentage: float = 100.0

    def __post_init__(self) -> None:
        if self.clients < 1:
            raise ValueError(f"indexing {self.name!r}: clients must be at least 1")
        if not 0 < self.ingest_percentage <= 100:
            raise ValueError(f"indexing {self.name!r}: ingest_percentage must be in (0, 100]")


#: A counted step's phases (:attr:`QueryStep.iterations`) may take the session's time for a
#: timed phase this many times over, and at least ``ITERATION_LIMIT_FLOOR`` seconds, before a
#: client still counting stops: a frozen node must not hold the run forever, and a limit
#: that cuts a step short is flagged in its status.
ITERATION_LIMIT_FACTOR = 10.0
ITERATION_LIMIT_FLOOR = 60.0


def iteration_limit(seconds: float) -> float:
    """The longest a counted phase may take, from the session's time for a timed one."""
    return max(ITERATION_LIMIT_FLOOR, ITERATION_LIMIT_FACTOR * seconds)


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

    ``clients`` is how many clients send the step's requests at once, over all bench ranks
    together (Rally's ``clients`` of a task): they are spread over the ranks as evenly as
    possible, several in one rank running as concurrent connections, and a target throughput
    is shared among them.  ``None`` means one client per bench rank, esdash's own model.

    ``iterations`` makes the step count requests instead of timing them (Rally's
    ``iterations``): every client sends ``warmup_iterations`` warm-up requests (when set;
    otherwise it warms up for ``warmup`` seconds), then ``iterations`` measured ones, and the
    step ends when every client is done, so the next step starts then.  ``warmup`` and
    ``duration`` are then the longest the two phases may take (None: the session's times
    times :data:`ITERATION_LIMIT_FACTOR`, at least :data:`ITERATION_LIMIT_FLOOR` seconds); a
    client still counting at the limit stops, and the results flag the step.
    """

    name: str
    queries: tuple[Query, ...]
    warmup: float | None = None
    duration: float | None = None
    target_throughput: float | None = None
    think_time: float = 0.0
    clients: int | None = None
    #: Documents indexed while the queries run, from the warm-up's start to the measured
    #: end (Rally's bulk task in a ``parallel`` block with searches); each load's
    #: documents come from :meth:`Track.step_corpora`.
    indexing: tuple[StepIndexing, ...] = ()
    #: Requests each client sends to warm up and to measure (None: timed, not counted).
    warmup_iterations: int | None = None
    iterations: int | None = None
    #: Seconds over which the clients start one after another (Rally's
    #: ``ramp-up-time-period``): client ``i`` of ``n`` (over all ranks) waits
    #: ``ramp_up * i / n`` before its first warm-up request; the warm-up still ends on time.
    ramp_up: float = 0.0

    def __post_init__(self) -> None:
        if self.think_time < 0:
            raise ValueError(f"step {self.name!r}: think_time must be >= 0")
        if self.ramp_up < 0 or (self.ramp_up and self.iterations is not None):
            raise ValueError(f"step {self.name!r}: ramp_up must be >= 0, and only on a timed step")
        if self.ramp_up and self.warmup is not None and self.warmup < self.ramp_up:
            raise ValueError(f"step {self.name!r}: the warm-up must last at least ramp_up")
        if self.iterations is not None and self.iterations < 1:
            raise ValueError(f"step {self.name!r}: iterations must be at least 1")
        if self.warmup_iterations is not None and self.warmup_iterations < 0:
            raise ValueError(f"step {self.name!r}: warmup_iterations must be >= 0")
        if self.warmup_iterations is not None and self.iterations is None:
            raise ValueError(
                f"step {self.name!r}: warmup_iterations needs iterations (a timed step warms "
                "up for its warmup seconds)"
            )
        if self.clients is not None and self.clients < 1:
            raise ValueError(f"step {self.name!r}: clients must be at least 1")
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

    ``origin`` names what generated the corpus (e.g. ``{"generator": "mri", "seed": 5}``) for
    tracks that generate it: an index is reused only for the same origin, and a difference is
    shown in these terms ("seed 5, planned 6") rather than as a file size.
    """

    path: Path
    documents: int | None = None
    includes_action_and_meta_data: bool = False
    origin: Mapping[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class TrackIndex:
    """Another index of a track, beside its main one (:meth:`Track.more_indices`).

    ``corpus`` None: the index is created but nothing is ingested into it (a track's
    searches may still name it).  ``data_stream``: ``name`` is a data stream, which the
    track's index template makes on the first document; its documents are sent as
    ``create`` actions and ``body`` is unused.
    """

    name: str
    body: JsonObject
    corpus: Corpus | None = None
    data_stream: bool = False


class Track(Registrable):
    """A workload: index settings and mapping, a corpus, a field schema and query steps."""

    kind = "track"
    #: The index the track's documents go to (queries may name another).
    index: str = ""
    #: Whether the order of the steps is part of what the track measures (a Rally schedule
    #: is: its author ordered the tasks).  ``benchmark.order = "auto"`` then keeps the
    #: listed order; otherwise it mirrors the rounds (:func:`esdash.stats.order.resolve`).
    ordered_schedule: bool = False
    fields: tuple[FieldSpec, ...] = ()

    def index_name(self, options: OptionValues) -> str:
        """The index the documents go to; tracks whose index depends on options override it."""
        return self.index or self.name

    def field_specs(self, options: OptionValues) -> tuple[FieldSpec, ...]:
        """The field schema for ``options``; tracks whose schema depends on options override it."""
        return self.fields

    @abstractmethod
    def index_body(self, options: OptionValues) -> JsonObject:
        """The settings and mappings of the track's index, as sent to ``PUT /<index>``."""

    @abstractmethod
    def corpus(self, options: OptionValues, cache_dir: Path) -> Corpus:
        """The corpus to ingest; a generator writes it under ``cache_dir`` once per options."""

    @abstractmethod
    def query_steps(self, options: OptionValues) -> tuple[QueryStep, ...]:
        """The query steps, in the order they run."""

    def more_indices(self, options: OptionValues, cache_dir: Path) -> tuple[TrackIndex, ...]:
        """The track's other indices beside :meth:`index_name`, each with its corpus, in the
        order they are ingested (after the main one).  Most tracks have one index: none."""
        return ()

    def step_corpora(self, options: OptionValues, cache_dir: Path) -> Mapping[str, Corpus]:
        """The documents of each :class:`StepIndexing` of the query steps, by its name
        (prepared under ``cache_dir`` like :meth:`corpus`).  Most tracks index nothing
        during their steps: none."""
        return {}

    def data_streams(self, options: OptionValues) -> tuple[str, ...]:
        """Which of the track's targets (:meth:`index_name` included) are data streams,
        made by the track's index templates rather than created with a body: none."""
        return ()

    def track_requests(
        self, options: OptionValues, distribution: Distribution
    ) -> tuple[PlannedRequest, ...]:
        """Administrative requests rank 0 sends once, in order: before the ingest (after
        preparing the indices) and after it (before settling and the steps), as a Rally
        track's ``force-merge`` or ``put-settings`` tasks.  Those ``distribution`` cannot
        serve are left out (the plan refuses their tasks).  Most tracks have none."""
        return ()

    def corpus_check(self, options: OptionValues, cache_dir: Path) -> CorpusStatus | None:
        """The corpus a run would ingest, checked without writing anything; None (the
        default) when the track cannot tell without generating or joining files, as a
        generator cannot.  ``esdash plan`` shows its lines, the ``corpus`` pre-flight check
        refuses its problems (``cache_dir`` is where :meth:`corpus` would write copies)."""
        return None

    def own_code(self, options: OptionValues) -> str | None:
        """One line naming the code of the track's own that esdash would run for
        ``options`` (a Rally track's ``track.py`` and the modules beside it) and whether it
        runs: only when the session trusts it (the track's ``trust_code`` option, which
        ``--trust-track-code`` sets).  ``esdash plan`` and ``esdash session check`` print it
        whether trusted or not, so nobody runs code they did not look at.  None (the
        default): the track runs no code from its input."""
        return None

    def plan(
        self, options: OptionValues, distribution: Distribution | None
    ) -> tuple[PlannedTask, ...]:
        """Every task of the track in order: what esdash does, or why it cannot.

        The default is esdash's own model (one ingest, then :meth:`query_steps`), checked
        against ``distribution`` (None: not installed, nothing checked): queries needing a
        module it lacks and mappings it cannot hold are refused with that reason.  Tracks that
        read a richer format (Rally's schedules) override it to list the format's tasks.
        """
        return plan_of_steps(self.index_body(options), self.query_steps(options), distribution)


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
    "OptionValue",
    "OptionValues",
    "Backend",
    "BadInput",
    "BrokenPlugin",
    "ClientCodec",
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
    "PlannedTask",
    "CorpusStatus",
    "PluginInfo",
    "ALL_PAGES",
    "QueryNotSupported",
    "REASON_KINDS",
    "Track",
    "TrackIndex",
    "interface_addresses",
]
