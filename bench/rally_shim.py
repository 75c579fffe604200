"""A root-endpoint shim for Rally 2.13, installed only into the bench's throw-away venv.

The Elasticsearch integ-test zip esdash runs answers ``GET /`` with 404/405 (the route is
not registered), but still sends ``X-Elastic-Product: Elasticsearch``.  Rally's sync client
runs a product check (``GET /``) before its first request and detects the version with
``info()``, so a plain ``esrally race`` fails before it measures anything
(../shared/research/rally.md section 3.2).  This module patches the sync client of that
venv only, through a ``.pth`` line that ``bench/rally_side_by_side.py`` writes:

1. a 404/405 answer to ``GET /`` that carries ``X-Elastic-Product: Elasticsearch`` counts as
   a passed product check;
2. ``info()`` (``GET /``) then answers with a body built from ``GET /_nodes/_local``.

On a cluster whose ``GET /`` works it changes nothing.  Measured requests go through Rally's
async client, which makes no product check, so the timings are Rally's own.
``ESDASH_RALLY_ROOT_SHIM=0`` turns it off.  It imports nothing at interpreter start-up: an
import hook patches ``esrally.client.synchronous`` when Rally itself imports it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

TARGET = "esrally.client.synchronous"
ROOT_MISSING = (404, 405)


def _is_elasticsearch_without_root(meta: Any) -> bool:
    """Whether a response to ``GET /`` is the integ-test zip's "no such route" answer."""
    headers = getattr(meta, "headers", None) or {}
    return (
        getattr(meta, "status", None) in ROOT_MISSING
        and headers.get("x-elastic-product") == "Elasticsearch"
    )


def _info_body(nodes: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``GET /`` that Rally reads, taken from one node of ``GET /_nodes/_local``."""
    node: dict[str, Any] = next(iter((nodes.get("nodes") or {}).values()), {})
    return {
        "name": node.get("name", ""),
        "cluster_name": nodes.get("cluster_name", ""),
        "version": {
            "number": node.get("version", ""),
            "build_flavor": node.get("build_flavor", "default"),
            "build_type": node.get("build_type", ""),
            "build_hash": node.get("build_hash", ""),
        },
        "tagline": "You Know, for Search",
    }


def _patch(module: ModuleType) -> None:
    """Wrap ``RallySyncElasticsearch.perform_request`` with the two fallbacks."""
    from elastic_transport import ObjectApiResponse  # Rally's own dependencies
    from elasticsearch import ApiError

    client = module.RallySyncElasticsearch
    original = client.perform_request

    def perform_request(
        self: Any,
        method: str,
        path: str,
        *,
        params: Any = None,
        headers: Any = None,
        body: Any = None,
    ) -> Any:
        if self._verified_elasticsearch is None:
            probe = self.transport.perform_request(method="GET", target="/", headers=self._headers)
            if _is_elasticsearch_without_root(probe.meta):
                self._verified_elasticsearch = True
        try:
            return original(self, method, path, params=params, headers=headers, body=body)
        except ApiError as error:
            if method != "GET" or path != "/" or not _is_elasticsearch_without_root(error.meta):
                raise
            nodes = original(self, "GET", "/_nodes/_local", headers=headers)
            return ObjectApiResponse(body=_info_body(dict(nodes.body)), meta=error.meta)

    client.perform_request = perform_request


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``esrally.client.synchronous`` with the normal finders, patches it once loaded."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)


def install() -> None:
    """Called from the venv's ``.pth`` line: register the import hook unless switched off."""
    if os.environ.get("ESDASH_RALLY_ROOT_SHIM", "1") != "0":
        sys.meta_path.insert(0, _PatchOnImport())
