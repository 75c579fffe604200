"""esdash-example-backend: Elasticsearch without security, in one module.

A third-party backend written against ``esdash.plugin_api`` alone.  It shows everything a
backend provides: it recognises a distribution (:meth:`PlainElasticsearch.inspect`), writes a
node's configuration from the cluster plan, says how to start a node, gives esdash a control
client, and registers a pre-flight check for what it cannot do (security).  It shares no code
with the built-in ``elasticsearch`` backend: a second engine would look the same.

Sessions pick it with ``cluster.backend = "plain-es"`` and ``cluster.security = false``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from esdash.plugin_api import (
    Backend,
    BadInput,
    CheckContext,
    ControlClient,
    ControlError,
    Credentials,
    Distribution,
    EngineInfo,
    Finding,
    Health,
    NodeCommand,
    NodeRequest,
    PreflightCheck,
    engine_of,
    find_java,
    hookimpl,
)

NAME = "plain-es"


class PlainElasticsearch(Backend):
    name = NAME
    description = "Elasticsearch with security off and a standard-library control client"

    def inspect(self, home: Path) -> Distribution:
        jars = sorted(Path(home).glob("lib/elasticsearch-[0-9]*.jar"))
        found = [re.fullmatch(r"elasticsearch-(\d+\.\d+\.\d+)\.jar", jar.name) for jar in jars]
        versions = [match.group(1) for match in found if match]
        if not (Path(home) / "bin" / "elasticsearch").is_file() or not versions:
            raise BadInput(f"{home} is not an Elasticsearch distribution; set cluster.home")
        modules = tuple(sorted(p.name for p in (Path(home) / "modules").iterdir()))
        return Distribution(
            home=Path(home),
            version=versions[0],
            flavor="plain",
            modules=modules,
            scripting="lang-painless" in modules,
        )

    def node_settings(self, request: NodeRequest) -> dict[str, Any]:
        topology, node = request.topology, request.node
        settings: dict[str, Any] = {
            "cluster.name": topology.cluster_name,
            "node.name": node.name,
            "path.data": str(request.dirs.data),
            "path.logs": str(request.dirs.logs),
            "network.host": node.address,
            "http.port": node.http_port,
            "transport.port": node.transport_port,
            "xpack.security.enabled": False,
        }
        if topology.single_node:
            settings["discovery.type"] = "single-node"
        else:
            settings["discovery.seed_hosts"] = topology.seed_hosts
            settings["cluster.initial_master_nodes"] = [m.name for m in topology.masters]
        return settings

    def write_node_config(self, request: NodeRequest, settings: Mapping[str, Any]) -> None:
        config = request.dirs.config
        if config.exists():
            shutil.rmtree(config)
        shutil.copytree(request.distribution.home / "config", config)
        lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
        (config / "elasticsearch.yml").write_text("\n".join(lines) + "\n")
        heap = f"-Xms{request.heap}\n-Xmx{request.heap}\n"
        (config / "jvm.options.d").mkdir(exist_ok=True)
        (config / "jvm.options.d" / "heap.options").write_text(heap)

    def node_command(self, request: NodeRequest) -> NodeCommand:
        home = request.distribution.home
        java = find_java(home, "ES_JAVA_HOME")
        env = {
            "ES_PATH_CONF": str(request.dirs.config),
            "ES_TMPDIR": str(request.dirs.tmp),
            "ES_JAVA_HOME": str(java.java_home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(request.dirs.tmp),
        }
        return NodeCommand([str(home / "bin" / "elasticsearch")], env, request.dirs.tmp)

    def control_client(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float = 30.0
    ) -> ControlClient:
        if credentials is not None:
            raise BadInput(f"{NAME} runs without security; set cluster.security = false")
        return PlainControl(endpoints[0], timeout)


class PlainControl:
    """The control operations over ``urllib``: one JSON request per operation."""

    engine = "elasticsearch"
    retry_statuses = frozenset({503})

    def __init__(self, endpoint: str, timeout: float) -> None:
        self.base = f"http://{endpoint}"
        self.timeout = timeout
        self.last_engine: str | None = None  # who answered the last request (its headers)

    def _call(self, operation: str, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                self.last_engine = engine_of(dict(response.headers))
                text = response.read()
        except urllib.error.HTTPError as error:
            reason = json.loads(error.read() or b"{}").get("error", error.reason)
            raise ControlError(operation, json.dumps(reason), error.code) from None
        except OSError as error:
            raise ControlError(operation, str(error)) from None
        return json.loads(text) if text else None

    def info(self) -> EngineInfo:
        answer = self._call("nodes info", "GET", "/_nodes/_local/_none")
        version = next(iter(answer["nodes"].values()))["version"]
        return EngineInfo(self.last_engine or "unknown", version, answer.get("cluster_name"))

    def health(self, *, index: str | None = None, timeout: float = 30.0, **wait: Any) -> Health:
        conditions = {key: str(value).lower() for key, value in wait.items() if value}
        query = urllib.parse.urlencode({"timeout": f"{timeout:g}s", **conditions})
        path = f"/_cluster/health/{index or ''}?{query}"
        try:
            answer = self._call("cluster health", "GET", path)
        except ControlError as error:
            if error.status != 408:  # a wait that timed out still reports the health
                raise
            answer = self._call("cluster health", "GET", f"/_cluster/health/{index or ''}")
            answer["timed_out"] = True
        fields = {k: v for k, v in answer.items() if k in Health.__struct_fields__}
        return Health(**{**fields, "ok": True})

    def index_exists(self, index: str) -> bool:
        try:
            self._call("index exists", "HEAD", f"/{index}")
        except ControlError as error:
            if error.status == 404:
                return False
            raise
        return True

    def count(self, index: str) -> int:
        return int(self._call("count", "GET", f"/{index}/_count")["count"])

    def index_meta(self, index: str) -> dict[str, Any] | None:
        answer = self._call("get mapping", "GET", f"/{index}/_mapping")
        metas = [(v.get("mappings") or {}).get("_meta") for v in answer.values()]
        return metas[0] if len(metas) == 1 else None

    def create_index(self, index: str, body: Mapping[str, object]) -> None:
        self._call("create index", "PUT", f"/{index}", dict(body))

    def delete_index(self, index: str) -> None:
        if self.index_exists(index):
            self._call("delete index", "DELETE", f"/{index}")

    def refresh(self, index: str) -> None:
        self._call("refresh", "POST", f"/{index}/_refresh")

    def flush(self, index: str) -> None:
        self._call("flush", "POST", f"/{index}/_flush")

    def force_merge(self, index: str, max_num_segments: int | None = None) -> None:
        limit = f"?max_num_segments={max_num_segments}" if max_num_segments else ""
        self._call("force merge", "POST", f"/{index}/_forcemerge{limit}")

    def node_stats(self, metrics: Sequence[str] = ()) -> dict[str, Any]:
        return dict(self._call("node stats", "GET", "/_nodes/stats/" + ",".join(metrics)))

    def index_stats(self, index: str, metrics: Sequence[str] = ()) -> dict[str, Any]:
        return dict(self._call("index stats", "GET", f"/{index}/_stats/" + ",".join(metrics)))

    def put_index_template(self, name: str, body: Mapping[str, object]) -> None:
        self._call("put index template", "PUT", f"/_index_template/{name}", dict(body))

    def put_component_template(self, name: str, body: Mapping[str, object]) -> None:
        self._call("put component template", "PUT", f"/_component_template/{name}", dict(body))

    def create_data_stream(self, name: str) -> None:
        self._call("create data stream", "PUT", f"/_data_stream/{name}")

    def delete_data_stream(self, name: str) -> None:
        self._call("delete data stream", "DELETE", f"/_data_stream/{name}")

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""

    def __enter__(self) -> PlainControl:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class SecurityOff(PreflightCheck):
    """``esdash session check`` and every run refuse plain-es with security on, up front."""

    name = "plain-es-security"
    description = "plain-es clusters run with cluster.security = false"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        cluster = context.session.cluster
        if cluster.backend.name == NAME and cluster.security:
            yield Finding("cluster.security", f"{NAME} has no security; set it to false")


@hookimpl
def esdash_register_backends(register) -> None:
    register(PlainElasticsearch())


@hookimpl
def esdash_register_checks(register) -> None:
    register(SecurityOff())
