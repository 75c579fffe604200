"""Ports and HTTP on loopback or inside a network namespace."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

from support.procs import run_bounded


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (the kernel picks it).

    Another process could take it before it is used; the window is small, and picking ports
    at run time avoids the fixed ranges that other services on a shared machine use.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports (held open together so they cannot repeat)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


_GET = """
import sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:
        sys.stdout.buffer.write(r.read())
except urllib.error.HTTPError as exc:
    sys.stdout.buffer.write(exc.read())
    print(exc.code, file=sys.stderr)
    sys.exit(4)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(3)
"""


class HttpUnreachable(Exception):
    """The URL did not answer (connection refused, timeout)."""


class HttpStatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, url: str, status: int, body: bytes) -> None:
        super().__init__(f"{url}: HTTP {status}: {body[:500].decode(errors='replace')}")
        self.status = status
        self.body = body


def http_get(url: str, *, netns: str | None = None, timeout: float = 5.0) -> bytes:
    """GET ``url`` from this namespace, or from inside the named network namespace.

    Raises :class:`HttpUnreachable` when nothing answers, :class:`HttpStatusError` on 4xx/5xx.

    The root namespace cannot reach the 127.77/78 addresses of the emulated hosts (its own
    ``lo`` owns 127/8), so requests to them must be made from inside a namespace.
    """
    if netns is None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise HttpStatusError(url, exc.code, exc.read()) from exc
        except OSError as exc:
            raise HttpUnreachable(f"{url}: {exc}") from exc
    argv = ["nsenter", f"--net=/run/netns/{netns}", sys.executable, "-c", _GET, url, str(timeout)]
    try:
        proc = run_bounded(argv, timeout=timeout + 10, text=False)
    except subprocess.TimeoutExpired as exc:
        raise HttpUnreachable(f"{url} from {netns}: timed out") from exc
    if proc.returncode == 4:
        raise HttpStatusError(url, int(proc.stderr.split()[0]), proc.stdout)
    if proc.returncode != 0:
        raise HttpUnreachable(f"{url} from {netns}: {proc.stderr.decode().strip()}")
    return proc.stdout


def http_json(url: str, *, netns: str | None = None, timeout: float = 5.0) -> object:
    return json.loads(http_get(url, netns=netns, timeout=timeout))
