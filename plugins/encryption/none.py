"""Encryption mode ``none``: plain data directories, documents sent as they are.

The baseline of every comparison in the paper.
"""

from __future__ import annotations

import esdash
from esdash.plugin_api import EncryptionMode


class NoEncryption(EncryptionMode):
    name = "none"
    description = "plain data directories, no client-side encryption (the baseline)"


@esdash.hookimpl
def esdash_register_encryption_modes(register) -> None:
    register(NoEncryption())
