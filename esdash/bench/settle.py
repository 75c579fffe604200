"""Settling after ingest: the cluster must be quiet before anything is measured.

Right after a bulk ingest the nodes are still merging segments (and may still be moving or
initialising shard copies); a query step measured then runs against a cluster that changes
under it, and the first step in the order pays for it.  Measured on a quiet 3-node cluster:
124 req/s right after a fresh ingest against 328 req/s for the same step without one.

So rank 0, once every worker has finished ingest, refreshes and flushes the index and then,
by ``benchmark.after_ingest``:

* ``force-merge``: merges every shard down to ``max_num_segments`` (Rally's habit for read
  benchmarks) and waits for it, then waits as for ``wait``;
* ``wait``: waits until the nodes report no running merges and no relocating or initialising
  shards (twice in a row, a second apart), up to ``settle_timeout``;
* ``none``: nothing beyond refresh and flush (today's numbers of a fresh cluster).

Everything goes through the backend's :class:`~esdash.plugin.control.ControlClient`, the
code Rally-style operations use too.  Each action and its time is returned (for the results)
and announced through ``say`` (stream events).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from esdash.plugin.control import ControlClient, ControlError
from esdash.rundir.records import JsonObject, SettleAction, SettleResult

#: Consecutive quiet readings (no merges, no shard moves) that end a wait.
QUIET_READINGS = 2
#: Seconds between readings while waiting.
POLL = 1.0


def _merges_running(stats: JsonObject) -> int:
    """Running merges of every shard copy of the index, from ``<index>/_stats/merge``."""
    total = (stats.get("_all") or {}).get("total") or {}
    merges = total.get("merges") or {}
    return int(merges.get("current") or 0)


def wait_until_quiet(control: ControlClient, index: str, deadline: float) -> tuple[bool, str]:
    """Wait for no running merges and no relocating/initialising shards; (quiet, detail)."""
    quiet = 0
    detail = ""
    while True:
        remaining = deadline - time.time()
        if remaining <= 0:
            return False, f"still busy at the timeout: {detail}"
        health = control.health(
            index=index,
            wait_for_no_relocating_shards=True,
            wait_for_no_initializing_shards=True,
            timeout=max(1.0, min(30.0, remaining)),
        )
        merges = _merges_running(control.index_stats(index, ("merge",)))
        moving = (health.relocating_shards or 0) + (health.initializing_shards or 0)
        detail = f"{merges} merge(s) running, {moving} shard(s) moving"
        if merges == 0 and moving == 0 and not health.timed_out:
            quiet += 1
            if quiet >= QUIET_READINGS:
                return True, "no merges running, no shards moving"
        else:
            quiet = 0
        time.sleep(min(POLL, max(0.0, deadline - time.time())))


def settle(
    control: ControlClient,
    index: str,
    after_ingest: str,
    *,
    ingested: bool,
    max_num_segments: int = 1,
    timeout: float = 600.0,
    say: Callable[[str, str], None] = lambda _message, _level: None,
) -> SettleResult:
    """Bring the index to rest before measuring; what was done, in order, with its time.

    ``ingested`` is False for a reused index: it was refreshed and flushed when it was
    written, so only the wait applies.  A failing action is recorded (and said) and the
    rest still runs: a cluster that cannot settle is measured, but flagged.
    """
    began = time.time()
    deadline = began + timeout
    result = SettleResult(after_ingest=after_ingest)

    def step(action: str, run: Callable[[], str]) -> None:
        started = time.time()
        try:
            detail, ok = run(), True
        except ControlError as exc:
            detail, ok = str(exc), False
        seconds = round(time.time() - started, 3)
        result.actions.append(SettleAction(action=action, seconds=seconds, ok=ok, detail=detail))
        say(
            f"{action}: {detail} ({seconds:.1f} s)" if detail else f"{action} ({seconds:.1f} s)",
            "info" if ok else "warning",
        )

    def refresh() -> str:
        control.refresh(index)
        return ""

    def flush() -> str:
        control.flush(index)
        return ""

    def force_merge() -> str:
        control.force_merge(index, max_num_segments=max_num_segments)
        return f"merged to at most {max_num_segments} segment(s) per shard"

    def wait() -> str:
        quiet, detail = wait_until_quiet(control, index, deadline)
        if not quiet:
            result.timed_out = True
            raise ControlError("wait", detail)
        return detail

    if ingested:
        step("refresh", refresh)
        step("flush", flush)
    if after_ingest == "force-merge":
        step("force-merge", force_merge)
    if after_ingest in ("force-merge", "wait"):
        step("wait", wait)
    result.seconds = round(time.time() - began, 3)
    return result
