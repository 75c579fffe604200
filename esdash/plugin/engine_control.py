"""A control client over an engine's own Python client: what Elasticsearch and OpenSearch share.

``elasticsearch-py`` and ``opensearch-py`` grew from one code base: every control operation
esdash performs has the same namespace (``indices``, ``cluster``, ``nodes``), the same method
name and the same keyword arguments in both.  What differs is small: how the client is built,
how one call gets another timeout or is told that a status is an answer (the 408 of a health
wait that timed out), what an answer is (a response object or the body itself), where an
error keeps the engine's reason, and how the engine is recognised.  So
:class:`EngineControl` implements :class:`~esdash.plugin.control.ControlClient` once, on
top of what a backend fills in with its library: one call of a client method
(:meth:`EngineControl._invoke`), one request as it is (:meth:`EngineControl._perform`) and
the engine's reason for an error (:meth:`EngineControl._reason`); the backend adds the one
operation that really differs, ``info`` (how the engine is recognised).  This module imports
neither library: each one may be imported by its own backend only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, ParamSpec, TypeVar

from esdash.plugin.control import ControlError
from esdash.rundir.records import Health, JsonMapping, JsonObject

#: The client methods :class:`EngineControl` calls, by their path on the client object
#: (``indices.refresh`` is ``client.indices.refresh``); both libraries have each of them.
ClientApi = Literal[
    "count",
    "cluster.health",
    "cluster.put_component_template",
    "indices.create",
    "indices.create_data_stream",
    "indices.delete",
    "indices.delete_data_stream",
    "indices.exists",
    "indices.flush",
    "indices.forcemerge",
    "indices.get_mapping",
    "indices.get_settings",
    "indices.put_index_template",
    "indices.refresh",
    "indices.stats",
    "nodes.info",
    "nodes.stats",
]

#: A request timeout meaning "as long as it takes" (a force merge returns when it is done).
UNBOUNDED = float("inf")

#: The HTTP status of a health wait that timed out: its body is the health as it then is.
TIMED_OUT_WAIT = 408

P = ParamSpec("P")
R = TypeVar("R")
Control = TypeVar("Control", bound="EngineControl")


@dataclass(frozen=True)
class ApiCall:
    """One call of a client method: ``api`` with ``arguments``, for ``operation``.

    ``timeout``: the request timeout in seconds (None: the client's own; :data:`UNBOUNDED`:
    none at all); ``answers``: HTTP statuses whose body is the answer, not an error.
    """

    operation: str
    api: ClientApi
    arguments: Mapping[str, object]
    timeout: float | None = None
    answers: frozenset[int] = frozenset()


class EngineControl(ABC):
    """:class:`~esdash.plugin.control.ControlClient` over an official engine client.

    A backend subclasses it, builds its client in ``__init__`` (calling this one with the
    request timeout), names the library's errors (:attr:`client_errors`) and implements
    :meth:`_reason`, :meth:`_invoke`, :meth:`_perform`, ``info`` and ``close`` as
    :class:`~esdash.plugin.control.ControlClient` asks; it sets :attr:`engine` and
    :attr:`retry_statuses`.
    """

    engine: str
    retry_statuses: frozenset[int]
    #: The client library's errors of a failed request (turned into :class:`ControlError`).
    client_errors: ClassVar[tuple[type[Exception], ...]]
    #: Arguments a force merge sends besides the index and ``max_num_segments``.
    force_merge_arguments: ClassVar[Mapping[str, object]] = {}

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    # ------------------------------------------------------------ what a backend fills in

    @abstractmethod
    def _invoke(self, call: ApiCall) -> object:
        """Make ``call`` with the client (through :meth:`_call`) and return the answer's
        body: a JSON object, or a bool from ``indices.exists``."""

    @abstractmethod
    def _reason(self, exc: Exception) -> tuple[str, int | None]:
        """The engine's reason for a failed request (one of :attr:`client_errors`), and its
        HTTP status (None: no answer, or not one of the engine's)."""

    @abstractmethod
    def _perform(
        self, operation: str, method: str, path: str, body: JsonObject | None, timeout: float | None
    ) -> object:
        """One request as it is (through :meth:`_call`); the answer's body, as parsed."""

    @abstractmethod
    def close(self) -> None: ...

    def _call(
        self, operation: str, function: Callable[P, R], *args: P.args, **arguments: P.kwargs
    ) -> R:
        """``function(*args, **arguments)``; a client error becomes a :class:`ControlError`
        naming ``operation``, the engine's reason and the HTTP status."""
        try:
            return function(*args, **arguments)
        except self.client_errors as exc:
            reason, status = self._reason(exc)
            raise ControlError(operation, reason, status) from None

    # ------------------------------------------------------------ shared by every engine

    def _object(self, call: ApiCall) -> JsonObject:
        """:meth:`_invoke`, its answer as a JSON object (``{}`` when it is none)."""
        answer = self._invoke(call)
        return dict(answer) if isinstance(answer, Mapping) else {}

    def health(
        self,
        *,
        index: str | None = None,
        wait_for_status: str | None = None,
        wait_for_nodes: str | None = None,
        wait_for_no_relocating_shards: bool = False,
        wait_for_no_initializing_shards: bool = False,
        timeout: float = 30.0,
    ) -> Health:
        """``_cluster/health``; a wait that times out (HTTP 408) is a result, not an error."""
        arguments: dict[str, object] = {"timeout": f"{timeout:g}s"}
        if index is not None:
            arguments["index"] = index
        if wait_for_status is not None:
            arguments["wait_for_status"] = wait_for_status
        if wait_for_nodes is not None:
            arguments["wait_for_nodes"] = wait_for_nodes
        if wait_for_no_relocating_shards:
            arguments["wait_for_no_relocating_shards"] = True
        if wait_for_no_initializing_shards:
            arguments["wait_for_no_initializing_shards"] = True
        waited = timeout + self.timeout  # the engine's wait, then the request's own time
        call = ApiCall(
            "cluster health", "cluster.health", arguments, waited, frozenset({TIMED_OUT_WAIT})
        )
        body = self._object(call)
        known = {name: body[name] for name in Health.__struct_fields__ if name in body}
        return Health(**{**known, "ok": True})

    def index_exists(self, index: str) -> bool:
        return bool(self._invoke(ApiCall("index exists", "indices.exists", {"index": index})))

    def count(self, index: str) -> int:
        return int(self._object(ApiCall("count", "count", {"index": index}))["count"])

    def index_meta(self, index: str) -> JsonObject | None:
        answer = self._object(ApiCall("get mapping", "indices.get_mapping", {"index": index}))
        metas = [(v.get("mappings") or {}).get("_meta") for v in answer.values()]
        return metas[0] if len(metas) == 1 else None

    def create_index(self, index: str, body: Mapping[str, object]) -> None:
        self._invoke(
            ApiCall("create index", "indices.create", {"index": index, "body": dict(body)})
        )

    def delete_index(self, index: str) -> None:
        """Delete ``index``; one that does not exist is already deleted."""
        try:
            self._invoke(ApiCall("delete index", "indices.delete", {"index": index}))
        except ControlError as exc:
            if exc.status != 404:
                raise

    def refresh(self, index: str) -> None:
        self._invoke(ApiCall("refresh", "indices.refresh", {"index": index}))

    def flush(self, index: str) -> None:
        self._invoke(ApiCall("flush", "indices.flush", {"index": index}))

    def force_merge(self, index: str, max_num_segments: int | None = None) -> None:
        arguments: dict[str, object] = {"index": index, **self.force_merge_arguments}
        if max_num_segments is not None:
            arguments["max_num_segments"] = max_num_segments
        # it returns when the merge is done
        self._invoke(ApiCall("force merge", "indices.forcemerge", arguments, UNBOUNDED))

    def node_stats(self, metrics: Sequence[str] = ()) -> JsonObject:
        return self._object(ApiCall("node stats", "nodes.stats", _metric(metrics)))

    def index_stats(self, index: str, metrics: Sequence[str] = ()) -> JsonObject:
        return self._object(
            ApiCall("index stats", "indices.stats", {"index": index, **_metric(metrics)})
        )

    def index_settings(self, index: str) -> JsonObject:
        arguments = {"index": index, "flat_settings": True, "include_defaults": True}
        return self._object(ApiCall("index settings", "indices.get_settings", arguments))

    def nodes_info(self, metrics: Sequence[str] = ()) -> JsonObject:
        return self._object(ApiCall("nodes info", "nodes.info", _metric(metrics)))

    def put_index_template(self, name: str, body: Mapping[str, object]) -> None:
        arguments = {"name": name, "body": dict(body)}
        self._invoke(ApiCall("put index template", "indices.put_index_template", arguments))

    def put_component_template(self, name: str, body: Mapping[str, object]) -> None:
        arguments = {"name": name, "body": dict(body)}
        self._invoke(ApiCall("put component template", "cluster.put_component_template", arguments))

    def create_data_stream(self, name: str) -> None:
        self._invoke(ApiCall("create data stream", "indices.create_data_stream", {"name": name}))

    def delete_data_stream(self, name: str) -> None:
        self._invoke(ApiCall("delete data stream", "indices.delete_data_stream", {"name": name}))

    def request(
        self,
        operation: str,
        method: str,
        path: str,
        body: JsonMapping | None,
        timeout: float | None = None,
    ) -> JsonObject:
        """One request as it is (see :meth:`~esdash.plugin.control.ControlClient.request`)."""
        answer = self._perform(operation, method, path, _copy(body), timeout)
        return dict(answer) if isinstance(answer, Mapping) else {}

    def __enter__(self: Control) -> Control:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _copy(body: JsonMapping | None) -> JsonObject | None:
    return dict(body) if body is not None else None


def _metric(metrics: Sequence[str]) -> dict[str, object]:
    """The ``metric`` argument of a stats or info call (none: every metric)."""
    return {"metric": ",".join(metrics)} if metrics else {}


def engine_reason(body: object, fallback: str) -> str:
    """The engine's own reason in an error body (``error.type: error.reason``), else
    ``fallback``; both libraries keep the body an engine sent with an error status."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return f"{error.get('type')}: {error.get('reason')}"
        if error:
            return str(error)
    return fallback
