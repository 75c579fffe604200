"""Driving the esdash CLI in tests: sessions on free ports, runs, process checks."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

ESDASH = [sys.executable, "-m", "esdash"]


#: Independent of the global ``random`` state, which tests and the libraries they drive
#: seed (a seeded state gave two "random" blocks the same base in a CI run).
_PORTS = random.SystemRandom()


def free_port_block(count: int, host: str = "127.0.0.1", avoid: int | None = None) -> int:
    """A base port such that ``base .. base+count-1`` are free on ``host`` right now, and
    (with ``avoid``) do not overlap ``avoid .. avoid+count-1``: another block handed out but
    not bound yet, such as the http ports beside the transport ports."""
    for _ in range(200):
        base = _PORTS.randrange(20000, 40000)
        if avoid is not None and abs(base - avoid) < count:
            continue
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


def free_port_blocks(count: int) -> tuple[int, int]:
    """Two blocks of ``count`` free ports that do not overlap (http, transport)."""
    http = free_port_block(count)
    return http, free_port_block(count, avoid=http)


def quick_benchmark(tables: str) -> str:
    """``tables`` with ``benchmark.warmup_max = "0s"`` and ``order = "listed"`` unless it sets
    its own: a test about something else runs its steps once, as listed, with no global
    warm-up (mirrored rounds, the default, would run every step twice)."""
    added = "".join(
        line
        for key, line in (("warmup_max", 'warmup_max = "0s"\n'), ("order", 'order = "listed"\n'))
        if not re.search(rf"^\s*{key}\s*=", tables, re.MULTILINE)
    )
    if not added:
        return tables
    if "[benchmark]" in tables:
        return tables.replace("[benchmark]\n", f"[benchmark]\n{added}", 1)
    return tables + f"\n[benchmark]\n{added}"


def write_session(
    directory: Path,
    name: str,
    nodes: int,
    *,
    security: bool = True,
    interconnect: str = "loopback",
    user: str = "esdash",
    extra_cluster: str = "",
    track: str = 'name = "mri"',
    tables: str = "",
    ports: bool = True,
) -> Path:
    """A session file for a small test cluster on free ports.

    ``track`` is the body of the ``[track]`` table; ``tables`` is appended verbatim (e.g. an
    ``[encryption]`` or ``[benchmark]`` table).  The global warm-up is off and the steps run
    once, listed, unless ``tables`` sets ``warmup_max`` or ``order``: run until steady (up to
    5 minutes) or twice, they would dominate a short test.
    ``ports=False`` leaves ``http_port`` and ``transport_port`` out: the ranks choose them.
    """
    tables = quick_benchmark(tables)
    explicit = ""
    if ports:
        http, transport = free_port_blocks(nodes)
        explicit = f"http_port = {http}\ntransport_port = {transport}\n"
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = {nodes}\nheap = "256m"\ninterconnect = "{interconnect}"\n'
        f'run_as = "{user}"\nsecurity = {str(security).lower()}\n'
        f"{explicit}"
        f'data_dir = "data-{name}"\n{extra_cluster}\n'
        f"[track]\n{track}\n{tables}\n"
    )
    return path


def esdash(
    *args: str,
    env_runs: Path,
    timeout: float = 300,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run the esdash CLI with runs under ``env_runs``; fail with its output on error."""
    full_env = {**(env if env is not None else os.environ), "ESDASH_RUNS": str(env_runs)}
    result = subprocess.run(
        [*ESDASH, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"esdash {' '.join(args)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def run_dir_from(output: str) -> Path:
    for line in output.splitlines():
        if line.startswith("run directory:"):
            return Path(line.split(":", 1)[1].strip())
    raise AssertionError(f"no run directory in output:\n{output}")


def status_json(run: Path, runs: Path) -> dict:
    return json.loads(esdash("cluster", "status", str(run), "--json", env_runs=runs).stdout)


def pids_alive(pids: list[int]) -> list[int]:
    """The pids that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive


def processes() -> list[tuple[int, int, str]]:
    """Every process now: pid, parent pid, command line (arguments joined by spaces)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.append((int(entry.name), ppid, cmdline))
    return found


def java_pids_under(path: Path) -> list[int]:
    """Java processes whose command line mentions ``path`` (a run's config or data dir), and
    the Java processes below them: a node's server JVM, forked by its launcher JVM, names
    only its encrypted mount when gocryptfs keeps the JVM's files there."""
    found = []
    parents: dict[int, int] = {}
    java: set[int] = set()
    for pid, ppid, cmdline in processes():
        if "java" not in cmdline:
            continue
        java.add(pid)
        parents[pid] = ppid
        if str(path) in cmdline:
            found.append(pid)
    below = [pid for pid in java if pid not in found and parents.get(pid) in found]
    return pids_alive(found + below)
