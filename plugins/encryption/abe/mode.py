"""Encryption mode ``abe``: the paper's client-side encryption, end to end.

Field names, text and keywords are encrypted with deterministic AES-SIV, numbers and dates
with order-preserving encryption bit-identical to pyope 0.2.2; the mapping, every document
at ingest and every query are rewritten on the client, and responses decoded.  Details in
:mod:`esdash_plugins.encryption.abe` and ``docs/plugins.md``.

:meth:`AbeMode.check_options` refuses what ``esdash run`` would refuse about the key source
(exactly one source; a key or passphrase file that is missing, others may read, or too short;
a key file that is weak, :data:`~.keys.KEY_RULE`; a passphrase command that is not there),
for ``esdash session check`` and before launch.
``esdash run`` then loads the key before any node starts.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from esdash.plugin_api import (
    BadInput,
    ClientCodec,
    EncryptionMode,
    JsonMapping,
    Option,
    OptionValues,
    Owner,
    Track,
)

OPE_BACKENDS = ("auto", "native", "python", "pyope")
KEY_SOURCES = ("key_file", "passphrase_file", "passphrase_command")


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

    def check_options(self, options: OptionValues, owner: Owner) -> None:
        """Exactly one key source, and a usable one; nothing is created and nothing run.

        The key and passphrase files go through the checks that load them at run time
        (:func:`esdash_plugins.encryption.abe.keys.read_key_file`: mode 0600, owned by you or
        root, long enough, not weak); a passphrase command is checked to exist, not run (it may ask
        someone); an existing ``salt_file`` must be an esdash salt file (a missing one is
        created by the run).
        """
        from . import keys

        chosen = [k for k in KEY_SOURCES if options.get(k)]
        if len(chosen) != 1:
            found = ", ".join(chosen) if chosen else "none"
            raise BadInput(
                f"encryption.{(chosen or KEY_SOURCES)[0]}: set exactly one of "
                f"{', '.join('encryption.' + k for k in KEY_SOURCES)} (found: {found}); the "
                f"key itself never goes into the session file"
            )
        kind = chosen[0]
        try:
            if kind == "key_file":
                keys.read_key_file(Path(options[kind]))
            elif kind == "passphrase_file":
                keys.read_passphrase_file(Path(options[kind]))
            else:
                _check_command(options[kind])
        except BadInput as exc:
            raise BadInput(f"encryption.{kind}: {exc}") from None
        salt_file = options.get("salt_file")
        if salt_file is not None and Path(salt_file).exists():
            try:
                keys.load_kdf(Path(salt_file), create=False)
            except BadInput as exc:
                raise BadInput(f"encryption.salt_file: {exc}") from None

    def client_codec(
        self,
        options: OptionValues,
        track: Track,
        *,
        track_options: OptionValues | None = None,
        data_root: Path | None = None,
    ) -> ClientCodec:
        from .codec import AbeCodec, plan_fields
        from .keys import key_source

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

    def codec_from_spec(self, spec: JsonMapping) -> ClientCodec:
        from .codec import AbeCodec

        return AbeCodec.from_spec(spec)


def _check_command(command: str) -> None:
    """A passphrase command that can be started here (it is run without a shell)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise BadInput(f"cannot split {command!r} into words: {exc}") from None
    if not argv:
        raise BadInput("empty command; name a program that prints the passphrase")
    if shutil.which(argv[0]) is None:
        raise BadInput(
            f"{argv[0]!r} is not an executable program here (the command runs without a "
            f"shell; for pipes write `sh -c '...'`)"
        )
