"""OpeCipher's contract: order, round trips, rejections, errors, caches, batches, backends."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from itertools import pairwise

import pytest
from conftest import require_backend
from esdash_plugins.encryption.abe.ope import (
    BACKENDS,
    InvalidCiphertextError,
    InvalidRangeError,
    OpeCipher,
    OpeError,
    OutOfRangeError,
    available_backends,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pyope.ope import OPE, ValueRange

KEY = b"esdash-test-key-0123456789abcdef"
AGES = ((0, 150), (0, 2**48 - 1))


def test_available_backends_always_offer_python():
    found = available_backends()
    assert "python" in found
    assert found == [name for name in BACKENDS if name in found]


def test_auto_prefers_native():
    expected = "native" if "native" in available_backends() else "python"
    assert OpeCipher(KEY, *AGES).backend == expected


# ------------------------------------------------------------------------- OPE properties


@pytest.mark.parametrize(
    "in_range, out_range",
    [((0, 300), (0, 2**48 - 1)), ((-150, 150), (-2000, 2000)), ((0, 40), (0, 80))],
)
def test_order_is_preserved_over_a_whole_domain(backend, in_range, out_range):
    cipher = OpeCipher(KEY, in_range, out_range, backend=backend)
    plaintexts = list(range(in_range[0], in_range[1] + 1))
    ciphertexts = cipher.encrypt_many(plaintexts)
    assert all(a < b for a, b in pairwise(ciphertexts))
    assert all(out_range[0] <= c <= out_range[1] for c in ciphertexts)
    assert cipher.decrypt_many(ciphertexts) == plaintexts


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(0, 30_000_000), min_size=1, max_size=30))
def test_round_trip_and_order_on_dates(values):
    for backend in ("native", "python"):
        if backend not in available_backends():
            continue
        cipher = OpeCipher(KEY, (0, 30_000_000), (0, 2**48 - 1), backend=backend, lru_size=8)
        ciphertexts = [cipher.encrypt(v) for v in values]
        assert [cipher.decrypt(c) for c in ciphertexts] == values
        for (a, ca), (b, cb) in pairwise(zip(values, ciphertexts, strict=True)):
            assert (a < b) == (ca < cb) and (a == b) == (ca == cb)


def test_invalid_ciphertexts_are_rejected_like_pyope(backend):
    """Every ciphertext of a small out range: the image decrypts, everything else is refused."""
    in_range, out_range = (0, 20), (100, 400)
    oracle = OPE(KEY, ValueRange(*in_range), ValueRange(*out_range))
    image = {oracle.encrypt(p): p for p in range(in_range[0], in_range[1] + 1)}
    cipher = OpeCipher(KEY, in_range, out_range, backend=backend)
    for c in range(out_range[0], out_range[1] + 1):
        if c in image:
            assert cipher.decrypt(c) == image[c]
        else:
            with pytest.raises(InvalidCiphertextError):
                cipher.decrypt(c)
    with pytest.raises(InvalidCiphertextError):
        cipher.decrypt_many([min(image), min(image) + 1])


# -------------------------------------------------------------------------------- errors


def test_values_outside_the_ranges(backend):
    cipher = OpeCipher(KEY, *AGES, backend=backend)
    for bad in (-1, 151, 2**70):
        with pytest.raises(OutOfRangeError, match="not within the input range"):
            cipher.encrypt(bad)
        with pytest.raises(OutOfRangeError):
            cipher.encrypt_many([1, bad])
    for bad in (-1, 2**48):
        with pytest.raises(OutOfRangeError, match="not within the output range"):
            cipher.decrypt(bad)
        with pytest.raises(OutOfRangeError):
            cipher.decrypt_many([bad])


@pytest.mark.parametrize("bad", [1.0, "3", None, True, b"1"])
def test_non_integers_are_refused(backend, bad):
    cipher = OpeCipher(KEY, *AGES, backend=backend)
    for call in (cipher.encrypt, cipher.decrypt):
        with pytest.raises(OpeError, match="must be an int"):
            call(bad)
    with pytest.raises(OpeError):
        cipher.encrypt_many([bad])
    assert isinstance(OpeError("x"), ValueError)


def test_int_subclasses_encrypt_as_ints(backend):
    class Age(int):
        pass

    cipher = OpeCipher(KEY, *AGES, backend=backend)
    assert cipher.encrypt(Age(42)) == cipher.encrypt(42)
    assert cipher.encrypt_many([Age(42)]) == [cipher.encrypt(42)]


def test_bad_keys_ranges_and_options():
    with pytest.raises(TypeError, match="expected bytes"):
        OpeCipher("a str key", *AGES)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        OpeCipher(bytearray(KEY), *AGES)  # type: ignore[arg-type]
    for in_range, out_range in [
        ((5, 4), (0, 10)),
        ((0, 10), (0, 5)),
        ((0,), (0, 5)),
        ((0, 1.5), (0, 5)),
        ((False, 3), (0, 5)),
        ("0-5", (0, 5)),
    ]:
        with pytest.raises(InvalidRangeError):
            OpeCipher(KEY, in_range, out_range)  # type: ignore[arg-type]
    for options in ({"memo_depth": -1}, {"memo_depth": 41}, {"lru_size": -1}, {"backend": "c"}):
        with pytest.raises(ValueError):
            OpeCipher(KEY, *AGES, **options)  # type: ignore[arg-type]


def test_native_limits():
    """Beyond int64/uint64 range ends, auto takes Python and native refuses clearly."""
    huge = ((0, 10), (0, 2**64))
    assert OpeCipher(KEY, *huge).backend == "python"
    negative = ((-(2**63) - 1, 0), (-(2**64), 2**64))
    assert OpeCipher(KEY, *negative).backend == "python"
    if "native" in available_backends():
        with pytest.raises(InvalidRangeError, match="native"):
            OpeCipher(KEY, *huge, backend="native")
    # ... and the Python backend still matches pyope there.
    oracle = OPE(KEY, ValueRange(0, 10), ValueRange(0, 2**64))
    assert OpeCipher(KEY, *huge).encrypt_many(range(11)) == [oracle.encrypt(p) for p in range(11)]


def test_repr_never_shows_the_key(backend):
    cipher = OpeCipher(KEY, *AGES, backend=backend)
    cipher.encrypt(42)
    for text in (repr(cipher), repr(cipher._engine), str(cipher)):
        assert KEY.decode() not in text and KEY.hex() not in text


# -------------------------------------------------------------------------------- caches


@pytest.mark.parametrize("backend_name", ["native", "python"])
def test_cached_and_uncached_results_agree(backend_name):
    require_backend(backend_name)
    values = [v * 7919 % 30_000_001 for v in range(400)]
    cached = OpeCipher(KEY, (0, 30_000_000), (0, 2**48 - 1), backend=backend_name, lru_size=64)
    bare = OpeCipher(
        KEY, (0, 30_000_000), (0, 2**48 - 1), backend=backend_name, memo_depth=0, lru_size=0
    )
    twice = values + values[::-1]
    assert [cached.encrypt(v) for v in twice] == [bare.encrypt(v) for v in twice]
    info = cached.cache_info()
    assert info.currsize == 64 and info.maxsize == 64
    assert info.hits > 0 and info.hits + info.misses == len(twice)
    assert 0 < info.memo_nodes < 2**16 and info.memo_depth == 16
    bare_info = bare.cache_info()
    assert bare_info.hits == 0 and bare_info.currsize == 0 and bare_info.memo_nodes == 0


@pytest.mark.parametrize("backend", ["native", "python"])
def test_memo_is_bounded_by_its_depth(backend):
    require_backend(backend)
    cipher = OpeCipher(KEY, (0, 2**20), (0, 2**40), backend=backend, memo_depth=4, lru_size=0)
    cipher.encrypt_many(range(0, 2**20, 997))
    assert 0 < cipher.cache_info().memo_nodes <= 2**4 - 1


def test_clear_drops_everything(backend):
    cipher = OpeCipher(KEY, *AGES, backend=backend)
    before = cipher.encrypt_many(range(151))
    cipher.decrypt(before[3])
    assert cipher.encrypt(7) == before[7]
    cipher.clear()
    info = cipher.cache_info()
    assert (info.hits, info.misses, info.currsize, info.decrypt_currsize, info.memo_nodes) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert cipher.encrypt_many(range(151)) == before
    assert cipher.cache_info().misses == 151


def test_lru_evicts_least_recently_used():
    cipher = OpeCipher(KEY, *AGES, backend="python", lru_size=3)
    for v in (1, 2, 3):
        cipher.encrypt(v)
    cipher.encrypt(1)  # 1 is now the most recent; 2 is the oldest
    cipher.encrypt(4)  # evicts 2
    assert list(cipher._enc) == [3, 1, 4]
    assert cipher.cache_info().currsize == 3


def test_encryption_fills_the_decryption_cache(backend):
    cipher = OpeCipher(KEY, *AGES, backend=backend)
    c = cipher.encrypt(99)
    assert cipher.decrypt(c) == 99
    expected_hits = 0 if backend == "pyope" else 1
    assert cipher.cache_info().decrypt_hits == expected_hits


def test_pyope_backend_keeps_no_cache():
    cipher = OpeCipher(KEY, *AGES, backend="pyope", lru_size=1000, memo_depth=16)
    cipher.encrypt(5)
    cipher.encrypt(5)
    info = cipher.cache_info()
    assert (info.maxsize, info.memo_depth, info.hits, info.misses) == (0, 0, 0, 2)


# ------------------------------------------------------------------------------- batches


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(-1000, 1000), max_size=60), lru=st.sampled_from([0, 5, 100]))
def test_encrypt_many_equals_elementwise(values, lru):
    for backend in ("native", "python"):
        if backend not in available_backends():
            continue
        batch = OpeCipher(KEY, (-1000, 1000), (-(2**40), 2**40), backend=backend, lru_size=lru)
        single = OpeCipher(KEY, (-1000, 1000), (-(2**40), 2**40), backend=backend, lru_size=0)
        half = len(values) // 2
        batch.encrypt_many(values[:half])  # some of the next batch are LRU hits
        ciphertexts = batch.encrypt_many(values)
        assert ciphertexts == [single.encrypt(v) for v in values]
        assert batch.decrypt_many(ciphertexts) == values
        assert batch.encrypt_many(iter(values)) == ciphertexts  # any iterable


def test_batches_from_threads_agree():
    """Native batch calls release the GIL; results must not depend on interleaving."""
    backend = "native" if "native" in available_backends() else "python"
    cipher = OpeCipher(KEY, (0, 30_000_000), (0, 2**48 - 1), backend=backend, lru_size=256)
    chunks = [[(i * 104729 + j * 7) % 30_000_001 for j in range(300)] for i in range(8)]
    expected = [
        OpeCipher(KEY, (0, 30_000_000), (0, 2**48 - 1), backend="python").encrypt_many(chunk)
        for chunk in chunks[:2]
    ]
    results: dict[int, list[int]] = {}

    def work(index: int) -> None:
        results[index] = cipher.encrypt_many(chunks[index])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(chunks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[0], results[1]] == expected
    for index, chunk in enumerate(chunks):
        assert results[index] == [cipher.encrypt(v) for v in chunk]


# --------------------------------------------------------------------- without the native


def test_esdash_works_without_the_native_module():
    """A machine without Rust: the OPE package imports, auto picks python, native says why."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["esdash_ope_native"] = None  # makes `import esdash_ope_native` fail
        from esdash_plugins.encryption.abe.ope import OpeCipher, available_backends
        assert "native" not in available_backends(), available_backends()
        cipher = OpeCipher(b"k" * 32, (0, 32767), (0, 2**31 - 1))
        assert cipher.backend == "python"
        try:
            OpeCipher(b"k" * 32, (0, 1), (0, 1), backend="native")
        except RuntimeError as error:
            assert "not installed" in str(error)
        else:
            raise AssertionError("backend='native' must fail without the module")
        print(cipher.encrypt(7733))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    oracle = OPE(b"k" * 32, ValueRange(0, 32767), ValueRange(0, 2**31 - 1))
    assert int(result.stdout) == oracle.encrypt(7733)


def test_native_module_is_imported_lazily():
    script = (
        "import esdash_plugins.encryption.abe.ope, sys; print('esdash_ope_native' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
