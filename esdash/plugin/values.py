"""The value types of the plugin contract: plain frozen records, no behaviour to override.

The base classes plugins subclass (:mod:`esdash.plugin.api`) take and return these, and so
do the plan checks (:mod:`esdash.plugin.planning`), the session (:mod:`esdash.plugin.session`)
and the query-file format (:mod:`esdash.plugin.steps`).  They live in a module of their own,
which imports none of those (only the security records a :class:`NodeRequest` carries), so
that every one of them can use these without an import circle: ``api`` builds its default
``Track.plan`` on ``planning``, which reads these records.  Plugins import them from
:mod:`esdash.plugin_api`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from esdash.plugin.security import NodeSecurity
from esdash.rundir.records import JsonMapping, JsonObject, NodePlan, Topology

# ---------------------------------------------------------------------------- options

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


# ----------------------------------------------------------------------- interconnects


@dataclass(frozen=True)
class Endpoint:
    """Where a node binds and publishes on one host."""

    interface: str
    address: str


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
