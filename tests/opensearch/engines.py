"""A running test cluster of either engine, and plain HTTPS requests to it.

The hit-count test talks to both engines the same way (the standard library, the run's CA
and bench user), so what differs between them is the engine, not the client.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import prereqs
from support.cli import free_port_blocks

from esdash.cluster import pki
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir


@dataclass(frozen=True)
class Cluster:
    """A run directory's cluster: its backend, nodes' base URLs and bench credentials."""

    run: Path
    runs: Path
    backend: str
    urls: tuple[str, ...]
    credentials: Credentials

    def request(
        self, method: str, path: str, body: Any = None, *, ndjson: bool = False, auth: bool = True
    ) -> tuple[int, dict[str, str], Any]:
        """``method path`` on the first node: (status, headers, parsed JSON body or text)."""
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        request = urllib.request.Request(self.urls[0] + path, data=data, method=method)
        request.add_header("Content-Type", "application/x-ndjson" if ndjson else "application/json")
        if auth:
            for name, value in pki.basic_auth_header(self.credentials).items():
                request.add_header(name, value)
        context = pki.ssl_context(self.credentials)
        try:
            with urllib.request.urlopen(request, timeout=120, context=context) as response:
                status, headers, raw = response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            status, headers, raw = error.code, dict(error.headers), error.read()
        try:
            return status, headers, json.loads(raw) if raw else None
        except ValueError:
            return status, headers, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, *, ndjson: bool = False) -> Any:
        """The parsed answer of a request that must succeed."""
        status, _headers, answer = self.request(method, path, body, ndjson=ndjson)
        assert status in (200, 201), f"{method} {path}: HTTP {status}: {answer}"
        return answer


def cluster_of(run: Path, runs: Path, backend: str) -> Cluster:
    rundir = RunDir.open(run)
    urls = tuple(f"https://{node.http_address}" for node in rundir.read_topology().nodes)
    return Cluster(run, runs, backend, urls, pki.read_credentials(run))


def os_session(directory: Path, name: str, nodes: int, *, track: str, tables: str = "") -> Path:
    """A secure OpenSearch session on free loopback ports (``tables`` appended verbatim).

    1 GiB of heap: with 512 MiB, a track with a large mapping (big5) searched while the
    node still held its ingest's garbage can trip the real-memory circuit breaker."""
    http, transport = free_port_blocks(nodes)
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nbackend = "opensearch"\nnodes = {nodes}\nheap = "1g"\n'
        f'interconnect = "loopback"\nrun_as = "{prereqs.es_user()}"\nsecurity = true\n'
        f"http_port = {http}\ntransport_port = {transport}\n"
        f'data_dir = "data-{name}"\n'
        f"[track]\n{track}\n{tables}\n"
    )
    return path
