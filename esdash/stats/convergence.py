"""When the global warm-up may call a query steady, and what a warm-up bound allows.

The global warm-up (:mod:`esdash.bench.warmup`) runs rounds in which every query gets a slot;
a query is judged over its last :data:`JUDGED_ROUNDS` rounds (the rounds' throughputs vary by
less than :data:`CV_LIMIT`, and their per-second counts show no Mann–Kendall trend at
:data:`ALPHA`).  Per-second counts need slots of at least :data:`MIN_SLOT`, so a bound shorter
than ``JUDGED_ROUNDS`` rounds of that slot can never tell whether anything is steady: the
pre-flight check refuses it (:func:`bound_problem`), and a longer one shrinks the slot until
the judged rounds fit (:func:`fitted_slot`), so the warm-up never runs past its bound.
"""

from __future__ import annotations

#: Rounds a query is judged over.
JUDGED_ROUNDS = 3
#: Largest coefficient of variation of the judged rounds' throughputs of a steady query.
CV_LIMIT = 0.05
#: Significance of the Mann–Kendall trend test over the judged rounds' per-second counts.
ALPHA = 0.05
#: The shortest slot a query gets in a round: per-second counts need a second.
MIN_SLOT = 1.0


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
