"""Key material of the ABE mode: where the secret comes from, and the subkeys derived from it.

Three sources, chosen in the ``[encryption]`` table (exactly one):

- ``key_file``: at least 32 random bytes, or the base64 text ``pyope.OPE.generate_key()``
  prints (kept verbatim, as pyope uses that text itself as its key).  Like OpenSSH with a
  private key, esdash refuses a file that the group or others may read or write, or that
  another user owns: a key anybody can read protects nothing.  A key file is not stretched,
  so weak content is refused too (:data:`KEY_RULE`, :func:`weak_key_problem`): 32 zero
  bytes, repeated bytes or a typed phrase would be a key anybody can guess, where a
  passphrase belongs in ``passphrase_file`` and goes through Argon2id.
- ``passphrase_file``: the first line of a file (the same permission rules), stretched
  with Argon2id into a 32-byte master key.
- ``passphrase_command``: a program (split like a shell would, never run through one) that
  prints the passphrase on its first line — gocryptfs' ``-extpass``.  The passphrase then
  never touches a file, the session or a command line.

Argon2id needs a salt.  It is not secret, but it must stay with the data it encrypted, so
it lives in the data root (``abe-kdf.json``) next to the nodes' data: a later job with the
same passphrase derives the same key and can read the indices again.

From the master key, HKDF-SHA256 derives one subkey per purpose and field
(``info = esdash/abe/v1/<purpose>/<field path>``): per-field OPE keys close pyope's
cross-field equality leak (its coins depend only on key and integer, not on the field).
``key_mode = "single"`` instead uses the master key bytes themselves as the one pyope key of
every field — the paper's setup — so its ciphertexts can be reproduced with pyope.

The secret is held by :class:`MasterKey`, whose ``repr`` never shows it; nothing in this
module logs or writes key material.  The *fingerprint* (an HKDF output, not invertible) is
what may be written: it tells esdash whether an existing index was written with this key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shlex
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from esdash.plugin_api import (
    TOO_DEEP,
    BadInput,
    JsonMapping,
    JsonObject,
    OptionValues,
    read_regular,
)

#: Fewest bytes of key material a key file must hold (AES-256 and HMAC-SHA256 strength).
MIN_KEY_BYTES = 32
#: Fewest different byte values a key's bytes must take.  32 random bytes take 30 on
#: average and fewer than 16 with a probability of 3.2e-17 (exact count over all 256^32
#: keys); 32 zero bytes take 1, repeated or patterned bytes and 44 ``a`` (base64) a few.
MIN_DISTINCT_BYTES = 16
#: The weak-key rule in one sentence (README and every refusal say it so).
KEY_RULE = (
    "a key file must not be text (printable UTF-8, unless it is base64 of at least 32 bytes) "
    f"and its key bytes (raw, or decoded from base64) must take at least {MIN_DISTINCT_BYTES} "
    "different values"
)
#: Name of the salt file in the data root.
KDF_FILE = "abe-kdf.json"
#: Argon2id cost (RFC 9106's second recommendation, scaled: t=3, 64 MiB, 4 lanes: ~0.6 s).
ARGON2_DEFAULTS = {"iterations": 3, "memory_cost": 64 * 1024, "lanes": 4}
#: Highest Argon2id cost a salt file may ask for: generous for real use (64x the default
#: memory, 33x its passes), small enough that a damaged file cannot exhaust the memory or
#: hang the run inside Argon2, where Ctrl-C is not seen.  ``memory_cost`` is in KiB.
ARGON2_LIMITS = {"iterations": 100, "memory_cost": 4 * 1024 * 1024, "lanes": 64}
#: How long a passphrase command may take (a password manager may ask the user).
COMMAND_TIMEOUT = 120.0
#: Prefix of every HKDF ``info``; bump the version to re-key the whole scheme.
INFO_PREFIX = "esdash/abe/v1"

_BASE64_TEXT = re.compile(rb"^[A-Za-z0-9+/]+={0,2}$")


class MasterKey:
    """The secret bytes every subkey is derived from.  Never printed, never pickled."""

    __slots__ = ("_material",)

    def __init__(self, material: bytes) -> None:
        if len(material) < 16:
            raise ValueError("key material too short")
        self._material = bytes(material)

    def __repr__(self) -> str:
        return "MasterKey(<hidden>)"

    def __reduce__(self) -> NoReturn:  # pickling would put the key into MPI messages or files
        raise TypeError("MasterKey is not picklable")

    @property
    def material(self) -> bytes:
        """The raw bytes: the single pyope key of ``key_mode = "single"``."""
        return self._material

    def derive(self, purpose: str, path: str, length: int) -> bytes:
        """HKDF-SHA256 subkey for ``purpose`` and field ``path``."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        info = f"{INFO_PREFIX}/{purpose}/{path}".encode()
        return HKDF(hashes.SHA256(), length, salt=None, info=info).derive(self._material)

    def string_key(self, path: str) -> bytes:
        """The AES-SIV key of field ``path``'s values (64 bytes: AES-256-SIV)."""
        return self.derive("value", path, 64)

    def name_key(self) -> bytes:
        """The AES-SIV key of field names the schema does not declare (64 bytes)."""
        return self.derive("name", "", 64)

    def name_prf_key(self) -> bytes:
        """The HMAC-SHA256 key of the PRF tokens of the schema's field names."""
        return self.derive("name-prf", "", 32)

    def ope_key(self, path: str, key_mode: str) -> bytes:
        """The OPE key of field ``path``: its own subkey, or with ``key_mode = "single"`` the
        key itself for every field, as pyope users (and the paper) had it."""
        return self._material if key_mode == "single" else self.derive("ope", path, 32)

    def fingerprint(self) -> str:
        """16 hex digits identifying the key (safe to store: a PRF output, not the key)."""
        return self.derive("fingerprint", "", 8).hex()


