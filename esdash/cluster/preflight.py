"""esdash's own pre-flight checks, and the one function every way into a run calls.

The registry (:class:`esdash.plugin.checks.PreflightCheck`, the ``esdash_register_checks``
hook) is part of the plugin contract; this module adds the checks of the core and runs the
whole list: ``esdash session check``, ``esdash sweep --dry-run`` and the dashboard's
validate key at the ``session`` stage, run preparation (``esdash run``, ``cluster up``,
``submit``, sweeps) at the ``launch`` stage.  A new check is added here or by a plugin,
never at one of those call sites.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from esdash.cluster import ports
from esdash.cluster.dataroot import MARKER, check_data_root, cluster_name, data_root, read_marker
from esdash.cluster.distribution import resolve_home
from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput, EsdashError
from esdash.launch.mpi import in_allocation
from esdash.paths import cache_dir
from esdash.plugin import corpus as ndjson
from esdash.plugin.api import Corpus, Owner, Track
from esdash.plugin.api import Distribution as EngineDistribution
from esdash.plugin.capabilities import missing_capability, runnable_steps
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck, Stage, run_checks
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.plugin.options import suggest
from esdash.plugin.planning import PlannedTask, plan_of_steps
from esdash.session import Session
from esdash.stats.convergence import bound_problem
from esdash.stats.order import minimum_repetitions
from esdash.thresholds import parse_threshold, target_problem


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
    the free space of their filesystem.  The files a run reads as they are
    (:attr:`~esdash.plugin.planning.CorpusStatus.files`) are then read whole
    (:func:`check_whole_corpus`, once per file identity), so a bad line after the first
    thousand is refused here and not by the ingest after the cluster started.
    A track that does not load is :class:`TrackLoads`'s finding, not this one's.
    """

    name = "corpus"
    description = "the track's corpus is on disk, every line a document, copies fit the disk"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        track = context.plugins.track(session.track.name)
        try:
            with _quiet():
                result = track.corpus_check(session.track.options, cache_dir() / "corpora")
        except BadInput:
            return
        if result is None:
            return
        for key, message in result.problems:
            yield Finding("", f"{session.path}: {key}: {message}")
        if result.problems:
            return
        for path, paired in result.files:
            try:
                check_whole_corpus(Corpus(path, includes_action_and_meta_data=paired))
            except BadInput as exc:
                yield Finding("", f"{session.path}: {corpus_key(session)}: {exc}")
                return


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
        try:
            distribution = backend.inspect(home)
        except BadInput as exc:
            if session.cluster.home is None:  # an explicit one is :class:`Home`'s finding
                yield Finding("", f"{home}: {_first_line(exc)}")
            return
        if distribution.problems:
            yield Finding("", f"{distribution.home}: {'; '.join(distribution.problems)}")


class Home(PreflightCheck):
    """An explicit ``cluster.home`` is a distribution of the session's backend.

    At the session stage, unlike :class:`Distribution`: a path the session names is as
    much the session's as a key file, and a typo in it should not wait for ``esdash run``.
    A session without ``cluster.home`` uses the cache, which ``esdash fetch`` may still
    fill before the run; that is :class:`Distribution`'s, at launch.
    """

    name = "home"
    description = "an explicit cluster.home is an unpacked distribution of the backend"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        home = session.cluster.home
        if home is None:
            return
        if not home.exists():
            yield Finding(
                "",
                f"{session.path}: cluster.home: {home} does not exist; point it at an unpacked "
                f"distribution, or remove it to use the newest one in esdash's cache "
                f"(`esdash fetch {session.cluster.backend.name}`)",
            )
            return
        backend = context.plugins.backend(session.cluster.backend.name)
        try:
            backend.inspect(home)
        except BadInput as exc:
            yield Finding("", f"{session.path}: cluster.home: {_first_line(exc)}")


def _first_line(error: Exception) -> str:
    return str(error).split("\n", 1)[0].strip()


