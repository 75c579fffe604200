"""Inference attacks on property-preserving ciphertexts, as pure functions over numpy arrays.

The leakage report (:mod:`esdash_plugins.encryption.abe.leakage`) runs these on the
ciphertexts of a sample, the way a curious cluster operator could, and measures how many
records they recover.  Each attack gets only what that operator has: the column of stored
ciphertexts (one per record) and, where the attack needs one, an *auxiliary* sample of
plaintexts from a similar distribution.  Each returns its guess per record, so the caller
compares guesses with the truth (:func:`recovery`); the attacks never see the truth.

Plaintexts are integers: OPE fields by their grid index, deterministic fields by a code the
caller gives each distinct plaintext (any labelling; the attacks only compare them).
:data:`NO_GUESS` marks a record the attack could not assign.

- :func:`frequency_attack` (Naveed, Kamara, Wright, CCS 2015, section 4.1): deterministic
  encryption keeps frequencies, so the i-th most frequent ciphertext is guessed to be the
  i-th most frequent auxiliary value.
- :func:`sorting_attack` (same paper, section 4.2): OPE keeps order, so on a *dense* column
  (every value of a known domain occurs) the i-th smallest ciphertext is the i-th value.
- :func:`cumulative_attack` (same paper, section 4.3): matches each ciphertext's empirical
  CDF and frequency to the auxiliary distribution's (a monotone variant; see there).
- :func:`window_attack` (Boldyreva, Chenette, O'Neill, CRYPTO 2011): a random
  order-preserving function ``[0, M) -> [0, N)`` puts plaintext ``m`` near ``m * N / M``, so
  ``floor(c * M / N)`` is within about ``sqrt(M)`` of the plaintext: half its bits, with no
  auxiliary data at all (:func:`window_bound`).
- :func:`length_attack`: AES-SIV is not padded, so a token's length is its plaintext's
  length plus a constant; each record is guessed as the most frequent auxiliary value of
  its ciphertext's length.  :func:`length_frequency_attack` runs frequency analysis inside
  each length class (the operator sees both equality and length).

:func:`majority_guess` is no attack but the yardstick beside them: every record guessed as
the most frequent value, which needs no ciphertext at all.  On a field with two values of
about equal frequency it scores about 50 %, so an attack's 0 % there is no safety.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

#: A guess no attack made (the auxiliary data ran out of values, or the column is empty).
NO_GUESS = -1
#: Distinct ciphertexts (and domain values) above which the sorting attack is not run: a
#: dense column that large would need as many records, and the report stays fast.
SORT_LIMIT = 1_000_000

Ints = npt.NDArray[np.int64]
#: A column of ciphertexts: integers (OPE) or anything numpy sorts (tokens).
Array = npt.NDArray[Any]


class NotApplicable(ValueError):
    """An attack whose precondition the column does not meet; the message says which."""


def _distinct(ciphertexts: Array) -> tuple[Array, Ints, Ints]:
    """Distinct ciphertexts (sorted), each record's position among them, and their counts."""
    values, inverse, counts = np.unique(ciphertexts, return_inverse=True, return_counts=True)
    return values, inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


def _by_frequency(counts: Ints) -> Ints:
    """Positions ordered by falling count; ties keep their (sorted) order.

    The stable tie order is the ciphertexts' own sort order, which an operator has too: for
    AES-SIV it is random, for OPE it is the plaintext order (the attack then borrows a
    little of the sorting attack's power, as a real attacker would).
    """
    return np.argsort(-counts, kind="stable").astype(np.int64)


def frequency_attack(ciphertexts: Array, auxiliary: Ints) -> Ints:
    """Per record, the auxiliary value whose frequency rank equals its ciphertext's.

    ``ciphertexts`` holds one stored value per record (strings or integers: only equality
    and, for ties, sort order are used); ``auxiliary`` one plaintext code per auxiliary
    record.  Ciphertexts ranked beyond the auxiliary's distinct values get :data:`NO_GUESS`.
    """
    if len(ciphertexts) == 0:
        return np.empty(0, dtype=np.int64)
    _, inverse, counts = _distinct(ciphertexts)
    aux_values, aux_counts = np.unique(np.asarray(auxiliary, dtype=np.int64), return_counts=True)
    cipher_rank = _by_frequency(counts)
    aux_rank = _by_frequency(aux_counts.astype(np.int64))
    per_cipher = np.full(len(counts), NO_GUESS, dtype=np.int64)
    paired = min(len(cipher_rank), len(aux_rank))
    per_cipher[cipher_rank[:paired]] = aux_values[aux_rank[:paired]]
    return per_cipher[inverse]


