"""What every bench rank keeps about its own life, worker and rank 0 alike.

The shared clock (:class:`Schedule`: interval numbers counted from the broadcast ``T0``), the
rank's phase and step (:class:`RankState`, attached to every payload a worker sends), and the
two ways a run ends early: a stop signal (:func:`watch_signals`) or the run's owner gone
(:func:`watch_owner`).  Either sets :attr:`RankState.aborted`, which the next wait
(:func:`sleep_until`) or tick raises as :class:`Aborted`.  Both roles need these, so they sit
below :mod:`esdash.bench.worker` and :mod:`esdash.bench.coordinator`.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from esdash.launch.owner import OwnerWatch
from esdash.rundir.layout import RunDir

#: How often a rank looks whether the run's owner is still there (it reads a small file).
OWNER_LOOK_SECONDS = 1.0
#: Phases in which everything is measured: an owner dying now aborts nothing (rank 0 writes
#: the whole results, as after a stop signal in that phase).
MEASURED = ("results", "done")

#: What a worker calls between requests (reports intervals, notices an abort).
Tick = Callable[[], None]


@dataclass
class Schedule:
    """The shared clock: interval numbers and boundaries in wall-clock seconds."""

    t0: float
    interval: float

    def seq(self, now: float) -> int:
        return int((now - self.t0) // self.interval)

    def boundary(self, seq: int) -> float:
        return self.t0 + (seq + 1) * self.interval


@dataclass
class RankState:
    """What this worker is doing, attached to every payload it sends."""

    phase: str = "starting"
    step: int | None = None
    aborted: str = ""


class Aborted(Exception):
    """SIGTERM or SIGINT arrived (Ctrl-C, scancel, a Slurm time limit): wrap up now."""


def watch_signals(state: RankState) -> None:
    def on_signal(signum: int, _frame: object) -> None:
        state.aborted = f"received {signal.Signals(signum).name}"

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def watch_owner(run: RunDir, state: RankState) -> OwnerWatch:
    """Abort like SIGTERM once the run's owner (``esdash run``) is gone for its grace.

    Nobody is left to signal the ranks when their owner was killed outright: each rank
    watches it itself (:mod:`esdash.launch.owner`), from a daemon thread, and wraps up the
    way a forwarded SIGTERM would have it -- rank 0 still writes what was measured.
    """
    watch = OwnerWatch(run)

    def look() -> None:
        while not state.aborted and state.phase not in MEASURED:
            gone = watch.gone()
            if gone and state.phase not in MEASURED:
                state.aborted = gone
                return
            time.sleep(OWNER_LOOK_SECONDS)

    threading.Thread(target=look, name="owner-watch", daemon=True).start()
    return watch


def sleep_until(moment: float, state: RankState, tick: Tick | None = None) -> None:
    while not state.aborted:
        left = moment - time.time()
        if left <= 0:
            return
        if tick is not None:
            tick()
        time.sleep(min(left, 0.1))
    raise Aborted(state.aborted)
