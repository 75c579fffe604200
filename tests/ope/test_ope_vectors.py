"""Every pyope 0.2.2 test vector, for every backend (ope-vectors.json, research notes §4.6).

The vectors cover four keys (32 ASCII bytes, a 44-byte ``generate_key()`` base64 text used
verbatim, 16 raw bytes, 100 bytes) and eight range pairs (defaults, ages, dates, date-times up
to 2**63-1, negative, tiny HYP-only trees, dense in == out, and out ranges up to 2**64-1).
The tape and node vectors pin the two building blocks separately, so a failure says where.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from esdash_plugins.encryption.abe.ope import OpeCipher


def _cipher(vector: dict[str, Any], backend: str, **options: Any) -> OpeCipher:
    return OpeCipher(
        bytes.fromhex(vector["key_hex"]),
        tuple(vector["in_range"]),
        tuple(vector["out_range"]),
        backend=backend,
        **options,
    )


def test_the_vector_file_is_the_research_one(vectors):
    assert vectors["generator"]["pyope"] == "0.2.2"
    assert len(vectors["vectors"]) == 114
    assert len(vectors["tape_vectors"]) == 10
    assert len(vectors["node_vectors"]) == 30


def test_every_vector_encrypts_and_decrypts(vectors, backend):
    wrong = []
    for vector in vectors["vectors"]:
        # No caches at all: each vector is computed from the root.
        cipher = _cipher(vector, backend, memo_depth=0, lru_size=0)
        ciphertext = cipher.encrypt(vector["plaintext"])
        plaintext = cipher.decrypt(vector["ciphertext"])
        if ciphertext != vector["ciphertext"] or plaintext != vector["plaintext"]:
            wrong.append((vector["note"], vector["plaintext"], ciphertext, plaintext))
    assert not wrong


def test_vectors_in_batches_with_warm_caches(vectors, backend):
    """Per context, one batch through encrypt_many and decrypt_many (memo and LRU in use)."""
    contexts: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for vector in vectors["vectors"]:
        context = (vector["key_hex"], tuple(vector["in_range"]), tuple(vector["out_range"]))
        contexts[context].append(vector)
    for group in contexts.values():
        cipher = _cipher(group[0], backend)
        plaintexts = [v["plaintext"] for v in group]
        ciphertexts = [v["ciphertext"] for v in group]
        assert cipher.encrypt_many(plaintexts) == ciphertexts
        assert [cipher.encrypt(p) for p in plaintexts] == ciphertexts  # now LRU hits
        cipher.clear()
        assert cipher.decrypt_many(ciphertexts) == plaintexts


def test_tape_vectors(vectors, backend):
    """HMAC-SHA256 of the decimal seed, then AES-256-CTR from a zero counter block."""
    for tape in vectors["tape_vectors"]:
        assert tape["hmac_input_ascii"] == str(tape["seed_int"])
        cipher = OpeCipher(bytes.fromhex(tape["key_hex"]), (0, 1), (0, 1), backend=backend)
        keystream = cipher._engine.keystream(tape["seed_int"], 32)
        assert keystream.hex() == tape["keystream32_hex"], tape["seed_int"]


def test_node_vectors(vectors, backend):
    """One hypergeometric split per node, down the left branch from the root."""
    for node in vectors["node_vectors"]:
        cipher = _cipher(node, backend, memo_depth=0)
        args = node["hgd_args"]
        (out_lo, out_hi), (in_lo, in_hi) = node["out_range"], node["in_range"]
        assert args["kk"] == node["mid"] - out_lo + 1
        assert args["good"] == in_hi - in_lo + 1
        assert args["bad"] == (out_hi - out_lo + 1) - args["good"]
        assert cipher._engine.root_split() == (node["mid"], node["x"]), node
