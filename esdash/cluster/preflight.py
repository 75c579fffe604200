"""esdash's own pre-flight checks, and the one function every way into a run calls.

The registry (:class:`esdash.plugin.checks.PreflightCheck`, the ``esdash_register_checks``
hook) is part of the plugin contract; this module adds the checks of the core and runs the
whole list: ``esdash session check``, ``esdash sweep --dry-run`` and the dashboard's
validate key at the ``session`` stage, run preparation (``esdash run``, ``cluster up``,
``submit``, sweeps) at the ``launch`` stage.  A new check is added here or by a plugin,
never at one of those call sites.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from esdash.cluster import ports
from esdash.cluster.dataroot import check_data_root, cluster_name, data_root
from esdash.cluster.distribution import resolve_home
from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput, EsdashError
from esdash.launch.mpi import in_allocation
from esdash.paths import cache_dir
from esdash.plugin.api import Owner
from esdash.plugin.capabilities import runnable_steps
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck, Stage, run_checks
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.plugin.options import suggest
from esdash.session import Session
from esdash.stats.order import minimum_repetitions


class EncryptionOptions(PreflightCheck):
    """What the ``[encryption]`` mode refuses beyond its option declarations.

    The mode's :meth:`~esdash.plugin_api.EncryptionMode.check_options` checks exactly one
    password or key source, private files and commands that exist, for the account the
    nodes run as.
    """

    name = "encryption-options"
    description = "the encryption mode accepts its options for the node account"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        try:
            owner = context.owner or resolve_owner(session.cluster.run_as)
            mode = context.plugins.encryption(session.encryption.name)
            mode.check_options(session.encryption.options, owner)
        except BadInput as exc:
            yield Finding("", f"{session.path}: {exc}")


#: A track's error that names a session key (``track.challenge: ...``).
_TRACK_KEY = re.compile(r"^(track\.[A-Za-z_][\w.]*): ")


def track_finding(session: Session, error: BadInput) -> Finding:
    """A track's :class:`BadInput` as one line naming the session file and key.

    A message that starts with its key keeps it; one that names a track file is about
    ``track.path`` when the track reads one, else about the ``[track]`` table.  Only the
    first line is kept (a JSON error's rendered text follows on further lines).
    """
    first = str(error).split("\n", 1)[0].strip()
    match = _TRACK_KEY.match(first)
    if match:
        key, message = match.group(1), first[match.end() :]
    else:
        key, message = ("track.path" if "path" in session.track.options else "track"), first
    return Finding("", f"{session.path}: {key}: {message}")


@contextmanager
def _quiet() -> Iterator[None]:
    """No log records below ERROR while a track loads.

    A track may log what it runs when first loaded (the ``rally`` track does); with no
    logging configured that lands on stderr, which would break ``session check``'s one line
    per problem and the dashboard's screen.  ``esdash plan`` shows it instead, and a run
    still logs it.
    """
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


class TrackLoads(PreflightCheck):
    """The session's track loads with its options: files, challenge, parameters.

    A track is asked what a run asks of it before anything starts (index name and body,
    field schema, query steps), so a missing track directory, invalid JSON, an unknown
    challenge or a parameter no template reads is refused here, by ``session check`` and
    ``submit --dry-run`` alike, with the message the track gives.  The corpus is not read:
    generating or joining one writes files, which a check must not.
    """

    name = "track"
    description = "the track loads with the session's options (files, challenge, parameters)"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        track = context.plugins.track(session.track.name)
        options = session.track.options
        try:
            with _quiet():
                track.index_name(options)
                track.index_body(options)
                track.field_specs(options)
                session.query_steps(track)
        except BadInput as exc:
            yield track_finding(session, exc)


class CorpusPresent(PreflightCheck):
    """The corpus a run ingests is on disk, or every missing file is named with its size.

    Asked of tracks that can say it without writing anything
    (:meth:`~esdash.plugin.api.Track.corpus_check`, which the ``rally`` track implements;
    :meth:`~esdash.plugin.api.Track.corpus` itself may generate or join files, which a check
    must not).  Each problem is one line naming the session key and the fix: missing files
    with their sizes and the total disk they take, files or cache copies that would not fit
    the free space of their filesystem.
    A track that does not load is :class:`TrackLoads`'s finding, not this one's.
    """

    name = "corpus"
    description = "the track's corpus is on disk and its copies fit the free space"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        track = context.plugins.track(session.track.name)
        try:
            with _quiet():
                result = track.corpus_check(session.track.options, cache_dir() / "corpora")
        except BadInput:
            return
        for key, message in result.problems if result is not None else ():
            yield Finding("", f"{session.path}: {key}: {message}")


class Distribution(PreflightCheck):
    """The backend's distribution is there and complete (``cluster.home`` or esdash's cache)."""

    name = "distribution"
    description = "the search engine's distribution is unpacked and complete"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        try:
            home = resolve_home(session)
        except BadInput as exc:
            yield Finding("", str(exc))
            return
        backend = context.plugins.backend(session.cluster.backend.name)
        distribution = backend.inspect(home)
        if distribution.problems:
            yield Finding("", f"{distribution.home}: {'; '.join(distribution.problems)}")


class DataRoot(PreflightCheck):
    """The data root can serve this cluster: same name, size and encryption, or ``--fresh``."""

    name = "data-root"
    description = "the data root holds nothing this cluster cannot reuse"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        mode = context.plugins.encryption(session.encryption.name)
        root = data_root(session)
        try:
            check_data_root(root, cluster_name(session), session.cluster.nodes, context.fresh, mode)
        except BadInput as exc:
            yield Finding("", str(exc))


class StepOrder(PreflightCheck):
    """``benchmark.order = "balanced"`` has a number of rounds its design can balance.

    A Williams design over k steps needs k rounds (2k for odd k), or a multiple: the check
    names the minimum for this session's steps.  The steps counted are those the session's
    distribution can run (when it is installed; all steps otherwise), as the plan orders them.
    """

    name = "step-order"
    description = "a balanced step order has a multiple of its minimum rounds"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        bench = session.benchmark
        if bench.order != "balanced":
            return
        try:
            steps = session.query_steps(context.plugins.track(session.track.name))
        except BadInput:
            return  # the session's own validation reports a broken track or query file
        count = len(steps)
        try:
            backend = context.plugins.backend(session.cluster.backend.name)
            count = runnable_steps(steps, backend.inspect(resolve_home(session)))
        except BadInput:
            pass  # no distribution here yet: every step counts
        needed = minimum_repetitions(count, "balanced")
        if count and bench.repetitions % needed:
            yield Finding(
                "benchmark.repetitions",
                f'order = "balanced" over {count} step(s) needs a multiple of {needed} '
                f"rounds (minimum {needed}), found {bench.repetitions}; set repetitions = "
                f'{needed * max(1, round(bench.repetitions / needed))} or order = "random"',
            )


class References(PreflightCheck):
    """Every ``[references.QUERY]`` names a query the session's steps run.

    A reference to a query that never runs would be a miss after the whole benchmark; a
    typo is cheaper to hear about before a node starts.
    """

    name = "references"
    description = "references name queries the session runs"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if not session.references:
            return
        try:
            steps = session.query_steps(context.plugins.track(session.track.name))
        except BadInput:
            return  # the session's own validation reports a broken track or query file
        known = {q.name for step in steps for q in step.queries}
        for query in sorted({r.query for r in session.references} - known):
            yield Finding(
                f"references.{query}",
                f"no query called {query!r} in the session's steps{suggest(query, sorted(known))}"
                f"; queries: {', '.join(sorted(known))}",
            )


class PortsFree(PreflightCheck):
    """The session's explicit ports are free here, for the nodes that will run on this host.

    Checked before anything starts, because a node that finds its port taken fails only
    after its JVM has booted, deep in a stack trace.  Only explicit ports: automatic ones
    are chosen free by the ranks.  Outside an allocation all nodes run here (``mpiexec``);
    inside one this host runs its first ``nodes_per_host``.  Every rank checks again on its
    own host before any node starts (:mod:`esdash.cluster.rank`), which covers the other
    hosts of an allocation.  An interconnect without an address here is no finding of this
    check: the ranks report it where they run.
    """

    name = "ports-free"
    description = "the session's explicit ports are not in use on this host"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if not ports.explicit_ports(session):
            return
        cluster = session.cluster
        try:
            endpoint = context.plugins.interconnect(cluster.interconnect).resolve(cluster.interface)
        except EsdashError:
            return
        here = min(cluster.nodes, cluster.nodes_per_host) if in_allocation() else cluster.nodes
        for line in ports.check_explicit(session, endpoint.address, range(here)):
            key, _, message = line.partition(": ")
            yield Finding(key, message)


#: esdash's own checks, run before the plugins' (in this order).
CORE_CHECKS: tuple[PreflightCheck, ...] = (
    EncryptionOptions(),
    TrackLoads(),
    CorpusPresent(),
    StepOrder(),
    References(),
    Distribution(),
    DataRoot(),
    PortsFree(),
)


def all_checks(plugins: PluginSet) -> list[PreflightCheck]:
    """The core's checks, then every plugin's."""
    return [*CORE_CHECKS, *plugins.checks()]


def findings(
    session: Session,
    stage: Stage,
    *,
    fresh: bool = False,
    owner: Owner | None = None,
    plugins: PluginSet | None = None,
) -> list[str]:
    """Every problem the checks of ``stage`` find in ``session``, one line each."""
    plugins = plugins or get_plugins()
    context = CheckContext(session=session, plugins=plugins, owner=owner, fresh=fresh)
    return run_checks(all_checks(plugins), context, stage)


def require(
    session: Session,
    stage: Stage,
    *,
    fresh: bool = False,
    owner: Owner | None = None,
    plugins: PluginSet | None = None,
) -> None:
    """Raise :class:`BadInput` listing every finding (one per line), if there is any."""
    lines = findings(session, stage, fresh=fresh, owner=owner, plugins=plugins)
    if lines:
        raise BadInput("\n".join(lines))
