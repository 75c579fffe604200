"""When the global warm-up may call the cluster warm, and what a warm-up bound allows.

Measured on this project's 2-core machine (``bench/warmup_curve.py``, figure and table in
``docs/warmup.md``): a fresh cluster gets faster for minutes because its JVMs are still
compiling -- the JIT compiler threads of three nodes used a whole core for the first minute
and let go of it over 3.5 minutes, while the queries' throughput rose 10- to 20-fold and then
stayed flat.  Once flat, the throughput of one query in one 30-second round still varied by
8-15 % (coefficient of variation) from round to round, mostly together for all queries (the
machine's own noise), so the earlier rule -- every query's last three rounds within 5 % --
judged a steady cluster warm in 0 % of the rounds of a 20-minute warm-up (A/A) and ran every
warm-up to its bound.

The rule now judges the cluster as a whole, after every round, from two kinds of evidence:

* **no rising trend**: each query's throughput over the last :data:`JUDGED_ROUNDS` rounds is
  divided by its own mean there, the queries are averaged round by round (the pooled index,
  whose noise is the machine's, not a query's), and the Theil–Sen slope of that index must be
  below :data:`TREND_LIMIT` per minute.  On the plateaus of the two recorded warm-ups this
  held in every round (44 of 44, A/A); while the clusters warmed up it was 39-121 %/minute;
* **the JIT compilers are quiet**, when the nodes report them (every cluster rank reads its
  node's JVM threads from ``/proc``): the busiest node's compiler threads used less than
  :data:`JIT_QUIET` of a core during the last round -- the JVM's own word that it has
  compiled what the load needs.  It held in every plateau round of the recording, and in no
  round before it.

A warm-up against a cluster whose nodes report no JIT readings (one esdash did not start)
judges by the trend alone.  Per-second counts need slots of at least :data:`MIN_SLOT`, so a
bound shorter than ``JUDGED_ROUNDS`` rounds of that slot can never judge anything: the
pre-flight check refuses it (:func:`bound_problem`), and a longer one shrinks the slot until
the judged rounds fit (:func:`fitted_slot`), so the warm-up never runs past its bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from esdash.stats.trend import theil_sen

#: Rounds the trend is judged over.
JUDGED_ROUNDS = 3
#: The largest rise of the pooled throughput index a warm cluster may show, per minute.
TREND_LIMIT = 0.20
#: The most JIT compiler CPU (cores) the busiest node may use in a warm cluster's round.
JIT_QUIET = 0.05
#: The shortest slot a query gets in a round: per-second counts need a second.
MIN_SLOT = 1.0
#: The rule in one line, for results.json and the summary.
CRITERION = (
    f"warm when the pooled throughput of the last {JUDGED_ROUNDS} rounds rises less than "
    f"{TREND_LIMIT * 100:g} %/min (Theil-Sen) and, where the nodes report it, no node's JIT "
    f"compiler threads used {JIT_QUIET:g} core or more in the last round"
)


@dataclass(frozen=True)
class Verdict:
    """One round's judgement: warm or not, the trend (relative, per minute), the busiest
    node's JIT compiler cores, and why, in words."""

    converged: bool
    trend: float | None
    jit: float | None
    reason: str


def pooled_index(series: Mapping[str, Sequence[float]]) -> list[float]:
    """Round by round, the mean over queries of each query's throughput divided by its own
    mean over the rounds: what the queries have in common.  Queries with a round without a
    success are left out (a failing query cannot warm)."""
    usable = [values for values in series.values() if values and min(values) > 0]
    if not usable:
        return []
    length = min(len(values) for values in usable)
    scaled = [
        [v / statistics.fmean(values[-length:]) for v in values[-length:]] for values in usable
    ]
    return [statistics.fmean(column) for column in zip(*scaled, strict=True)]


def judge(
    series: Mapping[str, Sequence[float]], round_seconds: float, jit: float | None
) -> Verdict:
    """The verdict after a round: ``series`` holds each query's cluster throughput in the
    judged rounds (oldest first), ``jit`` the busiest node's JIT cores in the last one."""
    index = pooled_index(series)
    if len(index) < JUDGED_ROUNDS:
        return Verdict(False, None, jit, f"fewer than {JUDGED_ROUNDS} rounds to judge")
    minutes = [k * round_seconds / 60 for k in range(len(index))]
    slope = theil_sen(minutes, index)
    rising = slope is None or slope >= TREND_LIMIT
    compiling = jit is not None and jit >= JIT_QUIET
    trend = f"throughput {'rising' if rising else 'flat'} ({_per_minute(slope)})"
    jit_said = f"JIT {jit:.2f} core" if jit is not None else "no JIT readings"
    reason = f"{trend}, {jit_said}"
    return Verdict(not rising and not compiling, slope, jit, reason)


def _per_minute(slope: float | None) -> str:
    return "-" if slope is None else f"{slope * 100:+.1f} %/min"


def needed_seconds(queries: int) -> float:
    """The shortest bound that can judge ``queries`` queries: the judged rounds, of the
    shortest slots."""
    return JUDGED_ROUNDS * queries * MIN_SLOT


def fitted_slot(slot: float, queries: int, bound: float) -> float:
    """``slot`` shrunk so that :data:`JUDGED_ROUNDS` rounds of ``queries`` fit in ``bound``
    (never below :data:`MIN_SLOT`, never above ``slot``)."""
    if queries <= 0 or bound <= 0:
        return slot
    return max(MIN_SLOT, min(slot, bound / (JUDGED_ROUNDS * queries)))


def bound_problem(queries: int, bound: float) -> str | None:
    """Why a warm-up bound of ``bound`` seconds cannot judge ``queries`` queries (None: it can;
    a bound of 0 means no warm-up)."""
    if bound <= 0 or queries <= 0:
        return None
    needed = needed_seconds(queries)
    if bound + 1e-9 >= needed:
        return None
    return (
        f"a global warm-up of at most {bound:g} s cannot tell whether {queries} queries run "
        f"steadily: that takes {JUDGED_ROUNDS} rounds of at least {MIN_SLOT:g} s per query "
        f"({needed:g} s); set warmup_max to at least {needed:g}s, or to '0s' for no global "
        f"warm-up"
    )
