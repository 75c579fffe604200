"""``esdash cluster up|status|down``: an on-demand search cluster, from any shell.

The launch, health and stop machinery (the plugin manager, the session model, MPI and
Slurm helpers) is imported inside each action, so ``esdash cluster down`` says what it
does before it loads any of it (issue 17: a first line within a second).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from esdash.cli._command import Subcommands, add_command, add_seconds, add_session
from esdash.cli._defaults import DEFAULT_TIMEOUT, STOP_GRACE
from esdash.cli._foreign import add_flag as add_foreign_flag
from esdash.cli._run_arg import add_run, resolve_run
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.errors import EXIT_ABORT

UP = """
Starts one node per MPI rank (inside a Slurm allocation: on its hosts) and returns once the
cluster is healthy, leaving it running: it prints the run directory, the endpoints and where
the credentials are, and the `cluster down` that stops it. Exit codes: 0 healthy, 1 failure,
2 bad input, 4 the cluster failed to start or become healthy, 5 a plugin is missing or
broken, 130 interrupted by a signal (everything started is stopped).
"""
STATUS = """
Reads the run directory only (it contacts no node): its state, owner, health as rank 0 last
wrote it, every node's rank, host, endpoint, state and message. Exit codes: 0 shown, 2 not a
run directory (or one another user could rewrite, without --allow-foreign).
"""
DOWN = """
Stops every node of the run: a stop request its ranks follow, then SIGTERM and, after the
grace, SIGKILL to the launcher, each process proven to be the run's own first. A run already
over is left alone. Exit codes: 0 every node is down, 1 a node still runs or a process was
not proven to be the run's own, 2 not a run directory.
"""


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser("cluster", help="start, inspect and stop search clusters")
    actions = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up = add_command(actions, "up", run_up, "start a cluster and return once it is healthy", UP)
    add_session(up)
    up.add_argument("--fresh", action="store_true", help="delete reused data of the data root")
    add_seconds(up, "--timeout", DEFAULT_TIMEOUT, "seconds to wait for a healthy cluster")
    up.add_argument(
        "--foreground",
        action="store_true",
        help="stay until the cluster stops (Ctrl-C, SIGTERM or `cluster down`)",
    )
    up.add_argument("--run-dir", help="use this prepared run directory (as `esdash submit` does)")
    add_trust_flag(up)

    status = add_command(
        actions, "status", run_status, "show a run's nodes, health and endpoints", STATUS
    )
    add_run(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    add_foreign_flag(status)

    down = add_command(actions, "down", run_down, "stop every node of a run", DOWN)
    add_run(down)
    add_seconds(down, "--grace", STOP_GRACE, "seconds before the launcher is killed")
    add_foreign_flag(down)


def run_up(args: argparse.Namespace) -> int:
    """Start a cluster; with ``--foreground`` stay until a signal or ``down`` stops it.

    SIGINT, SIGTERM or SIGHUP while the cluster starts stop everything started (exit 130,
    state ``interrupted``); in the foreground afterwards they are the normal end (exit 0,
    state ``stopped``); the reason names the signal either way.
    """
    from esdash.cluster import health as cluster_health
    from esdash.run import start, stop
    from esdash.rundir.layout import RunDir
    from esdash.session import load_session

    session = load_session(args.session, trust_track_code=trusted(args))
    run = RunDir.open(args.run_dir) if args.run_dir else None
    with stop.Interrupts() as interrupts:
        run, launcher, health = start.up(
            session, args.fresh, args.timeout, run, hold=True, owned=args.foreground
        )
        ends = cluster_health.endpoints(run)
        print(
            f"cluster {health.cluster_name} is {health.status} with "
            f"{health.number_of_nodes} node(s)"
        )
        print(f"run directory: {run.path}")
        for endpoint in ends.http:
            print(f"  {ends.scheme}://{endpoint}")
        if ends.credentials:
            print(f"credentials (user, password, CA): {ends.credentials}")
            print(f"try it: {curl_line(run.path, f'{ends.scheme}://{ends.http[0]}')}")
        else:
            print("security is off (cluster.security = false): no TLS, no authentication")
        sys.stdout.flush()
        if args.foreground:
            return stop.stay(run, launcher, interrupts)
        if interrupts.first:  # arrived between "ready" and handing the cluster over
            why = f"esdash received {interrupts.first} as the cluster became ready"
            stop.stop_cluster(run, launcher, reason="interrupted", why=why)
            print(f"esdash: {why}; the cluster is stopped", file=sys.stderr)
            return EXIT_ABORT
    print(f"stop it with: esdash cluster down {run.path}")
    return 0


def curl_line(run_dir: Path, url: str) -> str:
    """A ``curl`` of the cluster's health a user can paste into a shell: the CA and user
    named, the password read from the credentials file when it runs (it is never printed:
    terminals and job logs keep what they show).  Every path is quoted for the shell."""
    from esdash.cluster import pki

    credentials = pki.read_credentials(run_dir)
    read = "import json, sys; print(json.load(open(sys.argv[1]))['password'], end='')"
    password = f"$(python3 -c {shlex.quote(read)} {shlex.quote(str(credentials.path))})"
    ca = shlex.quote(str(credentials.required_ca()))
    parts = ["curl", "--cacert", ca, "-u", f'"{credentials.username}:{password}"']
    return " ".join([*parts, shlex.quote(f"{url}/_cluster/health?pretty")])


def run_status(args: argparse.Namespace) -> int:
    from esdash.cluster import health as cluster_health
    from esdash.rundir import files
    from esdash.rundir.layout import RunDir

    info = cluster_health.status(
        RunDir.open(resolve_run(args.run), foreign_ok=getattr(args, "allow_foreign", False))
    )
    if args.json:
        print(json.dumps(files.to_builtins(info), indent=2))
        return 0
    print(f"run      {info.run}")
    print(f"session  {info.session}   state {info.state}")
    if info.reason:
        print(f"reason   {info.reason}")
    if info.slurm_job:
        print(f"slurm    job {info.slurm_job}  {info.slurm_state or ''}".rstrip())
    if info.owner is not None:
        print(f"owner    pid {info.owner.pid} on {info.owner.host or '?'}: {info.owner.state}")
    if info.processes and info.owner is not None and info.owner.state == "gone":
        running = ", ".join(f"{role} pid {pid}" for role, pid in info.processes.items())
        print(f"orphans  {running} still run without their owner; `esdash cluster down` stops them")
    health = info.health
    live = info.state in ("starting", "running")
    if health and (not live or info.launcher_alive is False):  # issue 17: stale after `down`
        was = f"{health.status}, {health.number_of_nodes} node(s)" if health.ok else "unreachable"
        why = "gone (its launcher ended)" if live else info.state
        print(f"health   none: the cluster is {why}; its last answer was {was}")
    elif health:
        age = time.time() - (health.time or 0)
        if health.ok:
            print(
                f"health   {health.status}, {health.number_of_nodes} node(s), "
                f"{health.active_shards} active shard(s)  ({age:.0f} s ago)"
            )
        else:
            print(f"health   unreachable ({health.error}, {age:.0f} s ago)")
    nodes = info.nodes
    if nodes:
        print(
            f"{'rank':>4}  {'name':<8} {'host':<16} {'http':<22} {'state':<9} {'pid':>7}  message"
        )
        for rank, node in sorted(nodes.items()):
            http = f"{node.address or '-'}:{node.http_port or '-'}"
            print(
                f"{rank:>4}  {node.name or '-':<8} {node.host or '-':<16} "
                f"{http:<22} {node.state or '-':<9} {node.pid or '-'!s:>7}  "
                f"{node.message or ''}"
            )
    elif not health:
        print("nodes    none started yet")
    if info.credentials:
        print(f"credentials {info.credentials}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop a run's cluster; exit 1 while a node still runs or its launcher was refused.

    A run already over is left alone (one line, exit 0); a recorded process whose identity
    is not confirmed is never signalled, and a line on stderr says which and why.
    """
    print(f"esdash: stopping the cluster of {args.run} ...", file=sys.stderr, flush=True)
    from esdash.run import stop
    from esdash.rundir.layout import RunDir

    run = RunDir.open(resolve_run(args.run), foreign_ok=getattr(args, "allow_foreign", False))
    down = stop.take_down(run, grace=args.grace)
    if down.outcome == "already":
        print(f"{run.path}: {'; '.join(down.notes)}")
        return 0
    for note in down.notes:
        print(f"esdash: {note}", file=sys.stderr)
    statuses = run.node_statuses()
    still = [r for r, s in statuses.items() if s.state in ("starting", "running")]
    print(
        f"{run.path}: {down.outcome}; {len(statuses) - len(still)} of {len(statuses)} node(s) down"
    )
    return 0 if not still and down.outcome != "refused" else 1
