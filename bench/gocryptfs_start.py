#!/usr/bin/env python3
"""What does GoCryptFS cost when a cluster starts and stops?

Runs, alternately (ABBA order) on this machine, ``esdash cluster up`` until healthy and
``esdash cluster down`` for the same N-node session with ``encryption.mode = "none"`` and
``"gocryptfs"``:

- *first start*: an empty data root (``--fresh``), so gocryptfs also initialises each cipher
  directory (``gocryptfs -init``, scrypt with ``--scrypt-n``);
- *restart*: the data root of the previous start, reused (mount only).

Prints the median of each, the difference, and the ranks' own mount and init times from
``launcher.log``.  No assertion: a measurement, not a test.

    .venv/bin/python bench/gocryptfs_start.py [--nodes 1] [--rounds 3] [--scrypt-n 16]

Run as root (nodes run as the unprivileged user ``esdash``) on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import esdash, free_port_block

from esdash.rundir.layout import RunDir

USER = os.environ.get("ESDASH_TEST_USER", "esdash")


def write_session(directory: Path, mode: str, nodes: int, scrypt_n: int) -> Path:
    encryption = f'mode = "{mode}"\n'
    if mode == "gocryptfs":
        passfile = directory / "pass"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(passfile, flags, 0o600), "w") as out:  # private from the start
            out.write(secrets.token_urlsafe(32) + "\n")
        encryption += f'password_file = "{passfile}"\nscrypt_n = {scrypt_n}\n'
    path = directory / f"{mode}.toml"
    path.write_text(
        f'name = "bench-{mode}"\n[cluster]\nnodes = {nodes}\nheap = "512m"\n'
        f'run_as = "{USER}"\nsecurity = false\n'
        f"http_port = {free_port_block(nodes)}\ntransport_port = {free_port_block(nodes)}\n"
        f'data_dir = "data-{mode}"\n[encryption]\n{encryption}[track]\nname = "mri"\n'
    )
    return path


def up_down(session: Path, fresh: bool, env: dict[str, str]) -> tuple[float, float, Path]:
    """Seconds until healthy, seconds for ``down``, and the run directory."""
    start = time.perf_counter()
    output = esdash("cluster", "up", str(session), *(["--fresh"] if fresh else []), env=env)
    up = time.perf_counter() - start
    run = Path(output.split("run directory:", 1)[1].splitlines()[0].strip())
    start = time.perf_counter()
    esdash("cluster", "down", str(run), env=env)
    return up, time.perf_counter() - start, run


def storage_times(run: Path) -> dict[str, list[float]]:
    """The ranks' own "initialised ... in X s" and "mounted ... in X s" lines."""
    found: dict[str, list[float]] = {"initialised": [], "mounted": []}
    text = RunDir(run).launcher_log.read_text(errors="replace")
    for kind, seconds in re.findall(
        r"esdash gocryptfs on \S+: (initialised|mounted) .* in ([\d.]+) s", text
    ):
        found[kind].append(float(seconds))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scrypt-n", type=int, default=16)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="esdash-bench-gocryptfs-"))
    scratch.chmod(0o755)
    env = {**os.environ, "ESDASH_RUNS": str(scratch / "runs")}
    sessions = {
        mode: write_session(scratch, mode, args.nodes, args.scrypt_n)
        for mode in ("none", "gocryptfs")
    }
    times: dict[tuple[str, str], list[float]] = {}
    storage: dict[str, list[float]] = {"initialised": [], "mounted": []}
    for round_number in range(args.rounds):
        # ABBA order, so load that drifts over the run (other jobs) biases neither mode.
        order = list(sessions.items())
        for mode, session in order if round_number % 2 == 0 else reversed(order):
            for phase, fresh in (("first start", True), ("restart", False)):
                up, down, run = up_down(session, fresh, env)
                times.setdefault((mode, f"{phase} up"), []).append(up)
                times.setdefault((mode, f"{phase} down"), []).append(down)
                if mode == "gocryptfs":
                    for kind, values in storage_times(run).items():
                        storage[kind].extend(values)
        print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{args.nodes} node(s), {args.rounds} round(s), scrypt N = 2^{args.scrypt_n}; medians:")
    print(f"{'':<18} {'none':>8} {'gocryptfs':>10} {'difference':>11}")
    for what in ("first start up", "first start down", "restart up", "restart down"):
        plain = statistics.median(times[("none", what)])
        encrypted = statistics.median(times[("gocryptfs", what)])
        print(f"{what:<18} {plain:>7.2f}s {encrypted:>9.2f}s {encrypted - plain:>+10.2f}s")
    for kind, values in storage.items():
        if values:
            median = statistics.median(values)
            print(f"gocryptfs {kind} per node (the rank's own clock): median {median:.2f} s")
    print(f"scratch: {scratch} (delete it when done)")


if __name__ == "__main__":
    main()
