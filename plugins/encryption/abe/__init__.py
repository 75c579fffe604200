"""Client-side "ABE" encryption: AES-SIV for names and strings, OPE for numbers and dates.

The paper's third setup (Nolte, Quentin, Kunkel): documents are encrypted on the client, so
the cluster only ever stores and compares ciphertexts.  This package is the built-in
encryption plugin that provides the mode ``abe`` (:class:`~.mode.AbeMode`, registered by the
hook below), and the crypto behind it:

- :mod:`esdash_plugins.encryption.abe.mode`: the mode, its options and their checks;
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
"""

from __future__ import annotations

from esdash.plugin_api import hookimpl

from .mode import KEY_SOURCES, OPE_BACKENDS, AbeMode

__all__ = ["KEY_SOURCES", "OPE_BACKENDS", "AbeMode", "esdash_register_encryption_modes"]


@hookimpl
def esdash_register_encryption_modes(register) -> None:
    register(AbeMode())
