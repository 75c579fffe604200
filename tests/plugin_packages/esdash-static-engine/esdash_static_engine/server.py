"""One node of the static engine: an HTTP server that answers from a table, not from an index.

It speaks the few endpoints of the Elasticsearch REST API that `esdash run` and its ranks use
(cluster health, node info and statistics, index create/exists/delete/count/mapping/stats,
``_bulk``, ``_search`` and scrolls) and answers each after a set latency, failing a set
fraction of searches and rejecting a set fraction of bulk items.  Tests about esdash's own
ranks and statistics (signals, faults of load ranks, counted steps, rejections, coordinated
omission) then run under ``mpiexec`` in a fraction of a second per node instead of a JVM's
start and its CPU.  What depends on an engine's behaviour is tested against the real ones.

The nodes of one cluster find each other through ``peers`` (every node's ``host:port``): the
health counts the peers that answer a ping, ``_count`` and ``_nodes/stats`` gather every
peer's own figures, so a stopped or killed node is missing from the cluster as it would be
from a real one.  Standard library only: it starts as fast as Python does.

Run as ``python -m esdash_static_engine.server CONFIG.json``; the backend writes the file.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: How long a peer has to answer before the cluster counts it as gone.
PEER_TIMEOUT = 1.0


class Node:
    """The state of one node: its settings and the documents it was sent, per index."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.name: str = config["node_name"]
        self.peers: list[str] = list(config["peers"])
        self.search_latency = float(config.get("search_latency", 0.0))
        self.bulk_latency = float(config.get("bulk_latency", 0.0))
        self.search_failures = float(config.get("search_failures", 0.0))
        self.bulk_rejections = float(config.get("bulk_rejections", 0.0))
        self.random = random.Random(f"{config['cluster_name']}/{self.name}")
        self.lock = threading.Lock()
        self.indices: dict[str, dict[str, Any]] = {}
        self.rejected = {"search": 0, "write": 0}
        self.started = time.time()

    # ----------------------------------------------------------------- local state

    def docs(self, index: str) -> int:
        with self.lock:
            return sum(meta["docs"] for name, meta in self.indices.items() if _match(index, name))

    def create(self, index: str, body: dict[str, Any]) -> bool:
        with self.lock:
            if index in self.indices:
                return False
            self.indices[index] = {"body": body, "docs": 0}
            return True

    def drop(self, index: str) -> None:
        with self.lock:
            for name in [n for n in self.indices if _match(index, n)]:
                del self.indices[name]

    def chance(self, fraction: float) -> bool:
        with self.lock:
            return fraction > 0 and self.random.random() < fraction

    # ----------------------------------------------------------------- the cluster

    def ask_peers(self, path: str, method: str = "GET") -> list[Any]:
        """Every peer's JSON answer to ``path`` (this node's own too); silent peers are left out."""
        answers = []
        for peer in self.peers:
            request = urllib.request.Request(f"http://{peer}{path}", method=method)
            try:
                with urllib.request.urlopen(request, timeout=PEER_TIMEOUT) as response:
                    answers.append(json.loads(response.read() or b"null"))
            except (OSError, ValueError):
                continue
        return answers

    def health(self) -> dict[str, Any]:
        nodes = len(self.ask_peers("/_static/ping"))
        shards = len(self.indices)
        return {
            "cluster_name": self.config["cluster_name"],
            "status": "green" if nodes == len(self.peers) else "yellow",
            "timed_out": False,
            "number_of_nodes": nodes,
            "number_of_data_nodes": nodes,
            "active_primary_shards": shards,
            "active_shards": shards,
            "relocating_shards": 0,
            "initializing_shards": 0,
            "unassigned_shards": 0,
            "delayed_unassigned_shards": 0,
            "number_of_pending_tasks": 0,
            "number_of_in_flight_fetch": 0,
            "active_shards_percent_as_number": 100.0,
        }

    def local_stats(self) -> dict[str, Any]:
        """This node's ``_nodes/stats`` entry: its own CPU time, documents and rejections."""
        cpu = os.times()
        alive = max(time.time() - self.started, 1e-3)
        with self.lock:
            docs = sum(meta["docs"] for meta in self.indices.values())
            rejected = dict(self.rejected)
        return {
            "name": self.name,
            "host": self.config["address"],
            "process": {"cpu": {"percent": round(100 * (cpu.user + cpu.system) / alive)}},
            "os": {"cpu": {"percent": None}},
            "jvm": {"mem": {}, "gc": {"collectors": {}}},
            "indices": {"docs": {"count": docs}, "segments": {"count": len(self.indices)}},
            "thread_pool": {pool: {"rejected": count} for pool, count in rejected.items()},
        }

    def node_info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.config["address"],
            "ip": self.config["address"],
            "version": self.config["version"],
            "roles": ["master", "data", "ingest"],
            "http": {"publish_address": f"{self.config['address']}:{self.config['http_port']}"},
        }


