"""The control client for Elasticsearch: ``elasticsearch-py``, the way Rally drives a cluster.

Every control operation of esdash (index creation and reuse, refresh, health, node
statistics, templates, data streams) goes through :class:`ElasticsearchControl`; the
load generator's bulk and search requests keep their own keep-alive HTTP loop.  The
operations themselves are the SDK's (:class:`esdash.plugin_api.EngineControl`, shared with
OpenSearch); this module gives them elasticsearch-py.

``elasticsearch-py`` 8 checks on the first request that the server says
``X-Elastic-Product: Elasticsearch`` and refuses anything else (an OpenSearch node answers
with ``x-opensearch-version``); that refusal becomes a :class:`ControlError` naming the
engine that did answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from elasticsearch import ApiError, Elasticsearch, TransportError, UnsupportedProductError

from esdash.plugin_api import (
    ELASTICSEARCH,
    ApiCall,
    Credentials,
    EngineControl,
    EngineInfo,
    JsonObject,
    engine_of,
    engine_reason,
)

from .security import client_kwargs


class ElasticsearchControl(EngineControl):
    """:class:`esdash.plugin_api.ControlClient` for Elasticsearch 7.17, 8.x and 9.x."""

    engine = ELASTICSEARCH
    #: 503 while no master is elected ("master_not_discovered_exception").
    retry_statuses = frozenset({503})
    client_errors = (ApiError, TransportError)
    force_merge_arguments = {"wait_for_completion": True}

    def __init__(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float
    ) -> None:
        super().__init__(timeout)
        scheme = "http" if credentials is None else "https"
        hosts = [f"{scheme}://{endpoint}" for endpoint in endpoints]
        self.client = Elasticsearch(
            hosts, request_timeout=timeout, max_retries=0, **client_kwargs(credentials)
        )

    def _reason(self, exc: Exception) -> tuple[str, int | None]:
        if isinstance(exc, UnsupportedProductError):
            return (
                f"the cluster answered as {engine_of(exc.meta.headers) or 'not Elasticsearch'}",
                None,
            )
        if isinstance(exc, ApiError):
            return engine_reason(exc.body, str(exc.message)), exc.meta.status
        if isinstance(exc, TransportError):
            return f"{type(exc).__name__}: {exc.message}", None
        return f"{type(exc).__name__}: {exc}", None

    def _client(
        self, timeout: float | None, answers: frozenset[int] = frozenset()
    ) -> Elasticsearch:
        """The client with a call's own timeout and accepted statuses (``.options``)."""
        changes: dict[str, Any] = {}
        if timeout is not None:
            changes["request_timeout"] = None if math.isinf(timeout) else timeout
        if answers:
            changes["ignore_status"] = sorted(answers)
        return self.client.options(**changes) if changes else self.client

    def _invoke(self, call: ApiCall) -> object:
        function = attrgetter(call.api)(self._client(call.timeout, call.answers))
        return self._call(call.operation, function, **call.arguments).body

    def info(self) -> EngineInfo:
        answer = self._call("nodes info", self.client.nodes.info, node_id="_local", metric="_none")
        nodes = answer.body.get("nodes") or {}
        version = next((node.get("version") for node in nodes.values()), None) or "unknown"
        engine = engine_of(answer.meta.headers) or ELASTICSEARCH
        return EngineInfo(engine, version, answer.body.get("cluster_name"))

    def _perform(
        self, operation: str, method: str, path: str, body: JsonObject | None, timeout: float | None
    ) -> object:
        """One request as it is, as Rally's ``raw-request`` runner sends it."""
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        perform = self._client(timeout).perform_request
        return self._call(operation, perform, method, path, headers=headers, body=body).body

    def close(self) -> None:
        self.client.close()
