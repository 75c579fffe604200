"""The ``rally`` track: run a Rally track directory, as Elastic publishes them, with esdash.

Rally is the reference benchmark for Elasticsearch, and its tracks (``elastic/rally-tracks``)
are the workloads people already know.  This track reads such a directory with a locally
present corpus and maps what esdash can run onto esdash's model of one ingest followed by
timed query steps:

* ``indices[].body`` (rendered with the track parameters) is the index body; ``settings`` of
  the challenge's ``create-index`` tasks are merged into it, as Rally merges them;
* ``corpora[].documents[]`` aimed at the chosen index are the corpus (uncompressed files only;
  several files are joined once into esdash's cache);
* in the chosen challenge's schedule, the first ``bulk`` task is the ingest and each
  ``search`` task is a query step (a ``parallel`` block of searches is one step with several
  queries); ``warmup-time-period``, ``time-period``, iterations and ``target-throughput`` are
  converted (see :func:`esdash_plugins.tracks.rally_schedule._timing`);
* ``delete-index``, ``create-index``, ``refresh`` and ``cluster-health`` are done by esdash
  itself; every other task is listed as not supported.  Nothing is dropped silently:
  :meth:`RallyTrack.unsupported_operations` and the log say what is not run and why.

Every problem with the track is an :class:`esdash.errors.BadInput` naming the file (and line
where known) and the fix.

Where each part lives (this module keeps :class:`RallyTrack`, :func:`_field_specs` and the
plugin hook, and re-exports the names tests and other modules use as ``rally.<name>``):

* :mod:`esdash_plugins.tracks.rally_template`: rendering the Jinja2 templates;
* :mod:`esdash_plugins.tracks.rally_model`: the data classes (:class:`DocumentSet`,
  :class:`RallyTask`, :class:`TrackPy`, :class:`LoadedTrack`) and small shared helpers;
* :mod:`esdash_plugins.tracks.rally_reader`: :class:`_Reader`, reading the rendered track with
  errors that say where;
* :mod:`esdash_plugins.tracks.rally_schedule`: the schedule mapping, :func:`_timing`, the
  test-mode rules and the constants naming Rally's tasks and keys;
* :mod:`esdash_plugins.tracks.rally_loader`: :func:`load` and its helpers (indices, corpora,
  operations, challenge, parameter check, confinement to the track directory);
* :mod:`esdash_plugins.tracks.rally_corpus`: locating, preparing and checking the corpus files.

The modules import one way only: model <- reader <- schedule <- loader <- this module, and
model <- corpus <- this module.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from esdash_plugins.tracks.rally_corpus import (
    _Where,
    check_corpus,
    count_lines,
    join_documents,
    take_documents,
)
from esdash_plugins.tracks.rally_loader import load as load
from esdash_plugins.tracks.rally_model import LoadedTrack
from esdash_plugins.tracks.rally_schedule import BY_ESDASH as BY_ESDASH
from esdash_plugins.tracks.rally_schedule import (
    TEST_MODE_ITERATION_SECONDS as TEST_MODE_ITERATION_SECONDS,
)
from esdash_plugins.tracks.rally_schedule import test_mode_name as test_mode_name

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
    PlannedTask,
    QueryStep,
    Track,
    adaptation_note,
    hookimpl,
    mapping_refusal,
    operation_refusal,
    query_refusal,
)

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
    description = "a Rally track directory (track.json, corpora, challenges) run by esdash"
    options = (
        Option("path", "path", "Rally track directory (holding track.json)", default=REQUIRED),
        Option("challenge", "str", "challenge to run (default: the track's default challenge)"),
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
        Option("index", "str", "which of the track's indices to ingest (default: the first)"),
        Option(
            "test_mode",
            "bool",
            "Rally's --test-mode: the -1k document files (1,000 documents; taken from the full "
            "file into esdash's cache when only that is present), no warm-up, time periods of "
            "at most 10 s, iterations cut to the task's clients, target throughput lifted",
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
        if blocker is None and not loaded.documents:
            blocker = (
                f"no corpus documents go to index {loaded.index!r} in challenge "
                f"{loaded.challenge!r}, so esdash refuses the run (choose another index with "
                f"track.index: {', '.join(loaded.indices)})"
            )
        mapping = mapping_refusal(loaded.index_body, distribution) if blocker is None else None
        adapted = adaptation_note(loaded.index_body, distribution)
        tasks: list[PlannedTask] = []
        for task in loaded.tasks:
            query = loaded.task_queries.get(task.name)
            refusal = query_refusal(query.requires, query.body, distribution) if query else None
            lacking = operation_refusal(task.operation, distribution)
            if lacking is not None:
                task = task.refused(lacking.kind, lacking.reason)
            elif task.status == "refused":
                pass
            elif blocker is not None:
                task = task.refused("unsupported_operation", blocker)
            elif mapping is not None:
                reason = mapping.reason
                if not task.ingest:
                    reason = f"its index cannot be created: {reason}"
                task = task.refused(mapping.kind, reason)
            elif refusal is not None:
                task = task.refused(refusal.kind, refusal.reason)
            elif task.ingest and adapted:
                task = replace(task, esdash=f"{task.esdash}; {adapted}")
            tasks.append(task)
        return tuple(tasks)

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
        actions = {d.includes_action_and_meta_data for d in loaded.documents}
        if len(actions) > 1:
            raise BadInput(
                f"{loaded.track_file}: the documents for index {loaded.index!r} mix files with "
                f"and without action-and-meta-data lines; esdash needs one kind per corpus"
            )
        per_document = 2 if actions == {True} else 1
        paths = []
        for doc in loaded.documents:
            path, cut = where.locate(doc, loaded.track_file)
            if cut:
                taken = take_documents(
                    path, doc.documents * per_document, cache_dir, f"{loaded.name}-{doc.corpus}"
                )
                log.warning(
                    "test mode: %s holds no %s, so esdash took the first %d documents of %s "
                    "into %s",
                    path.parent,
                    doc.source_file,
                    doc.documents,
                    path,
                    taken,
                )
                path = taken
            paths.append(path)
        if loaded.documents[0].full is not None:  # test mode: count what the files hold
            count = sum(count_lines(path) for path in paths) // per_document
        else:
            count = sum(d.documents for d in loaded.documents)
        path = (
            paths[0]
            if len(paths) == 1
            else join_documents(paths, cache_dir, f"{loaded.name}-{loaded.index}")
        )
        return Corpus(path, count, actions.pop())

    def corpus_check(self, options: OptionValues, cache_dir: Path) -> CorpusStatus:
        """Whether the corpus a run ingests is here and fits, without writing anything.

        For ``esdash plan`` and the ``corpus`` pre-flight check: every document set the
        chosen index's ingest reads is present (where :meth:`corpus` looks), or listed as
        missing with its sizes from track.json and the disk they take; files (or the joined
        or test-mode copy esdash would write into ``cache_dir``) that would not fit the free
        space of their filesystem are refused before anything is copied.
        """
        loaded = load(options, plan=True)
        if loaded.blocker is not None or not loaded.documents:
            return CorpusStatus((), ())  # the plan refuses the run, saying why
        return check_corpus(loaded, _Where.of(loaded, options, cache_dir), cache_dir)


@hookimpl
def esdash_register_tracks(register) -> None:
    register(RallyTrack())
