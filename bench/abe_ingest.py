#!/usr/bin/env python3
"""What does client-side ABE encryption cost at ingest?  ABE docs/s over plaintext docs/s.

One cluster is started once; then ``esdash run --cluster --reingest`` ingests the same MRI
corpus alternately with ``[encryption] mode = "none"`` and ``mode = "abe"`` (order ABBA per
pair of rounds, so drift on a shared machine hits both alike).  Encryption runs inside the
ingest ranks, so the ABE figure includes it: names, strings (AES-SIV), numbers and dates
(OPE), JSON re-encoding.  The ingest throughput is esdash's own (``results.json``:
documents / the longest rank's ingest time); the query steps are cut to one short
``match_all`` so the runs are ingest only.

Prints the JSON bytes per document each mode sends (and how many of ABE's are field names),
each round, the medians and the ratio (target: ABE / plaintext >= 0.8), and the
encryption's share of the ABE ranks' ingest time.  Because wall-clock throughput on a shared
machine swings with everything else that runs, it also prints CPU per document (the
ingest ranks' own CPU time, and the Elasticsearch nodes' from ``/proc``) and the ratio of
the total CPU per document: the throughput ratio a CPU-bound machine would show.

    .venv/bin/python bench/abe_ingest.py [--nodes 1] [--documents 50000] [--rounds 4]
        [--ope-backend auto|native|python|pyope] [--key-mode per-field|single]
        [--node-cpus 0 --client-cpus 1]

With ``--node-cpus``/``--client-cpus`` the nodes and the ingest ranks run on separate cores,
as on an HPC node with cores to spare for the benchmark ranks: the ratio then shows what
encryption costs the cluster (bigger documents) rather than the sum of both sides' CPU.

Documents are encrypted by the native fast path (``esdash_abe_native``, from the raw
corpus lines) where it is built and the OPE backend is ``auto`` or ``native``;
``--ope-backend python`` measures the pure-Python encoder (same bytes, Python OPE core).
``--ope-backend pyope`` reproduces the paper's cost (pyope for every value, no caches; use
fewer documents, it is about a hundred times slower).  Run as root (nodes run as the
session's unprivileged user) on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import esdash, free_port_block, throwaway_key

from esdash.rundir.layout import RunDir


def write_sessions(directory: Path, args: argparse.Namespace, key: Path) -> dict[str, Path]:
    """Two sessions with the same cluster, corpus and steps; only [encryption] differs."""
    (directory / "steps.json").write_text(
        json.dumps(
            [
                {
                    "name": "all",
                    "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
                    "warmup_time_secs": 0,
                    "execution_time_secs": 0.5,
                }
            ]
        )
    )
    common = (
        f'[cluster]\nnodes = {args.nodes}\nheap = "{args.heap}"\nrun_as = "{args.user}"\n'
        f"http_port = {free_port_block(args.nodes)}\n"
        f"transport_port = {free_port_block(args.nodes)}\n"
        f'data_dir = "data"\n'
        f'[track]\nname = "mri"\ndocuments = {args.documents}\nseed = {args.seed}\n'
        f"[benchmark]\nworkers_per_node = {args.workers_per_node}\nbulk_size = {args.bulk_size}\n"
        f'warmup = "0s"\nduration = "0.5s"\nqueries = "steps.json"\n'
    )
    encryption = {
        "none": '[encryption]\nmode = "none"\n',
        "abe": (
            f'[encryption]\nmode = "abe"\nkey_file = "{key}"\nkey_mode = "{args.key_mode}"\n'
            f'ope_backend = "{args.ope_backend}"\n'
        ),
    }
    sessions = {}
    for mode, table in encryption.items():
        path = directory / f"ingest-{mode}.toml"
        path.write_text(f'name = "abe-ingest"\n{common}{table}')
        sessions[mode] = path
    return sessions


def _processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used so far), for every process."""
    stats: dict[int, tuple[int, float]] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    return stats


def node_processes(cluster: Path) -> dict[int, float]:
    """The cluster's node processes (pid -> CPU seconds so far).

    A node's recorded pid is its launcher; the server JVM is a descendant, so every
    process below the recorded pids counts.
    """
    stats = _processes()
    roots = set()
    for status in RunDir(cluster).node_statuses().values():
        if status.pid is not None:
            roots.add(status.pid)
    found = {}
    for pid, (_, cpu) in stats.items():
        ancestor, seen = pid, 0
        while ancestor in stats and ancestor not in roots and seen < 64:
            ancestor, seen = stats[ancestor][0], seen + 1
        if ancestor in roots:
            found[pid] = cpu
    return found


