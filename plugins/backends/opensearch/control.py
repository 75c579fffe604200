"""The control client for OpenSearch: ``opensearch-py``, OpenSearch's own Python client.

Every control operation of esdash goes through :class:`OpenSearchControl`; the load
generator's bulk and search requests keep their own keep-alive HTTP loop.  The operations
themselves are the SDK's (:class:`esdash.plugin_api.EngineControl`, shared with
Elasticsearch); this module gives them opensearch-py.  What differs from Elasticsearch, and
is handled here:

* the engine is told from the ``x-opensearch-version`` response header, and from
  ``version.distribution`` in ``GET /`` (OpenSearch 3.4 would read as an old Elasticsearch
  by its number, so the number is never looked at for that);
* requests are plain ``application/json`` (OpenSearch answers Elasticsearch's compatibility
  media types with 406), which is what opensearch-py sends;
* while the security plugin initialises, every request gets 503 "OpenSearch Security not
  initialized", so 503 is among :attr:`OpenSearchControl.retry_statuses`;
* opensearch-py has no way to say "no request timeout": a day stands for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from operator import attrgetter

from opensearchpy import OpenSearch, TransportError

from esdash.plugin_api import (
    OPENSEARCH,
    ApiCall,
    ControlError,
    Credentials,
    EngineControl,
    EngineInfo,
    JsonObject,
    engine_of,
    engine_reason,
)

from .security import client_kwargs

#: The request timeout that stands for none (a merge takes as long as it takes).
A_DAY = 86400


class OpenSearchControl(EngineControl):
    """:class:`esdash.plugin_api.ControlClient` for OpenSearch 2.x and 3.x."""

    engine = OPENSEARCH
    #: 503 while no cluster manager is elected and while the security plugin initialises.
    retry_statuses = frozenset({503})
    client_errors = (TransportError,)

    def __init__(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float
    ) -> None:
        super().__init__(timeout)
        self.client = OpenSearch(
            list(endpoints),
            timeout=timeout,
            max_retries=0,
            retry_on_timeout=False,
            **client_kwargs(credentials),
        )

    def _reason(self, exc: Exception) -> tuple[str, int | None]:
        if not isinstance(exc, TransportError):
            return f"{type(exc).__name__}: {exc}", None
        status = exc.status_code if isinstance(exc.status_code, int) else None
        info = exc.info
        if status is None:  # a connection error: info is the underlying exception
            return engine_reason(info, f"{type(exc).__name__}: {info or exc.error}"), None
        return engine_reason(info, str(info or exc.error)), status

    def _invoke(self, call: ApiCall) -> object:
        extra: dict[str, object] = {}
        if call.timeout is not None:
            extra["request_timeout"] = A_DAY if math.isinf(call.timeout) else call.timeout
        if call.answers:
            extra["ignore"] = tuple(sorted(call.answers))
        function = attrgetter(call.api)(self.client)
        answer: object = self._call(call.operation, function, **call.arguments, **extra)
        return answer

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

    def _perform(
        self, operation: str, method: str, path: str, body: JsonObject | None, timeout: float | None
    ) -> object:
        """One request as it is, as OpenSearch Benchmark's ``raw-request`` runner sends it
        (``transport.perform_request``: the path keeps its query string)."""
        perform = self.client.transport.perform_request
        answer: object = self._call(operation, perform, method, path, body=body, timeout=timeout)
        return answer

    def close(self) -> None:
        self.client.close()