@dataclass(frozen=True)
class KeySource:
    """Where the key comes from, without the secret: what bench ranks need to load it too.

    ``kdf`` holds the Argon2id salt and cost for the passphrase kinds (not secret).
    """

    kind: str
    location: str
    kdf: JsonMapping | None = field(default=None)

    def to_dict(self) -> JsonObject:
        return {"kind": self.kind, "location": self.location, "kdf": dict(self.kdf or {}) or None}

    @classmethod
    def from_dict(cls, data: JsonMapping) -> KeySource:
        return cls(str(data["kind"]), str(data["location"]), data.get("kdf"))

    def describe(self) -> str:
        """For messages: the file or command, never its output."""
        return f"{self.kind.replace('_', ' ')} {self.location}"


def check_private_file(path: Path, what: str) -> os.stat_result:
    """Refuse a missing, non-regular, group/world-accessible or foreign-owned file."""
    try:
        info = path.stat()
    except FileNotFoundError:
        hint = (
            f"create it: (umask 077; head -c 32 /dev/urandom > {path})"
            if what == "key file"
            else f"create it: (umask 077; printf '%s\\n' 'your passphrase' > {path})"
        )
        raise BadInput(f"{what} {path} does not exist; {hint}") from None
    except OSError as exc:
        raise BadInput(f"{what} {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(f"{what} {path} is not a regular file; point at the file itself")
    if info.st_mode & 0o077:
        raise BadInput(
            f"{what} {path} has mode {stat.S_IMODE(info.st_mode):04o}: its group or others "
            f"may access it, so it is refused; run chmod 600 {path}"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise BadInput(
            f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); "
            "use a file you own"
        )
    return info


def is_text(data: bytes) -> bool:
    """Whether ``data`` reads as typed text: UTF-8 (a BOM allowed) of printable characters,
    spaces, tabs and line ends only.  32 random bytes are text with a probability below
    1.9e-11 (the share of 32-byte strings that are valid UTF-8 at all, ASCII limited to its
    98 printable and white-space characters)."""
    try:
        chars = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\n\r" for c in chars)


def weak_key_problem(data: bytes, decoded: bytes | None = None) -> str | None:
    """What makes a key file's content weak under :data:`KEY_RULE`, or None.

    ``data`` is the file's content; ``decoded`` the bytes its base64 text stands for, when
    it is base64 of at least :data:`MIN_KEY_BYTES` bytes (then text is allowed: pyope's
    keys are base64 text).  Says only sizes and counts, never a byte of the key.
    """
    if decoded is None and is_text(data):
        return (
            f"it is text ({len(data)} bytes of printable characters), a passphrase or a typed "
            "key where random bytes are expected"
        )
    key = data if decoded is None else decoded
    distinct = len(set(key))
    if distinct < MIN_DISTINCT_BYTES:
        what = f"its {len(key)} bytes" + (" (decoded from base64)" if decoded is not None else "")
        kind = "all equal" if distinct == 1 else "repeated or patterned"
        return f"{what} take only {distinct} different value{'' if distinct == 1 else 's'} ({kind})"
    return None


def parse_key(data: bytes, origin: str = "key file", path: Path | None = None) -> bytes:
    """The key material in a key file's content; weak content is refused (:data:`KEY_RULE`).

    Base64 text of at least 32 bytes (pyope's ``generate_key()``) is used verbatim, without
    its line end, exactly as pyope uses it; anything else is raw bytes, at least 32 of them.
    ``path`` (the key file) goes into the way out the refusals name.
    """
    text = data.strip()
    decoded: bytes | None = None
    if _BASE64_TEXT.match(text):
        try:
            decoded = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            decoded = None
        if decoded is not None and len(decoded) < MIN_KEY_BYTES:
            decoded = None
    if decoded is None and len(data) < MIN_KEY_BYTES:
        raise BadInput(
            f"{origin} holds {len(data)} bytes; a key needs at least {MIN_KEY_BYTES} random "
            "bytes (head -c 32 /dev/urandom) or pyope's base64 text (OPE.generate_key())"
        )
    problem = weak_key_problem(data, decoded)
    if problem is not None:
        target = shlex.quote(str(path)) if path is not None else "FILE"
        raise BadInput(
            f"{origin} is refused as a weak key: {problem}; {KEY_RULE}; create a random key "
            f"with (umask 077; head -c 32 /dev/urandom > {target}), or put a passphrase into "
            "encryption.passphrase_file instead (stretched with Argon2id)"
        )
    return text if decoded is not None else data


def read_key_file(path: Path) -> bytes:
    check_private_file(path, "key file")
    return parse_key(path.read_bytes(), f"key file {path}", path)


def read_passphrase_file(path: Path) -> bytes:
    check_private_file(path, "passphrase file")
    return _first_line(path.read_bytes(), f"passphrase file {path}")


def run_passphrase_command(command: str) -> bytes:
    """The first line the command prints.  Its output is never shown in errors."""
    argv = shlex.split(command)
    if not argv:
        raise BadInput("encryption.passphrase_command is empty; name a program that prints it")
    try:
        result = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise BadInput(f"passphrase command {argv[0]!r} not found; check its path") from None
    except subprocess.TimeoutExpired:
        raise BadInput(
            f"passphrase command {argv[0]!r} did not finish within {COMMAND_TIMEOUT:g} s"
        ) from None
    if result.returncode != 0:
        # stderr is the program's own message (never the passphrase, which goes to stdout)
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise BadInput(
            f"passphrase command {argv[0]!r} exited with {result.returncode}"
            + (f": {detail[0][:200]}" if detail[0] else "")
        )
    return _first_line(result.stdout, f"passphrase command {argv[0]!r}")


def _first_line(data: bytes, origin: str) -> bytes:
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not line:
        raise BadInput(f"{origin} gave an empty passphrase")
    return line


def argon2id(passphrase: bytes, kdf: JsonMapping) -> bytes:
    """The 32-byte master key of ``passphrase`` with the salt and cost in ``kdf``.

    The parameters are checked again (a spec may come from elsewhere than :func:`load_kdf`),
    so the derivation never runs with a cost beyond :data:`ARGON2_LIMITS`.
    """
    from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

    where = f"salt file {kdf.get('file')}" if kdf.get("file") else "Argon2id parameters"
    problem = kdf_problem(kdf)
    if problem:
        raise BadInput(f"{where}: {problem}")
    try:
        return Argon2id(
            salt=bytes.fromhex(kdf["salt"]),
            length=32,
            iterations=int(kdf["iterations"]),
            lanes=int(kdf["lanes"]),
            memory_cost=int(kdf["memory_cost"]),
        ).derive(passphrase)
    except MemoryError:
        raise BadInput(
            f"{where}: not enough memory for memory_cost = {kdf['memory_cost']} KiB"
        ) from None


def kdf_problem(data: JsonMapping) -> str | None:
    """What makes ``data`` unusable as esdash's Argon2id parameters, in one sentence, or None.

    Every cost must be a whole number within :data:`ARGON2_LIMITS` (and Argon2's own rule,
    memory_cost >= 8 x lanes): a damaged file must not make the run allocate gigabytes or
    spend minutes in a derivation that cannot be interrupted.
    """
    if not isinstance(data, dict) or data.get("kdf") != "argon2id":
        return 'not an esdash Argon2id salt file (no "kdf": "argon2id")'
    salt = data.get("salt")
    try:
        salt_bytes = bytes.fromhex(salt) if isinstance(salt, str) else b""
    except ValueError:
        salt_bytes = b""
    if not 8 <= len(salt_bytes) <= 64:
        return '"salt" must be 8 to 64 bytes as hex text'
    for key, limit in ARGON2_LIMITS.items():
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            unit = " KiB (4 GiB)" if key == "memory_cost" else ""
            return (
                f'"{key}" is {json.dumps(value)}, expected a whole number from 1 to {limit}{unit} '
                f"(esdash's limit; the default is {ARGON2_DEFAULTS[key]})"
            )
    if data["memory_cost"] < 8 * data["lanes"]:
        return f'"memory_cost" must be at least 8 x "lanes" ({8 * data["lanes"]} KiB)'
    return None


def load_kdf(path: Path, create: bool) -> JsonObject:
    """The Argon2id parameters stored at ``path``; a new random salt when absent and ``create``.

    Written once, with ``O_EXCL``: concurrent first runs agree on one salt.
    """
    try:
        data = json.loads(read_regular(path))
    except RecursionError:
        raise BadInput(f"salt file {path}: {TOO_DEEP}") from None
    except FileNotFoundError:
        if not create:
            raise BadInput(
                f"salt file {path} does not exist: the data was written by another setup, or "
                "the file was deleted (without it the passphrase cannot re-create the key)"
            ) from None
        data = {"kdf": "argon2id", "salt": os.urandom(16).hex(), **ARGON2_DEFAULTS}
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return load_kdf(path, create=False)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
            out.write("\n")
        return data
    except (OSError, ValueError) as exc:
        raise BadInput(f"salt file {path}: cannot read it ({exc})") from None
    problem = kdf_problem(data)
    if problem:
        raise BadInput(
            f"salt file {path}: {problem}; restore the file the data was first written with "
            "(its salt and cost derive the key)"
        )
    return {"kdf": "argon2id", "salt": data["salt"], **{k: int(data[k]) for k in ARGON2_DEFAULTS}}


def key_source(options: OptionValues, data_root: Path | None) -> KeySource:
    """Check which source the options name (exactly one) and resolve its salt."""
    chosen = [k for k in ("key_file", "passphrase_file", "passphrase_command") if options.get(k)]
    if len(chosen) != 1:
        found = ", ".join(chosen) if chosen else "none"
        raise BadInput(
            "encryption: set exactly one of key_file, passphrase_file or passphrase_command "
            f"(found: {found})"
        )
    kind = chosen[0]
    if kind == "key_file":
        return KeySource(kind, str(Path(options[kind])))
    salt_file = options.get("salt_file")
    if salt_file is None:
        if data_root is None:
            raise BadInput(
                "encryption: a passphrase needs a salt file; set encryption.salt_file or run "
                "with a data root"
            )
        salt_file = Path(data_root) / KDF_FILE
    kdf = load_kdf(Path(salt_file), create=True)
    location = str(Path(options[kind])) if kind == "passphrase_file" else str(options[kind])
    return KeySource(kind, location, {**kdf, "file": str(salt_file)})


def load_master_key(source: KeySource) -> MasterKey:
    """Read the key file, or get the passphrase and stretch it: once per process."""
    if source.kind == "key_file":
        return MasterKey(read_key_file(Path(source.location)))
    if source.kind == "passphrase_file":
        passphrase = read_passphrase_file(Path(source.location))
    elif source.kind == "passphrase_command":
        passphrase = run_passphrase_command(source.location)
    else:
        raise BadInput(f"unknown key source {source.kind!r}")
    if not source.kdf:
        raise BadInput("a passphrase needs the Argon2id salt; none was resolved")
    return MasterKey(argon2id(passphrase, source.kdf))
