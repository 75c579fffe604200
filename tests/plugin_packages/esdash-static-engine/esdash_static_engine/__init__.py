"""esdash-static-engine: a backend whose nodes answer from a table (``server.py``), no JVM.

A measuring instrument, not a mock: the tests about esdash's own ranks and statistics
(signals in every phase, killed and frozen load ranks, counted steps, rejections) need a
cluster that answers with set latencies and failures and starts in a fraction of a second;
what they check is what esdash does with the answers.  Every node is a real process started,
watched and stopped by esdash's node ranks like a search engine's, on the session's ports.

Sessions pick it with ``cluster.backend = "static-engine"``, ``cluster.security = false`` and
``cluster.home`` set to this package's directory (:data:`HOME`); ``cluster.backend_options``
set ``search_latency``, ``bulk_latency``, ``search_failures`` and ``bulk_rejections``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from esdash.plugin_api import (
    Backend,
    BadInput,
    CheckContext,
    ControlClient,
    Credentials,
    Distribution,
    Finding,
    NodeCommand,
    NodeRequest,
    Option,
    PreflightCheck,
    hookimpl,
)

NAME = "static-engine"
#: The "distribution": this directory, which holds the node's server.
HOME = Path(__file__).resolve().parent
#: The Elasticsearch version the nodes say they are (what the ranks' requests are built for).
VERSION = "8.15.0"
CONFIG = "static-engine.json"


class StaticEngine(Backend):
    name = NAME
    description = "test instrument: HTTP nodes answering from a table with set latencies"
    options = (
        Option("search_latency", "duration", "seconds every search answer waits", default="2ms"),
        Option("bulk_latency", "duration", "seconds every bulk answer waits", default="1ms"),
        Option(
            "search_failures",
            "float",
            "fraction of searches answered 503",
            default=0.0,
            minimum=0.0,
            maximum=1.0,
        ),
        Option(
            "bulk_rejections",
            "float",
            "fraction of bulk items rejected with 429",
            default=0.0,
            minimum=0.0,
            maximum=1.0,
        ),
    )

    def inspect(self, home: Path) -> Distribution:
        if not (Path(home) / "server.py").is_file():
            raise BadInput(f"{home} holds no static engine; set cluster.home to {HOME}")
        return Distribution(
            home=Path(home), version=VERSION, flavor="static", modules=(), scripting=False
        )

    def node_settings(self, request: NodeRequest) -> dict[str, Any]:
        topology, node = request.topology, request.node
        return {
            "cluster_name": topology.cluster_name,
            "node_name": node.name,
            "address": node.address,
            "http_port": node.http_port,
            "peers": [f"{peer.address}:{peer.http_port}" for peer in topology.nodes],
            "version": VERSION,
            **{option.name: request.options.get(option.name) for option in self.options},
        }

    def write_node_config(self, request: NodeRequest, settings: Mapping[str, Any]) -> None:
        config = request.dirs.config
        if config.exists():
            shutil.rmtree(config)
        config.mkdir(mode=0o700, parents=True)
        (config / CONFIG).write_text(json.dumps(dict(settings), indent=1) + "\n")

    def node_command(self, request: NodeRequest) -> NodeCommand:
        # -I: the server needs the standard library only, and nothing from the environment
        server = request.distribution.home / "server.py"
        argv = [sys.executable, "-I", str(server), str(request.dirs.config / CONFIG)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        return NodeCommand(argv, env, request.dirs.tmp)

    def control_client(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float = 30.0
    ) -> ControlClient:
        if credentials is not None:
            raise BadInput(f"{NAME} runs without security; set cluster.security = false")
        return _control(endpoints[0], timeout)


def _control(endpoint: str, timeout: float) -> ControlClient:
    """The example backend's standard-library client (the nodes speak the same endpoints),
    with the two reads it leaves out."""
    from esdash_example_backend import PlainControl

    class StaticControl(PlainControl):
        def nodes_info(self, metrics: Sequence[str] = ()) -> dict[str, Any]:
            return dict(self._call("nodes info", "GET", "/_nodes/" + ",".join(metrics)))

        def index_settings(self, index: str) -> dict[str, Any]:
            path = f"/{index}/_settings?flat_settings=true&include_defaults=true"
            return dict(self._call("index settings", "GET", path))

    return StaticControl(endpoint, timeout)


class SecurityOff(PreflightCheck):
    """The static engine has no security: refused up front, like every unsupported setting."""

    name = "static-engine-security"
    description = "static-engine clusters run with cluster.security = false"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        cluster = context.session.cluster
        if cluster.backend.name == NAME and cluster.security:
            yield Finding("cluster.security", f"{NAME} has no security; set it to false")


@hookimpl
def esdash_register_backends(register: Any) -> None:
    register(StaticEngine())


@hookimpl
def esdash_register_checks(register: Any) -> None:
    register(SecurityOff())
