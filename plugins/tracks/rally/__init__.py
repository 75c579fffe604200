"""The ``rally`` track: run a Rally track directory, as Elastic publishes them, with esdash.

Rally is the reference benchmark for Elasticsearch, and its tracks (``elastic/rally-tracks``)
are the workloads people already know.  This track reads such a directory with a locally
present corpus and maps what esdash can run onto esdash's model of an ingest followed by
timed query steps:

* every index of ``indices[]`` is created with its body (rendered with the track
  parameters); ``settings`` of the challenge's ``create-index`` tasks are merged into the
  bodies of the indices they name, as Rally merges them.  The main index (``track.index``,
  default: the first one a bulk task fills) is :meth:`RallyTrack.index_name`, the others
  :meth:`RallyTrack.more_indices`;
* ``corpora[].documents[]`` the bulk tasks send to an index are its corpus (uncompressed
  files only; several files are joined once into esdash's cache);
* in the chosen challenge's schedule, the ``bulk`` tasks are the ingest (in schedule order,
  each document set once) and each ``search`` task is a query step (its ``index`` may name
  another index of the track, a comma list or a wildcard; a ``parallel`` block of searches
  is one step with several queries, and its bulk tasks index during that step:
  :meth:`RallyTrack.step_corpora`); ``warmup-time-period``, ``time-period``, iterations
  and ``target-throughput`` are converted (see
  :func:`esdash_plugins.tracks.rally.schedule._timing`);
* ``delete-index``, ``create-index``, ``refresh`` and ``cluster-health`` are done by esdash
  itself; every other task is listed as not supported.  Nothing is dropped silently:
  :meth:`RallyTrack.unsupported_operations` and the log say what is not run and why.

Every problem with the track is an :class:`esdash.errors.BadInput` naming the file (and line
where known) and the fix.

Where each part lives (this module keeps :class:`RallyTrack`, :func:`_field_specs` and the
plugin hook, and re-exports the names tests and other modules use as ``rally.<name>``):

* :mod:`esdash_plugins.tracks.rally.template`: rendering the Jinja2 templates;
* :mod:`esdash_plugins.tracks.rally.model`: the data classes (:class:`DocumentSet`,
  :class:`RallyTask`, :class:`TrackPy`, :class:`LoadedTrack`) and small shared helpers;
* :mod:`esdash_plugins.tracks.rally.reader`: :class:`_Reader`, reading the rendered track with
  errors that say where;
* :mod:`esdash_plugins.tracks.rally.schedule`: the schedule mapping, :func:`_timing`, the
  test-mode rules and the constants naming Rally's tasks and keys;
* :mod:`esdash_plugins.tracks.rally.loader`: :func:`load` and its helpers (indices, corpora,
  operations, challenge, parameter check, confinement to the track directory);
* :mod:`esdash_plugins.tracks.rally.corpus`: locating, preparing and checking the corpus files;
* :mod:`esdash_plugins.tracks.rally.trackcode`: the track's own ``track.py``, run only when
  the session trusts it (``trust_code``), in a child process
  (:mod:`esdash_plugins.tracks.rally.child`), as ``nobody`` when esdash runs as root.

The modules import one way only: model <- reader <- schedule <- loader <- this module, and
model <- corpus <- this module.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from esdash.plugin_api import (
    REQUIRED,
    BadInput,
    Corpus,
    CorpusStatus,
    Distribution,
    FieldSpec,
    JsonMapping,
    JsonObject,
    Option,
    OptionValues,
    PlannedRequest,
    PlannedTask,
    QueryStep,
    Refusal,
    Register,
    Track,
    TrackIndex,
    adaptation_note,
    hookimpl,
    mapping_refusal,
    operation_refusal,
    query_refusal,
)

from . import cascade, trackcode
from . import requests as rr
from .corpus import (
    _Where,
    check_corpus,
    count_lines,
    join_documents,
    take_documents,
)
from .dialect import track_python_file
from .loader import _track_file
from .loader import load as load
from .model import DocumentSet, LoadedTrack
from .schedule import BY_ESDASH as BY_ESDASH
from .schedule import test_mode_name as test_mode_name

log = logging.getLogger(__name__)


def _field_specs(properties: JsonMapping, prefix: str = "") -> list[FieldSpec]:
    specs: list[FieldSpec] = []
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        path = f"{prefix}{name}"
        if isinstance(spec.get("properties"), dict):
            specs += _field_specs(spec["properties"], f"{path}.")
            continue
        kind = str(spec.get("type", "object"))
        subfields = spec.get("fields")
        if (
            kind == "text"
            and isinstance(subfields, dict)
            and any(isinstance(s, dict) and s.get("type") == "keyword" for s in subfields.values())
        ):
            kind = "text+keyword"
        specs.append(FieldSpec(path, kind))
    return specs


class RallyTrack(Track):
    """A Rally track directory (``path``) run as an esdash track."""

    name = "rally"
    #: A Rally schedule runs in the order its author wrote it, as Rally runs it.
    ordered_schedule = True
    description = "a Rally track directory (track.json, corpora, challenges) run by esdash"
    options = (
        Option(
            "path",
            "path",
            "Rally track directory (holding track.json) or OpenSearch Benchmark workload "
            "directory (holding workload.json)",
            default=REQUIRED,
        ),
        Option(
            "challenge",
            "str",
            "challenge (OSB: test procedure) to run (default: the track's default one)",
        ),
        Option(
            "track_params",
            "list[str]",
            'track parameters as "key=value" (JSON values keep their type), like Rally\'s '
            "--track-params",
            default=(),
        ),
        Option(
            "corpus_dir",
            "path",
            "directory holding the uncompressed documents files (default: the track "
            "directory, then ~/.rally/benchmarks/data/<corpus>)",
        ),
        Option(
            "index",
            "str",
            "the main index, searched by searches that name none (default: the first index "
            "a bulk task fills); every index of the track is created and filled",
        ),
        Option(
            "test_mode",
            "bool",
            "Rally's --test-mode: the -1k document files (1,000 documents; taken from the full "
            "file into esdash's cache when only that is present), no warm-up, time periods of "
            "at most 10 s, iterations cut to the task's clients, target throughput lifted",
            default=False,
        ),
        Option(
            "trust_code",
            "bool",
            "run the track's own Python (track.py, OSB's workload.py, and the modules beside "
            "it) to sample its parameter sources and record its runners: in a child process, "
            "as nobody when esdash runs as root; without it the tasks that need the code are "
            "refused (the command-line flag --trust-track-code sets it too)",
            default=False,
        ),
    )

    def __init__(self) -> None:
        self._index = ""
        self._announced: set[tuple[str, str, str, str]] = set()

    @property
    def index(self) -> str:
        """The index of the most recently loaded options.

        ``Track.index`` is one name per track, but a Rally track's index depends on its
        options; :meth:`index_name` is the reliable form.  Callers that read ``index`` after
        calling :meth:`corpus` or :meth:`query_steps` with the same options (as the bench
        plan does) get the right name.
        """
        return self._index

    @index.setter
    def index(self, name: str) -> None:
        # Track.index is a plain attribute that callers may set; the loaded one wins again
        # on the next load.
        self._index = name

    def load(self, options: OptionValues) -> LoadedTrack:
        """The track read for ``options``; the first time, what is not run is logged."""
        loaded = load(options)
        self._index = loaded.index
        key = (str(loaded.track_file), loaded.challenge, loaded.index, repr(loaded.params))
        if key not in self._announced:
            self._announced.add(key)
            level = logging.WARNING if loaded.unsupported else logging.INFO
            log.log(level, "%s", loaded.summary())
        return loaded

    def index_name(self, options: OptionValues) -> str:
        return self.load(options).index

    def own_code(self, options: OptionValues) -> str | None:
        """The track's ``track.py`` (``workload.py``) and the modules beside it, and whether
        esdash runs them (``trust_code``), read without running anything."""
        track_file = _track_file(Path(options["path"]).expanduser())
        python_file = track_python_file(track_file.parent)
        if not python_file.is_file():
            return None
        files = ", ".join(str(p) for p in trackcode.code_files(python_file))
        if trackcode.trusted(options):
            return (
                f"track code: {files}: the session trusts it; esdash runs it in a child "
                f"process as {trackcode.runs_as()} for the tasks that need it"
            )
        return (
            f"track code: {files}: not run, the session does not trust it (the tasks that "
            f"need it are refused); to run it, set {trackcode.TRUST_HOW}"
        )

    def index_body(self, options: OptionValues) -> JsonObject:
        return self.load(options).index_body

    def query_steps(self, options: OptionValues) -> tuple[QueryStep, ...]:
        return self.load(options).steps

    def plan(
        self, options: OptionValues, distribution: Distribution | None
    ) -> tuple[PlannedTask, ...]:
        """Every task of the challenge in schedule order, parallel blocks included.

        What :class:`_ScheduleMapper` made of each task, then checked against
        ``distribution``: a query needing a module it lacks refuses its task, a mapping it
        cannot hold refuses every task esdash would run (the run stops at creating the
        index), and so does a track esdash cannot run at all (no index, or no documents for
        it).
        """
        loaded = load(options, plan=True)
        self._index = loaded.index
        blocker = loaded.blocker and f"the track {loaded.blocker}"
        blocker_kind = "unsupported_operation"
        if blocker is None and not loaded.documents:
            blocker = (
                f"no corpus documents go to index {loaded.index!r} in challenge "
                f"{loaded.challenge!r}, so esdash refuses the run (choose another index with "
                f"track.index: {', '.join(loaded.indices)})"
            )
            generated = next(
                (t for t in loaded.tasks if t.operation == "bulk" and t.reason_kind == "track_py"),
                None,
            )
            if generated is not None:  # the documents would come from the track's Python
                blocker_kind = "track_py"
                blocker = (
                    f"the index's documents come from bulk task {generated.name!r}, and "
                    f"{generated.reason}"
                )
        mapping = None
        unmade = "its index cannot be created"
        if blocker is None:
            bodies = [loaded.index_body, *(i.body for i in loaded.more if not i.data_stream)]
            mapping = next(
                (r for r in (mapping_refusal(b, distribution) for b in bodies) if r), None
            )
            named = [(loaded.index, loaded.index_body)]
            named += [(i.name, i.body) for i in loaded.more if not i.data_stream]
            found = (cascade.index_refusal(name, body, distribution) for name, body in named)
            mapping = mapping or next((r for r in found if r is not None), None)
            mapping = mapping or _stream_refusal(loaded, distribution)
            filled = [(loaded.index, loaded.index_body)]
            filled += [(i.name, i.body) for i in loaded.more if i.documents]
            rejected = cascade.pipeline_refusal(loaded.one_offs, filled, distribution)
            if mapping is None and rejected is not None:
                mapping, unmade = rejected, "its index is never filled"
        adapted = adaptation_note(loaded.index_body, distribution)
        tasks: list[PlannedTask] = []
        for task in loaded.tasks:
            query = loaded.task_queries.get(task.name)
            refusal = query_refusal(query.requires, query.body, distribution) if query else None
            if query is not None and query.path is not None and refusal is None:
                # a timed request (index-stats, node-stats, raw-request): its path's module
                timed = rr.raw_request(task.name, query.method, query.path, query.body)
                refusal = rr.refusal(timed, distribution)
            lacking = operation_refusal(task.operation, distribution)
            if lacking is not None:
                task = task.refused(lacking.kind, lacking.reason)
            elif task.status == "refused":
                pass
            elif (sent := self._request_refusal(loaded, task.name, distribution)) is not None:
                task = task.refused(sent.kind, sent.reason)
            elif blocker is not None:
                task = task.refused(blocker_kind, blocker)
            elif mapping is not None:
                reason = mapping.reason
                if not task.ingest:
                    reason = f"{unmade}: {reason}"
                task = task.refused(mapping.kind, reason)
            elif refusal is not None:
                task = task.refused(refusal.kind, refusal.reason)
            elif task.ingest and adapted:
                task = replace(task, esdash=f"{task.esdash}; {adapted}")
            tasks.append(task)
        return tuple(tasks)

    @staticmethod
    def _request_refusal(
        loaded: LoadedTrack, task: str, distribution: Distribution | None
    ) -> Refusal | None:
        """Why ``distribution`` cannot serve a request of the administrative ``task``."""
        found = (rr.refusal(one, distribution) for one in loaded.one_offs if one.name == task)
        return next((r for r in found if r is not None), None)

    def track_requests(
        self, options: OptionValues, distribution: Distribution
    ) -> tuple[PlannedRequest, ...]:
        """The requests of the challenge's administrative tasks (``force-merge``,
        ``put-settings``, templates, untimed ``raw-request`` ...), in schedule order; those
        of a task the plan refuses for ``distribution`` are left out."""
        loaded = self.load(options)
        refused = {t.name for t in self.plan(options, distribution) if t.status == "refused"}
        return tuple(one.planned() for one in loaded.one_offs if one.name not in refused)

    def unsupported_operations(self, options: OptionValues) -> list[str]:
        """Tasks of the challenge esdash does not run, each with the reason."""
        return list(self.load(options).unsupported)

    def esdash_operations(self, options: OptionValues) -> list[str]:
        """Tasks esdash does itself instead (delete/create index, refresh, cluster health)."""
        return list(self.load(options).by_esdash)

    def notes(self, options: OptionValues) -> list[str]:
        """How properties were converted or why they are ignored."""
        return list(self.load(options).notes)

    def field_specs(self, options: OptionValues) -> tuple[FieldSpec, ...]:
        """Field types from the index mapping (Rally tracks carry no value ranges)."""
        mappings = self.load(options).index_body.get("mappings", {})
        properties = mappings.get("properties", {}) if isinstance(mappings, dict) else {}
        return tuple(_field_specs(properties if isinstance(properties, dict) else {}))

    def corpus(self, options: OptionValues, cache_dir: Path) -> Corpus:
        loaded = self.load(options)
        if not loaded.documents:
            raise BadInput(
                f"{loaded.track_file}: no corpus documents go to index {loaded.index!r} in "
                f"challenge {loaded.challenge!r}; choose another index with track.index "
                f"({', '.join(loaded.indices)})"
            )
        where = _Where.of(loaded, options, cache_dir)
        return corpus_of(loaded, loaded.index, loaded.documents, where, cache_dir)

    def more_indices(self, options: OptionValues, cache_dir: Path) -> tuple[TrackIndex, ...]:
        """The track's other indices, each with the corpus its bulk tasks send to it.

        Rally creates every index of a track and its bulk tasks fill them; esdash does the
        same, the main index (:meth:`index_name`) first and these after it, in the order
        the bulk tasks send to them.  An index no bulk task sends to is created empty.
        """
        loaded = self.load(options)
        where = _Where.of(loaded, options, cache_dir)
        return tuple(
            TrackIndex(
                other.name,
                other.body,
                corpus_of(loaded, other.name, other.documents, where, cache_dir)
                if other.documents
                else None,
                data_stream=other.data_stream,
            )
            for other in loaded.more
        )

    def step_corpora(self, options: OptionValues, cache_dir: Path) -> dict[str, Corpus]:
        """The documents of each bulk task that indexes during a query step (a ``parallel``
        block with searches), by task name: the document sets it sends, prepared as an
        index's corpus is (several files joined, test mode's first documents)."""
        loaded = self.load(options)
        where = _Where.of(loaded, options, cache_dir)
        return {
            name: corpus_of(loaded, f"{loaded.index}-{name}", documents, where, cache_dir)
            for name, documents in loaded.step_documents.items()
        }

    def data_streams(self, options: OptionValues) -> tuple[str, ...]:
        """The track's ``data-streams``: their documents go as ``create`` actions."""
        return self.load(options).data_streams

    def corpus_check(self, options: OptionValues, cache_dir: Path) -> CorpusStatus:
        """Whether the corpora a run ingests are here and fit, without writing anything.

        For ``esdash plan`` and the ``corpus`` pre-flight check: every document set the
        ingest reads (for every index of the track) is present (where :meth:`corpus` looks),
        or listed as missing with its sizes from track.json and the disk they take; files
        (or the joined or test-mode copy esdash would write into ``cache_dir``) that would
        not fit the free space of their filesystem are refused before anything is copied.
        """
        loaded = load(options, plan=True)
        if loaded.blocker is not None or not loaded.documents:
            return CorpusStatus((), ())  # the plan refuses the run, saying why
        where = _Where.of(loaded, options, cache_dir)
        status = check_corpus(loaded, where, cache_dir)
        sets = [(o.name, o.documents) for o in loaded.more if o.documents]
        sets += [(f"{loaded.index}-{n}", d) for n, d in loaded.step_documents.items()]
        for name, documents in sets:
            if documents:
                each = replace(loaded, index=name, documents=documents)
                found = check_corpus(each, where, cache_dir)
                status = CorpusStatus(
                    status.lines + found.lines,
                    status.problems + found.problems,
                    status.files + found.files,
                )
        return status


