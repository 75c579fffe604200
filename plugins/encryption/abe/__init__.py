"""Client-side "ABE" encryption: AES-SIV for names and strings, OPE for numbers and dates.

The paper's third setup (Nolte, Quentin, Kunkel): documents are encrypted on the client, so
the cluster only ever stores and compares ciphertexts.  This package is the built-in
encryption plugin that provides the mode ``abe`` (:class:`~.mode.AbeMode`, registered by the
hook below), and the crypto behind it:

- :mod:`esdash_plugins.encryption.abe.mode`: the mode, its options and their checks;
- :mod:`esdash_plugins.encryption.abe.checks`: the pre-flight check of a session under
  ``abe`` (the track's field types, the data root's salt file);
- :mod:`esdash_plugins.encryption.abe.keys`: key file or Argon2id passphrase, HKDF subkeys
  per field;
- :mod:`esdash_plugins.encryption.abe.opecore`: the order-preserving cipher
  (:mod:`esdash_plugins.encryption.abe.ope` or pyope);
- :mod:`esdash_plugins.encryption.abe.values`: exact value grids (numbers, dates) and
  AES-SIV strings;
- :mod:`esdash_plugins.encryption.abe.names`: field names as valid Elasticsearch names;
- :mod:`esdash_plugins.encryption.abe.codec`: documents, mapping and the codec the bench
  ranks use;
- :mod:`esdash_plugins.encryption.abe.query`: query rewriting and response decoding;
- :mod:`esdash_plugins.encryption.abe.ope`: esdash's pyope-0.2.2-compatible OPE core.
- :mod:`esdash_plugins.encryption.abe.leakage`: the leakage report (hook
  ``esdash_leakage`` below), with the inference attacks of
  :mod:`esdash_plugins.encryption.abe.attacks`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from esdash.plugin_api import (
    ClientCodec,
    Corpus,
    EncryptionMode,
    JsonObject,
    PreflightCheck,
    Register,
    Session,
    Track,
    hookimpl,
)

from .mode import KEY_SOURCES, OPE_BACKENDS, AbeMode

__all__ = [
    "KEY_SOURCES",
    "OPE_BACKENDS",
    "AbeMode",
    "esdash_leakage",
    "esdash_register_encryption_modes",
]


@hookimpl
def esdash_register_encryption_modes(register: Register[EncryptionMode]) -> None:
    register(AbeMode())


@hookimpl
def esdash_register_checks(register: Register[PreflightCheck]) -> None:
    from .checks import AbeSession

    register(AbeSession())


@hookimpl
def esdash_leakage(
    session: Session, run_dir: Path, track: Track, corpus: Corpus, codec: ClientCodec
) -> JsonObject | None:
    """The leakage report of an ABE codec (:mod:`.leakage`); None for any other codec.

    The auxiliary sample is generated into a scratch directory under ``run_dir``, removed
    again whatever happens.
    """
    from .codec import AbeCodec
    from .leakage import report_for

    if not isinstance(codec, AbeCodec):
        return None
    scratch = Path(tempfile.mkdtemp(prefix=".leakage-", dir=run_dir))
    try:
        return report_for(session, track, corpus, codec, work_dir=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
