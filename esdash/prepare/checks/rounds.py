"""Checks of how the session runs its query steps: rounds a step order completes, and a
global warm-up long enough to judge.

Both are ``[benchmark]`` settings that are valid alone but wrong for the steps of this
session's track: a balanced order needs a multiple of its design's rounds, a warm-up bound
shorter than its judging rounds can only end "not converged".  The steps counted are those
the distribution would run, when it is installed here.
"""

from __future__ import annotations

from collections.abc import Iterator

from esdash.errors import BadInput
from esdash.plugin.capabilities import missing_capability, runnable_steps
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.order import minimum_repetitions
from esdash.prepare.checks.cluster import installed_distribution
from esdash.prepare.checks.track import from_track
from esdash.stats.convergence import bound_problem


class StepOrder(PreflightCheck):
    """A mirrored or balanced step order has a number of rounds its design completes.

    Mirrored rounds come in pairs (listed, then reversed); a Williams design over k steps
    needs k rounds (2k for odd k), or a multiple: the check names the minimum for this
    session's steps (``order = "auto"`` is mirrored unless the track's schedule is fixed,
    :meth:`esdash.session.Session.rounds`).  The steps counted are those the session's
    distribution can run (when it is installed; all steps otherwise), as the plan orders them.
    """

    name = "step-order"
    description = "a mirrored or balanced step order has a multiple of its minimum rounds"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if session.benchmark.order in ("listed", "random"):
            return  # any number of rounds completes them: no need to read the steps
        try:
            track = context.plugins.track(session.track.name)
            if session.benchmark.order == "auto" and session.fixed_by_track(track):
                return  # listed, as the track's schedule says (a Rally track is not re-read)
            steps = session.query_steps(track)
        except BadInput:
            return  # the session's own validation reports a broken track or query file
        order, repetitions = session.rounds(track, steps)
        if order not in ("balanced", "mirrored"):
            return
        distribution = installed_distribution(context)  # None: every step counts
        count = len(steps) if distribution is None else runnable_steps(steps, distribution)
        if not count:
            return
        needed = minimum_repetitions(count, order)
        if repetitions % needed:
            other = "random" if order == "balanced" else "listed"
            yield Finding(
                "benchmark.repetitions",
                f'order = "{order}" over {count} step(s) needs a multiple of {needed} '
                f"rounds (minimum {needed}), found {repetitions}; set repetitions = "
                f'{needed * max(1, round(repetitions / needed))} or order = "{other}"',
            )


class WarmupBound(PreflightCheck):
    """``benchmark.warmup_max`` is long enough to judge whether the queries run steadily.

    The global warm-up judges each query over a few rounds of at least a second each
    (:mod:`esdash.stats.convergence`); a shorter bound could only ever end "not converged".
    The queries counted are those the warm-up runs: the distinct queries of the steps the
    distribution can answer (all, when it is not installed here).
    """

    name = "warmup-bound"
    description = "a global warm-up bound long enough to judge convergence"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        bound = context.session.benchmark.warmup_max
        if bound <= 0:
            return
        steps = from_track(context, context.session.query_steps)
        if steps is None:
            return  # the session's own validation reports a broken track or query file
        distribution = installed_distribution(context)  # None: every query counts
        queries = {
            q.name
            for step in steps
            for q in step.queries
            if distribution is None
            or missing_capability(tuple(q.requires), distribution, q.body) is None
        }
        problem = bound_problem(len(queries), bound)
        if problem:
            yield Finding("benchmark.warmup_max", problem)