class DataRootMarker(PreflightCheck):
    """The data root's marker, when there is one, can be read.

    A damaged marker says nothing about whose data the root holds; a run refuses it (or,
    with ``--fresh``, deletes that data), so ``session check`` names the file and the fix.
    """

    name = "data-root-marker"
    description = "the data root's marker (esdash-data.json) is readable"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        root = context.data_root or data_root(context.session)
        if context.fresh or not (root / MARKER).exists():
            return
        try:
            read_marker(root)
        except BadInput as exc:
            yield Finding("", f"{context.session.path}: cluster.data_dir: {exc}")


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
            if not (root / MARKER).exists() or _marker_readable(root):
                yield Finding("", str(exc))
            # else: DataRootMarker's finding (session stage, run at launch too)


def _marker_readable(root: Path) -> bool:
    try:
        read_marker(root)
    except BadInput:
        return False
    return True


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
        count = len(steps)
        try:
            backend = context.plugins.backend(session.cluster.backend.name)
            count = runnable_steps(steps, backend.inspect(resolve_home(session)))
        except BadInput:
            pass  # no distribution here yet: every step counts
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
        session = context.session
        bound = session.benchmark.warmup_max
        if bound <= 0:
            return
        try:
            steps = session.query_steps(context.plugins.track(session.track.name))
        except BadInput:
            return  # the session's own validation reports a broken track or query file
        try:
            backend = context.plugins.backend(session.cluster.backend.name)
            distribution = backend.inspect(resolve_home(session))
            queries = {
                q.name
                for step in steps
                for q in step.queries
                if missing_capability(tuple(q.requires), distribution, q.body) is None
            }
        except BadInput:
            queries = {q.name for step in steps for q in step.queries}  # no distribution here
        problem = bound_problem(len(queries), bound)
        if problem:
            yield Finding("benchmark.warmup_max", problem)


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


#: The interconnect whose traffic never leaves the host.
LOOPBACK = "loopback"


def on_loopback(session: Session) -> bool:
    """Whether the nodes talk over this host's loopback interface only: the ``loopback``
    interconnect on its own interface (an explicit ``cluster.interface`` other than ``lo``
    binds an address other hosts can reach)."""
    cluster = session.cluster
    return cluster.interconnect == LOOPBACK and cluster.interface in (None, "lo")


class SecurityOff(PreflightCheck):
    """``security = false`` only where nobody else can listen: on loopback, or when the
    session says the network is trusted (``cluster.insecure_ok = true``).

    Without security the nodes speak plain HTTP without authentication, on HTTP and
    transport: on a real interconnect every host that reaches the addresses can read and
    change the indexed documents, and every host on the path can read the traffic.
    """

    name = "security-off"
    description = "security = false only on loopback, or with insecure_ok = true"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        cluster = session.cluster
        if cluster.security or cluster.insecure_ok or on_loopback(session):
            return
        where = f"interconnect {cluster.interconnect!r}"
        if cluster.interface is not None:
            where += f" (interface {cluster.interface!r})"
        yield Finding(
            "",
            f"{session.path}: cluster.security: false on {where} sends documents and queries "
            f"unencrypted and lets every host that reaches the nodes read and change them; "
            f"set security = true, or insecure_ok = true in [cluster] if that network is "
            f"trusted",
        )


