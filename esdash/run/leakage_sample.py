"""``esdash leakage SESSION``: the leakage report before any data is ingested.

The same analysis as at the end of ``esdash run`` (:mod:`esdash.run.leakage`), on the corpus
the session would ingest or a generated sample of it: track, corpus and key are resolved
exactly as ``esdash run`` resolves them (:func:`esdash.run.job.prepare_workload`,
:func:`esdash.run.job.client_codec_for`), so a user can choose the mode per field first.
No cluster starts; the plugin gets a scratch run directory, removed afterwards.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from esdash.errors import BadInput, EsdashError
from esdash.plugin.api import Track
from esdash.plugin.corpus import check_corpus
from esdash.plugin.manager import get_plugins
from esdash.run.job import client_codec_for, prepare_workload
from esdash.run.leakage import describe_documents
from esdash.rundir.records import Leakage
from esdash.session import Session

#: The track option ``esdash leakage --documents`` sets (generated tracks declare it).
DOCUMENTS_OPTION = "documents"


def with_documents(session: Session, documents: int | None, track: Track) -> Session:
    """``session`` with its track generating ``documents`` documents (None: unchanged)."""
    if documents is None:
        return session
    declared = {option.name for option in track.options}
    if DOCUMENTS_OPTION not in declared:
        raise BadInput(
            f"--documents: track {track.name} has no {DOCUMENTS_OPTION!r} option (its corpus "
            f"is a file); leave --documents out to analyse that corpus"
        )
    options = MappingProxyType({**session.track.options, DOCUMENTS_OPTION: documents})
    return replace(session, track=replace(session.track, options=options))


def refuse_server_side(session: Session) -> None:
    """A :class:`BadInput` for a mode that sends plaintext: there is nothing to measure."""
    plugins = get_plugins()
    mode = plugins.encryption(session.encryption.name)
    if mode.client_side:
        return
    client_side = [
        name for name in plugins.names("encryption") if plugins.encryption(name).client_side
    ]
    disk = "only the disks are encrypted, " if mode.node_data != "plain" else ""
    raise BadInput(
        f"{session.path}: encryption.mode = {mode.name!r} stores plaintext on the nodes "
        f"({disk}the search engine reads every value); leakage applies to client-side modes "
        f"({', '.join(client_side) or 'none is installed'}); set encryption.mode to one of them"
    )


def analyse_session(
    session: Session, documents: int | None = None, say: Callable[[str], None] | None = None
) -> Leakage:
    """The leakage report of ``session``'s mode on the corpus it would ingest, before any run.

    Track, corpus and codec are resolved exactly as ``esdash run`` resolves them; the
    plugin gets a scratch run directory, removed afterwards.  ``say`` hears what is being
    done (corpus generation and the analysis may take a while).
    """
    tell = say or (lambda text: None)
    refuse_server_side(session)
    plugins = get_plugins()
    track = plugins.track(session.track.name)
    session = with_documents(session, documents, track)
    # the key first: a missing or unsafe one is refused before the slow part, the corpus
    tell(f"reading the key of encryption mode {session.encryption.name}")
    codec = client_codec_for(session, track)
    if codec is None:  # a client-side mode without a codec for this track
        raise BadInput(
            f"encryption mode {session.encryption.name} encrypts nothing of track "
            f"{track.name} on the client; there is no leakage to measure"
        )
    try:
        tell(f"preparing the corpus of track {track.name} (generated once, then cached)")
        track, corpus, _steps = prepare_workload(session)
        check_corpus(corpus)  # a damaged (cached) corpus: exit 2 naming its file and line
        tell(f"attacks on the ciphertexts of {describe_documents(corpus)} begin")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="esdash-leakage-") as scratch:
            report = plugins.leakage(session, Path(scratch), track, corpus, codec)
        tell(f"attacks on the ciphertexts done in {time.monotonic() - started:.1f} s")
    finally:
        codec.close()
    if report is None:
        raise EsdashError(
            f"no plugin gave a leakage report for encryption mode {session.encryption.name} "
            f"(see the warnings above, if any)"
        )
    return report
