#!/usr/bin/env python3
"""How much time does esdash add to bringing a cluster up?

Runs, alternately and side by side on this machine:

- ``esdash cluster up`` for an N-node session (MPI ranks, topology, certificates, config
  rendering, supervision, health via the run directory) until it reports green;
- the same nodes started "by hand": the configuration esdash rendered is copied, each node
  is started directly with ``bin/elasticsearch`` in parallel, and ``_cluster/health`` is
  polled until green with N nodes.

Both start from empty data directories.  Prints the median of each and the ratio
(target: esdash adds no more than 15 %, i.e. ratio <= 1.15).

    .venv/bin/python bench/cluster_up.py [--nodes 3] [--rounds 3] [--no-security]

Run as root (nodes run as the session's unprivileged user) on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import esdash, free_port_block

from esdash.cluster import pki
from esdash.rundir.layout import RunDir

ROOT = Path(__file__).resolve().parents[1]


def write_session(directory: Path, nodes: int, security: bool, user: str) -> Path:
    path = directory / "bench.toml"
    path.write_text(
        f'name = "bench-up"\n[cluster]\nnodes = {nodes}\nheap = "512m"\n'
        f'run_as = "{user}"\nsecurity = {str(security).lower()}\n'
        f"http_port = {free_port_block(nodes)}\ntransport_port = {free_port_block(nodes)}\n"
        f'data_dir = "data"\n[track]\nname = "mri"\n'
    )
    return path


def time_esdash(session: Path, env: dict[str, str]) -> tuple[float, Path]:
    start = time.perf_counter()
    output = esdash("cluster", "up", str(session), "--fresh", env=env)
    elapsed = time.perf_counter() - start
    run = Path(
        next(line for line in output.splitlines() if line.startswith("run directory:"))
        .split(":", 1)[1]
        .strip()
    )
    esdash("cluster", "down", str(run), env=env)
    return elapsed, run


def health(url: str, context: ssl.SSLContext | None, auth: str | None) -> dict | None:
    request = urllib.request.Request(url + "/_cluster/health")
    if auth:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, context=context, timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


def time_by_hand(template_run: Path, scratch: Path, user: str) -> float:
    """Start the nodes esdash configured, directly and in parallel; time until green."""
    entry = pwd.getpwnam(user)
    run = RunDir(template_run)
    topology = run.read_topology()
    home = Path(str(run.read_info().home))
    nodes = topology.nodes
    work = scratch / f"hand-{time.monotonic_ns()}"
    processes = []
    for node in nodes:
        node_dir = work / str(node.rank)
        shutil.copytree(run.node_config_dir(node.rank), node_dir / "config")
        for sub in ("data", "logs", "tmp"):
            (node_dir / sub).mkdir(parents=True)
        yml = node_dir / "config" / "elasticsearch.yml"
        lines = [
            line
            for line in yml.read_text().splitlines()
            if not line.startswith(("path.data:", "path.logs:"))
        ]
        lines += [f'path.data: "{node_dir / "data"}"', f'path.logs: "{node_dir / "logs"}"']
        yml.write_text("\n".join(lines) + "\n")
        for path in [work, node_dir, *node_dir.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
    secure = run.credentials_file.exists()
    context = auth = None
    if secure:
        # esdash's own readers: the file's mode and owner checked, the CA required (never the
        # system's trust store, which did not sign the cluster).
        creds = pki.read_credentials(run.path)
        context = pki.ssl_context(creds)
        auth = pki.basic_auth_header(creds)["Authorization"]
    url = f"{'https' if secure else 'http'}://{nodes[0].http_address}"
    java_home = Path(os.path.realpath(shutil.which("java"))).parent.parent
    start = time.perf_counter()
    for node in nodes:
        node_dir = work / str(node["rank"])
        env = {
            "ES_PATH_CONF": str(node_dir / "config"),
            "ES_TMPDIR": str(node_dir / "tmp"),
            "ES_JAVA_HOME": os.environ.get("ES_JAVA_HOME", str(java_home)),
            "PATH": os.environ["PATH"],
            "HOME": str(node_dir / "tmp"),
        }
        processes.append(
            subprocess.Popen(
                [str(home / "bin" / "elasticsearch")],
                env=env,
                cwd=node_dir / "tmp",
                user=entry.pw_uid,
                group=entry.pw_gid,
                extra_groups=[],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    try:
        while True:
            state = health(url, context, auth)
            if state and state["status"] == "green" and state["number_of_nodes"] == len(nodes):
                return time.perf_counter() - start
            if any(p.poll() is not None for p in processes):
                sys.exit("a hand-started node exited; see its logs in " + str(work))
            time.sleep(0.25)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-security", action="store_true")
    parser.add_argument("--user", default=os.environ.get("ESDASH_USER", "esdash"))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="esdash-bench-", dir="/tmp"))
    scratch.chmod(0o755)
    try:
        env = {**os.environ, "ESDASH_RUNS": str(scratch / "runs")}
        session = write_session(scratch, args.nodes, not args.no_security, args.user)
        ours, theirs = [], []
        template = None
        for round_ in range(args.rounds):
            elapsed, template = time_esdash(session, env)
            ours.append(elapsed)
            theirs.append(time_by_hand(template, scratch, args.user))
            print(
                f"round {round_ + 1}: esdash {ours[-1]:6.1f} s   by hand {theirs[-1]:6.1f} s",
                flush=True,
            )
        mine, hand = statistics.median(ours), statistics.median(theirs)
        print(
            f"\n{args.nodes} nodes, security {'off' if args.no_security else 'on'}, "
            f"{args.rounds} rounds (medians)"
        )
        print(f"esdash cluster up -> green : {mine:6.1f} s")
        print(f"same nodes by hand -> green: {hand:6.1f} s")
        print(f"ratio esdash / by hand     : {mine / hand:6.2f}  (target <= 1.15)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
