"""ABE ciphertexts in the format an earlier esdash wrote, for index-reuse regressions.

Until the string ciphers took the field path alone as associated data, they used
``[b"esdash-value", path]``: same key, same schema, same scheme name, other ciphertexts.
The 1-node ABE points of the paper-small campaign reused an index written that way, and the
first query whose hits carried such strings (``age``) failed with ``InvalidTag``.
"""

from __future__ import annotations

from esdash_plugins.encryption.abe.codec import AbeCodec

#: The associated data's first element in that format.
OLD_VALUE_AD = b"esdash-value"


def older_format(spec: dict) -> AbeCodec:
    """A codec with the key and plan of ``spec`` whose strings are in the earlier format.

    All in Python (no native fast path): the earlier format is simulated on Python's ciphers.
    """
    codec = AbeCodec.from_spec(spec, native=False)
    for plan in codec.plans.values():
        if plan.strings is not None:
            plan.strings._ad = [OLD_VALUE_AD, plan.path.encode()]
    return codec
