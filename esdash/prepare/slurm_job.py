"""What a session's batch job asks Slurm for, as the values launching writes.

:mod:`esdash.launch.slurm` writes the #SBATCH lines and sits below the session (launching
imports nothing of the session file or the plugins that validate it), so the preparing side
turns a session into the :class:`~esdash.launch.slurm.JobRequest` it is handed, and answers
whether the session chose its own ``--time`` (else the estimate decides,
:mod:`esdash.prepare.timelimit`).
"""

from __future__ import annotations

from collections.abc import Mapping

from esdash.launch.slurm import JobRequest
from esdash.plugin.session import Session


def session_time(session: Session) -> str | None:
    """The session's own ``[slurm] time``, or None when its table sets none (then
    ``session.slurm.time`` is the option's default, which nobody chose for this run)."""
    table = session.source.get("slurm")
    value = table.get("time") if isinstance(table, Mapping) else None
    return None if value is None else str(value)


def job_request(session: Session) -> JobRequest:
    """The resources a job for ``session`` asks for: one task per cluster node, on as many
    hosts as ``nodes_per_host`` tasks each need, and the ``[slurm]`` table's values."""
    cluster, slurm = session.cluster, session.slurm
    return JobRequest(
        name=session.name,
        source=session.path,
        hosts=-(-cluster.nodes // cluster.nodes_per_host),
        tasks_per_host=cluster.nodes_per_host,
        time=slurm.time,
        own_time=session_time(session),
        partition=slurm.partition,
        account=slurm.account,
        extra=slurm.extra,
    )
