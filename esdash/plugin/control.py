"""The control client: every operation esdash itself performs on a running search cluster.

The load generator's hot path (bulk and search requests) keeps its own keep-alive HTTP
loop; everything else -- creating and deleting indices, reading an index's ``_meta``,
refresh, flush and force-merge, cluster health with wait conditions, node and index
statistics, templates and data streams -- goes through a :class:`ControlClient` that the
backend gives (:meth:`esdash.plugin.api.Backend.control_client`).  Each backend implements it
with its engine's own client library (Elasticsearch with ``elasticsearch``, OpenSearch with
``opensearch-py``), the way Rally drives a cluster.  The core never speaks an engine's API
directly.

Engines are told apart by what a response says about its sender, not by version numbers
(OpenSearch 3.x would read as an old Elasticsearch): Elasticsearch sends
``X-Elastic-Product: Elasticsearch``, OpenSearch ``x-opensearch-version``
(:func:`engine_of`).  A control client checks on connect that it talks to its own engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, runtime_checkable

from esdash.errors import ClusterError
from esdash.plugin.redaction import redact_values
from esdash.rundir.records import Health, JsonMapping, JsonObject

#: What :func:`engine_of` returns for the engines esdash knows.
ELASTICSEARCH = "elasticsearch"
OPENSEARCH = "opensearch"


def engine_of(headers: Mapping[str, str]) -> str | None:
    """The engine that sent a response, from its headers (None: neither says who it is).

    Header names are compared case-insensitively, as HTTP requires.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    if lowered.get("x-elastic-product", "").lower() == "elasticsearch":
        return ELASTICSEARCH
    if "x-opensearch-version" in lowered:
        return OPENSEARCH
    return None


class ControlError(ClusterError):
    """A control operation failed; the message names the operation and the engine's reason.

    The reason loses the document values an engine quotes (:func:`redact_values`): these
    messages end up in ``results.json``, the stream and the run's reason.
    """

    def __init__(self, operation: str, reason: str, status: int | None = None) -> None:
        where = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"{operation} failed{where}: {redact_values(reason)}")
        self.operation = operation
        self.status = status


@dataclass(frozen=True)
class EngineInfo:
    """Who answered: the engine (from its headers), its version and cluster name."""

    engine: str
    version: str
    cluster_name: str | None = None


@runtime_checkable
class ControlClient(Protocol):
    """Control operations on one cluster, as every backend provides them.

    Every method raises :class:`ControlError` (naming the operation and the engine's reason)
    when the cluster refuses or cannot be reached; :attr:`retry_statuses` are the HTTP
    statuses a caller waiting for a starting cluster should retry on (OpenSearch answers
    503 "Security not initialized" for a while after its port opens).
    """

    #: The engine this client speaks to (``elasticsearch``, ``opensearch``).
    engine: str
    #: HTTP statuses that mean "not ready yet, ask again" while a cluster starts.
    retry_statuses: frozenset[int]

    def info(self) -> EngineInfo:
        """Who answers; raises :class:`ControlError` when it is another engine."""
        ...

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
        """``_cluster/health``, waiting (up to ``timeout`` seconds) for the conditions given.

        A wait that times out returns the health as it then is (``timed_out`` True).
        """
        ...

    def index_exists(self, index: str) -> bool: ...

    def count(self, index: str) -> int:
        """Documents in ``index`` (after the last refresh)."""
        ...

    def index_meta(self, index: str) -> JsonObject | None:
        """The ``_meta`` object of ``index``'s mapping (None when it has none)."""
        ...

    def create_index(self, index: str, body: Mapping[str, object]) -> None: ...

    def delete_index(self, index: str) -> None: ...

    def refresh(self, index: str) -> None: ...

    def flush(self, index: str) -> None: ...

    def force_merge(self, index: str, max_num_segments: int | None = None) -> None:
        """Merge ``index``'s segments and return when the merge has finished."""
        ...

    def node_stats(self, metrics: Sequence[str] = ()) -> JsonObject:
        """``_nodes/stats`` (of ``metrics``, or all): the engine's answer as it is."""
        ...

    def index_stats(self, index: str, metrics: Sequence[str] = ()) -> JsonObject:
        """``<index>/_stats`` (of ``metrics``, or all): the engine's answer as it is."""
        ...

    def index_settings(self, index: str) -> JsonObject:
        """``<index>/_settings`` with defaults, flat (``index.number_of_shards``): as it is.

        What a comparison of engines reads back to show both ran the same index.
        """
        ...

    def nodes_info(self, metrics: Sequence[str] = ()) -> JsonObject:
        """``_nodes`` (of ``metrics``, e.g. ``jvm``, or all): the engine's answer as it is."""
        ...

    def put_index_template(self, name: str, body: Mapping[str, object]) -> None: ...

    def put_component_template(self, name: str, body: Mapping[str, object]) -> None: ...

    def create_data_stream(self, name: str) -> None: ...

    def delete_data_stream(self, name: str) -> None: ...

    def request(
        self,
        operation: str,
        method: str,
        path: str,
        body: JsonMapping | None,
        timeout: float | None = None,
    ) -> JsonObject:
        """One request as it is (``path`` with its query string), for a track's
        administrative tasks (Rally's ``raw-request``, ``force-merge``, templates ...).

        Returns the engine's answer (``{}`` when it has no JSON body); raises
        :class:`ControlError` naming ``operation`` on any status of 400 or above.
        ``timeout`` overrides the client's request timeout (a merge takes as long as it
        takes).
        """
        ...

    def close(self) -> None: ...

    def __enter__(self) -> ControlClient: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...
