"""Fuzz: damaged secret files — gocryptfs password files, ABE key, passphrase and salt files.

The secret a seed session names is replaced by odd content (empty, too short, several
lines, a NUL, not UTF-8, base64 that is not quite, a megabyte), given an odd mode or owner
(group-readable, world-writable, owned by another user, set-uid), or replaced by a
directory, a link out of the directory, a link loop, a FIFO; a salt file gets structured
JSON damage (a cost of 10**400, NaN, a salt that is not hex).  ``session check``,
``submit --dry-run`` and ``leakage`` read them.  A refusal must name the secret's file or
key and never print the secret.
"""

from __future__ import annotations

import base64
import os
import pwd
from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: Session seed -> the secret files it names (relative to the sessions directory).
SECRETS = {
    "gocryptfs.toml": ("secrets/gocryptfs.pass",),
    "abe-key.toml": ("secrets/abe.key",),
    "abe-pass.toml": ("secrets/abe.pass", "secrets/abe-kdf.json"),
}
#: Contents a secret file may be left with.
CONTENTS = (
    b"",
    b"\n",
    b"x",
    b"0" * 31,
    b"0" * 32,
    b"line one\nline two\n",
    b"pass\x00word\n",
    b"\xff\xfe\xfd" * 11,
    b"\r\n",
    b"  \t \n",
    base64.b64encode(b"k" * 32) + b"\n",
    base64.b64encode(b"k" * 31),
    b"A" * 44 + b"=\n",
    b"\xef\xbb\xbfpassphrase\n",
    b"\x1b[31mred\n",
    b"p" * 1_000_000,
)
MODES = (0o000, 0o400, 0o600, 0o604, 0o640, 0o644, 0o660, 0o666, 0o700, 0o777, 0o4600)


def other_uid() -> int:
    """A user that is not the caller (the unprivileged node user when there is one)."""
    for name in ("esdash", "nobody"):
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue
        if uid != os.geteuid():
            return uid
    return 65534


def damage_secret(path: Path, pick: Pick) -> str:
    """One damage to a secret file: content, mode, owner, or the file itself."""
    op = pick.choice(("content", "content", "mode", "owner", "file", "json"))
    if path.is_symlink() or not path.is_file():
        return f"{path.name}: {fuzzlib.replace_file(path, pick)}"
    if op == "content":
        data = pick.choice(CONTENTS)
        path.write_bytes(data)
        return f"{path.name}: content {fuzzlib._short(data)}"
    if op == "mode":
        mode = pick.choice(MODES)
        path.chmod(mode)
        return f"{path.name}: mode {mode:04o}"
    if op == "owner":
        uid = other_uid()
        os.chown(path, uid, -1)
        return f"{path.name}: owned by uid {uid}"
    if op == "json" and path.suffix == ".json":
        return fuzzlib.damage_file(path, pick, "json")
    return fuzzlib.damage_file(path, pick, "bytes")


def build_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A seed session whose secret files are damaged, and a command that reads them."""
    sessions = fuzzlib.copy_seed(seeds.sessions, tmp)
    name = pick.choice(sorted(SECRETS))
    session = sessions / name
    secrets = [sessions / relative for relative in SECRETS[name]]
    what = [damage_secret(pick.choice(secrets), pick) for _ in range(pick.integer(1, 2))]
    argv, codes = pick.choice(
        (
            (["session", "check", str(session)], frozenset({0, 2})),
            (["submit", "--dry-run", str(session)], frozenset({0, 2, 5})),
        )
        # leakage reads the key of a client-side mode only (gocryptfs: refused up front)
        + ((["leakage", "--documents", str(seed_inputs.SAMPLE_DOCUMENTS), "--json",
             str(session)], frozenset({0, 1, 2, 5})),) * name.startswith("abe")
    )  # fmt: skip
    names = [session.name, *(p.name for p in secrets)]
    env = {
        "ESDASH_RUNS": str(tmp / "runs"),
        "ESDASH_CACHE": str(seed_inputs.case_cache(seeds, tmp)),
    }
    forbidden = secret_values(secrets)
    return Case("secrets", argv, "; ".join(what), [sessions], codes, names, env, forbidden)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(650))
@given(data=st.data())
def test_damaged_secrets(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_case(seeds, DrawPick(data), tmp), sink)


def secret_values(paths: list[Path]) -> list[str]:
    """The distinctive lines of the secret files as they are now (short ones say nothing)."""
    values = []
    for path in paths:
        if path.is_symlink() or not path.is_file():
            continue
        for line in path.read_bytes().decode("utf-8", "replace").splitlines():
            if len(line.strip()) >= 12 and "salt" not in line and "kdf" not in line:
                values.append(line.strip())
    return values
