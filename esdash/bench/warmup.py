"""The global warm-up: rounds over every query until each one runs steadily.

A step's own warm-up (``benchmark.warmup``) is a few seconds of the step's queries; it cannot
make up for JVMs that are still compiling and caches that are still cold when the first step
starts, which is what made the first step of a fresh cluster look 2-4x slower than the last.
So before the first step every worker, each against its own node (all nodes get load), runs
*rounds*: each round gives every query ``warmup_round`` seconds in a closed loop, on a shared
schedule.  After each round the workers send rank 0 their successful requests per second of
each query; rank 0 judges every query over its last 3 rounds:

* converged when the round throughputs (cluster req/s) vary by less than 5 % (coefficient of
  variation) and the per-second counts of those rounds show no significant trend
  (Mann–Kendall two-sided p >= 0.05; the per-second counts give the test 3 x ``round``
  points -- three round totals alone could never reach significance);
* the warm-up ends after the round in which every query has converged, or when the next round
  would pass ``warmup_max``; how long it took and whether it converged are recorded.
* a query whose every request of a judged round failed cannot converge: it is not waited for
  (rank 0 says so, with the server's message), so a query that always fails does not keep the
  warm-up running to its bound; its step's own warm-up then fails with that message.

Rounds run back to back, so rank 0's decision is about the round running when it is made:
the decision names the last round and when the steps start, and reaches the workers while
that round runs.  A closed loop is used even for paced steps: the point is to warm the
cluster, and a closed loop is what shows when it stops getting faster.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from esdash.bench import loadgen
from esdash.cluster.http import Connection, RequestFailed
from esdash.rundir.records import GlobalWarmup, JsonObject, WarmupQuery
from esdash.stats.convergence import ALPHA, CV_LIMIT, JUDGED_ROUNDS, fitted_slot
from esdash.stats.trend import cv, mann_kendall

#: Seconds between the warm-up's decision and the round it ends, at least.
DECISION_MARGIN = 1.0
#: Pause between the last warm-up round and the first step.
GAP = 1.0


@dataclass(frozen=True)
class WarmupSchedule:
    """When rounds run: ``start``, ``queries`` x ``slot`` seconds per round, ``bound`` total."""

    start: float
    queries: tuple[str, ...]
    slot: float
    bound: float

    @property
    def round_seconds(self) -> float:
        return self.slot * len(self.queries)

    @classmethod
    def fitting(
        cls, start: float, queries: tuple[str, ...], slot: float, bound: float
    ) -> WarmupSchedule:
        """A schedule whose slot shrinks (never grows) so that the rounds needed to judge
        convergence fit in ``bound`` (:func:`esdash.stats.convergence.fitted_slot`)."""
        return cls(start, queries, fitted_slot(slot, len(queries), bound), bound)

    @property
    def max_rounds(self) -> int:
        """Whole rounds that fit in the bound: the warm-up never runs past it."""
        if not self.round_seconds:
            return 0
        return int(self.bound / self.round_seconds + 1e-9)

    def round_start(self, round_: int) -> float:
        return self.start + round_ * self.round_seconds

    def round_at(self, moment: float) -> int:
        return max(0, math.floor((moment - self.start) / self.round_seconds))

    def steps_start(self, last_round: int) -> float:
        return self.round_start(last_round + 1) + GAP

    def to_message(self) -> JsonObject:
        return {
            "start": self.start,
            "queries": list(self.queries),
            "slot": self.slot,
            "bound": self.bound,
        }

    @classmethod
    def from_message(cls, message: JsonObject) -> WarmupSchedule:
        return cls(message["start"], tuple(message["queries"]), message["slot"], message["bound"])


# ------------------------------------------------------------------------- workers


def run_round(
    connection: Connection,
    queries: Sequence[loadgen.PreparedQuery],
    schedule: WarmupSchedule,
    round_: int,
    record: Callable[[loadgen.PreparedQuery, float, bytes], None],
    tick: Callable[[], None],
    wait_until: Callable[[float], None],
    decode: Callable[[loadgen.PreparedQuery, bytes], object] | None = None,
) -> JsonObject:
    """One round on this worker: each query for its slot; per query, successes per second.

    Returns ``{query: {"bins": [ok per second], "errors": n, "error": last message}}``.
    Failed requests are counted, not raised: a query that fails is simply not converged.
    """
    counts: JsonObject = {}
    bins = max(1, round(schedule.slot))
    perf = time.perf_counter
    for j, query in enumerate(queries):
        begin = schedule.round_start(round_) + j * schedule.slot
        end = begin + schedule.slot
        wait_until(begin)
        entry: JsonObject = {"bins": [0] * bins, "errors": 0, "error": None}
        counts[query.name] = entry
        while time.time() < end:
            tick()
            started = perf()
            try:
                status, body = connection.request(query.method, query.path, query.body)
                if status < 300 and decode is not None:
                    decode(query, body)
            except (RequestFailed, loadgen.DecodeFailed) as exc:
                entry["errors"] += 1
                entry["error"] = str(exc)[:300]
                time.sleep(loadgen.CONNECTION_BACKOFF)
                continue
            if status >= 300:
                entry["errors"] += 1
                entry["error"] = f"HTTP {status}: {loadgen.server_message(status, body)}"
                continue
            partial = loadgen.partial_reason(body)
            if partial is not None:
                entry["errors"] += 1
                entry["error"] = partial
                continue
            record(query, perf() - started, body)
            slot_second = min(bins - 1, int((time.time() - begin) * bins / schedule.slot))
            entry["bins"][slot_second] += 1
    return counts


# --------------------------------------------------------------------------- rank 0


@dataclass
class WarmupJudge:
    """Rank 0's side: collects round counts, judges convergence, decides the last round."""

    schedule: WarmupSchedule
    #: Per round, per rank, the counts :func:`run_round` returned.
    rounds: dict[int, dict[int, JsonObject]] = field(default_factory=dict)
    judged: int = -1
    converged: dict[str, bool] = field(default_factory=dict)
    #: Queries whose every request of a judged round failed, with the last error message.
    failing: dict[str, str] = field(default_factory=dict)
    last_round: int | None = None

    def add(self, rank: int, round_: int, counts: JsonObject) -> None:
        self.rounds.setdefault(round_, {})[rank] = counts

    def _totals(self, round_: int) -> dict[str, tuple[list[int], int]]:
        """Per query: per-second successes summed over ranks, and errors."""
        size = max(1, round(self.schedule.slot))
        totals: dict[str, tuple[list[int], int]] = {}
        for query in self.schedule.queries:
            bins, errors = [0] * size, 0
            for counts in self.rounds.get(round_, {}).values():
                entry = counts.get(query) or {}
                for second, ok in enumerate(entry.get("bins", [])[:size]):
                    bins[second] += ok
                errors += int(entry.get("errors") or 0)
            totals[query] = (bins, errors)
        return totals

    def _judge_query(self, query: str, upto: int) -> tuple[bool, float | None, float | None]:
        """(converged, cv of round throughputs, Mann–Kendall p) over the last rounds."""
        first = upto - JUDGED_ROUNDS + 1
        if first < 0:
            return False, None, None
        series: list[float] = []
        rates: list[float] = []
        for round_ in range(first, upto + 1):
            bins, _errors = self._totals(round_)[query]
            series.extend(bins)
            rates.append(sum(bins) / self.schedule.slot)
        variation = cv(rates)
        p_value = mann_kendall(series).p
        ok = (
            min(rates) > 0
            and variation is not None
            and variation < CV_LIMIT
            and p_value is not None
            and p_value >= ALPHA
        )
        return ok, variation, p_value

    def poll(self, now: float, expected: set[int]) -> tuple[int, float] | None:
        """Judge rounds that are in; return ``(last_round, steps_start)`` once decided."""
        if self.last_round is not None:
            return None
        schedule = self.schedule
        while True:
            next_round = self.judged + 1
            ends = schedule.round_start(next_round + 1)
            reported = set(self.rounds.get(next_round, {}))
            if now < ends or (not expected <= reported and now < ends + 2 * DECISION_MARGIN):
                break
            self.judged = next_round
            for query in schedule.queries:
                self.converged[query] = self._judge_query(query, next_round)[0]
                self._note_failing(query, next_round)
        running = schedule.round_at(now + DECISION_MARGIN)
        # a query that fails every request can never converge: it is not waited for
        everything = bool(self.converged) and all(
            ok or query in self.failing for query, ok in self.converged.items()
        )
        if everything or running >= schedule.max_rounds - 1 or not expected:
            self.last_round = running
            return running, schedule.steps_start(running)
        return None

    def _note_failing(self, query: str, round_: int) -> None:
        """Remember ``query`` as failing when round ``round_`` had errors and no success;
        forget it when a round has successes again (a node that was back)."""
        bins, errors = self._totals(round_)[query]
        if sum(bins):
            self.failing.pop(query, None)
        elif errors:
            messages = [
                str((counts.get(query) or {}).get("error") or "")
                for counts in self.rounds.get(round_, {}).values()
            ]
            self.failing[query] = next((m for m in messages if m), "no message")

    def result(self) -> GlobalWarmup:
        schedule = self.schedule
        rounds = sorted(self.rounds)
        queries: dict[str, WarmupQuery] = {}
        for query in schedule.queries:
            totals = [self._totals(r)[query] for r in rounds]
            ok, variation, p_value = (
                self._judge_query(query, rounds[-1])
                if rounds
                else (
                    False,
                    None,
                    None,
                )
            )
            queries[query] = WarmupQuery(
                rounds=[round(sum(bins) / schedule.slot, 3) for bins, _ in totals],
                converged=ok,
                cv=None if variation is None else round(variation, 4),
                p_value=None if p_value is None else round(p_value, 4),
                errors=sum(errors for _, errors in totals),
            )
        ran = (self.last_round + 1) if self.last_round is not None else len(rounds)
        return GlobalWarmup(
            rounds=ran,
            round_seconds=schedule.round_seconds,
            seconds=round(ran * schedule.round_seconds, 3),
            bound_seconds=schedule.bound,
            converged=bool(queries) and all(q.converged for q in queries.values()),
            queries=queries,
        )
