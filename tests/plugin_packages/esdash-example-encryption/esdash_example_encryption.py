"""esdash-example-encryption: keyed pseudonyms for identifying fields, in one module.

A third-party encryption mode written against ``esdash.plugin_api`` alone.  The client
replaces the values of the chosen keyword fields by HMAC-SHA256 pseudonyms before they leave
it; equality queries on those fields are rewritten to the pseudonym, so ``term`` and
``match`` on them still find the same documents, while the cluster (and its disks) never sees
the plaintext.  Anything else on those fields (ranges, prefixes, scripts) cannot work on
pseudonyms and is refused up front with the query part that needs it.

Sessions pick it with::

    [encryption]
    mode = "pseudonyms"
    key_file = "~/.config/esdash/pseudonyms.key"   # 32 random bytes or more, mode 0600
    fields = ["BodyPart"]
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from esdash.plugin_api import (
    REQUIRED,
    BadInput,
    ClientCodec,
    EncryptionMode,
    Option,
    Owner,
    QueryNotSupported,
    Track,
    hookimpl,
)

#: Query kinds that compare a field with a value: rewritten to the value's pseudonym.
EQUALITY = ("term", "match", "match_phrase")


class Pseudonyms(EncryptionMode):
    name = "pseudonyms"
    description = "keyword fields replaced by keyed HMAC-SHA256 pseudonyms on the client"
    options = (
        Option("key_file", "path", "file with the secret key (32+ bytes, mode 0600)", REQUIRED),
        Option("fields", "list[str]", "keyword fields to pseudonymise", REQUIRED),
    )

    def check_options(self, options: Mapping[str, Any], owner: Owner) -> None:
        key_file = Path(options["key_file"]).expanduser()
        if not key_file.is_file():
            raise BadInput(f"encryption.key_file: {key_file} does not exist; create 32 bytes")
        if key_file.stat().st_mode & 0o077:
            raise BadInput(f"encryption.key_file: others may read {key_file}; chmod 600 it")
        if len(key_file.read_bytes()) < 32:
            raise BadInput(f"encryption.key_file: {key_file} holds under 32 bytes of key")

    def client_codec(
        self,
        options: Mapping[str, Any],
        track: Track,
        *,
        track_options: Mapping[str, Any] | None = None,
        data_root: Path | None = None,
    ) -> ClientCodec:
        key_file = os.fspath(Path(options["key_file"]).expanduser())
        return PseudonymCodec(key_file, tuple(options["fields"]))

    def codec_from_spec(self, spec: Mapping[str, Any]) -> ClientCodec:
        return PseudonymCodec(spec["key_file"], tuple(spec["fields"]))


class PseudonymCodec(ClientCodec):
    """Documents, mappings and queries with the chosen fields' values pseudonymised."""

    label = "pseudonyms"

    def __init__(self, key_file: str, fields: tuple[str, ...]) -> None:
        self.key_file, self.fields = key_file, fields
        self.key = Path(key_file).read_bytes()

    def pseudonym(self, value: object) -> str:
        return hmac.new(self.key, str(value).encode(), hashlib.sha256).hexdigest()[:32]

    def encode_index_body(self, body: Mapping[str, Any]) -> dict[str, Any]:
        encoded = dict(body)
        mappings = dict(encoded.get("mappings") or {})
        properties = dict(mappings.get("properties") or {})
        for field in self.fields:
            properties[field] = {"type": "keyword"}  # pseudonyms are compared, never analysed
        encoded["mappings"] = {**mappings, "properties": properties}
        return encoded

    def encode_document(self, doc: dict[str, Any]) -> dict[str, Any]:
        return {k: self.pseudonym(v) if k in self.fields else v for k, v in doc.items()}

    def encode_query(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._rewrite(body, "")

    def _rewrite(self, node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [self._rewrite(item, f"{where}[{i}]") for i, item in enumerate(node)]
        if not isinstance(node, Mapping):
            return node
        rewritten = {}
        for key, value in node.items():
            part = f"{where}.{key}" if where else key
            touched = isinstance(value, Mapping) and set(value) & set(self.fields)
            if touched and key in EQUALITY:
                field, wanted = next(iter(value.items()))
                if isinstance(wanted, Mapping):  # {"term": {"f": {"value": v}}}
                    wanted = wanted.get("value", wanted.get("query"))
                rewritten["term"] = {field: self.pseudonym(wanted)}
            elif touched:
                raise QueryNotSupported(part, f"{key} cannot compare pseudonyms")
            else:
                rewritten[key] = self._rewrite(value, part)
        return rewritten

    def decode_response(
        self, body: dict[str, Any], request: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return body  # pseudonyms stay pseudonyms: who holds the key looks them up

    def spec(self) -> dict[str, Any]:
        return {"key_file": self.key_file, "fields": list(self.fields)}

    def close(self) -> None:
        self.key = b""


@hookimpl
def esdash_register_encryption_modes(register) -> None:
    register(Pseudonyms())
