"""The check that some task of the track's plan runs, and the tasks it asks about.

:func:`track_tasks` is the plan a run follows (the track's, or esdash's model over a query
file replacing its steps); ``esdash plan`` lists the same tasks, so a session this refuses
is one whose plan shows every task refused, each with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator

from esdash.plugin.api import Track
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.planning import PlannedTask, plan_of_steps
from esdash.plugin.values import Distribution
from esdash.prepare.checks.cluster import installed_distribution
from esdash.prepare.checks.track import from_track
from esdash.session import Session


def track_tasks(
    session: Session, track: Track, distribution: Distribution | None
) -> tuple[PlannedTask, ...]:
    """Every task of the session's track checked against ``distribution``: the track's plan,
    or esdash's model over ``benchmark.queries`` when the session replaces the track's query
    steps with a query file (as a run does).  ``esdash plan`` shows these; :class:`TasksRun`
    refuses a session none of whose tasks runs."""
    options = session.track.options
    if session.benchmark.queries is not None:
        return plan_of_steps(track.index_body(options), session.query_steps(track), distribution)
    return track.plan(options, distribution)


def _track_label(session: Session) -> str:
    """The track as a session names it: ``track rally (/path/to/track, challenge x)``."""
    options = session.track.options
    said = [str(options[key]) for key in ("path",) if options.get(key) is not None]
    said += [f"challenge {options['challenge']}"] if options.get("challenge") else []
    return f"track {session.track.name}" + (f" ({', '.join(said)})" if said else "")


class TasksRun(PreflightCheck):
    """Some task of the track's plan runs: the ingest or a query step.

    When the plan refuses every task (operations esdash has no equivalent of, modules the
    distribution lacks, a mapping it cannot hold), a run would start a cluster and measure
    nothing the track asks for; this says so before anything starts, pointing at
    ``esdash plan``, which gives each task's reason.  The distribution is the one the run
    would use, when it is installed (without it, only what needs none is refused).
    """

    name = "plan"
    description = "the track's plan runs its ingest or a query step (not every task refused)"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        distribution = installed_distribution(context)
        tasks = from_track(context, lambda track: track_tasks(context.session, track, distribution))
        if not tasks or any(t.status == "run" and (t.ingest or t.step is not None) for t in tasks):
            return
        session = context.session
        yield Finding(
            "",
            f"{session.path}: track: {_track_label(session)}: every task is refused; "
            f"see `esdash plan {session.path}`",
        )
