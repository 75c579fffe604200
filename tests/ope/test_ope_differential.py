"""Differential tests: native vs pure Python vs pyope 0.2.2 itself, on generated contexts.

Random keys (including empty and longer than an HMAC block) and random ranges of four kinds:

- ``small``: negative and positive starts, domains up to 10**4, slack up to 10**7;
- ``tiny``: a handful of values, where the HYP sampler (kk <= 10) decides most splits;
- ``dense``: in size == out size, the identity-shaped tree that draws no coins;
- ``big``: out ranges past 2**53 (where pyope's float midpoint is inexact) up to the native
  limits [-2**63, 2**64-1], domains up to 2**62.

Each example encrypts a few plaintexts (always including the range ends), decrypts them back,
and decrypts one random ciphertext that all implementations must accept or reject alike.
pyope costs 0.3-5 ms per value, so example counts are modest; the vectors and the C/Python
prototypes' 40,000 cases (research notes, §3) cover volume.
"""

from __future__ import annotations

import pytest
from conftest import require_backend
from esdash_plugins.encryption.abe.ope import InvalidCiphertextError, OpeCipher, available_backends
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyope.ope import OPE, ValueRange

OURS = [name for name in ("native", "python") if name in available_backends()]


@st.composite
def contexts(draw: st.DrawFn, kind: str) -> tuple[bytes, tuple[int, int], tuple[int, int]]:
    key = draw(st.binary(min_size=0, max_size=80) | st.binary(min_size=65, max_size=130))
    if kind == "small":
        in_lo = draw(st.integers(-(10**9), 10**9))
        in_size = draw(st.integers(1, 10**4))
        out_size = in_size + draw(st.integers(0, 10**7))
        out_lo = draw(st.integers(-(2**60), 2**60))
    elif kind == "tiny":
        in_lo = draw(st.integers(-50, 50))
        in_size = draw(st.integers(1, 12))
        out_size = in_size + draw(st.integers(0, 16))
        out_lo = draw(st.integers(-50, 50))
    elif kind == "dense":
        in_lo = draw(st.integers(-(2**62), 2**62))
        in_size = out_size = draw(st.integers(1, 2**62))
        out_lo = draw(st.integers(-(2**62), 2**62))
    else:  # big
        out_size = draw(st.integers(2**53 + 1, 2**64))
        out_lo = draw(st.integers(-(2**63), 2**64 - out_size))
        in_size = draw(st.integers(1, min(out_size, 2**62)))
        in_lo = draw(st.integers(-(2**63), 2**63 - in_size))
    return key, (in_lo, in_lo + in_size - 1), (out_lo, out_lo + out_size - 1)


def _check(data: st.DataObject, key: bytes, in_range: tuple, out_range: tuple) -> None:
    oracle = OPE(key, ValueRange(*in_range), ValueRange(*out_range))
    plaintexts = [in_range[0], in_range[1]]
    plaintexts += data.draw(st.lists(st.integers(*in_range), max_size=2), label="plaintexts")
    expected = [oracle.encrypt(p) for p in plaintexts]
    probe = data.draw(st.integers(*out_range), label="probe ciphertext")
    try:
        probe_expected: int | None = oracle.decrypt(probe)
    except ValueError:  # pyope's InvalidCiphertextError, or InvalidRangeLimitsError
        probe_expected = None
    for backend in OURS:
        cipher = OpeCipher(key, in_range, out_range, backend=backend)
        assert [cipher.encrypt(p) for p in plaintexts] == expected, backend
        assert cipher.decrypt_many(expected) == plaintexts, backend
        fresh = OpeCipher(key, in_range, out_range, backend=backend, memo_depth=0, lru_size=0)
        assert fresh.encrypt_many(plaintexts) == expected, backend
        if probe_expected is None:
            with pytest.raises(InvalidCiphertextError):
                fresh.decrypt(probe)
        else:
            assert fresh.decrypt(probe) == probe_expected, backend


def _examples(count: int) -> settings:
    return settings(max_examples=count, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_examples(250)
@given(context=contexts("small"), data=st.data())
def test_small_ranges_match_pyope(context, data):
    _check(data, *context)


@_examples(150)
@given(context=contexts("tiny"), data=st.data())
def test_tiny_ranges_match_pyope(context, data):
    _check(data, *context)


@_examples(40)
@given(context=contexts("dense"), data=st.data())
def test_dense_ranges_match_pyope(context, data):
    _check(data, *context)


@_examples(60)
@given(context=contexts("big"), data=st.data())
def test_ranges_beyond_2_53_match_pyope(context, data):
    _check(data, *context)


def test_native_backend_is_built():
    """The differential tests above cover only the backends present; this one insists."""
    require_backend("native")


@st.composite
def field_ranges(draw: st.DrawFn) -> tuple[bytes, tuple[int, int], tuple[int, int]]:
    """The ranges the ABE codec gives a field (issue 16): a domain ``[0, top]`` of 1 to 45
    bits and its output range b = max(31, input bits + 16), capped at 53 bits."""
    from esdash_plugins.encryption.abe.codec import out_range_for

    key = draw(st.binary(min_size=16, max_size=80))
    top = draw(st.integers(1, 2**45 - 1))
    return key, (0, top), out_range_for(top)


@_examples(80)
@given(context=field_ranges(), data=st.data())
def test_the_codecs_per_field_output_ranges_match_pyope(context, data):
    _check(data, *context)


@pytest.mark.parametrize(
    "top, bits",
    [(150, 31), (2**15 - 1, 31), (2**15, 32), (30_000_000, 41), (2**37 - 1, 53), (3 * 10**13, 53)],
)
def test_output_range_width_follows_the_domain(top, bits):
    from esdash_plugins.encryption.abe.codec import out_range_for

    assert out_range_for(top) == (0, 2**bits - 1)
