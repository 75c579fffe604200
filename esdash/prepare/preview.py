"""What a session will run, task by task, before any cluster starts (``esdash plan``).

The track says what each of its tasks becomes (:meth:`esdash.plugin.api.Track.plan`),
checked against the distribution the session would run; this module adds what only the
session knows: the bench ranks that are esdash's clients and the warm-up, measured time and
rate each query step gets, resolved by the rule a run uses
(:func:`esdash.prepare.plan.step_timing`).  It is the preparing side's answer, computed
before anything is launched; viewers (the CLI, the dashboard's plan screen) only print the
result, with how long a run takes (:mod:`esdash.prepare.walltime`, printed by
:mod:`esdash.cli._time_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.cluster.distribution import resolve_home
from esdash.errors import BadInput
from esdash.plugin.api import ClientCodec, QueryNotSupported, Track
from esdash.plugin.planning import PlannedTask
from esdash.plugin.values import Distribution, QueryStep
from esdash.prepare.plan import encoded_query, step_timing
from esdash.prepare.slurm_job import session_time
from esdash.prepare.timelimit import JobTime, job_time
from esdash.prepare.walltime import WallTime, estimate_wall_time, task_steps
from esdash.session import Session

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet


@dataclass(frozen=True)
class SessionPlan:
    """The tasks of a session's track in order, and what they were planned against."""

    session: Session
    tasks: tuple[PlannedTask, ...]
    distribution: Distribution | None
    #: One line: the distribution planned against, or why there is none.
    distribution_line: str
    #: One line: how esdash runs every step of this session (ranks, cache, order).
    esdash_line: str
    ranks: int
    #: Where the corpus is, or which of its files are missing with their sizes (empty when
    #: the track cannot say so without writing files).
    corpus_lines: tuple[str, ...] = ()
    #: How long a run of the session takes, phase by phase (:mod:`esdash.prepare.walltime`).
    wall_time: WallTime | None = None
    #: What ``esdash submit`` would ask Slurm for as ``--time``.
    job_time: JobTime | None = None


def find_distribution(session: Session, plugins: PluginSet) -> tuple[Distribution | None, str]:
    """The distribution the session would run (``cluster.home`` or esdash's cache), and a
    line saying which; without one the plan checks no modules or field types, and says so."""
    backend = plugins.backend(session.cluster.backend.name)
    try:
        distribution = backend.inspect(resolve_home(session))
    except BadInput as exc:
        first = str(exc).split("\n", 1)[0]
        return None, (
            f"no {backend.name} distribution to plan against ({first}); modules and field "
            f"types are not checked"
        )
    return distribution, (
        f"distribution: {backend.name} {distribution.version} ({distribution.flavor}) at "
        f"{distribution.home}"
    )


def _steps_plan(
    session: Session, track: Track, distribution: Distribution | None
) -> tuple[PlannedTask, ...]:
    """The track's plan, or esdash's model over ``benchmark.queries`` when the session
    replaces the track's query steps with a query file (as a run does): the tasks the
    ``plan`` pre-flight check asks about, so a plan and a refused run agree."""
    from esdash.prepare.checks.tasks import track_tasks

    return track_tasks(session, track, distribution)


def schedule_text(schedule: Mapping[str, object]) -> str:
    """A task's schedule as the track gives it, in one line: properties as ``key=value``
    joined by commas, then each note (a key with a space: test mode's changes) in
    parentheses as ``(key: text)``, so no property runs into a note."""
    properties = ", ".join(f"{k}={v}" for k, v in schedule.items() if " " not in k)
    notes = " ".join(f"({k}: {v})" for k, v in schedule.items() if " " in k)
    return " ".join(part for part in (properties, notes) if part)


def _with_session(task: PlannedTask, session: Session, ranks: int) -> PlannedTask:
    """The task with the session's share: its clients (when the track leaves them to
    esdash) and, for a query step, the timing a run gives it."""
    if task.clients is None:
        task = replace(task, clients=ranks)
    if task.step is None or task.status != "run":
        return task
    warmup, duration, target = step_timing(task.step, session.benchmark)
    timing = _timing_text(task.step, warmup, duration)
    if any(load.name == task.name for load in task.step.indexing):  # indexes during it
        return replace(task, esdash=f"{task.esdash} -> the step: {timing}")
    if task.step.think_time:
        rate = f"closed loop with {task.step.think_time:g} s think time"
    elif target is not None:
        rate = f"paced at {target:g} req/s in total"
    else:
        rate = "closed loop (unthrottled)"
    clients = task.step.clients
    on = f"{clients} client(s) over {ranks} bench rank(s)" if clients else f"{ranks} bench rank(s)"
    return replace(
        task,
        esdash=f"{task.esdash} -> {timing}, {rate}, on {on}",
    )