def node_cpu(cluster: Path) -> float:
    """CPU seconds (user + system) the cluster's node processes have used so far."""
    return sum(node_processes(cluster).values())


def pin_nodes(cluster: Path, cpus: set[int]) -> None:
    """Every thread of every node process onto ``cpus`` (new threads inherit it)."""
    for pid in node_processes(cluster):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # thread ended
                os.sched_setaffinity(int(task.name), cpus)


def cpu_list(text: str) -> set[int]:
    """``0`` or ``0,2`` or ``0-3``: a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def ingest(session: Path, cluster: Path, env: dict[str, str]) -> dict:
    before = node_cpu(cluster)
    out = esdash("run", str(session), "--cluster", str(cluster), "--reingest", env=env)
    nodes_cpu = node_cpu(cluster) - before
    results_path = next(
        Path(line.split(": ", 1)[1]) for line in out.splitlines() if line.startswith("results: ")
    )
    results = json.loads(results_path.read_text())
    ingest = results["ingest"]
    if results["status"] != "ok" or ingest["docs_rejected"]:
        sys.exit(f"run {results_path} did not ingest cleanly: {results.get('reason')}")
    docs = ingest["docs"]
    return {
        "docs_per_s": ingest["docs_per_s"],
        "seconds": ingest["duration_s"],
        "encode_seconds": ingest.get("encode_seconds"),
        "ranks": results["ranks"],
        "client_us": ingest.get("client_cpu_seconds", float("nan")) / docs * 1e6,
        "nodes_us": nodes_cpu / docs * 1e6,
    }


def bytes_per_document(session: Path, env: dict[str, str], sample: int = 5000) -> dict:
    """Mean JSON bytes per document as sent in a bulk body: the corpus line (plaintext) or
    the codec's encrypted line (ABE), over the first ``sample`` documents of the corpus.

    Also the share of the encrypted bytes that are field names (what the compact format of
    issue 16 shrinks).  Runs the session's own codec, as a bench rank does.
    """
    os.environ["ESDASH_RUNS"] = env["ESDASH_RUNS"]
    from esdash.run.job import client_codec_for, prepare_workload
    from esdash.session import load_session

    loaded = load_session(session)
    track, corpus, _ = prepare_workload(loaded)
    with open(corpus.path, "rb") as source:
        lines = [line.rstrip(b"\n") for _, line in zip(range(sample), source, strict=False)]
    codec = client_codec_for(loaded, track)
    if codec is None:
        return {"bytes": statistics.fmean(len(line) for line in lines), "names": None}
    encoded = [
        fast or codec.encode_lines([json.loads(line)])[0]
        for fast, line in zip(codec.encode_raw_lines(lines), lines, strict=True)
    ]
    names = statistics.fmean(
        sum(len(key) + 3 for key in json.loads(line)) for line in encoded[:500]
    )  # "key": per top-level member
    codec.close()
    return {"bytes": statistics.fmean(len(line) for line in encoded), "names": names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--workers-per-node", type=int, default=1)
    parser.add_argument("--documents", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bulk-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4, help="runs per mode")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--ope-backend", default="auto")
    parser.add_argument("--key-mode", default="per-field")
    parser.add_argument("--user", default="esdash", help="the unprivileged node user")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (runs)")
    parser.add_argument(
        "--node-cpus",
        type=cpu_list,
        help="pin the node(s) to these CPUs (e.g. 0), the ingest ranks to --client-cpus: "
        "client and cluster then do not compete for cores, as on an HPC node with cores "
        "to spare for the benchmark ranks",
    )
    parser.add_argument("--client-cpus", type=cpu_list, help="CPUs of the ingest ranks (e.g. 1)")
    args = parser.parse_args()
    pwd.getpwnam(args.user)

    work = Path(tempfile.mkdtemp(prefix="esdash-abe-ingest-"))
    work.chmod(0o755)
    key = work / "abe.key"
    throwaway_key(key)
    sessions = write_sessions(work, args, key)
    env = {**os.environ, "ESDASH_RUNS": str(work / "runs")}
    from esdash_plugins.encryption.abe.native_lines import NATIVE_BACKENDS, native_module
    from esdash_plugins.encryption.abe.opecore import available

    encoder = (
        "native document encoder"
        if native_module() is not None and args.ope_backend in NATIVE_BACKENDS
        else "Python document encoder"
    )

    pinning = (
        f"; nodes on CPUs {sorted(args.node_cpus)}, ranks on CPUs {sorted(args.client_cpus)}"
        if args.node_cpus and args.client_cpus
        else "; nodes and ranks share all CPUs"
    )
    if bool(args.node_cpus) != bool(args.client_cpus):
        parser.error("--node-cpus and --client-cpus go together")
    print(
        f"# {args.nodes} node(s), {args.workers_per_node} worker(s)/node, {args.documents} MRI "
        f"docs, bulk {args.bulk_size}, {encoder}, OPE backend {args.ope_backend} "
        f"({available()}), "
        f"key mode {args.key_mode}{pinning}; work dir {work}"
        f"{'' if args.keep else ' (removed at the end)'}",
        flush=True,
    )
    up = esdash("cluster", "up", str(sessions["none"]), env=env)
    cluster = next(
        Path(line.split(":", 1)[1].strip())
        for line in up.splitlines()
        if line.startswith("run directory:")
    )
    measured: dict[str, list[dict]] = {"none": [], "abe": []}
    sizes = {mode: bytes_per_document(path, env) for mode, path in sessions.items()}
    for mode, size in sizes.items():
        names = f" ({size['names']:.0f} of them field names)" if size["names"] else ""
        print(f"bytes per document, {mode:4s}: {size['bytes']:.0f}{names}", flush=True)
    print(f"bytes ratio ABE/plaintext: {sizes['abe']['bytes'] / sizes['none']['bytes']:.2f}")
    try:
        if args.node_cpus:
            pin_nodes(cluster, args.node_cpus)
        if args.client_cpus:  # inherited by `esdash run`, mpiexec and the ranks
            os.sched_setaffinity(0, args.client_cpus)
        for mode in ("none", "abe"):  # warm-up: the JIT for both document shapes, caches
            ingest(sessions[mode], cluster, env)
        for round_ in range(args.rounds):
            order = ("none", "abe") if round_ % 2 == 0 else ("abe", "none")
            for mode in order:
                started = time.time()
                outcome = ingest(sessions[mode], cluster, env)
                measured[mode].append(outcome)
                encode = outcome["encode_seconds"]
                share = (
                    f", encryption {encode:.1f} s = "
                    f"{encode / (outcome['seconds'] * outcome['ranks']):.0%} of rank time"
                    if encode
                    else ""
                )
                took = time.time() - started
                print(
                    f"round {round_ + 1} {mode:4s}: {outcome['docs_per_s']:8.0f} docs/s "
                    f"({outcome['seconds']:.1f} s ingest{share}; run {took:.0f} s); CPU/doc: "
                    f"client {outcome['client_us']:.0f} us, nodes {outcome['nodes_us']:.0f} us",
                    flush=True,
                )
    finally:
        esdash("cluster", "down", str(cluster), env=env)
        if not args.keep:  # its data and the throw-away key
            shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(m["docs_per_s"] for m in measured["none"])
    abe = statistics.median(m["docs_per_s"] for m in measured["abe"])
    pairs = [
        a["docs_per_s"] / n["docs_per_s"]
        for n, a in zip(measured["none"], measured["abe"], strict=True)
    ]
    print(f"plaintext median: {plain:.0f} docs/s")
    print(f"ABE median:       {abe:.0f} docs/s")
    print(
        f"ratio ABE/plaintext: {abe / plain:.2f} (per round: "
        f"{', '.join(f'{p:.2f}' for p in pairs)}; target >= 0.8)"
    )
    cpu = {
        mode: (
            statistics.median(m["client_us"] for m in runs),
            statistics.median(m["nodes_us"] for m in runs),
        )
        for mode, runs in measured.items()
    }
    for mode, (client, nodes) in cpu.items():
        print(f"CPU per doc, {mode:4s}: client {client:.0f} us + nodes {nodes:.0f} us")
    ratio = sum(cpu["none"]) / sum(cpu["abe"])
    print(f"CPU ratio (plaintext CPU/doc over ABE CPU/doc): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
