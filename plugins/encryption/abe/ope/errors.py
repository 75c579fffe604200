"""Errors of :mod:`esdash_plugins.encryption.abe.ope`.

All are :class:`ValueError`, as pyope's are, so code written against pyope's ``OPE`` catches
them unchanged.
"""

from __future__ import annotations


class OpeError(ValueError):
    """Base class of every error :mod:`esdash_plugins.encryption.abe.ope` raises for bad input."""


class InvalidRangeError(OpeError):
    """An in or out range that is not a pair of ints, is inverted, or does not fit."""


class OutOfRangeError(OpeError):
    """A plaintext outside the in range, or a ciphertext outside the out range."""


class InvalidCiphertextError(OpeError):
    """A ciphertext inside the out range that no plaintext encrypts to."""
