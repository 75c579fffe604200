"""Encryption mode ``none``: plain data directories, documents sent as they are.

The baseline of every comparison in the paper.
"""

from __future__ import annotations

from esdash.plugin_api import EncryptionMode, Register, hookimpl


class NoEncryption(EncryptionMode):
    name = "none"
    description = "plain data directories, no client-side encryption (the baseline)"


@hookimpl
def esdash_register_encryption_modes(register: Register[EncryptionMode]) -> None:
    register(NoEncryption())
