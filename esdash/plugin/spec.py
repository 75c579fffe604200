"""The plugin contract: every hook esdash calls, typed, with its reference documentation.

A plugin is a module (or object) with functions named after these hooks and decorated with
``@hookimpl`` (``from esdash.plugin_api import hookimpl``).  Packages announce plugins
through the entry-point group ``esdash``::

    [project.entry-points.esdash]
    my-track = "my_package.my_module"

**Registration hooks** receive a ``register`` callable.  Each call registers one object of the
hook's kind (:mod:`esdash.plugin.api`); esdash stamps it with the plugin that gave it, and a
name registered twice is an error naming both plugins.

**Observer hooks** are called by the orchestrator (``esdash run``, :mod:`esdash.run.job`), once
each per session and once per interval record, never on a rank: the load generator's hot
path never calls a plugin.  A failing observer is reported as a warning; it never stops a
run.  Implementations may leave out arguments they do not use.  One observer answers:
``esdash_leakage`` returns the leakage report of a client-side encryption mode, which esdash
checks and writes into the run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import pluggy

from esdash.plugin.api import Backend, ClientCodec, EncryptionMode, Interconnect, Track
from esdash.plugin.checks import PreflightCheck
from esdash.plugin.values import Corpus
from esdash.rundir.records import Interval, JsonObject, Results

if TYPE_CHECKING:
    from esdash.plugin.session import Session

#: The project name of every hook marker.
PROJECT = "esdash"

#: Marker for the hooks below (this module is the whole contract).
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marker for hook implementations in built-in and third-party plugins.
hookimpl = pluggy.HookimplMarker(PROJECT)

T_contra = TypeVar("T_contra", contravariant=True)


class Register(Protocol[T_contra]):
    """What a registration hook receives: call it once per object the plugin provides."""

    def __call__(self, item: T_contra, /) -> None: ...


# ---------------------------------------------------------------------- registration


@hookspec
def esdash_register_backends(register: Register[Backend]) -> None:
    """Register search engines esdash can spawn.

    Call ``register(backend)`` with an instance of :class:`esdash.plugin_api.Backend`.  A
    backend inspects a distribution directory (version, flavor, modules), renders node
    configuration from the cluster topology, builds the command that runs a node and gives a
    control client for the running cluster.  Sessions choose it with ``cluster.backend``.
    """


@hookspec
def esdash_register_interconnects(register: Register[Interconnect]) -> None:
    """Register networks the nodes can talk over.

    Call ``register(interconnect)`` with an instance of
    :class:`esdash.plugin_api.Interconnect`.  An interconnect finds the interface and address
    a node binds and publishes on (by interface name patterns or an explicit
    ``cluster.interface``) and fails with a message naming the host when it is missing.
    Sessions choose it with ``cluster.interconnect``.
    """


@hookspec
def esdash_register_encryption_modes(register: Register[EncryptionMode]) -> None:
    """Register ways of protecting the data.

    Call ``register(mode)`` with an instance of :class:`esdash.plugin_api.EncryptionMode`.
    A mode decides where a node's data lives (plain directory, encrypted mount) and, for
    client-side modes, how documents, mappings and queries are transformed and responses
    decoded: ``client_codec`` returns a :class:`esdash.plugin_api.ClientCodec`, used once at
    plan time for the mapping and the queries, and in every bench rank for documents and
    responses.  Sessions choose it with ``encryption.mode``; its options are the other keys
    of the ``[encryption]`` table.
    """


@hookspec
def esdash_register_tracks(register: Register[Track]) -> None:
    """Register workloads.

    Call ``register(track)`` with an instance of :class:`esdash.plugin_api.Track`: index
    settings and mapping, a corpus (file or generator), the field schema (types and ranges)
    and query steps.  Sessions choose it with ``track.name``; its options are the other keys
    of the ``[track]`` table.
    """


@hookspec
def esdash_register_checks(register: Register[PreflightCheck]) -> None:
    """Register pre-flight checks of sessions.

    Call ``register(check)`` with an instance of :class:`esdash.plugin_api.PreflightCheck`.
    Every check runs before anything is launched: ``esdash session check``,
    ``esdash sweep --dry-run``, the dashboard's validate key, and ``esdash run`` /
    ``cluster up`` / ``submit`` all execute the same list (esdash's own checks and every
    plugin's), so they never disagree.  A check returns its findings, each naming the
    session key and the fix.
    """


# --------------------------------------------------------------------------- observers


@hookspec
def esdash_session_started(session: Session, run_dir: Path) -> None:
    """Called once when ``esdash run`` starts a session, before the cluster is launched.

    ``session`` is the validated :class:`esdash.plugin_api.Session`; ``run_dir`` the run's
    directory (a :class:`pathlib.Path`), where a plugin may write extra artefacts.
    """


@hookspec
def esdash_interval(session: Session, record: Interval) -> None:
    """Called for each interval record of the run stream, as the orchestrator follows it.

    ``record`` is the typed :class:`esdash.rundir.records.Interval` as stored in
    ``stream.jsonl``.  Keep this cheap: it runs once per interval (1 s by default) while the
    benchmark runs.
    """


@hookspec
def esdash_session_finished(session: Session, run_dir: Path, results: Results | None) -> None:
    """Called once when the session ends, successfully or not, before the cluster stops.

    ``results`` is the typed content of ``results.json``
    (:class:`esdash.rundir.records.Results`), or ``None`` when the session failed before
    the benchmark wrote any.
    """


@hookspec(firstresult=True)
def esdash_leakage(
    session: Session, run_dir: Path, track: Track, corpus: Corpus, codec: ClientCodec
) -> JsonObject | None:
    """Report what a client-side encryption mode still reveals to the cluster.

    Called once by the orchestrator at the end of a run with a client-side encryption mode
    (``esdash run``, after the results are read and before the cluster stops; also when the
    benchmark failed once its plan was made; not after a stop signal, whose stop must be
    prompt), and by ``esdash leakage SESSION`` before any data is ingested (then on a
    generated sample, with a scratch ``run_dir``).  Return a leakage report when ``codec``
    is yours, else None: the first report returned is kept.

    ``track``, ``corpus`` and ``codec`` are what the run itself used: the orchestrator has
    already resolved the track, the corpus and the key (a passphrase may have been asked
    for, a salt read from the data root), so a plugin must not resolve them again.  The
    codec holds the key and stays the caller's: do not close it.

    The report is the content of ``leakage.json``, a plain JSON object checked against
    :class:`esdash.rundir.records.Leakage` (a mismatch is a warning naming the plugin and
    the JSON path)::

        {"version": 1, "threat_model": str, "references": [str], "documents": int,
         "source": str, "auxiliary": str, "key_mode": str,
         "names": {"scheme": str, "declared": int, "learns": str,
                   "length_classes": int | null},
         "fields": [{"field": str, "type": str, "scheme": str, "learns": str,
                     "records": int, "distinct": int, "domain": int | null,
                     "length_classes": int | null,
                     "attacks": [{"name": str, "applicable": bool, "exact": float | null,
                                  "within_1pct": float | null, "note": str}],
                     "baseline": {attack-shaped} | null,
                     "verdict": str}]}

    Shares (``exact``, ``within_1pct``) are fractions from 0 to 1.  ``length_classes``: how
    many ciphertext lengths the stored values have (None: not measured); ``baseline``: the
    majority guess (every record guessed as the most frequent value), shaped like an attack,
    so no attack's share is read without it.  The report must never
    hold a plaintext value of the user's data, nor key material; esdash writes it, the
    plugin writes no file of its own.  It may take seconds (esdash says so while it runs);
    a failing implementation is a warning and never changes a run's exit status.
    """