def corpus_of(
    loaded: LoadedTrack,
    index: str,
    documents: Sequence[DocumentSet],
    where: _Where,
    cache_dir: Path,
) -> Corpus:
    """The corpus of one index: its document files (in test mode the first documents of
    the full file where the -1k file is absent), joined into one file when several."""
    actions = {d.includes_action_and_meta_data for d in documents}
    if len(actions) > 1:
        raise BadInput(
            f"{loaded.track_file}: the documents for index {index!r} mix files with "
            f"and without action-and-meta-data lines; esdash needs one kind per corpus"
        )
    per_document = 2 if actions == {True} else 1
    paths = []
    for doc in documents:
        path, cut = where.locate(doc, loaded.track_file)
        if cut:
            taken = take_documents(
                path, doc.documents * per_document, cache_dir, f"{loaded.name}-{doc.corpus}"
            )
            log.warning(
                "test mode: %s holds no %s, so esdash took the first %d documents of %s into %s",
                path.parent,
                doc.source_file,
                doc.documents,
                path,
                taken,
            )
            path = taken
        paths.append(path)
    if documents[0].full is not None:  # test mode: count what the files hold
        count = sum(count_lines(path) for path in paths) // per_document
    else:
        count = sum(d.documents for d in documents)
    path = (
        paths[0] if len(paths) == 1 else join_documents(paths, cache_dir, f"{loaded.name}-{index}")
    )
    return Corpus(path, count, actions.pop())