#: Programs that print their own arguments: a secret ``*_command`` would print is then
#: written in the session file itself.
_PRINTERS = ("echo", "printf")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def _printing_program(command: str, depth: int = 0) -> str | None:
    """``echo`` or ``printf`` when ``command`` runs one of them first (also behind ``env`` or
    ``sh -c``), else None.  Words are split as the encryption modes split them (no shell)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # the mode's own check names an unsplittable command
    while words and Path(words[0]).name == "env":
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]):
            words = words[1:]
    if not words:
        return None
    program = Path(words[0]).name
    if program in _PRINTERS:
        return program
    if program in _SHELLS and "-c" in words[1:-1] and depth == 0:
        script = words[words.index("-c") + 1]
        return _printing_program(re.split(r"[;&|\n]", script, maxsplit=1)[0], depth + 1)
    return None


def secret_warnings(session: Session) -> list[str]:
    """What ``esdash session check`` warns about without refusing the session.

    A ``password_command`` or ``passphrase_command`` (any ``*_command`` of the encryption
    mode) that is ``echo ...`` or ``printf ...`` holds the secret in the session file,
    which esdash copies into every run directory and report: legal, but almost certainly
    not meant.
    """
    lines = []
    for key, value in sorted(session.encryption.options.items()):
        if not key.endswith("_command") or not isinstance(value, str):
            continue
        program = _printing_program(value)
        if program is None:
            continue
        file_key = f"{key.removesuffix('_command')}_file"
        named = f" (encryption.{file_key})" if file_key in session.encryption.options else ""
        lines.append(
            f"{session.path}: encryption.{key}: {program!r} prints the secret from the session "
            f"file itself, and esdash copies that file into every run directory and report; "
            f"keep the secret in a file only you can read{named} or in a command that "
            f"fetches it (a secret store)"
        )
    return lines


class PortsValid(PreflightCheck):
    """Explicit ports whose ranges fit below 65535 and do not overlap (HTTP vs transport).

    Static, at the session stage: node-local rank *k* uses base + *k*
    (:func:`esdash.cluster.ports.static_problems`), so ``http_port == transport_port`` or
    ranges closer than the nodes on one address would fail the engines' bind after the
    cluster step started.
    """

    name = "ports"
    description = "explicit ports stay below 65535 and HTTP and transport do not overlap"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        for line in ports.static_problems(session):
            yield Finding("", f"{session.path}: {line}")


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


#: Most primary shards one index may have (Elasticsearch's and OpenSearch's
#: ``index.number_of_shards`` limit, ``es.index.max_number_of_shards``).
MAX_INDEX_SHARDS = 1024
#: Open shards per data node a cluster accepts (``cluster.max_shards_per_node``, default).
MAX_SHARDS_PER_NODE = 1000


def _flat_settings(settings: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """``{"index": {"number_of_shards": 3}}`` and its spellings as flat ``index.*`` names."""
    flat: dict[str, object] = {}
    for key, value in settings.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(_flat_settings(value, name))
        else:
            flat[name if name.startswith("index.") else f"index.{name}"] = value
    return flat


def _count(value: object, default: int) -> int | None:
    """A shard or replica count as the engines read it (text too); None: not a count."""
    if value is None:
        return default
    try:
        return int(str(value))
    except ValueError:
        return None


class IndexShards(PreflightCheck):
    """The track's index has at most 1,024 primary shards, and its copies fit the nodes.

    An engine refuses to create an index beyond either limit, which a run learns only when
    it creates the index, after the cluster started.  The session key is the track option
    that sets the count (``track.shards``), else the ``[track]`` table.
    """

    name = "index-shards"
    description = "the index's shards stay within the engines' limits for this cluster"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        try:
            with _quiet():
                body = context.plugins.track(session.track.name).index_body(session.track.options)
        except BadInput:
            return  # the ``track`` check's finding
        settings = body.get("settings") if isinstance(body, Mapping) else None
        flat = _flat_settings(settings) if isinstance(settings, Mapping) else {}
        shards = _count(flat.get("index.number_of_shards"), 1)
        replicas = _count(flat.get("index.number_of_replicas"), 1)
        options = session.track.options
        key = "track.shards" if "shards" in options else "track"
        if shards is not None and shards > MAX_INDEX_SHARDS:
            yield Finding(
                "",
                f"{session.path}: {key}: the index asks for {shards:,} primary shards; the "
                f"engines allow at most {MAX_INDEX_SHARDS:,} per index; set fewer shards",
            )
            return
        if shards is None or replicas is None:
            return
        total, nodes = shards * (1 + replicas), session.cluster.nodes
        if total > MAX_SHARDS_PER_NODE * nodes:
            yield Finding(
                "",
                f"{session.path}: {key}: {shards:,} shards x {1 + replicas} copies = {total:,} "
                f"shards exceed what {nodes} node(s) hold (cluster.max_shards_per_node = "
                f"{MAX_SHARDS_PER_NODE:,} each); set fewer shards or replicas, or more "
                f"cluster.nodes",
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
        try:
            with _quiet():
                steps = session.query_steps(context.plugins.track(session.track.name))
        except BadInput:
            steps = None  # the ``track`` check's finding; targets cannot be checked
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


def track_tasks(
    session: Session, track: Track, distribution: EngineDistribution | None
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
        session = context.session
        track = context.plugins.track(session.track.name)
        try:
            backend = context.plugins.backend(session.cluster.backend.name)
            distribution: EngineDistribution | None = backend.inspect(resolve_home(session))
        except BadInput:
            distribution = None  # not installed yet: ``distribution``'s finding at launch
        try:
            with _quiet():
                tasks = track_tasks(session, track, distribution)
        except BadInput:
            return  # the ``track`` check's finding
        if not tasks or any(t.status == "run" and (t.ingest or t.step is not None) for t in tasks):
            return
        yield Finding(
            "",
            f"{session.path}: track: {_track_label(session)}: every task is refused; "
            f"see `esdash plan {session.path}`",
        )


#: esdash's own checks, run before the plugins' (in this order).
CORE_CHECKS: tuple[PreflightCheck, ...] = (
    EncryptionOptions(),
    TrackLoads(),
    CorpusPresent(),
    TasksRun(),
    StepOrder(),
    WarmupBound(),
    References(),
    Thresholds(),
    IndexShards(),
    SecurityOff(),
    PortsValid(),
    Home(),
    DataRootMarker(),
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
    thresholds: tuple[str, ...] = (),
) -> list[str]:
    """Every problem the checks of ``stage`` find in ``session``, one line each, once.

    ``thresholds`` are the ``--threshold`` specifications of the run (or of ``session
    check``); a line two checks both find (the same file seen twice) is listed once.
    """
    plugins = plugins or get_plugins()
    context = CheckContext(
        session=session,
        plugins=plugins,
        owner=owner,
        fresh=fresh,
        data_root=data_root(session),
        thresholds=tuple(thresholds),
    )
    return list(dict.fromkeys(run_checks(all_checks(plugins), context, stage)))


def require(
    session: Session,
    stage: Stage,
    *,
    fresh: bool = False,
    owner: Owner | None = None,
    plugins: PluginSet | None = None,
    thresholds: tuple[str, ...] = (),
) -> None:
    """Raise :class:`BadInput` listing every finding (one per line), if there is any."""
    lines = findings(
        session, stage, fresh=fresh, owner=owner, plugins=plugins, thresholds=thresholds
    )
    if lines:
        raise BadInput("\n".join(lines))


# ------------------------------------------------------------------- the whole corpus

#: Where checked corpora are remembered, under esdash's cache directory.
CORPUS_CHECKS = "corpus-checks"
#: Bytes between two progress updates on a terminal.
_PROGRESS_BYTES = 64 * 1024 * 1024


#: What identifies a checked corpus file (see :func:`check_whole_corpus`).
JsonIdentity = dict[str, "str | int | bool"]


def corpus_key(session: Session) -> str:
    """The session key a corpus problem is about: the option naming the corpus, if any."""
    options = session.track.options
    for key in ("documents_file", "corpus_dir", "path"):
        if options.get(key) is not None:
            return f"track.{key}"
    return "track"


def _identity(path: Path, paired: bool) -> tuple[str, JsonIdentity]:
    """The cache key of a corpus file: what changes whenever its content may have changed."""
    info = path.stat()
    identity: JsonIdentity = {
        "path": str(path.resolve()),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "inode": info.st_ino,
        "device": info.st_dev,
        "paired": paired,
        "max_line_bytes": ndjson.MAX_LINE_BYTES,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return digest[:32], identity


def _remembered(record: Path, identity: JsonIdentity) -> bool:
    try:
        return bool(json.loads(record.read_text())["identity"] == identity)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _remember(record: Path, identity: JsonIdentity, documents: int) -> None:
    """Record a corpus that passed (atomically; a cache that cannot be written is skipped)."""
    # 0600, in a 0700 directory when it creates one: the record names a user's corpus
    with suppress(OSError):
        ndjson.write_atomically(
            record, [json.dumps({"identity": identity, "documents": documents}) + "\n"]
        )


def check_whole_corpus(corpus: Corpus) -> None:
    """Every line of the corpus file is a document (or its action line), or :class:`BadInput`.

    :func:`esdash.plugin.corpus.check_corpus` samples the first 1,000 lines and the last
    one; a bad line further in would stop the ingest after the cluster started.  This reads
    the whole file, streamed (progress on a terminal), once per file identity (path, size,
    mtime_ns, inode, device): a file that passed is remembered in esdash's cache directory,
    so ``session check`` and the run that follows read it once.  The one file a check
    writes, and only there.
    """
    path = Path(corpus.path)
    ndjson.corpus_size(path)  # missing, empty, compressed or UTF-16: the fast refusals
    key, identity = _identity(path, corpus.includes_action_and_meta_data)
    record = cache_dir() / CORPUS_CHECKS / f"{key}.json"
    if _remembered(record, identity):
        return
    documents = _scan(corpus, int(identity["size"]))
    _remember(record, identity, documents)


def corpus_checked(corpus: Corpus) -> bool:
    """Whether :func:`check_whole_corpus` passed this very file and remembers it.

    The ingest then sends the lines without parsing them again
    (:func:`esdash.bench.slices.read_slice`): the identity (size, modification time, inode)
    is that of the file as it is now, so an edited or replaced file is read checking.
    """
    path = Path(corpus.path)
    try:
        key, identity = _identity(path, corpus.includes_action_and_meta_data)
    except OSError:
        return False
    return _remembered(cache_dir() / CORPUS_CHECKS / f"{key}.json", identity)


def _scan(corpus: Corpus, size: int) -> int:
    """Check every line (the rules of :func:`esdash.plugin.corpus.check_corpus`); documents."""
    path = Path(corpus.path)
    limit = ndjson.MAX_LINE_BYTES
    paired = ndjson.has_action_lines(corpus, limit)
    progress = _Progress(path, size)
    documents = number = position = 0
    pending: int | None = None  # line of an action line still waiting for its document
    with ndjson.open_corpus(path) as handle:
        while True:
            line = ndjson.read_line(handle, path, number + 1, limit)
            if not line:
                break
            number += 1
            position += len(line)
            progress.update(position)
            if ndjson.is_blank(line):
                continue
            value = ndjson.decode_line(path, number, line)
            if paired and pending is None:
                ndjson.check_action(path, number, value)
                pending = number
                continue
            if paired and ndjson.is_action(value):
                raise ndjson.dangling_action(path, pending)
            ndjson.check_document(path, number, value)
            pending = None
            documents += 1
    progress.done()
    if pending is not None:
        raise ndjson.dangling_action(path, pending)
    if documents == 0:
        raise ndjson.no_documents(path)
    return documents


class _Progress:
    """``checking <file>: 42% of 1.2 GB`` on standard error, only when it is a terminal.

    Redirected output (a batch job's log, ``session check`` in a script) gets nothing: its
    lines are one per problem.  The line is erased when the scan ends.
    """

    def __init__(self, path: Path, size: int) -> None:
        self.path, self.size = path, size
        self.shown = sys.stderr.isatty() and size > _PROGRESS_BYTES
        self.next = _PROGRESS_BYTES
        self.started = time.monotonic()

    def update(self, position: int) -> None:
        if not self.shown or position < self.next:
            return
        self.next = position + _PROGRESS_BYTES
        share = 100 * position // max(self.size, 1)
        text = f"checking {self.path.name}: {share}% of {self.size / 1e9:.1f} GB"
        print(f"\r{text}", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
