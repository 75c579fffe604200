"""The control client for OpenSearch: ``opensearch-py``, OpenSearch's own Python client.

Every control operation of esdash goes through :class:`OpenSearchControl`; the load
generator's bulk and search requests keep their own keep-alive HTTP loop.  What differs from
Elasticsearch, and is handled here:

* the engine is told from the ``x-opensearch-version`` response header, and from
  ``version.distribution`` in ``GET /`` (OpenSearch 3.4 would read as an old Elasticsearch
  by its number, so the number is never looked at for that);
* requests are plain ``application/json`` (OpenSearch answers Elasticsearch's compatibility
  media types with 406), which is what opensearch-py sends;
* while the security plugin initialises, every request gets 503 "OpenSearch Security not
  initialized", so 503 is among :attr:`OpenSearchControl.retry_statuses`.

A health wait that times out is answered with HTTP 408 and the health as it then is: that is
a result, not an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from opensearchpy import NotFoundError, OpenSearch, TransportError

from esdash.plugin_api import (
    OPENSEARCH,
    ControlError,
    Credentials,
    EngineInfo,
    Health,
    JsonMapping,
    JsonObject,
    engine_of,
)

from .security import client_kwargs

#: HTTP statuses a caller waiting for a starting cluster retries on: 503 while no cluster
#: manager is elected and while the security plugin is not initialised.
RETRY_STATUSES = frozenset({503})

P = ParamSpec("P")
R = TypeVar("R")


def _reason(exc: TransportError) -> tuple[str, int | None]:
    """The engine's own reason for a failed request, and its HTTP status."""
    status = exc.status_code if isinstance(exc.status_code, int) else None
    info = exc.info
    if isinstance(info, Mapping):
        error = info.get("error")
        if isinstance(error, Mapping):
            return f"{error.get('type')}: {error.get('reason')}", status
        if error:
            return str(error), status
    if status is None:  # a connection error: info is the underlying exception
        return f"{type(exc).__name__}: {info or exc.error}", None
    return str(info or exc.error), status


