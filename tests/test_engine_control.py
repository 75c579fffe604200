"""Both backends' control clients against a fake engine: what goes on the wire, what comes back.

The operations live once in the SDK (:class:`esdash.plugin_api.EngineControl`); each backend
gives them its own client library.  A small HTTP server that answers like an engine (with
its product header) shows that every operation reaches the path and query string the
engine's REST API expects through either library, that a timed-out health wait is a result,
that deleting a missing index is not an error, that refusals name the operation, the
engine's reason and the status, and that a client refuses the other engine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import SplitResult, unquote, urlsplit

import pytest
from esdash_plugins.backends.elasticsearch.control import ElasticsearchControl
from esdash_plugins.backends.opensearch.control import OpenSearchControl

from esdash.plugin.control import ControlClient, ControlError

HEADERS = {
    "elasticsearch": ("X-Elastic-Product", "Elasticsearch"),
    "opensearch": ("x-opensearch-version", "3.4.0"),
}
CLIENTS = {"elasticsearch": ElasticsearchControl, "opensearch": OpenSearchControl}


class FakeEngine:
    """An HTTP server answering like ``engine``; ``seen`` is every ``METHOD path?query``."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.seen: list[str] = []
        self.bodies: list[object] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                fake.seen.append(f"{self.command} {unquote(self.path)}")
                fake.bodies.append(json.loads(raw) if raw else None)
                status, body = fake.reply(urlsplit(unquote(self.path)))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header(*HEADERS[fake.engine])
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"127.0.0.1:{self.server.server_port}"

    def reply(self, url: SplitResult) -> tuple[int, object]:
        path, query = url.path, url.query
        if "missing" in path:
            return 404, {"error": {"type": "index_not_found_exception", "reason": "no [missing]"}}
        if "bad" in path:
            return 400, {"error": {"type": "illegal_argument_exception", "reason": "bad value"}}
        if path == "/_nodes/_local/_none":
            return 200, {"cluster_name": "c", "nodes": {"n": {"version": "3.4.0"}}}
        if path.startswith("/_cluster/health"):
            timed_out = "wait_for_nodes=>=5" in query
            body = {"status": "yellow" if timed_out else "green", "timed_out": timed_out}
            return (408 if timed_out else 200), {**body, "number_of_nodes": 2, "other": 1}
        if path.endswith("/_count"):
            return 200, {"count": 3}
        if path.endswith("/_mapping"):
            return 200, {"idx": {"mappings": {"_meta": {"built_by": "esdash"}}}}
        return 200, {"acknowledged": True, "path": path}


@pytest.fixture(params=sorted(CLIENTS))
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[FakeEngine, ControlClient]]:
    fake = FakeEngine(request.param)
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    client = CLIENTS[request.param]([fake.endpoint], None, 5.0)
    try:
        yield fake, client
    finally:
        client.close()
        fake.server.shutdown()
        fake.server.server_close()


def test_every_operation_reaches_the_engines_rest_api(
    engine: tuple[FakeEngine, ControlClient],
) -> None:
    fake, client = engine
    assert client.info().engine == fake.engine and client.info().version == "3.4.0"
    assert client.index_exists("idx") is True and client.index_exists("missing") is False
    assert client.count("idx") == 3
    assert client.index_meta("idx") == {"built_by": "esdash"}
    client.create_index("idx", {"settings": {"index.number_of_shards": 1}})
    client.refresh("idx")
    client.flush("idx")
    client.force_merge("idx", 1)
    assert client.node_stats(["jvm", "os"])["path"] == "/_nodes/stats/jvm,os"
    assert client.index_stats("idx", ["docs"])["path"] == "/idx/_stats/docs"
    assert client.index_settings("idx")["path"] == "/idx/_settings"
    assert client.nodes_info()["path"] == "/_nodes"
    client.put_index_template("t", {"index_patterns": ["x*"]})
    client.put_component_template("c", {"template": {}})
    client.create_data_stream("ds")
    client.delete_data_stream("ds")
    client.delete_index("idx")
    assert client.request("raw", "POST", "/idx/_doc?refresh=true", {"a": 1})["path"] == (
        "/idx/_doc"
    )
    merge = "?max_num_segments=1" + ("&wait_for_completion=true" * (fake.engine != "opensearch"))
    assert fake.seen[2:] == [
        "HEAD /idx",
        "HEAD /missing",
        "POST /idx/_count",
        "GET /idx/_mapping",
        "PUT /idx",
        "POST /idx/_refresh",
        "POST /idx/_flush",
        f"POST /idx/_forcemerge{merge}",
        "GET /_nodes/stats/jvm,os",
        "GET /idx/_stats/docs",
        "GET /idx/_settings?flat_settings=true&include_defaults=true",
        "GET /_nodes",
        "PUT /_index_template/t",
        "PUT /_component_template/c",
        "PUT /_data_stream/ds",
        "DELETE /_data_stream/ds",
        "DELETE /idx",
        "POST /idx/_doc?refresh=true",
    ]
    assert fake.bodies[6] == {"settings": {"index.number_of_shards": 1}}
    assert fake.bodies[-1] == {"a": 1}


def test_health_waits_and_a_timed_out_wait_is_a_result(
    engine: tuple[FakeEngine, ControlClient],
) -> None:
    fake, client = engine
    health = client.health(
        index="idx", wait_for_status="green", wait_for_no_relocating_shards=True, timeout=3
    )
    assert health.ok and health.status == "green" and health.number_of_nodes == 2
    waited = client.health(wait_for_nodes=">=5", timeout=1)
    assert waited.ok and waited.timed_out is True and waited.status == "yellow"
    assert fake.seen == [
        "GET /_cluster/health/idx?timeout=3s&wait_for_no_relocating_shards=true"
        "&wait_for_status=green",
        "GET /_cluster/health?timeout=1s&wait_for_nodes=>=5",
    ]


def test_refusals_name_the_operation_the_reason_and_the_status(
    engine: tuple[FakeEngine, ControlClient],
) -> None:
    _fake, client = engine
    client.delete_index("missing")  # already gone: not an error
    with pytest.raises(ControlError) as refused:
        client.delete_index("bad")
    assert str(refused.value) == (
        "delete index failed (HTTP 400): illegal_argument_exception: bad value"
    )
    assert refused.value.status == 400 and refused.value.operation == "delete index"
    with pytest.raises(ControlError, match=r"^raw failed \(HTTP 400\)"):
        client.request("raw", "GET", "/bad/_search", None)
    with pytest.raises(ControlError, match=r"^count failed \(HTTP 400\)"):
        client.count("bad")


def test_an_unreachable_cluster_is_a_control_error_without_status() -> None:
    for control in CLIENTS.values():
        with control(["127.0.0.1:1"], None, 2.0) as client, pytest.raises(ControlError) as down:
            client.refresh("idx")
        assert down.value.status is None and "refresh failed: ConnectionError" in str(down.value)


@pytest.mark.parametrize("client_engine", sorted(CLIENTS))
def test_a_client_refuses_the_other_engine(client_engine: str) -> None:
    other = next(name for name in CLIENTS if name != client_engine)
    fake = FakeEngine(other)
    threading.Thread(target=fake.server.serve_forever, daemon=True).start()
    try:
        client = CLIENTS[client_engine]([fake.endpoint], None, 5.0)
        with client, pytest.raises(ControlError, match=f"the cluster answered as {other}"):
            client.info()
    finally:
        fake.server.shutdown()
        fake.server.server_close()
