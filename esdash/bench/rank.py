"""The benchmark step: worker ranks generate load, rank 0 coordinates and records.

Started as ``python -m esdash.bench.rank RUN_DIR`` by ``mpiexec`` or ``srun`` with
``workers + 1`` ranks.  Rank 0 does no load: it prepares the index, merges the workers'
interval payloads into the run stream, releases the query steps once ingest is done, and
writes the results.  Merging must never stall on a slow request of its own, so rank 0 sends
none.

MPI is used only to start: the ranks gather who is where, and rank 0 broadcasts the start
time ``T0`` and the index decision.  After that they exchange nothing over MPI (without
fault-tolerant MPI a dead peer breaks every pending message and collective): each worker
appends to its own file in the run directory and rank 0 to one file all workers read
(:mod:`esdash.bench.channel`).  A rank that dies stops writing; the others go on.

Timeline (wall clock, shared through the broadcast):

1. rank 0 creates the index (or keeps a reused one:
   :func:`esdash.bench.coordinator.decide_start`) and broadcasts ``T0``;
2. ingest: each worker sends its byte-range slice of the corpus to its node in bulk requests,
   then says it is done;
3. when every worker is done or lost, rank 0 settles the index (refresh, flush, force-merge
   or wait: :mod:`esdash.bench.settle`);
4. the global warm-up: rounds over every query until each runs steadily
   (:mod:`esdash.bench.warmup`); rank 0 decides when it ends and when the steps start;
5. the steps run on a fixed schedule from that moment, in the plan's order and rounds:
   each step's warm-up, then measurement;
6. every worker writes its final report; rank 0 writes ``results.json`` and the final record.

This module only starts a rank and hands it its role.  The workers are
:mod:`esdash.bench.worker`, rank 0 is :mod:`esdash.bench.coordinator`; what both keep about
their own life (the shared clock, the phase, an abort) is :mod:`esdash.bench.rank_state`,
and what a worker says to rank 0 is :mod:`esdash.bench.reporting`.  Rank 0's side of 3-5
lives in :class:`esdash.bench.conductor.Conductor`, its watch over the search nodes in
:class:`esdash.bench.nodewatch.NodeWatch`.

Liveness is a heartbeat, independent of requests: a thread of every worker appends one every
half interval, with the requests it has in flight.  A worker whose last heartbeat is older
than :data:`esdash.bench.coordinator.SILENT_INTERVALS` intervals is lost (and back when it
beats again); its data up to its last interval is kept.  A worker whose interval payload is
late is listed as missing in that interval's record; its data still counts when it arrives.
"""

from __future__ import annotations

import sys
from pathlib import Path

from esdash.bench.coordinator import decide_start, run_coordinator
from esdash.bench.split import run_split
from esdash.bench.worker import run_worker, worker_codec
from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.launch.rank_entry import rank_main
from esdash.plugin.security import Credentials
from esdash.rundir.layout import RunDir
from esdash.rundir.records import JsonObject


def run_bench_rank(run_path: Path) -> int:
    """One bench rank: the MPI start exchange in this process, the work in its child.

    See :mod:`esdash.bench.split` for why every rank is two processes.
    """
    run = RunDir.open(run_path)
    plan = run.read_bench_plan()
    nodes = run.read_topology().nodes
    # a benchmark against a running cluster reads that cluster's credentials
    info = run.read_info()
    cluster_run = RunDir(Path(info.cluster_run or run.path))

    def credentials() -> Credentials | None:
        if not cluster_run.credentials_file.exists():
            return None
        return pki.read_credentials(cluster_run.path)

    def exchange(worker_pid: int) -> JsonObject:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        # Errors of the start exchange are raised in Python, not an abort of the whole job.
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        rank, size = comm.Get_rank(), comm.Get_size()
        me = {"rank": rank, "host": MPI.Get_processor_name(), "pid": worker_pid}
        if rank:
            me["target"] = nodes[(rank - 1) % len(nodes)].name
        everyone = comm.gather(me, root=0)
        start = None
        if rank == 0:
            run.ranks_dir.mkdir(parents=True, exist_ok=True)
            start = decide_start(plan, cluster_run, str(info.engine), nodes)
        # The last MPI operation: from here on the ranks talk through files only.
        start = comm.bcast(start, root=0)
        return {"rank": rank, "size": size, "start": start, "everyone": everyone}

    def role(handover: JsonObject) -> int:
        rank, size, start = handover["rank"], handover["size"], handover["start"]
        if rank == 0:
            control = None
            if start["error"] is None:
                control = control_client(cluster_run, str(info.engine), nodes[:1], timeout=300.0)
            try:
                bench_ranks = handover["everyone"][1:]
                return run_coordinator(run, size, plan, control, start, bench_ranks, credentials())
            finally:
                if control is not None:
                    control.close()
        if start["error"]:
            return 1
        codec, codec_error = worker_codec(plan)
        return run_worker(run, rank, size, plan, nodes, credentials(), start, codec, codec_error)

    return run_split(run, exchange, role)


def main(argv: list[str] | None = None) -> int:
    return rank_main(
        "python -m esdash.bench.rank RUN_DIR", argv, lambda run, _flags: run_bench_rank(run)
    )


if __name__ == "__main__":
    sys.exit(main())
