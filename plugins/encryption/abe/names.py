"""Field names as short deterministic tokens that Elasticsearch and OpenSearch accept as names.

Every document carries every field name, so names are a large share of an encrypted
document's bytes (1,660 of an MRI document's 4,271 bytes in the first format), and the nodes
parse, store and index each of them.  Two kinds of token, both deterministic (the server
learns which documents share a name, nothing more):

- **Declared names** (every segment of every path the track's schema declares): a keyed PRF,
  ``k`` + HMAC-SHA256(name PRF key, parent path, segment) truncated to 64 bits, as unpadded
  URL-safe base64 (12 characters).  A PRF cannot be inverted, so names are decrypted by a
  lookup table built from the schema and the key (it never leaves the client).  Collisions
  among the schema's names are checked when the table is built and are an error
  (:class:`NameCollision`), not a silent merge of two fields.
- **Other names** (dynamic fields the schema does not declare): deterministic AES-SIV,
  ``f`` + unpadded URL-safe base64 of the ciphertext, decryptable without a table, so any
  document still round-trips.

Each segment is keyed with its plaintext parent path, so nested objects stay objects and
equal segment names under different parents differ.  Tokens use ``A-Z a-z 0-9 - _`` after a
letter: they never start with ``_`` (metadata fields) and never contain ``.``, ``/``,
``+``, ``=``, ``*`` or whitespace.  A query simply encrypts the names it uses.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

from esdash.plugin_api import BadInput

from .values import foreign

#: First letter of an AES-SIV token (names the schema does not declare).
PREFIX = "f"
#: First letter of a PRF token (names the schema declares).
PRF_PREFIX = "k"
#: Bytes of HMAC-SHA256 kept per PRF token: 64 bits, so a collision among a schema's few
#: hundred names has a probability of about n^2 / 2^65 (checked anyway).
PRF_BYTES = 8
#: Associated data / domain separation of name tokens.
_NAME_AD = b"esdash-name"


class NameCollision(BadInput):
    """Two names of the schema got one token under one parent (refused, never merged)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def segments(path: str) -> list[tuple[str, str]]:
    """``(parent path, segment)`` of each segment of a dotted ``path``, outermost first."""
    parts = path.split(".")
    return [(".".join(parts[:depth]), part) for depth, part in enumerate(parts)]


class NameCipher:
    """Encrypts and decrypts field paths segment by segment, with caches both ways.

    ``prf_key`` and ``declared`` (the schema's paths) switch on the PRF tokens for declared
    names; without them every name is an AES-SIV token (the first format's names).
    """

    __slots__ = ("_siv", "_prf_key", "_prf_bytes", "_enc", "_dec", "scheme")

    def __init__(
        self,
        key: bytes,
        prf_key: bytes | None = None,
        declared: Iterable[str] = (),
        *,
        prf_bytes: int = PRF_BYTES,
    ) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        self._siv = AESSIV(key)
        self._prf_key = prf_key
        self._prf_bytes = prf_bytes
        self._enc: dict[tuple[str, str], str] = {}
        self._dec: dict[tuple[str, str], str] = {}
        #: How names are protected, for the leakage report.
        self.scheme = (
            f"keyed PRF (HMAC-SHA256, {8 * prf_bytes} bits) for the schema's names, "
            "AES-SIV for others"
            if prf_key is not None
            else "deterministic (AES-SIV)"
        )
        if prf_key is not None:
            self._declare(declared)

    def __repr__(self) -> str:
        return "NameCipher(<key hidden>)"

    def _declare(self, paths: Iterable[str]) -> None:
        """Fill both tables with the PRF tokens of every segment of ``paths``."""
        for path in paths:
            for parent, name in segments(path):
                if (parent, name) in self._enc:
                    continue
                if not name:
                    raise BadInput(f"schema field {path!r}: empty name segment")
                token = self._prf(name, parent)
                other = self._dec.get((parent, token))
                if other is not None and other != name:
                    where = f"under {parent!r}" if parent else "at the top level"
                    raise NameCollision(
                        f"schema fields {other!r} and {name!r} {where} get the same "
                        f"{8 * self._prf_bytes}-bit name token; rename one of them"
                    )
                self._enc[(parent, name)] = token
                self._dec[(parent, token)] = name

    def _prf(self, name: str, parent: str) -> str:
        assert self._prf_key is not None
        message = b"\x00".join((_NAME_AD, parent.encode(), name.encode()))
        digest = hmac.new(self._prf_key, message, hashlib.sha256).digest()
        return PRF_PREFIX + _b64(digest[: self._prf_bytes])

    def segment(self, name: str, parent: str = "") -> str:
        """The encrypted form of one segment ``name`` under the plaintext path ``parent``."""
        key = (parent, name)
        found = self._enc.get(key)
        if found is None:
            if not name or "." in name:
                raise ValueError(f"invalid field name segment {name!r}")
            data = self._siv.encrypt(name.encode("utf-8"), [_NAME_AD, parent.encode()])
            found = PREFIX + _b64(data)
            self._enc[key] = found
            self._dec[(parent, found)] = name
        return found

    def key(self, key: str, parent: str = "") -> str:
        """The encrypted form of a document key (``a`` or dotted ``a.b``) under ``parent``."""
        if "." not in key:
            return self.segment(key, parent)
        out = []
        for part in key.split("."):
            out.append(self.segment(part, parent))
            parent = f"{parent}.{part}" if parent else part
        return ".".join(out)

    def path(self, path: str) -> str:
        """The encrypted form of a full plaintext path."""
        return self.key(path, "")

    def decrypt_segment(self, token: str, parent: str = "") -> str:
        """One segment's plaintext; :class:`~.values.ForeignCiphertext` if foreign."""
        found = self._dec.get((parent, token))
        if found is None:
            found = self._decrypt_segment(token, parent)
            self._dec[(parent, token)] = found
        return found

    def _decrypt_segment(self, token: str, parent: str) -> str:
        from cryptography.exceptions import InvalidTag

        where = f"under {parent!r}" if parent else "at the top level"
        what = f"the stored field name {token[:40]!r} {where}"
        if token.startswith(PRF_PREFIX) and self._prf_key is not None:
            raise foreign(what, ValueError("not a name of the track's schema"))
        if not token.startswith(PREFIX):
            raise foreign(what, ValueError("not an encrypted field name"))
        raw = token[len(PREFIX) :]
        try:
            padded = raw + "=" * (-len(raw) % 4)
            data = base64.b64decode(padded, altchars=b"-_", validate=True)
            return self._siv.decrypt(data, [_NAME_AD, parent.encode()]).decode("utf-8")
        except (InvalidTag, ValueError) as exc:  # binascii.Error is a ValueError
            raise foreign(what, exc) from exc

    def decrypt_key(self, token: str, parent: str = "") -> str:
        """The plaintext of an encrypted document key (dotted keys segment by segment)."""
        if "." not in token:
            return self.decrypt_segment(token, parent)
        out = []
        for part in token.split("."):
            plain = self.decrypt_segment(part, parent)
            out.append(plain)
            parent = f"{parent}.{plain}" if parent else plain
        return ".".join(out)
