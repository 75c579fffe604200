"""One persistent HTTP(S) connection per target node: the load generator's hot path.

The authors' scripts opened a new connection for every request, so their latencies included
TCP and TLS handshakes.  Here each rank keeps one keep-alive connection to its node and
reopens it only after a failure.  ``http.client`` is used directly: the full
elasticsearch-py client costs several times more CPU per request, and on a 2-core node the
load generator's CPU is part of what is measured.

``http.client`` sets ``TCP_NODELAY`` on every connection it opens (HTTPS too), so a body
sent after its headers does not wait for a delayed ACK (Nagle's algorithm would stall each
small request by up to 40 ms); ``tests/bench/test_http_nodelay.py`` holds it to that.
"""

from __future__ import annotations

import http.client
import ssl
import time
from dataclasses import dataclass

from esdash.cluster.pki import basic_auth_header, ssl_context
from esdash.plugin.secure_files import SecurityFilesError
from esdash.plugin.security import Credentials


class RequestFailed(Exception):
    """No HTTP response: the connection failed or timed out (``error_class`` says which)."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(frozen=True)
class Target:
    """A node to send requests to: its name, ``host:port`` and whether it speaks TLS."""

    name: str
    endpoint: str
    secure: bool


class Connection:
    """A keep-alive connection to one node, reopened lazily after errors."""

    def __init__(
        self,
        target: Target,
        credentials: Credentials | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.target = target
        self.timeout = timeout
        host, _, port = target.endpoint.rpartition(":")
        self._host, self._port = host.strip("[]"), int(port)
        self._context: ssl.SSLContext | None = None
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if target.secure:
            if credentials is None:
                raise SecurityFilesError(
                    f"{target.name} ({target.endpoint}) speaks TLS but no credentials were "
                    f"given; read the run's credentials (esdash.cluster.pki.read_credentials)"
                )
            self._context = ssl_context(credentials)  # the run's CA only, never the system's
        if credentials is not None:
            self._headers.update(basic_auth_header(credentials))
        self._conn: http.client.HTTPConnection | None = None
        #: When the request in flight was sent (monotonic), None between requests.
        self.sent_at: float | None = None

    def _open(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=self._context
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        """Send one request; return (status, body).  Raise :class:`RequestFailed` otherwise.

        ``timeout`` bounds this request only (a step's end: see ``loadgen.measure``); the
        connection's own timeout applies otherwise.  While the request is in flight
        :attr:`sent_at` holds when it was sent (monotonic clock), so a heartbeat thread can
        report how long it has been open.
        """
        headers = self._headers
        if content_type is not None:
            headers = {**headers, "Content-Type": content_type}
        if self._conn is None:
            self._conn = self._open()
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        self.sent_at = time.monotonic()
        try:
            if self._conn.sock is None:
                self._conn.timeout = limit
            elif limit != self._conn.timeout:  # settimeout costs system calls: only changes
                self._conn.timeout = limit
                self._conn.sock.settimeout(limit)
            self._conn.request(method, path, body=body, headers=headers)
            response = self._conn.getresponse()
            data = response.read()
        except TimeoutError as exc:
            self.close()
            raise RequestFailed("timeout", f"no response within {limit:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise RequestFailed("connection", f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.sent_at = None
        if response.will_close:
            self.close()
        return response.status, data

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def error_class_of(status: int) -> str:
    """The error class of an HTTP status, as counted in the results (``http_429``...)."""
    return f"http_{status}"
