"""Weak ABE key files are refused, in one line, by ``session check`` and by the run.

The rule (:data:`~esdash_plugins.encryption.abe.keys.KEY_RULE`): a key file must not be
text (printable UTF-8, unless it is base64 of at least 32 bytes) and its key bytes (raw, or
decoded from base64) must take at least 16 different values.  A key file is used as it is,
never stretched, so 32 zero bytes or a typed phrase would be a key anybody can guess; a
passphrase belongs in ``passphrase_file`` (Argon2id).  Random keys are never refused: the
rule's false refusals are below 2e-11 per 32-byte key (the module's constants say why), and
the test below draws thousands of them.  Keys are generated at test time; no test holds a
real-looking secret.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from esdash_plugins.encryption.abe import keys
from hypothesis import given
from hypothesis import strategies as st
from pyope.ope import OPE

from esdash.cli import main
from esdash.errors import BadInput
from esdash.plugin.manager import get_plugins
from esdash.run.job import client_codec_for
from esdash.session import load_session

NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")

#: The weak classes of the audit (L2) and the brief, one key file content each.
WEAK = {
    "32 zero bytes": b"\x00" * 32,
    "all-equal bytes": b"\xa5" * 48,
    "a phrase": b"correct horse battery staple 2024!",
    "a phrase with a line end": b"correct horse battery staple 2024!\n",
    "44 a (base64 of 3 values)": b"a" * 44,
    "44 a and a line end": b"a" * 44 + b"\n",
    "32 letters k": b"k" * 32,
    "base64 of 32 equal bytes": base64.b64encode(b"k" * 32) + b"\n",
    "a repeated pattern": b"\x01\x02\x03\x04" * 8,
    "a UTF-8 phrase": "Grüße aus Köln, heute ist ein schöner Tag".encode(),
}


def refusal(data: bytes) -> str:
    with pytest.raises(BadInput) as caught:
        keys.parse_key(data, "key file /k", Path("/k"))
    return str(caught.value)


@pytest.mark.parametrize("name", sorted(WEAK))
def test_each_weak_class_is_refused_in_one_line_that_names_the_rule_and_the_fix(
    name: str,
) -> None:
    message = refusal(WEAK[name])
    assert message.startswith("key file /k is refused as a weak key: ")
    assert keys.KEY_RULE in message and "\n" not in message
    assert "head -c 32 /dev/urandom > /k" in message
    assert "encryption.passphrase_file" in message and "Argon2id" in message
    # the key itself is never shown: no run of its bytes, no phrase
    for text in ("horse", "aaaa", "kkkk", "Köln"):
        assert text not in message


def test_text_and_repetition_are_named_as_what_they_are() -> None:
    assert "it is text (34 bytes of printable characters)" in refusal(WEAK["a phrase"])
    zeros = refusal(WEAK["32 zero bytes"])
    assert "its 32 bytes take only 1 different value (all equal)" in zeros
    a44 = refusal(WEAK["44 a (base64 of 3 values)"])
    assert "its 33 bytes (decoded from base64) take only 3 different values" in a44


def test_random_keys_are_never_refused() -> None:
    """Every kind of key esdash's and pyope's instructions make, drawn many times."""
    for _ in range(20_000):
        key = os.urandom(32)
        assert keys.parse_key(key) == key
    for _ in range(2_000):
        key = os.urandom(64)
        assert keys.parse_key(key) == key
        text = OPE.generate_key()  # base64 text, used verbatim
        assert keys.parse_key(text + b"\n") == text
        hexadecimal = os.urandom(32).hex().encode()  # openssl rand -hex 32
        assert keys.parse_key(hexadecimal + b"\n") == hexadecimal


@st.composite
def few_values(draw: st.DrawFn) -> bytes:
    """At least 32 bytes drawn from at most 15 different values."""
    alphabet = sorted(draw(st.sets(st.integers(0, 255), min_size=1, max_size=15)))
    return bytes(draw(st.lists(st.sampled_from(alphabet), min_size=32, max_size=300)))


@given(few_values())
def test_keys_of_fewer_than_16_byte_values_are_refused(data: bytes) -> None:
    with pytest.raises(BadInput, match="refused as a weak key"):
        keys.parse_key(data)
    with pytest.raises(BadInput, match=r"\(decoded from base64\) take only"):
        keys.parse_key(base64.b64encode(data))  # the same bytes as pyope-style text


#: Words of printable characters of every script (letters, digits, punctuation, symbols).
WORDS = st.text(alphabet=st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=12)


@given(st.lists(WORDS, min_size=2, max_size=12), st.sampled_from(["", "\n", "\r\n"]))
def test_typed_phrases_are_refused_as_text(words: list[str], end: str) -> None:
    phrase = " ".join(words)
    data = (phrase + " " * max(0, 32 - len(phrase.encode())) + end).encode()
    with pytest.raises(BadInput, match=r"it is text \("):
        keys.parse_key(data)


@given(st.lists(st.integers(0, 254), unique=True, min_size=15, max_size=80), st.randoms())
def test_bytes_of_16_values_that_are_not_text_are_accepted(values: list[int], rng) -> None:
    """The rule refuses no more than it says: 16 different values and a byte that UTF-8
    never has (0xff) make a key, however patterned."""
    key = bytes([*values, 0xFF]) * (32 // (len(values) + 1) + 1)
    key = bytes(rng.sample(list(key), len(key)))
    assert keys.parse_key(key) == key


# ------------------------------------------------------------------- session check, run


def abe_session(directory: Path, content: bytes) -> tuple[Path, Path]:
    key = directory / "abe.key"
    key.write_bytes(content)
    key.chmod(0o600)
    path = directory / "weak.toml"
    path.write_text(
        f'name = "weak"\n[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "{NODE_USER}"\n'
        f'data_dir = "data"\n[encryption]\nmode = "abe"\nkey_file = "abe.key"\n'
        '[track]\nname = "mri"\ndocuments = 100\n'
    )
    return path, key


@pytest.fixture
def scratch_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESDASH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))


@pytest.mark.usefixtures("scratch_env")
@pytest.mark.parametrize(
    "name", ["32 zero bytes", "all-equal bytes", "a phrase", "44 a (base64 of 3 values)"]
)
def test_session_check_and_the_run_refuse_a_weak_key_file(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, key = abe_session(tmp_path, WEAK[name])
    capsys.readouterr()
    code = main(["session", "check", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"esdash: error: {path}: encryption.key_file: key file {key} is refused as a weak key: "
    )
    assert "encryption.passphrase_file" in err
    # the run loads the key the same way, before any node starts
    session = load_session(path)
    with pytest.raises(BadInput, match=f"key file {key} is refused as a weak key"):
        client_codec_for(session, get_plugins().track("mri"))


@pytest.mark.usefixtures("scratch_env")
def test_session_check_passes_a_random_key_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = abe_session(tmp_path, os.urandom(32))
    capsys.readouterr()
    code = main(["session", "check", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"ok  {path}")
