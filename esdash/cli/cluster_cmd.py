"""``esdash cluster up|status|down``: an on-demand search cluster, from any shell.

The launch, health and stop machinery (the plugin manager, the session model, MPI and
Slurm helpers) is imported inside each action, so ``esdash cluster down`` says what it
does before it loads any of it (issue 17: a first line within a second).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from esdash.cli._command import Subcommands, add_command, add_seconds, add_session
from esdash.cli._defaults import DEFAULT_TIMEOUT, STOP_GRACE
from esdash.cli._foreign import add_flag as add_foreign_flag
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.errors import EXIT_ABORT


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser("cluster", help="start, inspect and stop search clusters")
    actions = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up = add_command(actions, "up", run_up, "start a cluster and return once it is healthy")
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

    status = add_command(actions, "status", run_status, "show a run's nodes, health and endpoints")
    status.add_argument("run", metavar="RUN", help="run directory")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    add_foreign_flag(status)

    down = add_command(actions, "down", run_down, "stop every node of a run")
    down.add_argument("run", metavar="RUN", help="run directory")
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


def run_status(args: argparse.Namespace) -> int:
    from esdash.cluster import health as cluster_health
    from esdash.rundir import files
    from esdash.rundir.layout import RunDir

    info = cluster_health.status(
        RunDir.open(args.run, foreign_ok=getattr(args, "allow_foreign", False))
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

    run = RunDir.open(args.run, foreign_ok=getattr(args, "allow_foreign", False))
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
