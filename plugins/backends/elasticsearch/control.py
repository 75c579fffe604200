"""The control client for Elasticsearch: ``elasticsearch-py``, the way Rally drives a cluster.

Every control operation of esdash (index creation and reuse, refresh, health, node
statistics, templates, data streams) goes through :class:`ElasticsearchControl`; the
load generator's bulk and search requests keep their own keep-alive HTTP loop.

``elasticsearch-py`` 8 checks on the first request that the server says
``X-Elastic-Product: Elasticsearch`` and refuses anything else (an OpenSearch node answers
with ``x-opensearch-version``); that refusal becomes a :class:`ControlError` naming the
engine that did answer.  A health wait that times out is answered with HTTP 408 and the
health as it then is: that is a result, not an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from elasticsearch import (
    ApiError,
    Elasticsearch,
    NotFoundError,
    TransportError,
    UnsupportedProductError,
)

from esdash.plugin_api import (
    ELASTICSEARCH,
    ControlError,
    Credentials,
    EngineInfo,
    Health,
    JsonMapping,
    JsonObject,
    engine_of,
)

from .security import client_kwargs

#: HTTP statuses a caller waiting for a starting cluster retries on: 503 while no master
#: is elected ("master_not_discovered_exception").
RETRY_STATUSES = frozenset({503})

P = ParamSpec("P")
R = TypeVar("R")


def _reason(exc: Exception) -> tuple[str, int | None]:
    """The engine's own reason for a failed request, and its HTTP status."""
    if isinstance(exc, ApiError):
        body = exc.body
        if isinstance(body, Mapping):
            error = body.get("error")
            if isinstance(error, Mapping):
                return f"{error.get('type')}: {error.get('reason')}", exc.meta.status
            if error:
                return str(error), exc.meta.status
        return str(exc.message), exc.meta.status
    if isinstance(exc, TransportError):
        return f"{type(exc).__name__}: {exc.message}", None
    return f"{type(exc).__name__}: {exc}", None


class ElasticsearchControl:
    """:class:`esdash.plugin_api.ControlClient` for Elasticsearch 7.17, 8.x and 9.x."""

    engine = ELASTICSEARCH
    retry_statuses = RETRY_STATUSES

    def __init__(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float
    ) -> None:
        scheme = "http" if credentials is None else "https"
        hosts = [f"{scheme}://{endpoint}" for endpoint in endpoints]
        self.timeout = timeout
        self.client = Elasticsearch(
            hosts, request_timeout=timeout, max_retries=0, **client_kwargs(credentials)
        )

    def _call(
        self, operation: str, function: Callable[P, R], *args: P.args, **arguments: P.kwargs
    ) -> R:
        try:
            return function(*args, **arguments)
        except UnsupportedProductError as exc:
            other = engine_of(exc.meta.headers) or "not Elasticsearch"
            raise ControlError(operation, f"the cluster answered as {other}") from None
        except (ApiError, TransportError) as exc:
            reason, status = _reason(exc)
            raise ControlError(operation, reason, status) from None

    def info(self) -> EngineInfo:
        answer = self._call("nodes info", self.client.nodes.info, node_id="_local", metric="_none")
        nodes = answer.body.get("nodes") or {}
        version = next((node.get("version") for node in nodes.values()), None) or "unknown"
        engine = engine_of(answer.meta.headers) or ELASTICSEARCH
        return EngineInfo(engine, version, answer.body.get("cluster_name"))

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
        arguments: dict[str, Any] = {"timeout": f"{timeout:g}s"}
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
        client = self.client.options(request_timeout=timeout + self.timeout, ignore_status=408)
        answer = self._call("cluster health", client.cluster.health, **arguments)
        body = answer.body
        known = {name: body[name] for name in Health.__struct_fields__ if name in body}
        return Health(**{**known, "ok": True})

    def index_exists(self, index: str) -> bool:
        return bool(self._call("index exists", self.client.indices.exists, index=index))

    def count(self, index: str) -> int:
        return int(self._call("count", self.client.count, index=index)["count"])

    def index_meta(self, index: str) -> JsonObject | None:
        answer = self._call("get mapping", self.client.indices.get_mapping, index=index)
        metas = [(v.get("mappings") or {}).get("_meta") for v in answer.body.values()]
        return metas[0] if len(metas) == 1 else None

    def create_index(self, index: str, body: Mapping[str, object]) -> None:
        self._call("create index", self.client.indices.create, index=index, body=dict(body))

    def delete_index(self, index: str) -> None:
        try:
            self.client.indices.delete(index=index)
        except NotFoundError:
            return
        except (ApiError, TransportError) as exc:
            reason, status = _reason(exc)
            raise ControlError("delete index", reason, status) from None

    def refresh(self, index: str) -> None:
        self._call("refresh", self.client.indices.refresh, index=index)

    def flush(self, index: str) -> None:
        self._call("flush", self.client.indices.flush, index=index)

    def force_merge(self, index: str, max_num_segments: int | None = None) -> None:
        # no request timeout: a merge takes as long as it takes, and returns when done
        client = self.client.options(request_timeout=None)
        arguments: dict[str, Any] = {"index": index, "wait_for_completion": True}
        if max_num_segments is not None:
            arguments["max_num_segments"] = max_num_segments
        self._call("force merge", client.indices.forcemerge, **arguments)

    def node_stats(self, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"metric": ",".join(metrics)} if metrics else {}
        return dict(self._call("node stats", self.client.nodes.stats, **arguments).body)

    def index_stats(self, index: str, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"index": index}
        if metrics:
            arguments["metric"] = ",".join(metrics)
        return dict(self._call("index stats", self.client.indices.stats, **arguments).body)

    def index_settings(self, index: str) -> JsonObject:
        answer = self._call(
            "index settings",
            self.client.indices.get_settings,
            index=index,
            flat_settings=True,
            include_defaults=True,
        )
        return dict(answer.body)

    def nodes_info(self, metrics: Sequence[str] = ()) -> JsonObject:
        arguments: dict[str, Any] = {"metric": ",".join(metrics)} if metrics else {}
        return dict(self._call("nodes info", self.client.nodes.info, **arguments).body)

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
        """One request as it is, as Rally's ``raw-request`` runner sends it."""
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        client = self.client if timeout is None else self.client.options(request_timeout=timeout)
        answer = self._call(
            operation,
            client.perform_request,
            method,
            path,
            headers=headers,
            body=dict(body) if body is not None else None,
        )
        return dict(answer.body) if isinstance(answer.body, Mapping) else {}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ElasticsearchControl:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
