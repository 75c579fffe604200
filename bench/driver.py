#!/usr/bin/env python3
"""How close does esdash's load generator get to the physical limit of a Python client?

Runs the same query at the same number of connections against the same local cluster with

- **raw**: a minimal ``http.client`` keep-alive loop that sends the pre-encoded body and
  reads the response (the same headers esdash sends; nothing else per request);
- **esdash on**: ``loadgen.measure`` in a closed loop with a real ``Recorder`` and the real
  ``Reporter.tick`` draining it every interval into a real channel file (a temporary one),
  so the per-interval cost is paid as in a run;
- **esdash off**: the same call with a no-op recorder (same call shape, same tick).

Every connection runs in its own process (``multiprocessing``, spawn: no GIL shared between
connections), all connections of a run start together, and every run lasts ``--seconds``.
The variants alternate over ``--rounds`` rounds in a balanced order (see :data:`ORDERS`;
six rounds balance it fully), after one discarded warm-up round.  Each worker measures its
own CPU (``getrusage(RUSAGE_SELF)``, user + system) over its loop.  Prints medians over rounds and
the ratios, with the targets: esdash (recording on) reaches at least 0.9x the raw loop's
throughput, and recording costs under 3 % (CPU per request and throughput).

    .venv/bin/python bench/driver.py [--nodes 1] [--connections 2] [--seconds 10] \
        [--rounds 3] [--documents 5000] [--security] [--cluster RUN]

Without ``--cluster`` it writes a session into a temporary directory, brings the cluster up
with ``esdash cluster up`` and takes it down at the end.  Run as root (nodes run as the
session's unprivileged user) on an otherwise idle machine: the client processes and the
nodes share its cores, so the client's CPU per request is part of what limits throughput.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import multiprocessing
import os
import resource
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import esdash, free_port_block

VARIANTS = ("raw", "on", "off")
LABELS = {
    "raw": "raw http.client loop",
    "on": "esdash, recording on",
    "off": "esdash, recording off",
}
INDEX = "esdash-driver-mri"
QUERY_NAME = "body_part"
QUERY_BODY = {"query": {"term": {"BodyPart": "Head"}}}
#: The order of the variants in each round: a cyclic Latin square interleaved with its
#: mirror image (a Williams design), so that every two consecutive rounds cancel a linear
#: drift of the machine, and six rounds give every variant every position and every pair of
#: variants both orders equally often.
ORDERS = (
    ("raw", "on", "off"),
    ("off", "on", "raw"),
    ("on", "off", "raw"),
    ("raw", "off", "on"),
    ("off", "raw", "on"),
    ("on", "raw", "off"),
)
TARGET_RATIO = 0.9
TARGET_COST = 0.03


# ------------------------------------------------------------------------------ workers


@dataclass(frozen=True)
class Spec:
    """What a worker needs to reach the node and what to send (picklable)."""

    node: str
    endpoint: str
    secure: bool
    credentials: Any
    path: str
    body: bytes
    interval: float


class NullRecorder:
    """The recorder's call shape, recording nothing: esdash with recording off."""

    def __init__(self) -> None:
        self.errors = 0

    def record(self, op, node, latency, service_time, docs=0, nbytes=0) -> None:
        pass

    def record_error(self, op, node, error_class, status, message, latency=None) -> None:
        self.errors += 1

    def drain(self) -> dict[str, Any]:
        return {}


class CountingChannel:
    """The real channel writer (a temporary file), counting what the recorder reported."""

    def __init__(self, path: Path) -> None:
        from esdash.bench.channel import ChannelWriter

        self.writer = ChannelWriter(path)
        self.recorded = 0
        self.errors = 0
        self.payloads = 0

    def write(self, record: dict[str, Any]) -> None:
        self.writer.write(record)
        data = record.get("data")  # a RankPayload when recording, {} from the no-op recorder
        for op in getattr(data, "ops", {}).values():
            self.recorded += op.requests
            self.errors += sum(op.errors.values())
        self.payloads += 1


def _raw_headers(spec: Spec) -> tuple[dict[str, str], ssl.SSLContext | None]:
    """The headers and TLS context ``esdash.cluster.http.Connection`` uses, built by hand."""
    import base64

    from esdash.cluster import pki

    headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
    context = None
    creds = spec.credentials
    if spec.secure:
        if creds is None:
            sys.exit(f"{spec.node}: a TLS node needs the run's credentials (its CA)")
        context = pki.ssl_context(creds)  # the run's CA only, as the hot path verifies
    if creds is not None:
        token = f"{creds.username}:{creds.password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
    return headers, context


def _raw_loop(spec: Spec, conn: http.client.HTTPConnection, headers: dict, until: float) -> dict:
    perf = time.perf_counter
    deadline = perf() + (until - time.time())
    path, body = spec.path, spec.body
    sent = errors = 0
    while perf() < deadline:
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            errors += 1
        sent += 1
    return {"requests": sent, "errors": errors, "recorded": sent}


