"""The global warm-up: rounds over every query until the cluster is warm.

A step's own warm-up (``benchmark.warmup``) is a few seconds of the step's queries; it cannot
make up for JVMs that are still compiling when the first step starts, which made the first
steps of a fresh cluster look up to 2x slower than the same steps later (measured: on this
project's 2-core machine three fresh nodes' JIT compilers took a whole core for a minute
and 3.5 minutes to finish, ``docs/warmup.md``).  So before the first step every worker,
each against its own node (all nodes get load), runs *rounds*: each round gives every query
a slot of ``warmup_round`` seconds in a closed loop, on a shared schedule.  After each round
the workers send rank 0 their successful requests per second of each query, and rank 0
judges the cluster as a whole (:func:`esdash.stats.convergence.judge`): warm when the queries'
pooled throughput over the last 3 rounds no longer rises and, where the nodes' ranks report
it, no node's JIT compiler threads are still busy.

* the warm-up ends after the round in which the cluster is warm, or when the next round
  would pass ``warmup_max`` (the slot shrinks until the judged rounds fit in the bound: the
  warm-up never runs past it); how long it took, the rule, every judged round's figures and
  whether it converged are recorded;
* a query whose every request of a judged round failed cannot warm: it is left out of the
  judgement (rank 0 names it, with the server's message), so a query that always fails does
  not keep the warm-up running to its bound; its step's own warm-up then fails with that
  message.

Rounds run back to back, so rank 0's decision is about the round running when it is made:
the decision names the last round and when the steps start, and reaches the workers while
that round runs; the verdict is said once that round's counts are in.  A closed loop is
used even for paced steps: the point is to warm the cluster, and a closed loop is what shows
when it stops getting faster.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from esdash.bench import loadgen
from esdash.cluster.http import Connection, RequestFailed
from esdash.rundir.records import GlobalWarmup, JsonObject, WarmupQuery
from esdash.stats.convergence import CRITERION, JUDGED_ROUNDS, Verdict, fitted_slot, judge
from esdash.stats.trend import cv

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
    """Rank 0's side: collects round counts and the nodes' JIT readings, judges after every
    round whether the cluster is warm (:mod:`esdash.stats.convergence`), decides the last
    round."""

    schedule: WarmupSchedule
    #: Per round, per rank, the counts :func:`run_round` returned.
    rounds: dict[int, dict[int, JsonObject]] = field(default_factory=dict)
    judged: int = -1
    #: The verdict of every judged round, in order.
    verdicts: list[Verdict] = field(default_factory=list)
    #: Queries whose every request of a judged round failed, with the last error message.
    failing: dict[str, str] = field(default_factory=dict)
    last_round: int | None = None
    #: Per node, ``(time, JIT compiler CPU seconds so far)`` as its rank reported them.
    jit: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, rank: int, round_: int, counts: JsonObject) -> None:
        self.rounds.setdefault(round_, {})[rank] = counts

    def observe_jit(self, readings: dict[str, tuple[float, float]]) -> None:
        """The nodes' latest JIT readings (node -> (time, compiler CPU seconds)); a repeated
        reading is kept once."""
        for node, reading in readings.items():
            seen = self.jit.setdefault(node, [])
            if not seen or seen[-1][0] < reading[0]:
                seen.append(reading)

    @property
    def converged(self) -> bool:
        """Whether the last judged round found the cluster warm."""
        return bool(self.verdicts) and self.verdicts[-1].converged

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

    def rates(self, round_: int) -> dict[str, float]:
        """Per query, the cluster's successful requests per second in ``round_``."""
        slot = self.schedule.slot
        return {q: sum(bins) / slot for q, (bins, _errors) in self._totals(round_).items()}

    def _jit_cores(self, round_: int) -> float | None:
        """The most JIT compiler CPU any node used during ``round_`` (cores), or None when
        no node reported readings that cover most of the round."""
        begin = self.schedule.round_start(round_)
        end = self.schedule.round_start(round_ + 1)
        found = []
        for readings in self.jit.values():
            inside = [r for r in readings if begin - 1.0 <= r[0] <= end + 1.0]
            if len(inside) >= 2 and inside[-1][0] - inside[0][0] >= 0.5 * (end - begin):
                found.append((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]))
        return max(found) if found else None

    def _judge(self, upto: int) -> Verdict:
        """The verdict over the rounds up to ``upto`` (:func:`esdash.stats.convergence.judge`)."""
        first = upto - JUDGED_ROUNDS + 1
        window = [self.rates(r) for r in range(max(0, first), upto + 1)]
        usable = [q for q in self.schedule.queries if q not in self.failing]
        series = {q: [w[q] for w in window] for q in usable}
        return judge(series, self.schedule.round_seconds, self._jit_cores(upto))

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
                self._note_failing(query, next_round)
            self.verdicts.append(self._judge(next_round))
        running = schedule.round_at(now + DECISION_MARGIN)
        everything_fails = bool(self.verdicts) and len(self.failing) == len(schedule.queries)
        if self.converged or everything_fails or running >= schedule.max_rounds - 1:
            self.last_round = running
            return running, schedule.steps_start(running)
        if not expected:
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
        """The warm-up as ``results.json`` records it: the rounds run, each query's round
        throughputs, each judged round's trend and JIT figures, and the final verdict."""
        schedule = self.schedule
        rounds = sorted(self.rounds)
        ran = (self.last_round + 1) if self.last_round is not None else len(rounds)
        shown = [r for r in rounds if r < ran] or rounds
        # the rounds after the deciding one are judged here, so every round ran has a verdict
        # and the last one (what the results say) is among the figures listed
        judged = self.verdicts[: len(shown)]
        judged += [self._judge(r) for r in shown[len(judged) :]]
        verdict = judged[-1] if judged else None
        every = [self._totals(r) for r in shown]
        queries: dict[str, WarmupQuery] = {}
        for query in schedule.queries:
            totals = [round_totals[query] for round_totals in every]
            rates = [sum(bins) / schedule.slot for bins, _ in totals]
            variation = cv(rates[-JUDGED_ROUNDS:]) if len(rates) >= JUDGED_ROUNDS else None
            queries[query] = WarmupQuery(
                rounds=[round(rate, 3) for rate in rates],
                converged=verdict is not None and verdict.converged and query not in self.failing,
                cv=None if variation is None else round(variation, 4),
                errors=sum(errors for _, errors in totals),
            )
        return GlobalWarmup(
            rounds=ran,
            round_seconds=schedule.round_seconds,
            seconds=round(ran * schedule.round_seconds, 3),
            bound_seconds=schedule.bound,
            converged=verdict is not None and verdict.converged,
            queries=queries,
            criterion=CRITERION,
            trend=[None if v.trend is None else round(v.trend, 4) for v in judged],
            jit_cores=[None if v.jit is None else round(v.jit, 3) for v in judged],
            reason=verdict.reason if verdict is not None else "no round ran",
        )
