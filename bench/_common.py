"""Helpers every bench script needs: free ports for a test cluster and the esdash CLI."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port such that ``base .. base+count-1`` are free on ``host`` right now."""
    for _ in range(200):
        base = random.randrange(20000, 40000)
        socks = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no block of free ports found")


def esdash(*args: str, env: dict[str, str], timeout: float = 7200) -> str:
    """Run ``esdash ARGS``; exit the bench with its output when it fails."""
    result = subprocess.run(
        [sys.executable, "-m", "esdash", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if result.returncode != 0:
        sys.exit(f"esdash {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def throwaway_key(path: str | os.PathLike) -> None:
    """A fresh 32-byte ABE key file at ``path``, created private (mode 0600) from the start."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(os.urandom(32))