def worker(variant: str, spec: Spec, pipe: Any) -> None:
    """One connection: set up, say ready, wait for the start time, run, send the figures."""
    from esdash.bench import loadgen
    from esdash.bench.rank_state import RankState, Schedule
    from esdash.bench.recorder import Recorder
    from esdash.bench.reporting import Reporter
    from esdash.cluster.http import Connection, Target

    query = loadgen.PreparedQuery(QUERY_NAME, spec.path, spec.body)
    if variant == "raw":
        headers, context = _raw_headers(spec)
        host, _, port = spec.endpoint.rpartition(":")
        if context is not None:
            raw = http.client.HTTPSConnection(host, int(port), timeout=60, context=context)
        else:
            raw = http.client.HTTPConnection(host, int(port), timeout=60)
        raw.request("POST", spec.path, spec.body, headers)  # connect (and handshake) now
        raw.getresponse().read()
    else:
        connection = Connection(Target(spec.node, spec.endpoint, spec.secure), spec.credentials)
        connection.request("POST", query.path, query.body)
    pipe.send("ready")
    start, until = pipe.recv()
    delay = start - time.time()
    if delay > 0:
        time.sleep(delay)

    before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    if variant == "raw":
        outcome = _raw_loop(spec, raw, headers, until)
        ended = time.perf_counter()
    else:
        scratch = tempfile.mkdtemp(prefix="esdash-driver-")
        comm = CountingChannel(Path(scratch) / "channel.jsonl")
        recorder: Any = Recorder(1) if variant == "on" else NullRecorder()
        reporter = Reporter(comm, 1, recorder, Schedule(start, spec.interval), RankState())  # type: ignore[arg-type]
        sent = loadgen.measure(connection, [query], until, recorder, reporter.tick)
        ended = time.perf_counter()
        reporter.flush(partial=True)
        if variant == "on":
            outcome = {"requests": sent, "errors": comm.errors, "recorded": comm.recorded}
        else:
            outcome = {"requests": sent, "errors": recorder.errors, "recorded": sent}
        outcome["payloads"] = comm.payloads
        shutil.rmtree(scratch, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcome.update(seconds=ended - began, cpu=cpu)
    pipe.send(outcome)


# -------------------------------------------------------------------------------- runs


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


@dataclass
class Run:
    variant: str
    requests: int
    errors: int
    recorded: int
    throughput: float
    cpu_per_request: float
    machine_busy: float


def run_variant(
    variant: str, spec: Spec, nodes: Sequence[tuple[str, str]], connections: int, seconds: float
) -> Run:
    """Start ``connections`` worker processes side by side, run them for ``seconds``.

    Connection ``k`` goes to node ``k mod len(nodes)``, in every variant alike.
    """
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for k in range(connections):
        name, endpoint = nodes[k % len(nodes)]
        mine, theirs = context.Pipe()
        mine_spec = dataclasses.replace(spec, node=name, endpoint=endpoint)
        process = context.Process(target=worker, args=(variant, mine_spec, theirs), daemon=True)
        process.start()
        pipes.append(mine)
        processes.append(process)
    try:
        for pipe in pipes:
            if not pipe.poll(120) or pipe.recv() != "ready":
                raise RuntimeError(f"a {variant} worker did not get ready")
        start = time.time() + 0.2
        for pipe in pipes:
            pipe.send((start, start + seconds))
        busy0, total0 = _cpu_ticks()
        results = []
        for pipe in pipes:
            if not pipe.poll(seconds + 120):
                raise RuntimeError(f"a {variant} worker did not report")
            results.append(pipe.recv())
        busy1, total1 = _cpu_ticks()
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    requests = sum(r["requests"] for r in results)
    return Run(
        variant=variant,
        requests=requests,
        errors=sum(r["errors"] for r in results),
        recorded=sum(r["recorded"] for r in results),
        throughput=sum(r["requests"] / r["seconds"] for r in results),
        cpu_per_request=sum(r["cpu"] for r in results) / max(requests, 1),
        machine_busy=(busy1 - busy0) / max(total1 - total0, 1),
    )


# ----------------------------------------------------------------------------- cluster


def cluster_up(scratch: Path, nodes: int, security: bool, user: str, env: dict) -> Path:
    """``esdash cluster up`` on a session written into ``scratch``; the run directory."""
    session = scratch / "driver.toml"
    session.write_text(
        f'name = "bench-driver"\n[cluster]\nnodes = {nodes}\nheap = "512m"\n'
        f'interconnect = "loopback"\nrun_as = "{user}"\nsecurity = {str(security).lower()}\n'
        f"http_port = {free_port_block(nodes)}\ntransport_port = {free_port_block(nodes)}\n"
        f'data_dir = "data"\n[track]\nname = "mri"\n'
    )
    output = esdash("cluster", "up", str(session), "--fresh", env=env)
    for line in output.splitlines():
        if line.startswith("run directory:"):
            return Path(line.split(":", 1)[1].strip())
    sys.exit(f"no run directory in the output of esdash cluster up:\n{output}")


def targets_of(run: Path) -> tuple[list[tuple[str, str]], bool, Any]:
    """([(node name, host:port)...], secure, credentials) of a run's cluster."""
    from esdash.cluster import pki
    from esdash.rundir.layout import RunDir

    rundir = RunDir(run)
    nodes = rundir.read_topology().nodes
    secure = rundir.credentials_file.exists()
    credentials = pki.read_credentials(run) if secure else None
    return [(n.name, n.http_address) for n in nodes], secure, credentials


def prepare_index(connection: Any, documents: int, shards: int | None) -> dict[str, Any]:
    """Create the index with the MRI mapping and bulk ``documents`` generated documents."""
    from esdash_plugins.tracks import mri

    options = {} if shards is None else {"shards": shards}
    body = mri.MriTrack().index_body(options)
    connection.request("DELETE", f"/{INDEX}")
    status, reply = connection.request("PUT", f"/{INDEX}", json.dumps(body).encode())
    if status >= 300:
        sys.exit(f"creating index {INDEX}: HTTP {status}: {reply[:300]!r}")
    action = json.dumps({"index": {"_index": INDEX}}).encode()
    batch: list[bytes] = []
    for k, doc in enumerate(mri.generate(documents, 42), 1):
        batch += [action, json.dumps(doc, separators=(",", ":")).encode()]
        if len(batch) == 2000 or k == documents:
            status, reply = connection.request(
                "POST", "/_bulk", b"\n".join(batch) + b"\n", "application/x-ndjson"
            )
            if status >= 300 or b'"errors":false' not in reply[:64]:
                sys.exit(f"bulk failed: HTTP {status}: {reply[:300]!r}")
            batch = []
    connection.request("POST", f"/{INDEX}/_refresh")
    connection.request("POST", f"/{INDEX}/_forcemerge?max_num_segments=1")
    status, reply = connection.request("GET", f"/{INDEX}/_count")
    count = json.loads(reply)["count"]
    if count != documents:
        sys.exit(f"index {INDEX} has {count} documents, not {documents}")
    status, reply = connection.request("GET", "/_nodes?filter_path=nodes.*.version")
    version = ", ".join(sorted({n["version"] for n in json.loads(reply)["nodes"].values()}))
    return {"shards": body["settings"]["number_of_shards"], "version": version}


# ------------------------------------------------------------------------------ report


def _verdict(ok: bool) -> str:
    return "meets the target" if ok else "MISSES the target"


def report(
    runs: Sequence[Run], args: argparse.Namespace, info: dict[str, Any], loads: tuple
) -> None:
    by = {v: [r for r in runs if r.variant == v] for v in VARIANTS}
    thr = {v: statistics.median(r.throughput for r in by[v]) for v in VARIANTS}
    cpu = {v: statistics.median(r.cpu_per_request for r in by[v]) for v in VARIANTS}
    busy = {v: statistics.median(r.machine_busy for r in by[v]) for v in VARIANTS}
    errors = sum(r.errors for r in runs)

    print()
    print(f"esdash load generator vs a raw http.client loop ({args.rounds} rounds, medians)")
    print(
        f"  cluster: {info['nodes']} local node(s), Elasticsearch {info['version']}, security "
        f"{'on (HTTPS)' if info['secure'] else 'off (HTTP)'}; index {INDEX}: "
        f"{args.documents} MRI documents, {info['shards']} shard(s)"
    )
    print(
        f"  query: {QUERY_NAME} (term BodyPart=Head, request_cache=false, "
        f"{info['hits']} hits, {info['response_bytes']} response bytes)"
    )
    print(
        f"  {args.connections} connection(s), one process each; {args.seconds:g} s per run; "
        f"variants alternated over {args.rounds} rounds (balanced order) after a discarded "
        "warm-up round"
    )
    print(
        f"  machine: {os.cpu_count()} cores shared by the nodes and the clients, not "
        f"isolated (noisy); load average before {loads[0]:.2f}, after {loads[1]:.2f}"
    )
    print()
    print(f"  {'variant':<24}{'req/s':>10}{'CPU us/req':>13}{'machine busy':>14}")
    for v in VARIANTS:
        print(f"  {LABELS[v]:<24}{thr[v]:>10,.0f}{cpu[v] * 1e6:>13.1f}{busy[v]:>13.0%}")
    print()

    ratio = thr["on"] / thr["raw"]
    cost_cpu = cpu["on"] / cpu["off"] - 1
    cost_thr = thr["off"] / thr["on"] - 1
    rounds = list(zip(by["raw"], by["on"], by["off"], strict=True))
    paired = {
        "ratio": [on.throughput / raw.throughput for raw, on, _ in rounds],
        "cpu": [on.cpu_per_request / off.cpu_per_request - 1 for _, on, off in rounds],
        "thr": [off.throughput / on.throughput - 1 for _, on, off in rounds],
    }

    def spread(values: list[float], percent: bool) -> str:
        fmt = (lambda x: f"{x:+.1%}") if percent else (lambda x: f"{x:.3f}")
        return "per round " + " ".join(fmt(x) for x in values)

    print(
        f"  throughput esdash (recording on) / raw       {ratio:7.3f}   target >= "
        f"{TARGET_RATIO}: {_verdict(ratio >= TARGET_RATIO)}  "
        f"({spread(paired['ratio'], False)})"
    )
    print(
        f"  recording cost, CPU per request (on/off - 1) {cost_cpu:+7.1%}   target < "
        f"{TARGET_COST:.0%}: {_verdict(cost_cpu < TARGET_COST)}  "
        f"({spread(paired['cpu'], True)})"
    )
    print(
        f"  recording cost, throughput (off/on - 1)      {cost_thr:+7.1%}   target < "
        f"{TARGET_COST:.0%}: {_verdict(cost_thr < TARGET_COST)}  "
        f"({spread(paired['thr'], True)})"
    )
    print(
        f"  client CPU per request esdash/raw            {cpu['on'] / cpu['raw']:7.3f} "
        f"(recording on), {cpu['off'] / cpu['raw']:.3f} (off)"
    )
    lost = [r for r in runs if r.variant == "on" and r.recorded != r.requests]
    print(
        f"  errors in all runs: {errors}; recorder counted every request: "
        f"{'yes' if not lost else 'NO'}"
    )
    print(
        "  Single rounds on a shared machine vary by several percent; trust differences "
        "only when every round agrees."
    )


# -------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="seconds per variant in the warm-up round"
    )
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--shards", type=int, default=None, help="default: the MRI track's")
    parser.add_argument("--interval", type=float, default=1.0, help="recorder drain interval")
    parser.add_argument("--security", action="store_true", help="HTTPS and authentication")
    parser.add_argument("--cluster", type=Path, help="use this running cluster's run directory")
    parser.add_argument("--user", default=os.environ.get("ESDASH_USER", "esdash"))
    args = parser.parse_args()

    from esdash.bench import loadgen
    from esdash.cluster.http import Connection, Target

    scratch = Path(tempfile.mkdtemp(prefix="esdash-driver-", dir="/tmp"))
    scratch.chmod(0o755)
    env = {**os.environ, "ESDASH_RUNS": str(scratch / "runs")}
    run = args.cluster
    try:
        if run is None:
            print(f"starting a {args.nodes}-node cluster ...", flush=True)
            run = cluster_up(scratch, args.nodes, args.security, args.user, env)
        nodes, secure, credentials = targets_of(run)
        name, endpoint = nodes[0]
        admin = Connection(Target(name, endpoint, secure), credentials, timeout=300)
        print(f"indexing {args.documents} documents into {INDEX} ...", flush=True)
        info = prepare_index(admin, args.documents, args.shards)
        query = loadgen.PreparedQuery.of(QUERY_NAME, INDEX, QUERY_BODY)
        status, body = admin.request("POST", query.path, query.body)
        if status != 200:
            sys.exit(f"the query failed: HTTP {status}: {body[:300]!r}")
        hits, size = loadgen.returned_documents(body), len(body)
        info.update(nodes=len(nodes), secure=secure, hits=hits, response_bytes=size)
        admin.close()
        spec = Spec(name, endpoint, secure, credentials, query.path, query.body, args.interval)

        load_before = os.getloadavg()[0]
        print(f"warm-up round ({args.warmup:g} s per variant, discarded) ...", flush=True)
        for variant in VARIANTS:
            run_variant(variant, spec, nodes, args.connections, args.warmup)
        runs: list[Run] = []
        for k in range(args.rounds):
            order = ORDERS[k % len(ORDERS)]
            for variant in order:
                result = run_variant(variant, spec, nodes, args.connections, args.seconds)
                runs.append(result)
                print(
                    f"round {k + 1} {LABELS[variant]:<22} {result.throughput:8,.0f} req/s "
                    f"{result.cpu_per_request * 1e6:7.1f} us CPU/req  machine busy "
                    f"{result.machine_busy:4.0%}  errors {result.errors}",
                    flush=True,
                )
        report(runs, args, info, (load_before, os.getloadavg()[0]))
    finally:
        if args.cluster is None and run is not None:
            esdash("cluster", "down", str(run), env=env)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
