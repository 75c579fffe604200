"""The ``pyope`` backend: pyope 0.2.2 itself, behind the engine interface.

It exists so that a session can reproduce the paper's ABE cost (pure, recursive Python for
every value, no caches) and lay it beside esdash's backends in the same campaign.  pyope is
imported only when this backend is chosen.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import InvalidCiphertextError


class PyopeEngine:
    """pyope's ``OPE`` with the engine methods :class:`~.ope.OpeCipher` calls."""

    def __init__(self, key: bytes, in_range: tuple[int, int], out_range: tuple[int, int]) -> None:
        # pyope ships no type information.
        from pyope import errors  # type: ignore[import-untyped]
        from pyope.ope import OPE, ValueRange  # type: ignore[import-untyped]

        self._ope = OPE(key, ValueRange(*in_range), ValueRange(*out_range))
        # pyope rejects a ciphertext either at the leaf or, when the descent reaches a child
        # without plaintexts, by failing to build that child's (inverted) ValueRange.
        self._invalid = (errors.InvalidCiphertextError, errors.InvalidRangeLimitsError)

    def __repr__(self) -> str:
        return "<esdash_plugins.encryption.abe.ope PyopeEngine>"  # never the key

    def encrypt(self, plaintext: int) -> int:
        ciphertext: int = self._ope.encrypt(plaintext)
        return ciphertext

    def decrypt(self, ciphertext: int) -> int:
        try:
            plaintext: int = self._ope.decrypt(ciphertext)
        except self._invalid:
            raise InvalidCiphertextError(f"invalid ciphertext {ciphertext}") from None
        return plaintext

    def encrypt_many(self, plaintexts: Iterable[int]) -> list[int]:
        values = list(plaintexts)
        results = {p: self.encrypt(p) for p in sorted(set(values))}
        return [results[p] for p in values]

    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]:
        values = list(ciphertexts)
        results = {c: self.decrypt(c) for c in sorted(set(values))}
        return [results[c] for c in values]

    def root_split(self) -> tuple[int, int]:
        import math

        from pyope import stat

        ope = self._ope
        y = ope.out_range.start - 1 + int(math.ceil(ope.out_range.size() / 2.0))
        return y, stat.sample_hgd(ope.in_range, ope.out_range, y, ope.tape_gen(y))

    def keystream(self, seed: int, length: int) -> bytes:
        bits = self._ope.tape_gen(seed)
        return bytes(int("".join(str(next(bits)) for _ in range(8)), 2) for _ in range(length))

    def memo_len(self) -> int:
        return 0

    def clear(self) -> None:
        """pyope keeps no caches."""
