"""Field names as deterministic AES-SIV ciphertexts that Elasticsearch accepts as names.

Each path segment is encrypted on its own, with the parent path as associated data, so
nested objects stay objects and equal segment names under different parents differ.  The
ciphertext is written as ``f`` + unpadded URL-safe base64 (``A-Z a-z 0-9 - _``): it never
starts with ``_`` (no clash with metadata fields) or a digit, and never contains ``.``,
``/``, ``+``, ``=``, ``*`` or whitespace.  Base64 rather than base32: every document carries
every name, and the shorter names make an MRI document 10 % smaller, which the nodes feel
at ingest.  Names are deterministic, so a query simply encrypts the names it uses.
"""

from __future__ import annotations

import base64

from .values import foreign

PREFIX = "f"


class NameCipher:
    """Encrypts and decrypts field paths segment by segment, with caches both ways."""

    __slots__ = ("_siv", "_enc", "_dec")

    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        self._siv = AESSIV(key)
        self._enc: dict[tuple[str, str], str] = {}
        self._dec: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return "NameCipher(<key hidden>)"

    def segment(self, name: str, parent: str = "") -> str:
        """The encrypted form of one segment ``name`` under the plaintext path ``parent``."""
        key = (parent, name)
        found = self._enc.get(key)
        if found is None:
            if not name or "." in name:
                raise ValueError(f"invalid field name segment {name!r}")
            data = self._siv.encrypt(name.encode("utf-8"), [b"esdash-name", parent.encode()])
            found = PREFIX + base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
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
        if not token.startswith(PREFIX):
            raise foreign(what, ValueError("not an encrypted field name"))
        raw = token[len(PREFIX) :]
        try:
            padded = raw + "=" * (-len(raw) % 4)
            data = base64.b64decode(padded, altchars=b"-_", validate=True)
            return self._siv.decrypt(data, [b"esdash-name", parent.encode()]).decode("utf-8")
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
