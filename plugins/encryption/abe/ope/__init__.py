"""Order-preserving encryption for the ABE mode: pyope 0.2.2's ciphertexts, 100x+ faster.

The paper's ABE mode encrypted numbers with pyope (BCLO, EUROCRYPT 2009), which costs about a
millisecond per value because it is recursive pure Python.  esdash must stay compatible with
data written that way, so :class:`OpeCipher` computes exactly pyope's function of (key bytes,
in range, out range, value), from a native Rust core or a pure-Python fallback, with a node
memo and LRU caches on top.  The research notes (``ope.md``) describe the algorithm and the
porting pitfalls; ``bench/ope.py`` measures the speed-up on the machine at hand::

    from esdash_plugins.encryption.abe.ope import OpeCipher

    cipher = OpeCipher(key, (0, 30_000_000), (0, 2**48 - 1))
    c = cipher.encrypt(20190228)
    assert cipher.decrypt(c) == 20190228
    cs = cipher.encrypt_many(values)  # one backend call for the distinct cache misses

Keep out ranges at or below 2**53 - 1 for new data: JSON consumers keep full precision, and
pyope 0.2.0-0.2.2 then agree.  Use one key per field (HKDF) for new data; pyope's coins do not
depend on the field, so a shared key leaks equality across fields with equal ranges.
"""

from __future__ import annotations

from .cipher import BACKENDS, CacheInfo, OpeCipher, available_backends
from .errors import (
    InvalidCiphertextError,
    InvalidRangeError,
    OpeError,
    OutOfRangeError,
)

__all__ = [
    "BACKENDS",
    "CacheInfo",
    "InvalidCiphertextError",
    "InvalidRangeError",
    "OpeCipher",
    "OpeError",
    "OutOfRangeError",
    "available_backends",
]
