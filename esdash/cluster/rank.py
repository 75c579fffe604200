"""What every MPI rank of the cluster step does: run one search node and supervise it.

Started as ``python -m esdash.cluster.rank RUN_DIR`` by ``mpiexec`` or ``srun``:

1. find this host's address on the session's interconnect;
2. allgather (rank, host, interface, address, node-local rank);
3. rank 0 plans the topology, checks the data root, creates the run's CA, node certificates
   and credentials, and broadcasts the plan (or the reason there is none);
4. each rank prepares its data directory through the encryption plugin, writes its node's
   configuration and runs the node in the foreground as the unprivileged owner;
5. each rank supervises its node until the node exits, SIGTERM/SIGINT arrives (Ctrl-C,
   ``scancel``, a Slurm time limit) or ``esdash cluster down`` creates the stop file; then it
   stops the node and records why in ``nodes/<rank>/status.json``.
   Rank 0 also writes the cluster's health to ``health.json`` once a second, so viewers
   anywhere (a login node, the root network namespace) can follow it through the file system.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TypedDict

from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.dataroot import cluster_name, data_root, prepare_data_root
from esdash.cluster.monitor import ClusterMonitor
from esdash.cluster.node import NodeProcess
from esdash.cluster.topology import RankReport, plan_topology
from esdash.cluster.users import chown_tree, resolve_owner
from esdash.errors import EsdashError
from esdash.plugin.api import NodeDirs, NodeRequest
from esdash.plugin.manager import get_plugins
from esdash.rundir.files import tail
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Topology
from esdash.session import Session, load_run_session

POLL_SECONDS = 0.5


class Supervisor:
    """Stops the node on SIGTERM/SIGINT or a stop request, and records the outcome."""

    def __init__(self, run: RunDir, rank: int) -> None:
        self.run = run
        self.rank = rank
        self.signalled: str | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signalled = signal.Signals(signum).name

    def stop_reason(self) -> str | None:
        if self.signalled:
            return f"received {self.signalled}"
        if self.run.stop_requested():
            return "stop requested (esdash cluster down)"
        return None


def _report(session: Session, rank: int) -> tuple[RankReport | None, str | None]:
    interconnect = get_plugins().interconnect(session.cluster.interconnect)
    host = socket.gethostname()
    try:
        endpoint = interconnect.resolve(session.cluster.interface)
    except EsdashError as exc:
        return None, f"rank {rank} on {host}: {exc}"
    return RankReport(rank, host, endpoint.interface, endpoint.address), None


class _Plan(TypedDict, total=False):
    """What rank 0 broadcasts: the topology, or the errors that prevent one."""

    topology: Topology
    errors: list[str]


def _plan(
    run: RunDir,
    session: Session,
    gathered: list[tuple[RankReport | None, str | None]],
    fresh: bool,
) -> _Plan:
    """Rank 0: the topology and security for everyone, or the errors that prevent it."""
    errors = [error for _, error in gathered if error]
    if errors:
        return {"errors": errors}
    try:
        topology = plan_topology(
            cluster_name(session),
            [report for report, _ in gathered if report is not None],  # none: errors
            session.cluster.http_port,
            session.cluster.transport_port,
        )
        encryption = get_plugins().encryption(session.encryption.name)
        reuse = prepare_data_root(
            data_root(session), topology.cluster_name, len(gathered), fresh, encryption
        )
        if session.cluster.security:
            cluster_pki = pki.create_cluster_pki(
                run.pki_dir,
                topology.cluster_name,
                [sorted({n.address, n.host}) for n in topology.nodes],
                node_names=[n.name for n in topology.nodes],
            )
            pki.create_credentials(run.path, ca_certs=cluster_pki.ca_cert)
    except (EsdashError, ValueError) as exc:
        return {"errors": [str(exc)]}
    topology = Topology(
        cluster_name=topology.cluster_name,
        nodes=topology.nodes,
        data_root=str(data_root(session)),
    )
    run.write_topology(topology)
    with run.edit_info() as info:
        info.data_root = str(data_root(session))
        info.data_reuse = reuse
    return {"topology": topology}


def run_rank(run_path: Path, fresh: bool) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    comm.Set_errhandler(MPI.ERRORS_RETURN)  # a lost rank must not take the other nodes down
    rank = comm.Get_rank()
    run = RunDir.open(run_path)
    supervisor = Supervisor(run, rank)
    session: Session | None = None
    try:
        session = load_run_session(run)
        report, error = _report(session, rank)
    except EsdashError as exc:
        report, error = None, f"rank {rank}: {exc}"
    gathered = comm.allgather((report, error))
    plan = _plan(run, session, gathered, fresh) if rank == 0 else None  # type: ignore[arg-type]
    plan = comm.bcast(plan, root=0)
    run.node_dir(rank).mkdir(parents=True, exist_ok=True)
    if "errors" in plan:
        with run.edit_node_status(rank) as status:
            status.state = "failed"
            status.message = "; ".join(plan["errors"])
        return 1
    topology: Topology = plan["topology"]
    node = topology.nodes[rank]
    with run.edit_node_status(rank) as status:
        status.state = "starting"
        status.name = node.name
        status.address = node.address
        status.interface = node.interface
        status.http_port = node.http_port
        status.transport_port = node.transport_port
        status.master_eligible = node.master_eligible
        status.slurm_node = os.environ.get("SLURMD_NODENAME")
    try:
        return _run_node(run, session, topology, rank, supervisor)
    except EsdashError as exc:
        with run.edit_node_status(rank) as status:
            status.state = "failed"
            status.message = str(exc)
        return 1


def _run_node(
    run: RunDir, session: Session, topology: Topology, rank: int, supervisor: Supervisor
) -> int:
    plugins = get_plugins()
    backend = plugins.backend(session.cluster.backend.name)
    encryption = plugins.encryption(session.encryption.name)
    owner = resolve_owner(session.cluster.run_as)
    info = run.read_info()
    distribution = backend.inspect(Path(str(info.home)))
    node_dir = run.node_dir(rank)
    dirs = NodeDirs(
        config=run.node_config_dir(rank),
        data=data_root(session) / str(rank),
        logs=run.node_logs_dir(rank),
        tmp=run.node_tmp_dir(rank),
    )
    for path in (dirs.logs, dirs.tmp):
        path.mkdir(parents=True, exist_ok=True)
    node_security = None
    if session.cluster.security:
        node_security = pki.node_security(
            pki.load_cluster_pki(run.pki_dir), rank, pki.read_credentials(run.path)
        )
    with encryption.node_storage(dirs.data, owner, session.encryption.options) as data_path:
        request = NodeRequest(
            distribution=distribution,
            topology=topology,
            node=topology.nodes[rank],
            dirs=NodeDirs(dirs.config, data_path, dirs.logs, dirs.tmp),
            heap=session.cluster.heap_option,
            owner=owner,
            options=session.cluster.backend.options,
            security=node_security,
        )
        backend.write_node_config(request, backend.node_settings(request))
        chown_tree(node_dir, owner)
        process = NodeProcess(backend.node_command(request), owner, run.node_stdout(rank))
        pid = process.start()
        with run.edit_node_status(rank) as status:
            status.state = "running"
            status.pid = pid
            status.started = time.time()
        monitor = None
        if rank == 0:
            # the node next to this rank: reachable whatever the interconnect
            control = control_client(
                run, backend.name, topology.nodes[:1], timeout=5.0, plugins=plugins
            )
            monitor = ClusterMonitor(run, control)
            monitor.start()
        reason = None
        while process.poll() is None:
            reason = supervisor.stop_reason()
            if reason:
                break
            time.sleep(POLL_SECONDS)
        if monitor is not None:
            monitor.done.set()
        code = process.stop()
    # Slurm signals every process of the step at once (scancel, time limit), so the node may
    # have exited on the same SIGTERM a moment before this rank saw it.
    reason = reason or supervisor.stop_reason()
    if reason is None and code in (143, -signal.SIGTERM):
        time.sleep(POLL_SECONDS)
        reason = supervisor.stop_reason() or "terminated by SIGTERM from outside (e.g. Slurm)"
    if reason is not None:
        with run.edit_node_status(rank) as status:
            status.state = "stopped"
            status.exit_code = code
            status.message = reason
        return 0
    log_tail = tail(dirs.logs / f"{topology.cluster_name}.log", 40) or tail(
        run.node_stdout(rank), 40
    )
    explanation = backend.explain_exit(code, log_tail) or "see the node's log"
    with run.edit_node_status(rank) as status:
        status.state = "failed"
        status.exit_code = code
        status.message = f"{topology.nodes[rank].name} exited with code {code}: {explanation}"
        status.log_tail = log_tail
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m esdash.cluster.rank RUN_DIR [--fresh]", file=sys.stderr)
        return 2
    return run_rank(Path(args[0]), "--fresh" in args[1:])


if __name__ == "__main__":
    sys.exit(main())