def _match(pattern: str, name: str) -> bool:
    """Index ``name`` is meant by ``pattern`` (a name, a comma list, ``*`` wildcards, _all)."""
    for part in pattern.split(","):
        if part in ("_all", "*") or re.fullmatch(re.escape(part).replace(r"\*", ".*"), name):
            return True
    return False


class Handler(BaseHTTPRequestHandler):
    """Routes one request to the answer the table gives."""

    protocol_version = "HTTP/1.1"  # keep-alive: esdash's ranks reuse their connections
    #: Headers and body go out as separate writes: without TCP_NODELAY the second waits for
    #: the client's delayed ACK (40 ms), which would be the whole latency measured.
    disable_nagle_algorithm = True
    node: Node  # set on the class by serve()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Silent: a node's log is its stdout, and a benchmark sends thousands of requests."""

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    # ----------------------------------------------------------------- answers

    def _send(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, kind: str, reason: str) -> None:
        self._send(status, {"error": {"type": kind, "reason": reason}, "status": status})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self) -> dict[str, Any]:
        raw = self._body()
        try:
            found = json.loads(raw) if raw.strip() else {}
        except ValueError:
            found = None
        return found if isinstance(found, dict) else {}

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        node = self.node
        try:
            self._answer(method, parts, query, node)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _answer(self, method: str, parts: list[str], query: dict[str, str], node: Node) -> None:
        head = parts[0] if parts else ""
        if not parts:
            return self._send(200, self._root(node))
        if head == "_static":
            return self._internal(method, parts[1:], node)
        if head == "_cluster" and len(parts) >= 2 and parts[1] == "health":
            self._body()
            return self._send(200, node.health())
        if head == "_nodes":
            return self._nodes(parts[1:], node)
        if head == "_bulk" or (len(parts) == 2 and parts[1] == "_bulk"):
            default = parts[0] if len(parts) == 2 else None
            return self._bulk(node, default)
        if head == "_search" and len(parts) >= 2 and parts[1] == "scroll":
            self._body()
            if method == "DELETE":
                return self._send(200, {"succeeded": True, "num_freed": 1})
            return self._send(200, self._hits(node, 0, 0, scroll=True))
        if head in ("_index_template", "_component_template", "_data_stream"):
            self._body()
            return self._send(200, {"acknowledged": True})
        if head.startswith("_"):
            self._body()
            return self._error(400, "static_engine_unsupported", f"no answer for /{head}")
        return self._index(method, parts, query, node)

    def _root(self, node: Node) -> dict[str, Any]:
        return {
            "name": node.name,
            "cluster_name": node.config["cluster_name"],
            "version": {"number": node.config["version"], "build_flavor": "static"},
            "tagline": "esdash static engine",
        }

    def _internal(self, method: str, parts: list[str], node: Node) -> None:
        """What the peers ask each other: a ping, a node's own figures, a drop."""
        self._body()
        if parts == ["ping"]:
            return self._send(200, {"name": node.name})
        if parts == ["stats"]:
            return self._send(200, {"id": node.name, "stats": node.local_stats()})
        if parts == ["info"]:
            return self._send(200, {"id": node.name, "info": node.node_info()})
        if len(parts) == 3 and parts[0] == "index" and parts[2] == "count":
            return self._send(200, {"count": node.docs(parts[1])})
        if len(parts) == 2 and parts[0] == "index" and method == "DELETE":
            node.drop(parts[1])
            return self._send(200, {"acknowledged": True})
        return self._error(404, "static_engine_unsupported", "no such internal path")

    def _nodes(self, parts: list[str], node: Node) -> None:
        self._body()
        local = bool(parts) and parts[0] == "_local"
        rest = parts[1:] if local else parts
        if rest and rest[0] == "stats":
            found = [{"id": node.name, "stats": node.local_stats()}] if local else None
            found = found or node.ask_peers("/_static/stats")
            nodes = {entry["id"]: entry["stats"] for entry in found}
        else:
            found = [{"id": node.name, "info": node.node_info()}] if local else None
            found = found or node.ask_peers("/_static/info")
            nodes = {entry["id"]: entry["info"] for entry in found}
        self._send(200, {"cluster_name": node.config["cluster_name"], "nodes": nodes})

    def _bulk(self, node: Node, default_index: str | None) -> None:
        lines = self._body().splitlines()
        items = []
        failed = False
        counts: dict[str, int] = {}
        i = 0
        while i < len(lines):
            if not lines[i].strip():
                i += 1
                continue
            try:
                action = json.loads(lines[i])
            except ValueError:
                return self._error(400, "parse_exception", f"bulk line {i + 1} is no JSON")
            op, meta = next(iter(action.items())) if action else ("index", {})
            index = meta.get("_index") or default_index or "_unknown"
            i += 1 if op == "delete" else 2
            if node.chance(node.bulk_rejections):
                failed = True
                with node.lock:
                    node.rejected["write"] += 1
                items.append(
                    {
                        op: {
                            "_index": index,
                            "status": 429,
                            "error": {
                                "type": "es_rejected_execution_exception",
                                "reason": "rejected by the static engine's set rejection rate",
                            },
                        }
                    }
                )
                continue
            counts[index] = counts.get(index, 0) + (0 if op == "delete" else 1)
            items.append({op: {"_index": index, "status": 201, "result": "created"}})
        with node.lock:
            for index, count in counts.items():
                node.indices.setdefault(index, {"body": {}, "docs": 0})["docs"] += count
        time.sleep(node.bulk_latency)
        took = int(node.bulk_latency * 1000)
        # "errors" first: esdash reads it from the answer's first bytes
        answer = json.dumps({"errors": failed, "took": took, "items": items})
        self._send(200, raw=answer.encode())

    def _hits(self, node: Node, total: int, size: int, scroll: bool = False) -> dict[str, Any]:
        took = int(node.search_latency * 1000)
        answer: dict[str, Any] = {
            "took": took,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {"value": total, "relation": "eq"},
                "max_score": 1.0,
                "hits": [
                    {"_index": "static", "_id": str(n), "_score": 1.0, "_source": {}}
                    for n in range(min(size, total))
                ],
            },
        }
        if scroll:
            answer["_scroll_id"] = "static-scroll"
        return answer

    def _index(self, method: str, parts: list[str], query: dict[str, str], node: Node) -> None:
        index, action = parts[0], (parts[1] if len(parts) > 1 else "")
        if action == "_search":
            body = self._json_body()
            time.sleep(node.search_latency)
            if node.chance(node.search_failures):
                with node.lock:
                    node.rejected["search"] += 1
                return self._error(
                    503, "static_engine_failure", "failed by the static engine's set failure rate"
                )
            size = int(body.get("size", query.get("size", 10)) or 0)
            return self._send(200, self._hits(node, node.docs(index), size, "scroll" in query))
        if action == "_count":
            self._body()
            counts = node.ask_peers(f"/_static/index/{index}/count")
            return self._send(200, {"count": sum(c["count"] for c in counts)})
        if action in ("_refresh", "_flush", "_forcemerge"):
            self._body()
            return self._send(200, {"_shards": {"total": 1, "successful": 1, "failed": 0}})
        if action == "_mapping":
            self._body()
            with node.lock:
                found = {
                    name: {"mappings": meta["body"].get("mappings", {})}
                    for name, meta in node.indices.items()
                    if _match(index, name)
                }
            return self._send(200, found) if found else self._missing(index)
        if action == "_settings":
            self._body()
            settings: dict[str, Any] = {"number_of_shards": "1", "number_of_replicas": "0"}
            if query.get("flat_settings") == "true":
                settings = {f"index.{key}": value for key, value in settings.items()}
            else:
                settings = {"index": settings}
            return self._send(200, {index: {"settings": settings}})
        if action == "_stats":
            self._body()
            counts = node.ask_peers(f"/_static/index/{index}/count")
            docs = {"docs": {"count": sum(c["count"] for c in counts)}, "segments": {"count": 1}}
            return self._send(200, {"_all": {"primaries": docs, "total": docs}, "indices": {}})
        if action:
            self._body()
            return self._error(400, "static_engine_unsupported", f"no answer for {action}")
        if method == "PUT":
            if not node.create(index, self._json_body()):
                return self._error(400, "resource_already_exists_exception", f"{index} exists")
            return self._send(200, {"acknowledged": True, "index": index})
        self._body()
        if method == "DELETE":
            node.ask_peers(f"/_static/index/{index}", method="DELETE")
            return self._send(200, {"acknowledged": True})
        with node.lock:
            exists = any(_match(index, name) for name in node.indices)
        return self._send(200, {index: {}}) if exists else self._missing(index)

    def _missing(self, index: str) -> None:
        self._error(404, "index_not_found_exception", f"no such index [{index}]")


def serve(config: dict[str, Any]) -> None:
    """Answer until SIGTERM or SIGINT, as a node does."""
    Handler.node = Node(config)
    server = ThreadingHTTPServer((config["address"], int(config["http_port"])), Handler)
    server.daemon_threads = True

    def stop(_signum: int, _frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"static engine node {config['node_name']} on {config['http_port']}", flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m esdash_static_engine.server CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        serve(json.load(handle))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