class OpenSearchControl:
    """:class:`esdash.plugin_api.ControlClient` for OpenSearch 2.x and 3.x."""

    engine = OPENSEARCH
    retry_statuses = RETRY_STATUSES

    def __init__(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float
    ) -> None:
        self.timeout = timeout
        self.client = OpenSearch(
            list(endpoints),
            timeout=timeout,
            max_retries=0,
            retry_on_timeout=False,
            **client_kwargs(credentials),
        )

    def _call(
        self, operation: str, function: Callable[P, R], *args: P.args, **arguments: P.kwargs
    ) -> R:
        try:
            return function(*args, **arguments)
        except TransportError as exc:
            reason, status = _reason(exc)
            raise ControlError(operation, reason, status) from None

    def _raw(self, path: str) -> tuple[Mapping[str, str], JsonObject]:
        """``GET path`` on one node, with the response headers (the high-level API drops them)."""
        connection = self.client.transport.get_connection()
        _status, headers, data = connection.perform_request("GET", path)
        body = self.client.transport.deserializer.loads(data, headers.get("content-type"))
        return headers, body

    def info(self) -> EngineInfo:
        """Who answers: the engine from ``x-opensearch-version``, else ``version.distribution``.

        Asks ``_nodes/_local`` (every engine has it; Elasticsearch 8's integ-test-zip has no
        ``GET /``), and ``GET /`` only when the headers name no engine.
        """
        headers, body = self._call("info", self._raw, "/_nodes/_local/_none")
        engine = engine_of(headers)
        if engine is None:
            _headers, root = self._call("info", self._raw, "/")
            engine = (root.get("version") or {}).get("distribution") or "an unknown engine"
        if engine != OPENSEARCH:
            raise ControlError("info", f"the cluster answered as {engine}, not OpenSearch")
        nodes = body.get("nodes") or {}
        version = next((node.get("version") for node in nodes.values()), None) or "unknown"
        return EngineInfo(OPENSEARCH, str(version), body.get("cluster_name"))

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
        arguments: dict[str, Any] = {
            "timeout": f"{timeout:g}s",
            "request_timeout": timeout + self.timeout,
            "ignore": 408,
        }
        if index is not None:
            arguments["index"] = index
        if wait_for_status is not None:
            arguments["wait_for_status"] = wait_for_status
        if wait_for_nodes is not None:
            arguments["wait_for_nodes"] = wait_for_nodes
        if wait_for_no_relocating_shards:
            arguments["wait_for_no_relocating_shards"] = "true"
        if wait_for_no_initializing_shards:
            arguments["wait_for_no_initializing_shards"] = "true"
        body = self._call("cluster health", self.client.cluster.health, **arguments)
        known = {name: body[name] for name in Health.__struct_fields__ if name in body}
        return Health(**{**known, "ok": True})

    def index_exists(self, index: str) -> bool:
        return bool(self._call("index exists", self.client.indices.exists, index=index))

    def count(self, index: str) -> int:
        return int(self._call("count", self.client.count, index=index)["count"])

    def index_meta(self, index: str) -> JsonObject | None:
        answer = self._call("get mapping", self.client.indices.get_mapping, index=index)
        metas = [(v.get("mappings") or {}).get("_meta") for v in answer.values()]
        return metas[0] if len(metas) == 1 else None

    def create_index(self, index: str, body: Mapping[str, object]) -> None:
        self._call("create index", self.client.indices.create, index=index, body=dict(body))

    def delete_index(self, index: str) -> None:
        try:
            self.client.indices.delete(index=index)
        except NotFoundError:
            return
        except TransportError as exc:
            reason, status = _reason(exc)
            raise ControlError("delete index", reason, status) from None

    def refresh(self, index: str) -> None:
        self._call("refresh", self.client.indices.refresh, index=index)

    def flush(self, index: str) -> None:
        self._call("flush", self.client.indices.flush, index=index)

    def force_merge(self, index: str, max_num_segments: int | None = None) -> None:
        # A merge takes as long as it takes and the call returns when it is done: a day
        # stands for "no request timeout" (opensearch-py has no way to say none).
        arguments: dict[str, Any] = {"index": index, "request_timeout": 86400}
        if max_num_segments is not None:
            arguments["max_num_segments"] = max_num_segments
        self._call("force merge", self.client.indices.forcemerge, **arguments)

    def node_stats(self, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"metric": ",".join(metrics)} if metrics else {}
        return dict(self._call("node stats", self.client.nodes.stats, **arguments))

    def index_stats(self, index: str, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"index": index}
        if metrics:
            arguments["metric"] = ",".join(metrics)
        return dict(self._call("index stats", self.client.indices.stats, **arguments))

    def index_settings(self, index: str) -> JsonObject:
        answer = self._call(
            "index settings",
            self.client.indices.get_settings,
            index=index,
            flat_settings=True,
            include_defaults=True,
        )
        return dict(answer)

    def nodes_info(self, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"metric": ",".join(metrics)} if metrics else {}
        return dict(self._call("nodes info", self.client.nodes.info, **arguments))

    def put_index_template(self, name: str, body: Mapping[str, object]) -> None:
        self._call(
            "put index template", self.client.indices.put_index_template, name=name, body=dict(body)
        )

    def put_component_template(self, name: str, body: Mapping[str, object]) -> None:
        self._call(
            "put component template",
            self.client.cluster.put_component_template,
            name=name,
            body=dict(body),
        )

    def create_data_stream(self, name: str) -> None:
        self._call("create data stream", self.client.indices.create_data_stream, name=name)

    def delete_data_stream(self, name: str) -> None:
        self._call("delete data stream", self.client.indices.delete_data_stream, name=name)

    def request(
        self,
        operation: str,
        method: str,
        path: str,
        body: JsonMapping | None,
        timeout: float | None = None,
    ) -> JsonObject:
        """One request as it is, as OpenSearch Benchmark's ``raw-request`` runner sends it
        (``transport.perform_request``: the path keeps its query string)."""
        answer = self._call(
            operation,
            self.client.transport.perform_request,
            method,
            path,
            body=dict(body) if body is not None else None,
            timeout=timeout,
        )
        return dict(answer) if isinstance(answer, Mapping) else {}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> OpenSearchControl:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
