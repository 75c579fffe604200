"""The types plugins register: backends, interconnects, encryption modes and tracks.

A plugin module implements one or more ``esdash_register_*`` hooks (see
:mod:`esdash.plugin.spec`) and calls ``register(obj)`` with instances of the classes below
(plugins import them from :mod:`esdash.plugin_api`, the one module they use).
Every registered object has a ``name`` (unique within its kind, used in session files), a
one-line ``description`` (shown by ``esdash plugins`` and the dashboard) and a tuple of
:class:`Option` declarations: the keys a session file may set for it.  esdash validates
those keys before anything runs, so a plugin receives only well-typed, in-range values.

The classes are deliberately small; methods that a kind needs are documented on the class.
The records they take and return (:class:`Option`, :class:`Distribution`, :class:`QueryStep`,
:class:`Corpus`, ...) are in :mod:`esdash.plugin.values`.  Nothing here imports Textual:
plugins run on compute nodes.
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import socket
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from esdash.boundary import Dir
from esdash.errors import BadInput, EsdashError
from esdash.plugin.control import ControlClient
from esdash.plugin.host import HostProbe
from esdash.plugin.planning import REASON_KINDS, CorpusStatus, PlannedTask, plan_of_steps
from esdash.plugin.security import Credentials
from esdash.plugin.values import (
    Corpus,
    Distribution,
    Endpoint,
    FieldSpec,
    NodeCommand,
    NodeRequest,
    Option,
    OptionValues,
    Owner,
    QueryStep,
    TrackIndex,
)
from esdash.rundir.records import JsonMapping, JsonObject, PlannedRequest


class Registrable(ABC):
    """What every registered object has: a name, a description and its session options."""

    #: Which registry the object belongs to ("backend", "interconnect", ...).
    kind: ClassVar[str]
    name: str
    description: str
    options: tuple[Option, ...] = ()


# --------------------------------------------------------------------------- backends


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


class Track(Registrable):
    """A workload: index settings and mapping, a corpus, a field schema and query steps."""

    kind = "track"
    #: The index the track's documents go to (queries may name another).
    index: str = ""
    #: Whether the order of the steps is part of what the track measures (a Rally schedule
    #: is: its author ordered the tasks).  ``benchmark.order = "auto"`` then keeps the
    #: listed order; otherwise it mirrors the rounds (:func:`esdash.plugin.order.resolve`).
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
    "Backend",
    "BadInput",
    "BrokenPlugin",
    "ClientCodec",
    "CorpusStatus",
    "EncryptionMode",
    "Interconnect",
    "InterconnectError",
    "PlannedTask",
    "PluginInfo",
    "QueryNotSupported",
    "REASON_KINDS",
    "Registrable",
    "Track",
    "interface_addresses",
]