def dense_problem(distinct: int, domain: tuple[int, int]) -> str | None:
    """Why the sorting attack does not apply to ``distinct`` ciphertexts over ``domain``.

    ``None`` when it applies: the column is dense, i.e. it has exactly one distinct
    ciphertext per domain value (OPE is injective, so then every value occurs).
    """
    low, high = domain
    size = high - low + 1
    if distinct > SORT_LIMIT or size > SORT_LIMIT:
        return (
            f"not run: {distinct:,} distinct values in a domain of {size:,}, beyond "
            f"{SORT_LIMIT:,} (no sample of that size is dense)"
        )
    if distinct != size:
        return (
            f"not dense: {distinct:,} distinct values in a domain of {size:,}; sorting needs "
            "every value of the domain to occur"
        )
    return None


def sorting_attack(ciphertexts: Ints, domain: tuple[int, int]) -> Ints:
    """Per record, the domain value whose rank equals its ciphertext's rank.

    Exact on a dense column (every value of ``domain = (low, high)`` occurs): an
    order-preserving injection from a set onto itself is the identity.  Raises
    :class:`NotApplicable` (with :func:`dense_problem`'s reason) on any other column,
    where rank and value part ways.
    """
    values, inverse, _ = _distinct(ciphertexts)
    problem = dense_problem(len(values), domain)
    if problem is not None:
        raise NotApplicable(problem)
    return (domain[0] + np.arange(len(values), dtype=np.int64))[inverse]


def _midpoints(counts: Ints) -> npt.NDArray[np.float64]:
    """Each value's position in the distribution: the middle of its step of the CDF.

    The step of a value spans ``[CDF - frequency, CDF]``; its middle carries both of the
    paper's matching terms, the cumulative share and the frequency.
    """
    total = float(counts.sum())
    return (np.cumsum(counts) - counts / 2.0) / total


def cumulative_attack(ciphertexts: Ints, auxiliary: Ints) -> Ints:
    """Per record, the auxiliary value whose CDF step lies nearest its ciphertext's.

    The paper solves a linear sum assignment between distinct ciphertexts and domain values
    with the cost ``|frequency difference| + |CDF difference|`` (Hungarian algorithm,
    cubic time).  This is its monotone variant: each distinct ciphertext, in order, takes
    the auxiliary value whose CDF step midpoint (:func:`_midpoints`) is nearest to its own,
    found by binary search (``numpy.searchsorted``).  Why: OPE ciphertexts are ordered, so
    an attacker's best assignment is order-preserving anyway; the nearest midpoint needs no
    solver (numpy only, no scipy) and runs in ``n log n`` on columns with 10^5 distinct
    values, where the cubic assignment does not.  Unlike the assignment it may map two
    ciphertexts to one value, which only matters where the auxiliary data is sparse.
    """
    if len(ciphertexts) == 0 or len(auxiliary) == 0:
        return np.full(len(ciphertexts), NO_GUESS, dtype=np.int64)
    _, inverse, counts = _distinct(ciphertexts)
    aux_values, aux_counts = np.unique(np.asarray(auxiliary, dtype=np.int64), return_counts=True)
    cipher_mid = _midpoints(counts)
    aux_mid = _midpoints(aux_counts.astype(np.int64))
    right = np.clip(np.searchsorted(aux_mid, cipher_mid), 0, len(aux_mid) - 1)
    left = np.clip(right - 1, 0, len(aux_mid) - 1)
    nearer_left = np.abs(cipher_mid - aux_mid[left]) <= np.abs(aux_mid[right] - cipher_mid)
    chosen = np.where(nearer_left, left, right)
    return aux_values[chosen][inverse]


