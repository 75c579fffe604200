"""The static engine answers as its table says: the instrument is checked before it measures.

``tests/plugin_packages/esdash-static-engine`` stands in for a search engine in the tests
about esdash's ranks (``support/static_engine.py``).  Here two real node processes of it run
on loopback, as a node rank would start them, and answer real HTTP requests: the set
latency, failure fraction and rejection fraction hold, the documents a bulk request sends
are counted across the cluster, and a node that stops is missing from the cluster's health.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.net import free_ports

SERVER = (
    Path(__file__).parent
    / "plugin_packages"
    / "esdash-static-engine"
    / "esdash_static_engine"
    / "server.py"
)


def call(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def start_node(
    tmp: Path, name: str, port: int, peers: list[int], **table: object
) -> subprocess.Popen:
    config = tmp / f"{name}.json"
    config.write_text(
        json.dumps(
            {
                "cluster_name": "static-test",
                "node_name": name,
                "address": "127.0.0.1",
                "http_port": port,
                "peers": [f"127.0.0.1:{p}" for p in peers],
                "version": "8.15.0",
                **table,
            }
        )
    )
    node = subprocess.Popen(
        [sys.executable, "-I", str(SERVER), str(config)], stdout=subprocess.PIPE
    )
    assert node.stdout is not None
    assert b"static engine node" in node.stdout.readline()  # it listens
    return node


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[list[int], list[subprocess.Popen]]]:
    ports = free_ports(2)
    nodes = [
        start_node(tmp_path, "node-0", ports[0], ports, search_latency=0.05, bulk_rejections=0.5),
        start_node(tmp_path, "node-1", ports[1], ports, search_failures=1.0),
    ]
    try:
        yield ports, nodes
    finally:
        for node in nodes:
            node.terminate()
            node.wait(timeout=10)


def bulk(docs: int, index: str = "idx") -> bytes:
    return b"".join(
        json.dumps({"index": {"_index": index}}).encode() + b"\n" + b'{"n": 1}\n'
        for _ in range(docs)
    )


def test_latency_failures_rejections_and_counts_follow_the_table(two_nodes) -> None:
    (first, second), _ = two_nodes
    assert call(first, "PUT", "/idx", b'{"mappings": {"_meta": {"k": "v"}}}') == (
        200,
        {"acknowledged": True, "index": "idx"},
    )
    assert call(first, "PUT", "/idx", b"{}")[0] == 400  # exists
    assert call(first, "GET", "/idx/_mapping")[1] == {"idx": {"mappings": {"_meta": {"k": "v"}}}}
    # node-0 rejects half of the items (seeded), node-1 none
    status, answer = call(first, "POST", "/_bulk", bulk(200))
    rejected = [i for i in answer["items"] if i["index"]["status"] == 429]
    assert status == 200 and answer["errors"] is True and 60 < len(rejected) < 140
    status, answer = call(second, "POST", "/_bulk", bulk(50))
    assert answer["errors"] is False and len(answer["items"]) == 50
    # the count is the cluster's: what both nodes accepted
    assert call(second, "GET", "/idx/_count")[1] == {"count": 200 - len(rejected) + 50}
    # node-0 answers every search after its latency; node-1 fails every one
    started = time.monotonic()
    status, answer = call(first, "POST", "/idx/_search", b'{"size": 3}')
    assert time.monotonic() - started >= 0.05
    assert status == 200 and answer["_shards"]["failed"] == 0 and len(answer["hits"]["hits"]) == 3
    status, answer = call(second, "POST", "/idx/_search", b"{}")
    assert status == 503 and answer["error"]["type"] == "static_engine_failure"
    stats = call(first, "GET", "/_nodes/stats/jvm,thread_pool")[1]["nodes"]
    assert stats["node-0"]["thread_pool"]["write"]["rejected"] == len(rejected)
    assert stats["node-1"]["thread_pool"]["search"]["rejected"] == 1


def test_a_stopped_node_is_missing_from_the_health(two_nodes) -> None:
    (first, _second), nodes = two_nodes
    health = call(first, "GET", "/_cluster/health")[1]
    assert (health["status"], health["number_of_nodes"]) == ("green", 2)
    nodes[1].terminate()
    nodes[1].wait(timeout=10)
    health = call(first, "GET", "/_cluster/health")[1]
    assert (health["status"], health["number_of_nodes"]) == ("yellow", 1)
    assert call(first, "GET", "/nothing")[0] == 404
    assert call(first, "GET", "/_cat/indices")[0] == 400  # unsupported: said, not guessed
