"""The order-preserving cipher the ABE mode uses: the ``ope`` subpackage when present, else pyope.

``esdash_plugins.encryption.abe.ope.OpeCipher`` is esdash's fast, pyope-0.2.2-compatible core
(native with a pure-Python fallback, node memo and LRU caches).  Where it is not installed this
adapter wraps ``pyope.ope.OPE`` behind the same interface (``encrypt``, ``decrypt``,
``encrypt_many``, ``decrypt_many``), so the codec never cares which one runs.  The codec keeps
per-field value caches of its own, so the contexts are made without an LRU.

``backend = "pyope"`` reproduces the paper's cost: every value goes through pyope's
recursion, with no cache in front of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from esdash.plugin_api import BadInput

#: esdash's own OPE core; None where this installation lacks the ``ope`` subpackage.
_OpeCipher: type[OpeCipher] | None = None
try:  # the fast core, when the OPE package has landed
    from .ope import OpeCipher

    _OpeCipher = OpeCipher
except ImportError:  # pragma: no cover - depends on the installation
    pass

BACKENDS = ("auto", "native", "python", "pyope")
#: Entries of each plaintext->ciphertext and ciphertext->plaintext cache of the adapter.
LRU_SIZE = 65536


class OpeContext(Protocol):
    """One OPE context, whichever implementation runs it (``OpeCipher`` or :class:`PyopeCipher`)."""

    def encrypt(self, plaintext: int) -> int: ...
    def decrypt(self, ciphertext: int) -> int: ...
    def encrypt_many(self, plaintexts: Iterable[int]) -> list[int]: ...
    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]: ...
    def clear(self) -> None: ...


def available() -> str:
    """Which implementation ``backend = "auto"`` uses here (for messages and benchmarks)."""
    if _OpeCipher is not None:
        return "esdash_plugins.encryption.abe.ope"
    return "pyope (esdash_plugins.encryption.abe.ope not installed)"


def ope_cipher(
    key: bytes, in_range: tuple[int, int], out_range: tuple[int, int], backend: str = "auto"
) -> OpeContext:
    """An OPE context for ``(key, in_range, out_range)`` with the chosen backend."""
    if backend not in BACKENDS:
        raise BadInput(f"ope_backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if _OpeCipher is not None:
        try:
            # The codec caches values per field itself, so no LRU here (the node memo stays);
            # backend "pyope" runs without any cache: the paper's cost.
            return _OpeCipher(key, in_range, out_range, backend=backend, lru_size=0)
        except RuntimeError as exc:  # e.g. the native module is not installed here
            raise BadInput(f"ope_backend = {backend!r}: {exc}") from None
    if backend in ("native", "python"):
        raise BadInput(
            f"ope_backend = {backend!r} needs esdash_plugins.encryption.abe.ope, which is not "
            'installed here; use ope_backend = "auto" or "pyope"'
        )
    return PyopeCipher(key, in_range, out_range, lru_size=0)


class PyopeCipher:
    """pyope 0.2.2 with ``OpeCipher``'s interface and, unless ``lru_size=0``, value caches."""

    def __init__(
        self,
        key: bytes,
        in_range: tuple[int, int],
        out_range: tuple[int, int],
        lru_size: int = LRU_SIZE,
    ) -> None:
        # pyope ships no type information.
        from pyope.ope import OPE, ValueRange  # type: ignore[import-untyped]

        self._ope = OPE(bytes(key), ValueRange(*in_range), ValueRange(*out_range))
        self._size = lru_size
        self._enc: dict[int, int] = {}
        self._dec: dict[int, int] = {}

    def __repr__(self) -> str:
        return "PyopeCipher(<key hidden>)"

    def encrypt(self, plaintext: int) -> int:
        return self._cached(self._enc, plaintext, self._ope.encrypt)

    def decrypt(self, ciphertext: int) -> int:
        return self._cached(self._dec, ciphertext, self._ope.decrypt)

    def _cached(self, cache: dict[int, int], value: int, compute: Callable[[int], int]) -> int:
        """``compute(value)`` through ``cache``, which is emptied when full: a bound on its
        memory without an LRU's bookkeeping, and pyope's cost dwarfs the odd refill."""
        found = cache.get(value)
        if found is None:
            found = compute(value)
            if self._size:
                if len(cache) >= self._size:
                    cache.clear()
                cache[value] = found
        return found

    def encrypt_many(self, plaintexts: Iterable[int]) -> list[int]:
        return [self.encrypt(p) for p in plaintexts]

    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]:
        return [self.decrypt(c) for c in ciphertexts]

    def clear(self) -> None:
        self._enc.clear()
        self._dec.clear()
