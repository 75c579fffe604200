"""The benchmark plan: what every bench rank needs, written once into ``bench.json``.

The orchestrator (``esdash run``) resolves the session, the track and the distribution's
capabilities into this plan before anything is launched; bench ranks only read it, as the
records of :mod:`esdash.rundir.records` (:class:`~esdash.rundir.records.BenchPlan`), never
through this module.  Queries the distribution cannot run
(a script query without the painless module) are kept in the plan with the reason, so they
are reported as unsupported instead of silently missing.

With a client-side encryption mode the plan holds what is *sent*: the encoded index body
and queries (rewritten once, here, never per request), queries the mode cannot express
marked "not possible under <mode>: <part>", and the codec's secret-free spec from which
every bench rank rebuilds the codec to encrypt documents and decode responses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec

from esdash.errors import BadInput
from esdash.paths import cache_dir
from esdash.plugin.api import ClientCodec, QueryNotSupported, Track
from esdash.plugin.capabilities import missing_capability
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin.index_stamp import REUSE_MODES, corpus_identity, stamp_index_body
from esdash.plugin.order import step_orders
from esdash.plugin.planning import adapt_index_body
from esdash.plugin.values import (
    Corpus,
    Distribution,
    OptionValues,
    Query,
    QueryStep,
    StepIndexing,
    TrackIndex,
    iteration_limit,
)
from esdash.rundir.records import (
    BenchPlan,
    JsonObject,
    PlannedIndex,
    PlannedIndexing,
    PlannedQuery,
    PlannedStep,
)
from esdash.session import BenchmarkSpec, Session


def encoded_query(query: Query, codec: ClientCodec) -> JsonObject:
    """``query``'s body as ``codec`` sends it; :class:`QueryNotSupported` where it cannot.

    A request other than a search (``Query.path``) is never encoded: without a body it is
    sent as it is, with one it cannot run under a codec (its plaintext would not match the
    encrypted index).
    """
    body = dict(query.body)
    if query.path is None:
        return codec.encode_query(body)
    if body:
        raise QueryNotSupported(f"{query.method} {query.path}", "the codec encrypts searches only")
    return body


def planned_query(
    query: Query, index: str, distribution: Distribution, codec: ClientCodec | None = None
) -> PlannedQuery:
    """A query as it is sent: encoded by the codec, or kept with why it cannot run.

    A query the encryption mode cannot express is reported as such even where the
    distribution lacks a capability too: encryption rules it out everywhere.  Its body is
    not kept (it would put plaintext constants into the run directory).
    """
    planned = PlannedQuery(
        name=query.name,
        index=query.index or index,
        body=dict(query.body),
        request_cache=query.request_cache,
        method=query.method,
        path=query.path,
        variants=tuple(dict(v) for v in query.variants),
        pages=query.pages,
        paging=query.paging,
    )
    if codec is not None:
        try:
            if query.variants or query.pages is not None:
                # a codec decodes a response against the one body it encoded
                what = "parameter-source bodies" if query.variants else "pages of a search"
                raise QueryNotSupported(what, "the codec decodes single searches only")
            planned = msgspec.structs.replace(planned, body=encoded_query(query, codec))
        except QueryNotSupported as exc:
            refusal = f"not possible under {codec.label}: {exc.part} ({exc.reason})"
            return msgspec.structs.replace(planned, body=None, variants=(), unsupported=refusal)
    missing = None
    for body in (query.body, *query.variants):
        missing = missing or missing_capability(tuple(query.requires), distribution, body)
    return msgspec.structs.replace(planned, unsupported=missing)


#: Seconds between one step's measured end and the next step's measurement, made up of the
#: next step's warm-up and, where that is shorter, a pause: a request answered late (up to
#: ``loadgen.OPEN_GRACE`` past its step's end, a scroll's last pages) then lands in no
#: measurement, and a short step (Rally's test mode measures 1 s) is not lost to it.
STEP_PAUSE = 1.0


def step_pause(step: QueryStep, warmup: float) -> float:
    """Seconds a step waits before its warm-up (:data:`STEP_PAUSE` less its warm-up); none
    for a counted step, which starts when every client of the step before is done."""
    return 0.0 if step.iterations is not None else max(0.0, STEP_PAUSE - warmup)


def global_warmup_bound(benchmark: BenchmarkSpec, track_options: OptionValues) -> float:
    """The longest the global warm-up may take before the steps, in seconds: the session's
    ``benchmark.warmup_max``, none in Rally's test mode (a smoke test).  The warm-up never
    runs past it (:meth:`esdash.bench.warmup.WarmupSchedule.fitting`)."""
    if track_options.get("test_mode"):
        return 0.0
    return benchmark.warmup_max


def plan_steps(
    steps: tuple[QueryStep, ...],
    benchmark: BenchmarkSpec,
    track_name: str,
    index: str,
    distribution: Distribution,
    codec: ClientCodec | None = None,
    corpora: Mapping[str, Corpus] | None = None,
    streams: tuple[str, ...] = (),
) -> tuple[PlannedStep, ...]:
    """The steps as the ranks run them, timed by the session's ``benchmark``; ``corpora``
    holds the documents of the steps' indexing loads by name (:meth:`Track.step_corpora`),
    ``streams`` the track's data streams (their documents go as ``create``); ``track_name``
    names the track where a load has no documents."""
    planned = []
    for step in steps:
        warmup, duration, target = step_timing(step, benchmark)
        planned.append(
            PlannedStep(
                name=step.name,
                pause=step_pause(step, warmup),
                queries=tuple(planned_query(q, index, distribution, codec) for q in step.queries),
                warmup=warmup,
                duration=duration,
                target_throughput=target,
                think_time=step.think_time,
                clients=step.clients,
                indexing=tuple(
                    planned_indexing(
                        step.name, load, corpora or {}, benchmark, track_name, streams, codec
                    )
                    for load in step.indexing
                ),
                warmup_iterations=step.warmup_iterations,
                iterations=step.iterations,
                ramp_up=min(step.ramp_up, warmup),
            )
        )
    return tuple(planned)


def plan_refusals(
    track: Track, options: OptionValues, distribution: Distribution
) -> dict[str, dict[str | None, str]]:
    """The query steps the track's own plan refuses for ``distribution``, by step name:
    per query name (None: every query of the step), the reason ``esdash plan`` gives.

    :func:`planned_query` checks what a query declares and its body; a track's plan may
    know more (a Rally request path whose module the distribution lacks, a data stream
    whose template it refuses).  A run does what the plan says, so those steps are not
    sent either: a refused task measured as 100 % errors would contradict ``esdash plan``.
    """
    refusals: dict[str, dict[str | None, str]] = {}
    for task in track.plan(options, distribution):
        if task.status != "refused" or task.step is None:
            continue
        # a step of one query is the task's; in a parallel block, the task's own query
        which = None if len(task.step.queries) == 1 else task.name
        reason = f"refused by the plan ({task.reason_kind}): {task.reason}"
        refusals.setdefault(task.step.name, {})[which] = reason
    return refusals


def refuse_planned(
    steps: tuple[PlannedStep, ...], refusals: Mapping[str, Mapping[str | None, str]]
) -> tuple[PlannedStep, ...]:
    """``steps`` with the queries ``refusals`` names marked unsupported (kept in place, so
    the results list them with the reason, as a query the distribution cannot run)."""
    marked = []
    for step in steps:
        refused = refusals.get(step.name, {})
        queries = tuple(
            msgspec.structs.replace(query, unsupported=refused.get(None, refused.get(query.name)))
            if query.unsupported is None and (None in refused or query.name in refused)
            else query
            for query in step.queries
        )
        marked.append(msgspec.structs.replace(step, queries=queries))
    return tuple(marked)


def planned_indexing(
    step: str,
    load: StepIndexing,
    corpora: Mapping[str, Corpus],
    benchmark: BenchmarkSpec,
    track_name: str,
    streams: tuple[str, ...],
    codec: ClientCodec | None,
) -> PlannedIndexing:
    """One indexing load of ``step`` with its corpus, as the ranks send it (the batch size
    the session's ``benchmark`` gives unless the load sets its own)."""
    corpus = corpora.get(load.name)
    if corpus is None:
        raise BadInput(
            f"track {track_name}: step {step!r} indexes {load.name!r}, but the track "
            f"gives no documents for it (Track.step_corpora); fix the track plugin"
        )
    if codec is not None:
        raise BadInput(
            f"step {step!r} indexes {load.name!r} during its searches, which esdash does not "
            f"do under {codec.label}: run the track without encryption"
        )
    return PlannedIndexing(
        name=load.name,
        index=load.index,
        corpus_path=str(corpus.path),
        corpus_documents=corpus.documents,
        corpus_has_actions=corpus.includes_action_and_meta_data,
        op_type="create" if load.index in streams else "index",
        clients=load.clients,
        bulk_size=load.bulk_size or benchmark.bulk_size,
        target_throughput=load.target_throughput,
        pipeline=load.pipeline,
        looped=load.looped,
        ingest_percentage=load.ingest_percentage,
    )


def step_timing(step: QueryStep, bench: BenchmarkSpec) -> tuple[float, float, float | None]:
    """Warm-up and measured seconds and the target rate a step runs with.

    What the step leaves open (None) the session's ``[benchmark]`` gives; ``esdash plan``
    shows the same numbers a run uses.  A counted step's times are limits: what it leaves
    open is :func:`iteration_limit` of the session's time.
    """
    warmup = bench.warmup if step.warmup is None else step.warmup
    duration = bench.duration if step.duration is None else step.duration
    if step.iterations is not None:
        if step.duration is None:
            duration = iteration_limit(duration)
        if step.warmup_iterations == 0:
            warmup = 0.0  # no warm-up: the measurement starts with the step
        elif step.warmup_iterations is not None and step.warmup is None:
            warmup = iteration_limit(warmup)
    return (
        warmup,
        duration,
        # a step with think time is a closed loop: the session's rate does not apply
        step.target_throughput
        if step.target_throughput is not None or step.think_time
        else bench.target_throughput,
    )


def in_rounds(
    steps: tuple[PlannedStep, ...], order: str, repetitions: int, seed: int
) -> tuple[PlannedStep, ...]:
    """Every round of the steps, in the order they run (``benchmark.order``/``repetitions``).

    Only runnable steps are ordered (a step nothing can run takes no time, and would shift
    the positions a balanced design balances); they follow once, after the last round, so
    results still list why they did not run.  The order is reproducible from the seed.
    """
    if order == "listed" and repetitions == 1:
        return steps  # the order the track lists, unsupported steps in their place
    runnable = [step for step in steps if step.runnable]
    idle = [step for step in steps if not step.runnable]
    try:
        rounds = step_orders(len(runnable), order, repetitions, seed) if runnable else []  # type: ignore[arg-type]
    except ValueError as exc:  # the step-order pre-flight check names this before a launch
        raise BadInput(f"benchmark.repetitions: {exc}") from exc
    sequence = [
        msgspec.structs.replace(runnable[k], round=r, position=p)
        for r, order_of_round in enumerate(rounds)
        for p, k in enumerate(order_of_round)
    ]
    last = max(repetitions - 1, 0)
    sequence += [msgspec.structs.replace(step, round=last, position=-1) for step in idle]
    return tuple(sequence)


def make_plan(
    session: Session,
    track: Track,
    corpus: Corpus,
    steps: tuple[QueryStep, ...],
    distribution: Distribution,
    ranks: int,
    seed: int,
    reingest: bool = False,
    codec: ClientCodec | None = None,
    reuse_index: str = "auto",
    offsets_dir: Path | None = None,
) -> BenchPlan:
    """The plan of one run; its index body carries the index's fingerprint.

    The fingerprint (``_meta.esdash``: corpus identity, mapping, settings, a codec's
    ciphertext layout) is computed here, once, so rank 0 only compares it with the one of
    an existing index (:mod:`esdash.bench.index_reuse`).  ``offsets_dir`` is where the
    corpus' offsets are cached when its own directory is read-only (default: esdash's
    cache, as :func:`esdash.run.job.prepare_workload` scans it).
    """
    if reuse_index not in REUSE_MODES:
        raise BadInput(
            f"--reuse-index must be one of {', '.join(REUSE_MODES)}, not {reuse_index!r}"
        )
    options = session.track.options
    order, repetitions = session.rounds(track, steps)
    index = track.index_name(options)
    index_body, notes = adapt_index_body(track.index_body(options), distribution)
    if codec is not None:
        index_body = codec.encode_index_body(index_body)
    offsets = offsets_dir if offsets_dir is not None else cache_dir() / "offsets"
    index_body = stamp_index_body(index_body, corpus_identity(corpus, offsets))
    corpora = track.step_corpora(options, cache_dir() / "corpora")
    for step_corpus in corpora.values():  # scanned once here; the ranks read the offsets
        plan_slices(step_corpus, ranks, offsets)
    streams = track.data_streams(options)
    more: list[PlannedIndex] = []
    for other in track.more_indices(options, cache_dir() / "corpora"):
        if other.corpus is not None:  # scanned once here; the ranks read the cached offsets
            plan_slices(other.corpus, ranks, offsets)
        planned, adapted = planned_index(other, distribution, codec, offsets)
        more.append(planned)
        notes += [f"index {other.name}: {note}" for note in adapted]
    return BenchPlan(
        index=index,
        index_body=index_body,
        corpus_path=str(corpus.path),
        corpus_documents=corpus.documents,
        corpus_has_actions=corpus.includes_action_and_meta_data,
        bulk_size=session.benchmark.bulk_size,
        steps=in_rounds(
            refuse_planned(
                plan_steps(
                    steps,
                    session.benchmark,
                    session.track.name,
                    index,
                    distribution,
                    codec,
                    corpora,
                    streams,
                ),
                # a session replacing the steps with benchmark.queries has none of them
                {}
                if session.benchmark.queries is not None
                else plan_refusals(track, options, distribution),
            ),
            order,
            repetitions,
            seed,
        ),
        interval=session.benchmark.interval,
        seed=seed,
        ranks=ranks,
        reingest=reingest,
        reuse_index=reuse_index,
        track=track.name,
        encryption=session.encryption.name,
        client_codec=codec.spec() if codec is not None else None,
        notes=tuple(notes),
        after_ingest=session.benchmark.after_ingest,
        max_num_segments=session.benchmark.max_num_segments,
        settle_timeout=session.benchmark.settle_timeout,
        warmup_max=global_warmup_bound(session.benchmark, options),
        warmup_round=session.benchmark.warmup_round,
        order=order,
        repetitions=repetitions,
        more_indices=tuple(more),
        track_requests=track.track_requests(options, distribution),
        data_stream=index in track.data_streams(options),
    )


def planned_index(
    index: TrackIndex,
    distribution: Distribution,
    codec: ClientCodec | None,
    offsets: Path,
) -> tuple[PlannedIndex, list[str]]:
    """Another index of the track as the run prepares it: its body adapted to the
    distribution, encoded by the codec and stamped with its own fingerprint (each index
    is reused or re-ingested on its own); a data stream's documents go as ``create``."""
    corpus = index.corpus
    body: JsonObject = {}
    notes: list[str] = []
    if not index.data_stream:
        body, notes = adapt_index_body(index.body, distribution)
        if codec is not None:
            body = codec.encode_index_body(body)
        identity = corpus_identity(corpus, offsets) if corpus is not None else {}
        body = stamp_index_body(body, identity)
    planned = PlannedIndex(
        name=index.name,
        body=body,
        corpus_path=str(corpus.path) if corpus is not None else "",
        corpus_documents=corpus.documents if corpus is not None else 0,
        corpus_has_actions=corpus.includes_action_and_meta_data if corpus is not None else False,
        op_type="create" if index.data_stream else "index",
        data_stream=index.data_stream,
    )
    return planned, list(notes)