def _stream_refusal(loaded: LoadedTrack, distribution: Distribution | None) -> Refusal | None:
    """Why ``distribution`` cannot hold the data streams the run ingests into (None: it
    can, or there are none): Elasticsearch needs its data-streams module, which the
    integ-test zip lacks; OpenSearch has them in its server, but not every Elasticsearch
    feature the templates making them may use (:func:`cascade.stream_refusal`)."""
    streams = [
        s
        for s in loaded.data_streams
        if s == loaded.index or any(i.name == s and i.documents for i in loaded.more)
    ]
    if streams and distribution is not None and not rr.is_elasticsearch(distribution):
        found = (cascade.stream_refusal(loaded.one_offs, s, distribution) for s in streams)
        return next((r for r in found if r is not None), None)
    if not streams or distribution is None or not rr.is_elasticsearch(distribution):
        return None
    if set(distribution.modules) & set(rr.DATA_STREAM_MODULES):
        return None
    return Refusal(
        "module",
        f"data stream {streams[0]} needs the {rr.DATA_STREAM_MODULES[0]} module, which this "
        f"{distribution.flavor} distribution {distribution.version} does not have",
        rr.DATA_STREAM_MODULES[0],
    )


@hookimpl
def esdash_register_tracks(register: Register[Track]) -> None:
    register(RallyTrack())
