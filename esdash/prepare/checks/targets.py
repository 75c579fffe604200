"""Checks that what a run is judged against names queries the session runs.

``[references.QUERY]`` and ``--threshold`` targets are read only after the whole benchmark;
a typo found then costs the run (a miss, exit code 3), so it is refused here as bad input
before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterator

from esdash.errors import BadInput
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.options import suggest
from esdash.prepare.checks.track import from_track
from esdash.thresholds import parse_threshold, target_problem


class References(PreflightCheck):
    """Every ``[references.QUERY]`` names a query the session's steps run.

    A reference to a query that never runs would be a miss after the whole benchmark; a
    typo is cheaper to hear about before a node starts.
    """

    name = "references"
    description = "references name queries the session runs"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        named = {reference.query for reference in context.session.references}
        if not named:
            return
        steps = from_track(context, context.session.query_steps)
        if steps is None:
            return  # the session's own validation reports a broken track or query file
        known = {q.name for step in steps for q in step.queries}
        for query in sorted(named - known):
            yield Finding(
                f"references.{query}",
                f"no query called {query!r} in the session's steps{suggest(query, sorted(known))}"
                f"; queries: {', '.join(sorted(known))}",
            )


class Thresholds(PreflightCheck):
    """Every ``--threshold`` parses and its target names something the run records.

    A target that names no query of the session's steps nor an ingest operation would
    fail only after the whole benchmark, as exit code 3; a typo is bad input (exit 2),
    told before anything starts.
    """

    name = "thresholds"
    description = "--threshold specifications parse and name queries the session runs"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if not context.thresholds:
            return
        # None: the ``track`` check's finding; targets cannot be checked
        steps = from_track(context, session.query_steps)
        queries = [q.name for step in steps or () for q in step.queries]
        for text in context.thresholds:
            try:
                threshold = parse_threshold(text)
            except BadInput as exc:
                yield Finding("", f"{session.path}: --threshold: {exc}")
                continue
            problem = target_problem(threshold, queries) if steps is not None else None
            if problem:
                yield Finding("", f"{session.path}: --threshold: {problem}")
