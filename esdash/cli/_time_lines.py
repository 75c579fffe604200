"""The wall-time estimate and the Slurm time limit of a run, as the lines a command prints.

:mod:`esdash.prepare.walltime` and :mod:`esdash.prepare.timelimit` compute them before
anything is launched; ``esdash plan``, ``esdash submit`` and ``esdash sweep`` print them
here, with the reader's own duration format (:func:`esdash.view.format.duration`).  The
lines live with the commands that print them, not in :mod:`esdash.view`: the read model
stays independent of the preparing side, so the two sit on one floor.
"""

from __future__ import annotations

from esdash.prepare.timelimit import JobTime
from esdash.prepare.walltime import BOUND, ESTIMATE, FIXED, StepTime, WallTime
from esdash.view.format import duration


def wall_time_lines(wall: WallTime, steps: bool = True) -> list[str]:
    """The estimate as lines: the total, then each phase with its time, its kind (fixed,
    estimate, bound) and where it comes from; with ``steps``, each query step below its
    phase.  ``esdash plan`` and ``esdash submit --dry-run`` print these."""
    rows: list[tuple[str, str, str, str]] = []
    for phase in wall.phases:
        rows.append((phase.label, duration(phase.seconds), phase.kind, phase.basis))
        if steps and phase.key == "steps":
            rows += [
                (f"  {step.name}", duration(step.seconds), step.kind, _step_text(step))
                for step in wall.steps
            ]
    plural = {FIXED: FIXED, ESTIMATE: "estimates", BOUND: "bounds"}
    made_of = ", ".join(
        f"{n} {kind if n == 1 else plural[kind]}"
        for kind in (FIXED, ESTIMATE, BOUND)
        if (n := wall.count(kind))
    )
    lines = [
        f"wall time of a run: {duration(wall.total)}, bounds at their bound ({made_of}; "
        f"README: Wall time)"
    ]
    label = max(len(row[0]) for row in rows)
    size = max(len(row[1]) for row in rows)
    kind = max(len(row[2]) for row in rows)
    lines += [f"  {a:<{label}}  {b:>{size}}  {c:<{kind}}  {d}".rstrip() for a, b, c, d in rows]
    return lines


#: How a figure reads in one line: ``~`` estimated, ``<=`` a bound, fixed as it is.
_MARK = {ESTIMATE: "~", BOUND: "<=", FIXED: ""}


def phases_brief(wall: WallTime, cluster: bool = True) -> str:
    """``ingest ~20s, settle <=10m00s, warmup <=5m00s, steps 1m30s``: the phases that take
    time, in one line (``cluster``: with the cluster's start and stop)."""
    own = ("cluster_start", "cluster_stop")
    return ", ".join(
        f"{phase.key.replace('_', ' ')} {_MARK[phase.kind]}{duration(phase.seconds)}"
        for phase in wall.phases
        if phase.seconds > 0 and (cluster or phase.key not in own)
    )


def _step_text(step: StepTime) -> str:
    """``1 s pause + 0 s warm-up + 10 s measured, 3 rounds``; a counted step's limits."""
    if not step.rounds:
        return "refused: runs in no round, takes no time"
    limit = "at most " if step.kind == BOUND else ""
    parts = [f"{step.pause:g} s pause"] if step.pause else []
    parts += [f"{limit}{step.warmup:g} s warm-up", f"{limit}{step.duration:g} s measured"]
    rounds = f", {step.rounds} rounds" if step.rounds > 1 else ""
    return " + ".join(parts) + rounds


def time_line(job: JobTime, who: str = "esdash submit asks") -> str:
    """What a job asks Slurm for as ``--time`` (``who``: ``esdash submit asks``, ``the job
    asked``), and why; a session's own limit below the total says so."""
    if job.own is None:
        return (
            f"{who} Slurm for --time={job.text}: the total {duration(job.total)} "
            f"{job.limit.margin} (no [slurm] time is set)"
        )
    line = f"{who} Slurm for --time={job.text}: set by [slurm] time"
    if job.short:
        line += (
            f", SHORTER than the total {duration(job.total)}: Slurm ends the job before "
            f"its results when the bounded phases take their bounds (without [slurm] time "
            f"it would be {job.limit.text}, the total {job.limit.margin})"
        )
    return line
