"""The leakage report of a run in a client-side encryption mode, asked of its plugin.

The analysis needs the key and the plaintext corpus, so it runs in the mode's plugin (hook
``esdash_leakage``); :func:`record_leakage` only calls it at the end of ``esdash run``, with
the track, corpus and codec the run resolved, and writes ``leakage.json`` through
:class:`esdash.rundir.layout.RunDir`.  It says what it does (the analysis may take seconds);
a failure is a warning, never the run's exit status.  ``esdash leakage SESSION`` runs the
same analysis before any run: :mod:`esdash.run.leakage_sample`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from esdash.plugin.api import ClientCodec, Track
from esdash.plugin.manager import get_plugins
from esdash.plugin.values import Corpus
from esdash.rundir.layout import RunDir
from esdash.session import Session


def describe_documents(corpus: Corpus) -> str:
    """``a corpus of 2,000 documents`` (or ``the corpus`` when the track does not count them)."""
    return f"a corpus of {corpus.documents:,} documents" if corpus.documents else "the corpus"


def record_leakage(
    run: RunDir,
    session: Session,
    track: Track,
    corpus: Corpus,
    codec: ClientCodec,
    out: TextIO,
) -> Path | None:
    """Ask the plugins for the run's leakage report and write it; the file, or None.

    Prints ``leakage analysis begins (a corpus of N documents; ...)`` before and
    ``leakage: <path>`` after; whatever fails is one warning line on stderr.
    """
    print(
        f"leakage analysis begins ({describe_documents(corpus)}; the mode's plugin samples it)",
        file=out,
        flush=True,
    )
    try:
        report = get_plugins().leakage(session, run.path, track, corpus, codec)
        if report is None:
            _warn(
                f"no leakage report: no plugin answered for encryption mode "
                f"{session.encryption.name} (see the warnings above, if any)"
            )
            return None
        run.write_leakage(report)
    except Exception as exc:  # the run is measured: nothing here may change its outcome
        _warn(f"leakage analysis failed: {type(exc).__name__}: {exc}")
        return None
    print(f"leakage: {run.leakage_file}", file=out, flush=True)
    return run.leakage_file


def _warn(text: str) -> None:
    print(f"esdash: warning: {text}", file=sys.stderr, flush=True)
