"""``OpeCipher``: one (key, in range, out range) context, with caches, over a chosen backend.

The backends compute the same function (pyope 0.2.2's ciphertexts, bit for bit); they differ
only in speed:

``native``
    Rust (PyO3, abi3), the ``esdash_ope_native`` module built from ``native/ope``.  About
    0.4 us per tree node (110-130x pyope per value without any cache), and batch calls
    release the GIL.  Optional: installed by ``scripts/provision`` when cargo is available.
``python``
    Pure Python (:mod:`esdash_plugins.encryption.abe.ope._python`), 4-30x faster than pyope;
    the fallback when the native module is missing, so esdash never needs a Rust toolchain.
``pyope``
    pyope itself, without any cache: the paper's cost, for side-by-side campaigns.

Two caches sit on top of the native and Python backends (research notes, §4.2): a node memo
inside the backend (the shallow tree nodes, shared by nearly every value) and two LRU caches
here, plaintext -> ciphertext and ciphertext -> plaintext.  Document values repeat heavily
(field strengths, ages, matrix sizes, per-series constants), so the LRU gives most of the
practical speed-up.  The caches are as sensitive as the key: memory only, and :meth:`clear`
drops them.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import NamedTuple, Protocol, TypeGuard

from .errors import InvalidCiphertextError, InvalidRangeError, OpeError, OutOfRangeError

#: Backend names, in order of preference for ``backend="auto"`` (pyope is never automatic).
BACKENDS = ("native", "python", "pyope")
#: The deepest node memo allowed (2**40 nodes would exceed any memory anyway).
MEMO_DEPTH_MAX = 40
#: Native limits: every range end must be an int64 or a uint64 (ES ``long``/``unsigned_long``).
NATIVE_MIN = -(2**63)
NATIVE_MAX = 2**64 - 1


class _Engine(Protocol):
    def encrypt(self, plaintext: int) -> int: ...
    def decrypt(self, ciphertext: int) -> int: ...
    def encrypt_many(self, plaintexts: Iterable[int]) -> list[int]: ...
    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]: ...
    def root_split(self) -> tuple[int, int]: ...
    def keystream(self, seed: int, length: int) -> bytes: ...
    def memo_len(self) -> int: ...
    def clear(self) -> None: ...


@functools.cache
def _native_module() -> ModuleType | None:
    """``esdash_ope_native``, or ``None`` when it is not installed (imported once, lazily)."""
    try:
        import esdash_ope_native  # type: ignore[import-untyped]  # built from native/ope
    except ImportError:
        return None
    module: ModuleType = esdash_ope_native
    return module


@functools.cache
def _pyope_available() -> bool:
    try:
        import pyope.ope  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def available_backends() -> list[str]:
    """The backends usable in this interpreter, fastest first."""
    found = []
    if _native_module() is not None:
        found.append("native")
    found.append("python")
    if _pyope_available():
        found.append("pyope")
    return found


class CacheInfo(NamedTuple):
    """Counters of one :class:`OpeCipher` (LRU lookups and the backend's node memo)."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    decrypt_hits: int
    decrypt_misses: int
    decrypt_currsize: int
    memo_nodes: int
    memo_depth: int


def _is_int(value: object) -> TypeGuard[int]:
    # bool is refused: pyope would take True as 1 for the descent but seed the leaf with the
    # string "True", a ciphertext nobody means.
    return isinstance(value, int) and not isinstance(value, bool)


def _checked(what: str, value: object, bounds: tuple[int, int], side: str) -> int:
    """``value`` as an int inside ``bounds``, else pyope's error for it (``what`` is
    plaintext or ciphertext, ``side`` the range it must be in: input or output)."""
    if not _is_int(value):
        raise OpeError(f"{what} must be an int, got {type(value).__name__}")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise OutOfRangeError(f"{what} {value} is not within the {side} range [{lo}, {hi}]")
    return int(value)


def _range(name: str, value: object) -> tuple[int, int]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidRangeError(f"{name}: expected a (start, end) pair of ints, got {value!r}")
    start, end = value
    if not (_is_int(start) and _is_int(end)):
        raise InvalidRangeError(f"{name}: start and end must be ints, got {value!r}")
    if start > end:
        raise InvalidRangeError(f"{name}: the start {start} is greater than the end {end}")
    return int(start), int(end)


class OpeCipher:
    """Order-preserving encryption, ciphertexts bit-identical to pyope 0.2.2's ``OPE``.

    ``OpeCipher(key, in_range, out_range)`` encrypts what ``pyope.ope.OPE(key,
    ValueRange(*in_range), ValueRange(*out_range))`` encrypts, to the same integers.  The key
    is used verbatim (pyope hashes nothing first: a ``generate_key()`` base64 text *is* the
    key).  Both ranges are inclusive and act as part of the key.

    ``memo_depth`` bounds the node memo to the top levels of the tree (2**depth nodes at most;
    16 is about 1 MiB natively and the measured sweet spot).  ``lru_size`` entries are kept
    per direction; 0 disables the LRU.  ``backend`` is ``"auto"`` (native if installed and the
    ranges fit in int64/uint64, else python), ``"native"``, ``"python"`` or ``"pyope"``; the
    pyope backend ignores both cache parameters, because it stands for the uncached paper
    setup.  The chosen backend is in :attr:`backend`.

    Errors are :class:`ValueError` subclasses as in pyope: :class:`OutOfRangeError` for values
    outside a range, :class:`InvalidCiphertextError` for a ciphertext that no plaintext maps
    to, :class:`InvalidRangeError` for bad ranges; a non-``bytes`` key is a :class:`TypeError`.
    One exception is inherited from pyope on purpose: if the sampler draws exactly 0.0 on a
    value's path (probability 2**-32 per draw), pyope divides by zero, and so does every
    backend here (:class:`ZeroDivisionError`), because no compatible ciphertext exists.

    Safe to share between threads (the native backend locks, LRU updates tolerate races;
    counters are then approximate).
    """

    __slots__ = (
        "backend",
        "in_range",
        "out_range",
        "memo_depth",
        "lru_size",
        "_engine",
        "_enc",
        "_dec",
        "_counts",
        "_lock",
    )

    def __init__(
        self,
        key: bytes,
        in_range: tuple[int, int],
        out_range: tuple[int, int],
        *,
        memo_depth: int = 16,
        lru_size: int = 65536,
        backend: str = "auto",
    ) -> None:
        if not isinstance(key, bytes):
            raise TypeError(f"key: expected bytes, but got {type(key).__name__!r}")
        in_range = _range("in_range", in_range)
        out_range = _range("out_range", out_range)
        if in_range[1] - in_range[0] > out_range[1] - out_range[0]:
            raise InvalidRangeError(
                f"in_range {list(in_range)} has more values than out_range {list(out_range)}"
            )
        if not _is_int(memo_depth) or not 0 <= memo_depth <= MEMO_DEPTH_MAX:
            raise ValueError(f"memo_depth must be an int in [0, {MEMO_DEPTH_MAX}]")
        if not _is_int(lru_size) or lru_size < 0:
            raise ValueError("lru_size must be an int >= 0")
        self.in_range = in_range
        self.out_range = out_range
        self.backend = self._choose(backend, in_range, out_range)
        if self.backend == "pyope":
            memo_depth = lru_size = 0
        self.memo_depth = memo_depth
        self.lru_size = lru_size
        self._engine = self._make_engine(key)
        self._enc: OrderedDict[int, int] = OrderedDict()
        self._dec: OrderedDict[int, int] = OrderedDict()
        # hits, misses, decrypt hits, decrypt misses
        self._counts = [0, 0, 0, 0]
        self._lock = threading.Lock()

    @staticmethod
    def _choose(backend: str, in_range: tuple[int, int], out_range: tuple[int, int]) -> str:
        lowest, highest = min(in_range[0], out_range[0]), max(in_range[1], out_range[1])
        fits = lowest >= NATIVE_MIN and highest <= NATIVE_MAX
        if backend == "auto":
            return "native" if fits and _native_module() is not None else "python"
        if backend == "native":
            if _native_module() is None:
                raise RuntimeError(
                    "the native OPE backend is not installed (esdash_ope_native); build it with "
                    "scripts/provision or `pip install ./native/ope`, or use backend='python'"
                )
            if not fits:
                raise InvalidRangeError(
                    "the native backend takes range ends in [-2**63, 2**64-1]; "
                    "use backend='python' for larger ranges"
                )
            return backend
        if backend == "pyope":
            if not _pyope_available():
                raise RuntimeError("backend='pyope' needs the pyope package (pip install pyope)")
            return backend
        if backend == "python":
            return backend
        raise ValueError(f"backend must be one of auto, {', '.join(BACKENDS)}; got {backend!r}")

    def _make_engine(self, key: bytes) -> _Engine:
        if self.backend == "native":
            native = _native_module()
            assert native is not None  # _choose picks it only where it is installed
            engine: _Engine = native.Engine(key, self.in_range, self.out_range, self.memo_depth)
            return engine
        if self.backend == "pyope":
            from ._pyope import PyopeEngine

            return PyopeEngine(key, self.in_range, self.out_range)
        from ._python import PythonEngine

        return PythonEngine(key, self.in_range, self.out_range, self.memo_depth)

    def __repr__(self) -> str:
        # Never the key, nor cached values.
        return (
            f"OpeCipher(in_range={self.in_range}, out_range={self.out_range}, "
            f"backend={self.backend!r})"
        )

    # ---------------------------------------------------------------------- validation

    def _plaintext(self, value: object) -> int:
        return _checked("plaintext", value, self.in_range, "input")

    def _ciphertext(self, value: object) -> int:
        return _checked("ciphertext", value, self.out_range, "output")

    @staticmethod
    def _checked_batch(
        values: Iterable[int], check: Callable[[object], int], bounds: tuple[int, int]
    ) -> list[int]:
        """``values`` as a list of ints inside ``bounds``; the common case (every one an int
        in range) costs one comparison per value, anything else goes through ``check``."""
        checked = [check(v) if type(v) is not int else v for v in values]
        lo, hi = bounds
        for v in checked:
            if not lo <= v <= hi:
                check(v)
        return checked

    def _remember(self, plaintext: int, ciphertext: int) -> None:
        """Cache a pair in both directions (OPE is a bijection onto its image)."""
        size = self.lru_size
        if not size:
            return
        for cache, key, value in (
            (self._enc, plaintext, ciphertext),
            (self._dec, ciphertext, plaintext),
        ):
            cache[key] = value
            if len(cache) > size:
                try:  # noqa: SIM105 (contextlib.suppress costs more than the whole hit path)
                    cache.popitem(last=False)
                except KeyError:  # emptied meanwhile by clear() in another thread
                    pass

    # ---------------------------------------------------------------------- single values

    def encrypt(self, plaintext: int) -> int:
        """The ciphertext of ``plaintext`` (an int inside the in range)."""
        cache = self._enc
        if type(plaintext) is int:
            ciphertext = cache.get(plaintext)
            if ciphertext is not None:
                self._counts[0] += 1
                try:  # noqa: SIM105 (contextlib.suppress costs more than the whole hit path)
                    cache.move_to_end(plaintext)
                except KeyError:  # evicted by another thread between the two calls
                    pass
                return ciphertext
            lo, hi = self.in_range
            value = plaintext if lo <= plaintext <= hi else self._plaintext(plaintext)
        else:
            value = self._plaintext(plaintext)
        ciphertext = self._engine.encrypt(value)
        self._counts[1] += 1
        if self.lru_size:
            self._remember(value, ciphertext)
        return ciphertext

    def decrypt(self, ciphertext: int) -> int:
        """The plaintext of ``ciphertext``; :class:`InvalidCiphertextError` if there is none."""
        cache = self._dec
        if type(ciphertext) is int:
            plaintext = cache.get(ciphertext)
            if plaintext is not None:
                self._counts[2] += 1
                try:  # noqa: SIM105
                    cache.move_to_end(ciphertext)
                except KeyError:
                    pass
                return plaintext
            lo, hi = self.out_range
            value = ciphertext if lo <= ciphertext <= hi else self._ciphertext(ciphertext)
        else:
            value = self._ciphertext(ciphertext)
        self._counts[3] += 1
        try:
            plaintext = self._engine.decrypt(value)
        except OpeError:
            raise
        except ValueError as error:  # the native module's invalid-ciphertext error
            raise InvalidCiphertextError(str(error)) from None
        if self.lru_size:
            self._remember(plaintext, value)
        return plaintext

    # ---------------------------------------------------------------------------- batches

    def encrypt_many(self, plaintexts: Iterable[int]) -> list[int]:
        """Ciphertexts of ``plaintexts``, in input order.

        Distinct values missing from the LRU go to the backend in one call, which sorts them
        and walks the tree once, depth first, so every node on their paths is computed once
        per batch (and natively without the GIL).  Ingest should call this once per field
        and bulk request.  Hits and misses count distinct values.
        """
        values = self._checked_batch(plaintexts, self._plaintext, self.in_range)
        return self._many(values, self._enc, 0, self._engine.encrypt_many, encrypting=True)

    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]:
        """Plaintexts of ``ciphertexts``, in input order; raises on the first invalid one."""
        values = self._checked_batch(ciphertexts, self._ciphertext, self.out_range)
        try:
            return self._many(values, self._dec, 2, self._engine.decrypt_many, encrypting=False)
        except OpeError:
            raise
        except ValueError as error:
            raise InvalidCiphertextError(str(error)) from None

    def _many(
        self,
        values: list[int],
        cache: OrderedDict[int, int],
        counter: int,
        compute: Callable[[list[int]], list[int]],
        *,
        encrypting: bool,
    ) -> list[int]:
        known: dict[int, int] = {}
        missing: list[int] = []
        for v in dict.fromkeys(values):
            found = cache.get(v)
            if found is None:
                missing.append(v)
            else:
                known[v] = found
                try:  # noqa: SIM105
                    cache.move_to_end(v)
                except KeyError:
                    pass
        self._counts[counter] += len(known)
        self._counts[counter + 1] += len(missing)
        if missing:
            for v, result in zip(missing, compute(missing), strict=True):
                known[v] = result
                if encrypting:
                    self._remember(v, result)
                else:
                    self._remember(result, v)
        return [known[v] for v in values]

    # ------------------------------------------------------------------------ housekeeping

    def cache_info(self) -> CacheInfo:
        """LRU counters and sizes, and the number of remembered tree nodes."""
        hits, misses, dhits, dmisses = self._counts
        return CacheInfo(
            hits=hits,
            misses=misses,
            maxsize=self.lru_size,
            currsize=len(self._enc),
            decrypt_hits=dhits,
            decrypt_misses=dmisses,
            decrypt_currsize=len(self._dec),
            memo_nodes=self._engine.memo_len(),
            memo_depth=self.memo_depth,
        )

    def clear(self) -> None:
        """Drop every cached pair and tree node, and reset the counters.

        The caches allow (approximate) decryption, so call this when a session ends.
        """
        with self._lock:
            self._enc = OrderedDict()
            self._dec = OrderedDict()
            self._counts = [0, 0, 0, 0]
            self._engine.clear()