def window_attack(ciphertexts: Ints, plaintexts: int, out_range: tuple[int, int]) -> Ints:
    """Per record, ``floor((c - low) * M / N)``: where a random OPF puts the plaintext.

    ``plaintexts`` is ``M`` (the domain ``[0, M)``), ``out_range = (low, high)`` the
    ciphertext range, ``N = high - low + 1``.  Boldyreva et al. show that a random
    order-preserving function is close to this line: the number of the ``M`` chosen points
    below ``c`` is hypergeometric, with a spread of at most ``sqrt(M) / 2``.  Computed with
    Python integers, as ``c * M`` overflows 64 bits for date-time fields.
    """
    if len(ciphertexts) == 0:
        return np.empty(0, dtype=np.int64)
    low, high = out_range
    points = high - low + 1
    values, inverse, _ = _distinct(ciphertexts)
    guesses = [(int(c) - low) * plaintexts // points for c in values.tolist()]
    per_cipher = np.clip(np.array(guesses, dtype=np.int64), 0, plaintexts - 1)
    return per_cipher[inverse]


def window_bound(plaintexts: int) -> tuple[int, float, float]:
    """Boldyreva et al.'s window for a domain of ``M`` plaintexts: (values, bits, of bits).

    A window of about ``sqrt(M)`` values around :func:`window_attack`'s guess holds the
    plaintext with constant probability, so ``log2(M) - log2(sqrt(M))``, about half of the
    ``log2(M)`` bits of a value, leak without any auxiliary data.
    """
    bits = math.log2(plaintexts) if plaintexts > 1 else 0.0
    window = max(1, math.isqrt(max(plaintexts - 1, 0)) + 1)
    return window, bits - math.log2(window), bits


def _most_frequent(values: Ints) -> int:
    """The most frequent value of a non-empty array (ties: the smallest)."""
    found, counts = np.unique(values, return_counts=True)
    return int(found[int(np.argmax(counts))])


def length_attack(lengths: Ints, auxiliary: Ints, aux_lengths: Ints) -> Ints:
    """Per record, the most frequent auxiliary value whose ciphertext has the record's length.

    ``lengths`` holds the length of each record's stored ciphertext (nothing else of it is
    used: the attacker sees only lengths); ``auxiliary`` the auxiliary plaintext codes and
    ``aux_lengths`` the length their ciphertexts would have, which the attacker computes
    under a key of its own (AES-SIV lengths do not depend on the key).  A length no
    auxiliary value has gets :data:`NO_GUESS`.  Where every length class holds one value,
    this recovers every record, whatever the frequencies.
    """
    guesses = np.full(len(lengths), NO_GUESS, dtype=np.int64)
    aux = np.asarray(auxiliary, dtype=np.int64)
    aux_lengths = np.asarray(aux_lengths, dtype=np.int64)
    for length in np.unique(lengths).tolist():
        candidates = aux[aux_lengths == length]
        if len(candidates):
            guesses[lengths == length] = _most_frequent(candidates)
    return guesses


def length_frequency_attack(
    ciphertexts: Array, lengths: Ints, auxiliary: Ints, aux_lengths: Ints
) -> Ints:
    """Per record, :func:`frequency_attack` run inside the record's length class.

    The ciphertexts of one length are ranked by frequency against the auxiliary values of
    that length only: length narrows the candidates, equality ranks them.
    """
    guesses = np.full(len(ciphertexts), NO_GUESS, dtype=np.int64)
    aux = np.asarray(auxiliary, dtype=np.int64)
    aux_lengths = np.asarray(aux_lengths, dtype=np.int64)
    for length in np.unique(lengths).tolist():
        rows = lengths == length
        candidates = aux[aux_lengths == length]
        if len(candidates):
            guesses[rows] = frequency_attack(ciphertexts[rows], candidates)
    return guesses


def majority_guess(truth: Ints) -> Ints:
    """Every record guessed as the most frequent value of ``truth``: the baseline.

    No attack (it reads the plaintexts' distribution, not a ciphertext): the share it
    recovers is what knowing the distribution alone gives, the yardstick for the attacks.
    """
    if len(truth) == 0:
        return np.empty(0, dtype=np.int64)
    return np.full(len(truth), _most_frequent(truth), dtype=np.int64)


def recovery(guesses: Ints, truth: Ints, tolerance: float | None = None) -> tuple[float, float]:
    """Shares of records guessed exactly and within ``tolerance`` (0 to 1 each).

    Without a tolerance (deterministic fields, whose codes have no distance) the second
    share is the exact one.  :data:`NO_GUESS` never counts.
    """
    if len(truth) == 0:
        return 0.0, 0.0
    guessed = guesses != NO_GUESS
    exact = float(np.mean(guessed & (guesses == truth)))
    if tolerance is None:
        return exact, exact
    close = guessed & (np.abs(guesses - truth) <= tolerance)
    return exact, float(np.mean(close))