def _timing_text(step: QueryStep, warmup: float, duration: float) -> str:
    """A step's warm-up and measurement as a run gives them: seconds, or iterations per
    client within time limits."""
    if step.iterations is None:
        return f"{warmup:g} s warm-up + {duration:g} s measured"
    if step.warmup_iterations is None:
        warm = f"{warmup:g} s warm-up + "
    elif step.warmup_iterations:
        warm = f"{step.warmup_iterations} warm-up (at most {warmup:g} s) + "
    else:
        warm = ""
    return f"{warm}{step.iterations} measured (at most {duration:g} s) requests per client"


def _cache_text(tasks: Sequence[PlannedTask]) -> str:
    """How the searches of ``tasks`` use the shard request cache."""
    choices = {
        q.request_cache
        for t in tasks
        if t.step is not None
        for q in t.step.queries
        if q.path is None  # a search; other requests have no request cache
    }
    words = {
        False: "request_cache=false",
        True: "request_cache=true",
        None: "no request_cache parameter (the index default decides)",
    }
    if len(choices) <= 1:
        return f"every search is sent with {words[choices.pop() if choices else False]}"
    listed = ", ".join(words[c] for c in (False, True, None) if c in choices)
    return f"searches use the request cache as their tasks set it ({listed})"


def session_codec(
    session: Session, track: Track, plugins: PluginSet
) -> tuple[ClientCodec | None, str | None]:
    """The client-side encryption mode's codec (None for the others), or None and why it
    could not be built (the key missing, say: then the queries are not checked against it)."""
    from esdash.cluster.dataroot import data_root

    mode = plugins.encryption(session.encryption.name)
    if not mode.client_side:
        return None, None
    try:
        codec = mode.client_codec(
            session.encryption.options,
            track,
            track_options=session.track.options,
            data_root=data_root(session),
        )
    except BadInput as exc:
        first = str(exc).split("\n", 1)[0]
        return None, f"queries not checked against encryption mode {mode.name}: {first}"
    return codec, None


def _under_codec(task: PlannedTask, codec: ClientCodec) -> PlannedTask:
    """The task with the queries ``codec`` cannot express named: refused when none of its
    queries can run on ciphertexts, else noted (as a run marks them "not possible")."""
    if task.step is None or task.status != "run":
        return task
    refused = []
    for query in task.step.queries:
        try:
            encoded_query(query, codec)
        except QueryNotSupported as exc:
            refused.append(
                f"{query.name}: not possible under {codec.label}: {exc.part} ({exc.reason})"
            )
    if not refused:
        return task
    if len(refused) == len(task.step.queries):
        return task.refused("encryption", "; ".join(refused))
    return replace(task, esdash=f"{task.esdash} (without {'; '.join(refused)})")


def corpus_lines(session: Session, track: Track) -> tuple[str, ...]:
    """What the track's ``corpus_check`` says of the corpus a run ingests (see
    :class:`esdash.prepare.checks.track.CorpusPresent`, which refuses the same problems)."""
    from esdash.paths import cache_dir

    try:
        status = track.corpus_check(session.track.options, cache_dir() / "corpora")
    except BadInput as exc:  # a corpus the run would refuse: the plan still lists the tasks
        return (f"REFUSED: {str(exc).splitlines()[0]}",)
    return status.lines if status is not None else ()


def session_plan(
    session: Session, plugins: PluginSet | None = None, runs: Path | None = None
) -> SessionPlan:
    """Every task of the session's track, as the session would run it, and how long a run
    takes (previous runs of the session are looked for in ``runs``, default: the runs
    directory).

    Raises :class:`BadInput` for a track that does not load (the message names the file
    or key), as ``esdash session check`` reports it.
    """
    from esdash.plugin.manager import get_plugins

    plugins = plugins or get_plugins()
    track = plugins.track(session.track.name)
    distribution, distribution_line = find_distribution(session, plugins)
    bench = session.benchmark
    ranks = bench.workers_per_node * session.cluster.nodes
    tasks = _steps_plan(session, track, distribution)
    codec, unchecked = session_codec(session, track, plugins)
    if codec is not None:
        try:
            tasks = tuple(_under_codec(task, codec) for task in tasks)
        finally:
            codec.close()
    tasks = tuple(_with_session(task, session, ranks) for task in tasks)
    order, repetitions = session.rounds(track, task_steps(tasks)[0])
    rounds = f", {repetitions} rounds" if repetitions > 1 else ""
    warmup = f"a global warm-up of at most {bench.warmup_max:g} s, " if bench.warmup_max else ""
    esdash_line = (
        f"esdash: {ranks} bench rank(s) ({bench.workers_per_node} per node x "
        f"{session.cluster.nodes} node(s)) are the clients, one connection each unless a task "
        f"sets its clients; {_cache_text(tasks)}; after the ingest: refresh, flush, "
        f"{bench.after_ingest}, {warmup}then the query steps in {order} order{rounds}"
    )
    if unchecked:
        esdash_line += f"\n  {unchecked}"
    corpus = corpus_lines(session, track)
    wall = estimate_wall_time(session, track, tasks=tasks, distribution=distribution, runs=runs)
    return SessionPlan(
        session,
        tasks,
        distribution,
        distribution_line,
        esdash_line,
        ranks,
        corpus,
        wall,
        job_time(session_time(session), wall.total),
    )
