"""Checks of what the session asks of its track: it loads, its corpus is whole, its index fits.

A track is asked here what a run asks of it before anything starts (index name and body,
field schema, query steps, the corpus on disk), with what the engines would refuse only
after the cluster started (too many shards), so each problem is one line naming the
session file and key.  :func:`quiet`, :func:`track_finding` and :func:`from_track` are
shared by every check that loads the track.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from esdash.errors import BadInput
from esdash.paths import cache_dir
from esdash.plugin.api import Track
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.corpus_scan import check_whole_corpus
from esdash.plugin.values import Corpus
from esdash.session import Session

#: A track's error that names a session key (``track.challenge: ...``).
_TRACK_KEY = re.compile(r"^(track\.[A-Za-z_][\w.]*): ")

_Asked = TypeVar("_Asked")


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
def quiet() -> Iterator[None]:
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


def from_track(context: CheckContext, ask: Callable[[Track], _Asked]) -> _Asked | None:
    """What ``ask`` gets from the session's track, loaded :func:`quiet`-ly; None when the
    track (or the session's query file) refuses with :class:`BadInput`.

    That refusal is :class:`TrackLoads`'s finding, told once with the track's words: every
    other check that needs something of the track passes over a track that does not load.
    """
    track = context.plugins.track(context.session.track.name)
    try:
        with quiet():
            return ask(track)
    except BadInput:
        return None


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
            with quiet():
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
    (:func:`esdash.plugin.corpus_scan.check_whole_corpus`, once per file identity), so a bad
    line after the first thousand is refused here and not by the ingest after the cluster
    started.
    A track that does not load is :class:`TrackLoads`'s finding, not this one's.
    """

    name = "corpus"
    description = "the track's corpus is on disk, every line a document, copies fit the disk"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        options, corpora = context.session.track.options, cache_dir() / "corpora"
        result = from_track(context, lambda track: track.corpus_check(options, corpora))
        if result is None:
            return  # the track does not load, or cannot tell without writing anything
        session = context.session
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


def corpus_key(session: Session) -> str:
    """The session key a corpus problem is about: the option naming the corpus, if any."""
    options = session.track.options
    for key in ("documents_file", "corpus_dir", "path"):
        if options.get(key) is not None:
            return f"track.{key}"
    return "track"


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
        options = context.session.track.options
        body = from_track(context, lambda track: track.index_body(options))
        if body is None:
            return  # the ``track`` check's finding
        session = context.session
        settings = body.get("settings") if isinstance(body, Mapping) else None
        flat = _flat_settings(settings) if isinstance(settings, Mapping) else {}
        shards = _count(flat.get("index.number_of_shards"), 1)
        replicas = _count(flat.get("index.number_of_replicas"), 1)
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
