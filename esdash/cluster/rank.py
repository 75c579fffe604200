"""What every MPI rank of the cluster step does: run one search node and supervise it.

Started as ``python -m esdash.cluster.rank RUN_DIR`` by ``mpiexec`` or ``srun``:

1. find this host's address on the session's interconnect; allgather the addresses (each
   rank's index among the ranks on its address is its node-local rank);
2. choose and hold free HTTP and transport ports on that address (or check the session's
   explicit ones: base + node-local rank), then allgather (rank, host, interface, address,
   ports) — :mod:`esdash.cluster.ports`;
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

import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

from esdash.cluster import nodedirs, pki, ports
from esdash.cluster.control import control_client
from esdash.cluster.dataroot import (
    adopt_node_data,
    cluster_name,
    data_root,
    prepare_data_root,
)
from esdash.cluster.jvmload import jvm_cpu
from esdash.cluster.monitor import ClusterMonitor
from esdash.cluster.node import NodeProcess
from esdash.cluster.topology import RankReport, plan_topology
from esdash.cluster.users import node_owner, remove_account
from esdash.errors import EsdashError
from esdash.launch.owner import OwnerWatch
from esdash.launch.rank_entry import rank_main
from esdash.plugin.manager import get_plugins
from esdash.plugin.values import NodeDirs, NodeRequest
from esdash.rundir.layout import RunDir
from esdash.rundir.records import NodePlan, Topology
from esdash.session import Session, load_run_session

POLL_SECONDS = 0.5
#: Seconds between two readings of the node's JVM CPU (:func:`_record_jvm`).
JVM_SAMPLE_SECONDS = 2.0
#: ``run.json`` states of a run whose orchestrator has not recorded its end.
LIVE_STATES = ("prepared", "starting", "running", None)
#: A node's stop reason for a stop file without a recorded reason.
STOP_REQUESTED = "stop requested (esdash cluster down)"


class Supervisor:
    """Stops the node on SIGTERM/SIGINT/SIGHUP or a stop request, and records the outcome.

    The reason names what happened: the signal this rank received, or -- for the stop
    file -- the reason its writer recorded in ``run.json`` (``esdash run received SIGTERM``),
    so a node's status never says "cluster down" when a signal stopped the run.
    """

    def __init__(self, run: RunDir, rank: int) -> None:
        self.run = run
        self.rank = rank
        self.signalled: str | None = None
        self._requested: str | None = None
        #: Why the run's owner is gone (:mod:`esdash.launch.owner`), once it is.
        self.orphaned: str | None = None
        self._owner = OwnerWatch(run)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signalled = self.signalled or signal.Signals(signum).name

    def stop_reason(self) -> str | None:
        if self.signalled:
            return f"received {self.signalled}"
        if self._requested is None and self.run.stop_requested():
            reason = None
            with contextlib.suppress(EsdashError):
                reason = self.run.read_info().reason
            self._requested = f"stop requested: {reason}" if reason else STOP_REQUESTED
        if self._requested is None and self.orphaned is None:
            self.orphaned = self._owner.gone()
        return self._requested or self.orphaned

    def record_orphaned(self) -> None:
        """The run's own state once its node is down, if the run's owner is gone: nobody
        else is left to write it.  Its death stopped the node, or it died while it was
        stopping the run (SIGTERM, then SIGKILL before its clean-up ended), leaving its
        reason half written.  Every rank writes the same line; the last one stays."""
        gone = self.orphaned or self._owner.dead_now()
        if gone is None:
            return
        with contextlib.suppress(EsdashError, OSError), self.run.edit_info() as info:
            info.orphaned = gone
            if info.state in LIVE_STATES and gone not in (info.reason or ""):
                info.state = "failed"
                info.reason = f"{info.reason}; {gone}" if info.reason else gone


def _report(session: Session, rank: int) -> tuple[RankReport | None, str | None]:
    interconnect = get_plugins().interconnect(session.cluster.interconnect)
    host = socket.gethostname()
    try:
        endpoint = interconnect.resolve(session.cluster.interface)
    except EsdashError as exc:
        return None, f"rank {rank} on {host}: {exc}"
    return RankReport(rank, host, endpoint.interface, endpoint.address), None


def _with_ports(
    session: Session, report: RankReport, addresses: list[str | None]
) -> tuple[RankReport | None, str | None, ports.Reservation | None]:
    """The report with this rank's ports, or why there are none; and the held ports.

    Automatic ports are chosen on this rank's own host and held until its node starts, so
    no other rank or session chooses them meanwhile.  Explicit ones (base + node-local rank)
    are checked here, on every host, before any node starts: a port in use is one line
    naming the key, the port and the process holding it.
    """
    where = f"rank {report.rank} on {report.host}"
    offset = ports.local_offset(report.rank, addresses)
    explicit = ports.explicit_ports(session)
    automatic = [key for key in (ports.HTTP_KEY, ports.TRANSPORT_KEY) if key not in explicit]
    try:
        clashes = ports.check_explicit(session, report.address, [offset])
        if clashes:
            return None, f"{where}: {'; '.join(clashes)}", None
        reservation = None
        if automatic:
            # not a port some rank checks as its explicit one (base + node-local rank)
            bases = {base + k for base in explicit.values() for k in range(len(addresses))}
            reservation = ports.reserve(report.address, len(automatic), exclude=bases)
    except OSError as exc:
        return None, f"{where}: cannot choose ports on {report.address}: {exc}", None
    chosen = {key: base + offset for key, base in explicit.items()}
    if reservation is not None:
        chosen.update(zip(automatic, reservation.ports, strict=True))
    found = replace(
        report, http_port=chosen[ports.HTTP_KEY], transport_port=chosen[ports.TRANSPORT_KEY]
    )
    return found, None, reservation


def _record_port_clash(run: RunDir, session: Session, node: NodePlan, offset: int) -> None:
    """After a failed node exit: if another process holds one of its ports, say so.

    The engines explain a bind failure in their own words deep in a stack trace; this names
    the session key, the port and the holder in one line, and records the key, so that the
    start is retried once when esdash chose that port itself (:func:`ports.retry_reason`).
    """
    explicit = ports.explicit_ports(session)
    planned = {ports.HTTP_KEY: node.http_port, ports.TRANSPORT_KEY: node.transport_port}
    offsets = {key: offset for key in explicit}
    with run.edit_node_status(node.rank) as status:
        if status.state != "failed" or status.exit_code is None:
            return  # no node ran, or it was stopped: no bind failure to explain
        key, line = ports.node_clash(node.address, planned, offsets)
        if key:
            status.port_in_use = key
            status.message = f"{node.name} exited with code {status.exit_code}: {line}"


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
        # a start retried with new ports keeps what its first attempt found in the data root
        info.data_reuse = info.data_reuse or reuse
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
    addresses: list[str | None] = comm.allgather(report.address if report else None)
    reservation = None
    if session is not None and report is not None:
        report, error, reservation = _with_ports(session, report, addresses)
    gathered = comm.allgather((report, error))
    plan = _plan(run, session, gathered, fresh) if rank == 0 else None  # type: ignore[arg-type]
    plan = comm.bcast(plan, root=0)
    if reservation is not None:
        reservation.release()  # the node binds them next
    nodedirs.make_node_dir(run, rank)
    if "errors" in plan:
        with run.edit_node_status(rank) as status:
            status.state = "failed"
            status.message = "; ".join(plan["errors"])
        return 1
    assert session is not None  # a rank that could not load it reported an error: no plan
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
        code = _run_node(run, session, topology, rank, supervisor)
    except (EsdashError, OSError) as exc:  # OSError: a file or process the node needs
        with run.edit_node_status(rank) as status:
            status.state = "failed"
            status.message = str(exc)
        return 1
    finally:
        supervisor.record_orphaned()
        _remove_account(run)
    if code:
        _record_port_clash(run, session, node, ports.local_offset(rank, addresses))
    return code


def _run_node(
    run: RunDir, session: Session, topology: Topology, rank: int, supervisor: Supervisor
) -> int:
    plugins = get_plugins()
    backend = plugins.backend(session.cluster.backend.name)
    encryption = plugins.encryption(session.encryption.name)
    info = run.read_info()
    owner = node_owner(info, session.cluster.run_as, session.path)
    distribution = backend.inspect(Path(str(info.home)))
    here = nodedirs.prepare(run, rank, owner)
    dirs = NodeDirs(
        config=here.config, data=data_root(session) / str(rank), logs=here.logs, tmp=here.tmp
    )
    node_security = None
    if session.cluster.security:
        node_security = pki.node_security(
            pki.load_cluster_pki(run.pki_dir), rank, pki.read_credentials(run.path)
        )
    adopted = adopt_node_data(dirs.data.parent, rank, owner)
    if adopted:
        print(f"esdash rank {rank}: {adopted}", file=sys.stderr, flush=True)
    with encryption.node_storage(dirs.data, owner, session.encryption.options) as data_path:
        request = NodeRequest(
            distribution=distribution,
            topology=topology,
            node=topology.nodes[rank],
            dirs=_with_storage(dirs, data_path, encryption.node_scratch(data_path)),
            heap=session.cluster.heap_option,
            owner=owner,
            options=session.cluster.backend.options,
            security=node_security,
        )
        backend.write_node_config(request, backend.node_settings(request))
        nodedirs.hand_over_config(run, rank, owner)
        reason = supervisor.stop_reason()
        if reason:  # stopped while this rank prepared: start no node only to stop it
            with run.edit_node_status(rank) as status:
                status.state = "stopped"
                status.message = f"{reason} (before the node started)"
            return 0
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
        sampled = 0.0
        while process.poll() is None:
            reason = supervisor.stop_reason()
            if reason:
                break
            if time.monotonic() - sampled >= JVM_SAMPLE_SECONDS:
                sampled = time.monotonic()
                _record_jvm(run, rank, process)
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
    log_tail = nodedirs.log_tail(run, rank, owner, f"{topology.cluster_name}.log")
    explanation = backend.explain_exit(code, log_tail) or _killed_by(code) or "see the node's log"
    with run.edit_node_status(rank) as status:
        status.state = "failed"
        status.exit_code = code
        status.message = f"{topology.nodes[rank].name} exited with code {code}: {explanation}"
        status.log_tail = log_tail
    return 1


def _record_jvm(run: RunDir, rank: int, process: NodeProcess) -> None:
    """The node's JVM CPU by kind of thread, into its status (:mod:`esdash.cluster.jvmload`):
    the global warm-up reads whether the node still compiles."""
    guard = process.process.pid if process.process is not None else None
    reading = jvm_cpu(guard) if guard is not None else None
    if reading is None:
        return
    with contextlib.suppress(EsdashError, OSError), run.edit_node_status(rank) as status:
        status.jvm = reading


def _remove_account(run: RunDir) -> None:
    """A per-cluster account goes with the last node of the run on this host.

    Every rank tries once its node (and storage) is gone; while another rank's node here
    still runs as the account, it stays (:func:`esdash.cluster.users.remove_account`).
    """
    with contextlib.suppress(EsdashError):
        account = run.read_info().node_account
        if account is not None:
            done = remove_account(account)
            if done:
                print(f"esdash on {socket.gethostname()}: {done}", file=sys.stderr, flush=True)


def _with_storage(dirs: NodeDirs, data: Path, scratch: Path | None) -> NodeDirs:
    """The node's directories once its storage is ready: the JVM's temporary files, heap
    dumps, crash files and GC logs inside the storage when the mode says so (a gocryptfs
    mount), else in the run directory."""
    if scratch is None:
        return replace(dirs, data=data)
    return replace(dirs, data=data, tmp=scratch, jvm=scratch)


def _killed_by(code: int | None) -> str | None:
    """ "killed by SIGKILL" for an exit code that says a signal ended the node (-9 or 137)."""
    if code is None:
        return None
    number = -code if code < 0 else code - 128 if 128 < code < 160 else None
    if number is None:
        return None
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    return rank_main(
        "python -m esdash.cluster.rank RUN_DIR [--fresh]",
        argv,
        lambda run, flags: run_rank(run, "--fresh" in flags),
    )


if __name__ == "__main__":
    sys.exit(main())
