"""Encryption mode ``abe``: the paper's client-side encryption, end to end.

Field names, text and keywords are encrypted with deterministic AES-SIV, numbers and dates
with order-preserving encryption bit-identical to pyope 0.2.2; the mapping, every document
at ingest and every query are rewritten on the client, and responses decoded.  Details in
:mod:`esdash.abe` and ``docs/plugins.md``.

Options are only checked for their types when a session is checked: the key file may not
exist yet on the machine that checks it (it is created where the job runs).  ``esdash run``
loads the key before any node starts and stops with a message naming the file and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import esdash
from esdash.plugin_api import ClientCodec, EncryptionMode, Option, Track

OPE_BACKENDS = ("auto", "native", "python", "pyope")


class AbeMode(EncryptionMode):
    name = "abe"
    description = "client-side encryption: AES-SIV names and strings, order-preserving numbers"
    client_side = True
    options = (
        Option("key_file", "path", "key: >= 32 random bytes or pyope base64 text, mode 0600"),
        Option("passphrase_file", "path", "passphrase (first line), mode 0600; Argon2id"),
        Option(
            "passphrase_command",
            "str",
            "program printing the passphrase on its first line (never run through a shell)",
        ),
        Option(
            "salt_file",
            "path",
            "Argon2id salt of a passphrase (default: abe-kdf.json in the data root)",
        ),
        Option(
            "key_mode",
            "str",
            "per-field: HKDF subkeys per field; single: one pyope key for all (the paper's)",
            default="per-field",
            choices=("per-field", "single"),
        ),
        Option(
            "ope_backend",
            "str",
            "OPE implementation; pyope reproduces the paper's cost",
            default="auto",
            choices=OPE_BACKENDS,
        ),
        Option(
            "decode_responses",
            "bool",
            "workers decrypt every response inside the measured service time",
            default=True,
        ),
        Option(
            "text_match",
            "str",
            "match on text+keyword fields: words (exact words, the paper's) or refuse",
            default="words",
            choices=("words", "refuse"),
        ),
    )

    def client_codec(
        self,
        options: Mapping[str, Any],
        track: Track,
        *,
        track_options: Mapping[str, Any] | None = None,
        data_root: Path | None = None,
    ) -> ClientCodec:
        from esdash.abe.codec import AbeCodec, plan_fields
        from esdash.abe.keys import key_source

        values = {o.name: options.get(o.name, o.default) for o in self.options}
        track_options = track_options or {}
        fields = plan_fields(track.field_specs(track_options), track.index_body(track_options))
        return AbeCodec(
            fields,
            key_source(values, data_root),
            key_mode=values["key_mode"],
            ope_backend=values["ope_backend"],
            text_match=values["text_match"],
            decode_responses=values["decode_responses"],
        )

    def codec_from_spec(self, spec: Mapping[str, Any]) -> ClientCodec:
        from esdash.abe.codec import AbeCodec

        return AbeCodec.from_spec(spec)


@esdash.hookimpl
def esdash_register_encryption_modes(register) -> None:
    register(AbeMode())
