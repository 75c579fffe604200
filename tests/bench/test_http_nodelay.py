"""The bench's keep-alive connections send without Nagle's delay (``TCP_NODELAY``).

``http.client`` writes a request's headers and its body in two sends; without
``TCP_NODELAY`` the body waits for the server's delayed ACK of the headers (up to 40 ms on
Linux), a stall on every small request that caps ingest and query rates (issue 18).  The
option is checked on the socket of a :class:`esdash.cluster.http.Connection` after a real
request to a real local server, plain HTTP and HTTPS (with a CA and certificate made by
esdash's own PKI code), and again after the connection was reopened.
"""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from esdash.cluster.http import Connection, Target
from esdash.cluster.pki import create_cluster_pki
from esdash.plugin.security import Credentials


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with its own body (keep-alive, HTTP/1.1)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # quiet: pytest shows stderr of failures only, and this is not one


def _serve(context: ssl.SSLContext | None) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


@pytest.fixture
def http_port() -> Iterator[int]:
    yield from _serve(None)


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[int, Credentials]]:
    pki = create_cluster_pki(tmp_path / "pki", "nodelay", [["127.0.0.1", "localhost"]])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.node(0).cert, pki.node(0).key)
    credentials = Credentials("esdash", "secret", pki.ca_cert)
    for port in _serve(context):
        yield port, credentials


def _no_delay(connection: Connection) -> int:
    """The ``TCP_NODELAY`` option of the connection's open socket."""
    sock = connection._conn.sock if connection._conn is not None else None
    assert sock is not None, "the connection has no open socket"
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def _check(connection: Connection) -> None:
    try:
        for round_ in range(2):  # a connection reopened after close() gets the option too
            body = b'{"round": %d}' % round_
            assert connection.request("POST", "/_bulk", body) == (200, body)
            assert _no_delay(connection) != 0
            connection.close()
    finally:
        connection.close()


def test_plain_http_connections_set_tcp_nodelay(http_port: int) -> None:
    _check(Connection(Target("n0", f"127.0.0.1:{http_port}", secure=False), timeout=30))


def test_https_connections_set_tcp_nodelay(https: tuple[int, Credentials]) -> None:
    port, credentials = https
    _check(Connection(Target("n0", f"127.0.0.1:{port}", secure=True), credentials, timeout=30))
