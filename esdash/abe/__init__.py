"""Client-side "ABE" encryption: AES-SIV for names and strings, OPE for numbers and dates.

The paper's third setup (Nolte, Quentin, Kunkel): documents are encrypted on the client, so
the cluster only ever stores and compares ciphertexts.  Its pieces:

- :mod:`esdash.abe.keys`: key file or Argon2id passphrase, HKDF subkeys per field;
- :mod:`esdash.abe.opecore`: the order-preserving cipher (``esdash.ope`` or pyope);
- :mod:`esdash.abe.values`: exact value grids (numbers, dates) and AES-SIV strings;
- :mod:`esdash.abe.names`: field names as valid Elasticsearch names;
- :mod:`esdash.abe.codec`: documents, mapping and the codec the bench ranks use;
- :mod:`esdash.abe.query`: query rewriting and response decoding.

The plugin that exposes it is ``esdash_plugins.encryption.abe``.
"""
