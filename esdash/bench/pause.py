"""A test-only hold at a phase boundary of bench rank 0 (``ESDASH_TEST_PAUSE``).

The fault tests send a signal when a phase's ``phase`` event appears in the run stream, not
after a sleep.  Some phases last less than a second on a small corpus (writing the results,
settling an index of a thousand documents): a test could not reliably hit them.  With
``ESDASH_TEST_PAUSE="results=5,settle=3"`` (phases: ingest, settle, warmup, steps,
results) rank 0 stays in each named phase for that many seconds right after writing its
event, so the signal lands inside the phase.  Without the variable (every real run) nothing
waits.  Malformed entries are ignored: this is a test
hook, never user input.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

VARIABLE = "ESDASH_TEST_PAUSE"


def pause_seconds(phase: str, value: str | None = None) -> float:
    """Seconds to hold ``phase`` according to ``value`` (default: the environment)."""
    text = os.environ.get(VARIABLE, "") if value is None else value
    for entry in text.split(","):
        name, _, seconds = entry.partition("=")
        if name.strip() == phase:
            try:
                return max(0.0, min(float(seconds), 600.0))
            except ValueError:
                return 0.0
    return 0.0


def hold(phase: str, aborted: Callable[[], bool] | None = None) -> None:
    """Wait in ``phase`` as the test asked; return early once ``aborted()`` is true."""
    seconds = pause_seconds(phase)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if aborted is not None and aborted():
            return
        time.sleep(0.05)
