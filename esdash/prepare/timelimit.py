"""What a batch job asks Slurm for as ``--time``, from a run's estimated wall time.

Slurm ends a job at its time limit: a limit too short loses the run (its results are never
written), one too long only waits longer in the queue.  ``esdash submit`` and ``esdash sweep
--submit`` take the session's own ``[slurm] time`` when it sets one; otherwise the estimated
total (:func:`esdash.prepare.walltime.estimate_wall_time`) with the margin of
:func:`time_limit`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from esdash.rundir.records import JsonObject

#: The margin sbatch's ``--time`` gets over the estimated total (see :func:`time_limit`).
MARGIN_SHARE = 0.25
MARGIN_MIN_S = 600.0
MARGIN_TEXT = "+25 %, at least +10 min"


@dataclass(frozen=True)
class TimeLimit:
    """What sbatch's ``--time`` gets for an estimated total: the total plus the margin."""

    seconds: int
    text: str
    margin: str = MARGIN_TEXT


def time_limit(total: float) -> TimeLimit:
    """The total plus 25 %, and at least 10 minutes more, rounded up to whole minutes.

    The estimated phases come from assumed rates or from one earlier run, and can be off by
    tens of percent on other hardware or a busier file system: 25 % covers that on long jobs.
    Short jobs get at least 10 minutes, for what no phase counts: the job's own start (Python
    and the JVMs loaded from a shared file system), the run directory's checks and the stop
    of a cluster that does not answer.
    """
    padded = total + max(MARGIN_SHARE * total, MARGIN_MIN_S)
    seconds = int(math.ceil(padded / 60.0)) * 60
    return TimeLimit(seconds, slurm_time(seconds))


def slurm_time(seconds: float) -> str:
    """``HH:MM:SS``, or ``D-HH:MM:SS`` from a day on: a value sbatch's ``--time`` reads."""
    whole = int(math.ceil(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def slurm_seconds(text: str) -> int | None:
    """Seconds of a Slurm time limit (``30``, ``m:s``, ``h:m:s``, ``d-h``, ``d-h:m``,
    ``d-h:m:s``), or None for anything else (``infinite``, a typo sbatch would refuse)."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if match is None:
        return None
    days, first, second, third = match.groups()
    parts = [int(p) for p in (first, second, third) if p is not None]
    if days is not None:  # d-h, d-h:m, d-h:m:s
        hours, minutes, secs = (parts + [0, 0])[:3]
        return int(days) * 86400 + hours * 3600 + minutes * 60 + secs
    if len(parts) == 1:  # minutes
        return parts[0] * 60
    if len(parts) == 2:  # minutes:seconds
        return parts[0] * 60 + parts[1]
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


@dataclass(frozen=True)
class JobTime:
    """What a batch job asks Slurm for as ``--time``, and why.

    ``own`` is the session's ``slurm.time`` (None: it sets none); ``limit`` the estimate's
    total with its margin.  ``text`` is what the job gets: ``own`` when set, else ``limit``.
    ``short``: the session's own limit is below the total, so Slurm may end the job
    before its results are written when the bounded phases take their bounds.
    """

    own: str | None
    limit: TimeLimit
    total: float

    @property
    def text(self) -> str:
        return self.own if self.own is not None else self.limit.text

    @property
    def short(self) -> bool:
        seconds = slurm_seconds(self.own) if self.own is not None else None
        return seconds is not None and seconds < self.total

    def to_json(self) -> JsonObject:
        return {
            "time": self.text,
            "from": "session" if self.own is not None else "estimate",
            "estimate_with_margin": self.limit.text,
            "margin": self.limit.margin,
            "session_shorter_than_total": self.short,
        }


def job_time(own: str | None, total: float) -> JobTime:
    """``--time`` for a job whose runs take ``total`` seconds: the session's own ``own``
    (:func:`esdash.prepare.slurm_job.session_time`) when it sets one, else the total with the
    margin of :func:`time_limit`."""
    return JobTime(own, time_limit(total), total)
