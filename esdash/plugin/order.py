"""The order steps run in, round after round: listed, mirrored, random, or balanced (Williams).

A step's numbers depend on where it runs: the first step after ingest meets a cluster still
merging segments and JVMs still compiling, and every step warms caches for the next.  Run
in the listed order every time, that bias lands on the same steps in every round and looks
like a property of their queries.

* ``listed``: ``0 .. k-1`` every round (nothing to balance);
* ``mirrored``: ``0 .. k-1``, then ``k-1 .. 0``, and so on (an even number of rounds): each
  step's positions add up to the same sum, so a cluster that still gets faster (or slower)
  at a steady rate over the steps moves every step's median over the rounds alike, whatever
  the listed order.  On this machine the cluster was still ~11 %/min faster after the
  warm-up, one position later x1.022 (``bench/order_bias.py``); two rounds cancel that by
  construction instead of having to detect it.  The default for tracks whose step order is
  not part of their definition (:func:`resolve`);
* ``random``: a fresh shuffle per round, seeded: the bias becomes noise, on average;
* ``balanced``: a **Williams design**, a Latin square in which every step runs in every
  position equally often *and* follows every other step equally often, so both the position
  effect and the carry-over of one step into the next cancel exactly over a complete set of
  rounds.  An even number of steps needs ``k`` rounds for that, an odd number ``2k`` (the
  squares and their mirror images).

Everything is reproducible from the seed: the same seed gives the same orders.

It lives beside the session it interprets (``benchmark.order``, :meth:`Session.rounds
<esdash.plugin.session.Session.rounds>`) and needs no statistics: the session layer, the
pre-flight checks and the plan all read it without loading numpy.
"""

from __future__ import annotations

import random
from typing import Literal

Order = Literal["listed", "mirrored", "random", "balanced"]
ORDERS: tuple[Order, ...] = ("listed", "mirrored", "random", "balanced")
#: What a session may say: an order, or ``auto`` (:func:`resolve`).
CHOICES: tuple[str, ...] = ("auto", *ORDERS)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"an order of {k} steps: there must be at least one")


def williams_design(k: int) -> list[list[int]]:
    """The sequences of a Williams design for ``k`` items (``0 .. k-1``).

    The first sequence is ``0, 1, k-1, 2, k-2, ...``; sequence ``i`` adds ``i`` to every item
    (mod ``k``).  For even ``k`` these ``k`` sequences are balanced for position and for
    ordered neighbours; for odd ``k`` they are followed by their ``k`` reversals (``2k``
    sequences).  ``k = 1`` gives ``[[0], [0]]`` (odd, by the rule).
    """
    _check_k(k)
    first = [0]
    for m in range(1, k):
        first.append((m + 1) // 2 if m % 2 else k - m // 2)
    square = [[(item + shift) % k for item in first] for shift in range(k)]
    if k % 2:
        square += [list(reversed(row)) for row in square]
    return square


def minimum_repetitions(k: int, order: Order) -> int:
    """The fewest rounds ``order`` needs for ``k`` steps: ``k`` or ``2k`` when balanced, 2 when
    mirrored, else 1.

    A balanced order needs a multiple of this (``session check`` names it).
    """
    _check_k(k)
    if order == "balanced":
        return k if k % 2 == 0 else 2 * k
    if order == "mirrored":
        return 2
    if order in ("listed", "random"):
        return 1
    raise ValueError(f"unknown order {order!r}: use one of {', '.join(ORDERS)}")


def step_orders(k: int, order: Order, repetitions: int, seed: int) -> list[list[int]]:
    """The order of the ``k`` steps in each of ``repetitions`` rounds (step indexes).

    ``mirrored`` alternates the listed order and its reverse, the listed one first (the seed
    plays no part).  ``balanced`` repeats the Williams design as often as ``repetitions``
    asks; ``seed`` shuffles which sequence runs in which round (within each complete design)
    and relabels the steps, so the design does not always put step 0 first in round 0.
    Relabelling and reordering sequences keep every balance property.  Raises ``ValueError`` when
    ``repetitions`` is not a positive multiple of :func:`minimum_repetitions`.
    """
    minimum = minimum_repetitions(k, order)
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, not {repetitions}")
    rng = random.Random(seed)
    if order == "listed":
        return [list(range(k)) for _ in range(repetitions)]
    if order == "mirrored":
        if repetitions % 2:
            raise ValueError(
                f"a mirrored order needs an even number of rounds (listed, then reversed), "
                f"not {repetitions}"
            )
        return [
            list(range(k)) if r % 2 == 0 else list(range(k - 1, -1, -1)) for r in range(repetitions)
        ]
    if order == "random":
        rounds = []
        for _ in range(repetitions):
            permutation = list(range(k))
            rng.shuffle(permutation)
            rounds.append(permutation)
        return rounds
    if repetitions % minimum:
        raise ValueError(
            f"a balanced order of {k} steps needs repetitions to be a multiple of {minimum}"
            f" (a Williams design of {minimum} rounds), not {repetitions}"
        )
    labels = list(range(k))
    rng.shuffle(labels)
    design = williams_design(k)
    rounds = []
    for _ in range(repetitions // minimum):
        block = list(design)
        rng.shuffle(block)
        rounds.extend([labels[item] for item in sequence] for sequence in block)
    return rounds


def resolve(order: str, repetitions: int | None, fixed_schedule: bool) -> tuple[Order, int]:
    """The order and the number of rounds a session's ``benchmark.order``/``repetitions`` mean.

    ``auto`` is ``mirrored`` unless the steps' order is part of what is measured
    (``fixed_schedule``: a Rally schedule, or steps that index while they run, so a later
    step searches what an earlier one wrote): then ``listed``, as the track lists them.
    ``repetitions`` left out is the order's own minimum for ``mirrored`` (2) and 1 otherwise
    (a balanced order names its minimum in ``session check``).
    """
    if order == "auto":
        chosen: Order = "listed" if fixed_schedule else "mirrored"
    elif order in ORDERS:
        chosen = order
    else:
        raise ValueError(f"unknown order {order!r}: use one of {', '.join(CHOICES)}")
    if repetitions is None:
        repetitions = 2 if chosen == "mirrored" else 1
    return chosen, repetitions
