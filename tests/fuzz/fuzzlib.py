"""The fuzz campaign's engine: structured damage to valid inputs, and one checked CLI call.

Every case starts from a *valid* seed (a run directory, a session, a key file, a corpus, a
Rally track, a campaign; :mod:`seeds`) copied into a fresh directory, damages it the way
files get damaged in practice (a key deleted, a value of the wrong type, a huge, negative
or NaN number, control characters and odd Unicode, a truncated file, bytes that are not
UTF-8, deep nesting, a path leading out of the directory, a file replaced by a directory or
a link) and calls the command line on it.  The verdict is the house rule for bad input
(:func:`verify`): an exit code the CLI documents, no traceback, no hang, a short error that
names the file, and every input file byte-for-byte as it was.

The damage is written against :class:`Pick`, a tiny chooser, so the same code runs under
Hypothesis (:class:`DrawPick`, which shrinks a failure to a minimal damage) and with a
seeded :class:`random.Random` (:class:`RandomPick`) for the cases that go through the real
executable in parallel processes, which Hypothesis' one-example-at-a-time loop cannot do.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import random
import shutil
import signal
import stat
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import tomli_w

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

T = TypeVar("T")

#: Seconds one in-process case may take before it counts as a hang.
CASE_TIMEOUT = 20
#: Seconds one case through the real executable may take (interpreter start included).
PROCESS_TIMEOUT = 60
#: Most lines a refusal may print on stderr ("one line, or a few": a session lists each
#: problem on its own line).
MAX_ERROR_LINES = 25
#: Exit codes the CLI documents (README, "Exit codes"); 4 (cluster) and 130 (signal) cannot
#: come from the commands the fuzzer runs, which start nothing.
DOCUMENTED = frozenset({0, 1, 2, 3, 5})

#: Cases run per input kind in this process, printed at the end of the session.
COUNTS: Counter[str] = Counter()


# ----------------------------------------------------------------------------- choosing


class Pick(Protocol):
    """What the damage functions need of a source of choices."""

    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...

    def text(self, max_size: int) -> str: ...


class DrawPick:
    """Choices drawn from Hypothesis' ``st.data()``: reproducible, and shrunk on failure."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self._data = data
        self._st = st

    def choice(self, options: Sequence[T]) -> T:
        return self._data.draw(self._st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self._data.draw(self._st.integers(low, high))

    def text(self, max_size: int) -> str:
        return self._data.draw(self._st.text(max_size=max_size))


class RandomPick:
    """Choices from a seeded :class:`random.Random` (the real-executable cases)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return self._random.choice(list(options))

    def integer(self, low: int, high: int) -> int:
        return self._random.randint(low, high)

    def text(self, max_size: int) -> str:
        size = self._random.randint(0, max_size)
        alphabet = "aZ9 _-./=\\\"'\t\n\x00\x1b\x7f\u00e9\u202e\u200b\U0001f600\ufeff"
        return "".join(self._random.choice(alphabet) for _ in range(size))


# ------------------------------------------------------------------------ odd values

#: Stands for a deeply nested array; replaced after serialising (``json.dumps`` and
#: ``tomli_w`` recurse, so they cannot write one themselves).  The depths are well inside
#: or well beyond Python's recursion limit, never near it: whether a parser recursing near
#: the limit fails depends on how deep the caller's stack already is, which would make the
#: same damage pass in one run and fail in the next.
DEEP = "\u0000esdash-fuzz-deep\u0000"
DEEP_LEVELS = (50, 5_000, 100_000)

#: Paths that lead out of the input's directory, or to things that are not plain files.
OUTSIDE_PATHS = (
    "/etc/hostname",
    "/etc",
    "/dev/null",
    "/proc/self/status",
    "../../../../../../etc/hostname",
    "..",
    "../outside",
    "/nonexistent/esdash-fuzz",
    "~/../../etc/hostname",
    "~nosuchuser/x",
    "",
    ".",
    "a\x00b",
    "/tmp/" + "x" * 300,
    "x/" * 2000,
)

#: Strings a human or a broken writer may leave: control characters, terminal escapes,
#: right-to-left overrides, lone surrogates, huge text, numbers as text.
ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "\x1b[2J\x1b[31mred",
    "line\nbreak",
    "tab\there\r",
    "\u202eevil\u202c",
    "\ud800",
    "\U0001f600\u0301",
    "\ufeffbom",
    "NaN",
    "-1",
    "1e999",
    "0x10",
    "true",
    "null",
    "{{ 7*7 }}",
    "{% raw %}",
    "${HOME}",
    "$(id)",
    "%s%n%x",
    "x" * 100_000,
)

#: Numbers a broken writer or a typo produces.
ODD_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    -(2**63),
    2**63,
    2**64 + 1,
    10**30,
    -(10**30),
    10**400,
    0.5,
    -0.0,
    1e-320,
    1e308,
    -1e308,
    math.nan,
    math.inf,
    -math.inf,
)


def odd_value(pick: Pick, allow_null: bool = True) -> Any:
    """One value of a kind a reader does not expect (for ``allow_null=False``, TOML's)."""
    kind = pick.choice(
        ("number", "string", "path", "bool", "container", "deep", "text")
        + (("null",) if allow_null else ())
    )
    if kind == "number":
        return pick.choice(ODD_NUMBERS)
    if kind == "string":
        return pick.choice(ODD_STRINGS)
    if kind == "path":
        return pick.choice(OUTSIDE_PATHS)
    if kind == "bool":
        return pick.choice((True, False))
    if kind == "container":
        return pick.choice(([], {}, [[]], [{}], {"": {}}, ["a", 1, None] if allow_null else ["a"]))
    if kind == "deep":
        return DEEP
    if kind == "text":
        return pick.text(40)
    return None


# ------------------------------------------------------------------ structured damage


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path inside a parsed document (the root is the empty path)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _render_path(path: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def damage_tree(doc: Any, pick: Pick, allow_null: bool = True) -> tuple[Any, str]:
    """``doc`` with one structural change at a chosen key path, and what was done.

    Deleting a key or an item, replacing a value by an odd one (wrong type, odd number,
    odd string, a path out of the directory, deep nesting), renaming a key to an unknown
    one, or wrapping a value in a list: what a hand edit or a different writer version does.
    """
    paths = list(_paths(doc))
    path = paths[pick.integer(0, len(paths) - 1)]
    op = pick.choice(("delete", "replace", "replace", "replace", "rename", "wrap", "dup"))
    if not path:
        if op == "dup" and isinstance(doc, dict) and doc:
            return [doc, doc], "root: wrapped in a two-item list"
        value = odd_value(pick, allow_null)
        return value, f"root replaced by {_short(value)}"
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    where = _render_path(path)
    if op == "delete":
        del parent[last]
        return doc, f"{where} deleted"
    if op == "rename" and isinstance(parent, dict):
        parent[f"{last}_fuzz" if pick.choice((True, False)) else str(last).upper()] = parent.pop(
            last
        )
        return doc, f"{where} renamed to an unknown key"
    if op == "wrap":
        parent[last] = [parent[last]]
        return doc, f"{where} wrapped in a list"
    if op == "dup" and isinstance(parent, list):
        parent.append(parent[last])
        return doc, f"{where} duplicated at the end"
    value = odd_value(pick, allow_null)
    parent[last] = value
    return doc, f"{where} = {_short(value)}"


def _short(value: Any) -> str:
    if value == DEEP:
        return "<deeply nested array>"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} chars)"


def _deepen(text: str, quoted: str, pick: Pick) -> str:
    levels = pick.choice(DEEP_LEVELS)
    return text.replace(quoted, "[" * levels + "]" * levels)


def dump_json(doc: Any, pick: Pick) -> bytes:
    """JSON as a writer might produce it (NaN/Infinity tokens included), deep markers expanded."""
    text = json.dumps(doc, indent=pick.choice((None, 1)), allow_nan=True)
    if json.dumps(DEEP) in text:
        text = _deepen(text, json.dumps(DEEP), pick)
    return text.encode("utf-8", "surrogatepass")


def dump_toml(doc: Any, pick: Pick) -> bytes:
    """TOML of a damaged document (deep markers expanded); a value TOML cannot hold is
    written as a string instead."""
    if not isinstance(doc, dict):  # TOML's root is a table: the file is not TOML at all
        return json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    text = tomli_w.dumps(_tomlable(doc))
    if tomli_w.dumps({"k": DEEP})[4:-1] in text:
        text = _deepen(text, tomli_w.dumps({"k": DEEP})[4:-1], pick)
    return text.encode("utf-8", "surrogatepass")


def _tomlable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        items = [_tomlable(v) for v in value if v is not None]
        return items
    return value


# ------------------------------------------------------------------------ byte damage

#: Byte strings inserted into a file: not UTF-8, a NUL, a BOM, an escape, a lone CR.
INSERTS = (b"\xff\xfe", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\x1b[31m", b"\r", b"\n\n", b"}")


def damage_bytes(data: bytes, pick: Pick) -> tuple[bytes, str]:
    """``data`` truncated, with odd bytes inserted, a byte flipped or a chunk repeated."""
    op = pick.choice(("truncate", "insert", "flip", "repeat", "empty", "bom"))
    size = len(data)
    at = pick.integer(0, max(size - 1, 0))
    if op == "truncate":
        return data[:at], f"truncated to {at} of {size} bytes"
    if op == "insert":
        chunk = pick.choice(INSERTS)
        return data[:at] + chunk + data[at:], f"{chunk!r} inserted at byte {at}"
    if op == "flip" and size:
        return data[:at] + bytes([data[at] ^ 0x80]) + data[at + 1 :], f"byte {at} flipped"
    if op == "repeat" and size:
        end = min(size, at + pick.integer(1, 64))
        return data[:end] + data[at:], f"bytes {at}..{end} repeated"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM prepended"
    return b"", "emptied"


def damage_lines(data: bytes, pick: Pick, json_lines: bool = True) -> tuple[bytes, str]:
    """A JSON-lines file with one line damaged, dropped, repeated, joined or replaced."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        return b"{}\n", "one empty object written"
    index = pick.integer(0, len(lines) - 1)
    op = pick.choice(("tree", "tree", "bytes", "drop", "repeat", "join", "garbage", "nonl"))
    where = f"line {index + 1}"
    if op == "tree" and json_lines:
        try:
            doc = json.loads(lines[index])
        except (ValueError, RecursionError):
            op = "bytes"
        else:
            doc, what = damage_tree(doc, pick)
            lines[index] = dump_json(doc, pick).replace(b"\n", b" ")
            return b"\n".join(lines) + b"\n", f"{where}: {what}"
    if op in ("bytes", "tree"):
        lines[index], what = damage_bytes(lines[index], pick)
        return b"\n".join(lines) + b"\n", f"{where}: {what}"
    if op == "drop":
        del lines[index]
        return b"\n".join(lines) + (b"\n" if lines else b""), f"{where} deleted"
    if op == "repeat":
        lines.insert(index, lines[index])
        return b"\n".join(lines) + b"\n", f"{where} repeated"
    if op == "join" and index + 1 < len(lines):
        lines[index : index + 2] = [lines[index] + lines[index + 1]]
        return b"\n".join(lines) + b"\n", f"{where} joined with the next"
    if op == "nonl":
        return b"\n".join(lines), "last newline removed"
    garbage = pick.choice((b"[]", b"null", b"42", b'"x"', b"{", b"\xff", b" ", b"{}" * 3))
    lines.insert(index, garbage)
    return b"\n".join(lines) + b"\n", f"{garbage!r} inserted as {where}"


# ------------------------------------------------------------------------- file damage


def damage_file(path: Path, pick: Pick, fmt: str) -> str:
    """Damage one file in place by its format (``json``, ``jsonl``, ``toml``, ``text``,
    ``bytes``), or replace the file itself by something else; returns what was done."""
    name = path.name
    op = pick.choice(("content",) * 8 + ("file",))
    # never write through a link an earlier damage made (it points out of the case)
    if op == "file" or path.is_symlink() or not path.is_file():
        return f"{name}: {replace_file(path, pick)}"
    data = path.read_bytes()
    if fmt in ("json", "toml"):
        loader = json.loads if fmt == "json" else tomllib.loads
        try:
            doc = loader(data.decode("utf-8"))
        except (ValueError, RecursionError):
            doc = None
        if doc is not None and pick.choice((True, True, True, False)):
            doc, what = damage_tree(doc, pick, allow_null=fmt == "json")
            path.write_bytes(dump_json(doc, pick) if fmt == "json" else dump_toml(doc, pick))
            return f"{name}: {what}"
    if fmt == "jsonl" and pick.choice((True, True, False)):
        new, what = damage_lines(data, pick)
        path.write_bytes(new)
        return f"{name}: {what}"
    if fmt == "text" and pick.choice((True, False)):
        new, what = damage_text_lines(data, pick)
        path.write_bytes(new)
        return f"{name}: {what}"
    new, what = damage_bytes(data, pick)
    path.write_bytes(new)
    return f"{name}: {what}"


#: Lines put into a text file (a template, a TOML file): syntax that is half there.
TEXT_LINES = (
    b"{{",
    b"}}",
    b"{% if %}",
    b"{% for x in y %}",
    b"{{ undefined_name.attribute }}",
    b"{% include '/etc/hostname' %}",
    b"{{ rally.collect(parts='../../*.json') }}",
    b"[[",
    b"[cluster]",
    b"name = ",
    b'name = "dup"',
    b"= 1",
    b"x = [[[[[[[[[[",
    b'"\\u0000" = 1',
    b"a.b.c.d.e.f = 1",
)


def damage_text_lines(data: bytes, pick: Pick) -> tuple[bytes, str]:
    """A line of a text file deleted, repeated, or a half-written construct inserted."""
    lines = data.split(b"\n")
    index = pick.integer(0, max(len(lines) - 1, 0))
    op = pick.choice(("drop", "repeat", "insert", "insert"))
    if op == "drop" and lines:
        del lines[index]
        return b"\n".join(lines), f"line {index + 1} deleted"
    if op == "repeat" and lines:
        lines.insert(index, lines[index])
        return b"\n".join(lines), f"line {index + 1} repeated"
    line = pick.choice(TEXT_LINES)
    lines.insert(index, line)
    return b"\n".join(lines), f"{line!r} inserted as line {index + 1}"


def remove(path: Path) -> None:
    """Whatever is at ``path`` (file, link, FIFO, directory) removed, never followed."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or os.path.lexists(path):
        path.unlink()


def replace_file(path: Path, pick: Pick) -> str:
    """The file deleted, or replaced by a directory, a link out of the directory, a link
    loop, a FIFO or an empty file."""
    op = pick.choice(("delete", "directory", "link-out", "link-loop", "fifo", "empty", "link-dev"))
    remove(path)
    if op == "delete":
        return "deleted"
    if op == "directory":
        path.mkdir()
        return "replaced by a directory"
    if op == "link-out":
        path.symlink_to(outside_file())
        return f"replaced by a symlink to {outside_file()} (outside the input)"
    if op == "link-dev":
        path.symlink_to("/dev/null")
        return "replaced by a symlink to /dev/null"
    if op == "link-loop":
        path.symlink_to(path.name)
        return "replaced by a symlink to itself"
    if op == "fifo":
        os.mkfifo(path)
        return "replaced by a FIFO (nobody writes it)"
    path.write_bytes(b"")
    return "emptied"


# -------------------------------------------------------------------- snapshots, calls


#: The file outside every case that damaged inputs link to: the fuzzer's own, so that
#: nothing writing through such a link (a command, or a bug of the fuzzer) can touch a
#: file of the system; part of every snapshot, so a command that does is caught.
OUTSIDE = Path(tempfile.gettempdir()) / "esdash-fuzz-outside.txt"
LINK_TARGETS = (OUTSIDE, Path("/etc/hostname"))  # the latter: a path the damage names


def outside_file() -> Path:
    """:data:`OUTSIDE`, created on first use."""
    if not OUTSIDE.is_file() or OUTSIDE.is_symlink():
        remove(OUTSIDE)
        OUTSIDE.write_text("a file outside the fuzz case's input\n")
    return OUTSIDE


def snapshot(roots: Sequence[Path]) -> dict[str, tuple[Any, ...]]:
    """Every entry below ``roots`` (links not followed, FIFOs not opened): type, mode, and
    the SHA-256 of a regular file's bytes or a link's target."""
    found: dict[str, tuple[Any, ...]] = {}
    for root in roots:
        entries = [root] if not root.is_dir() or root.is_symlink() else []
        if not entries:
            for directory, dirs, files in os.walk(root):
                entries.extend(Path(directory) / name for name in (*dirs, *files))
        for entry in entries:
            try:
                info = os.lstat(entry)
            except FileNotFoundError:
                continue
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                found[str(entry)] = ("link", os.readlink(entry))
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(entry.read_bytes()).hexdigest()
                found[str(entry)] = ("file", mode, info.st_uid, digest)
            elif stat.S_ISDIR(info.st_mode):
                found[str(entry)] = ("dir", mode, info.st_uid)
            else:
                found[str(entry)] = ("other", stat.S_IFMT(info.st_mode), mode)
    return found


def changed(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    """Input entries that were modified or removed (new files are output, not damage)."""
    return [path for path, entry in before.items() if after.get(path) != entry]


class Hang(BaseException):
    """Raised by the alarm in a case that ran too long (a BaseException, so that no
    ``except Exception`` in the code under test swallows it)."""


@dataclass
class Outcome:
    """What one CLI call did."""

    code: int | None
    out: str
    err: str
    crash: str | None = None  # the uncaught exception's traceback
    hang: bool = False
    site: str = ""  # the innermost frame of esdash's own code when it crashed or hung


class _Alarm:
    """The SIGALRM handler of one call: raises :class:`Hang`, and remembers that it did
    (code under test that swallowed the first one is still reported as hanging)."""

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.fired = True
        raise Hang(f"no answer within {CASE_TIMEOUT} s")


def call_main(argv: Sequence[str], timeout: int = CASE_TIMEOUT) -> Outcome:
    """``esdash.cli.main(argv)`` in this process: its exit code and output; an exception
    other than SystemExit is kept as a crash, a call longer than ``timeout`` as a hang."""
    from esdash.cli import main

    out, err = io.StringIO(), io.StringIO()
    alarm = _Alarm()
    previous = signal.signal(signal.SIGALRM, alarm)
    # then once a second: a Hang swallowed by the code under test is raised again
    signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
    code: int | None = None
    crash, hang, site = None, False, ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            err.write(f"{exc.code}\n")
    except Hang as exc:
        hang, site = True, project_site(exc)
    except BaseException as exc:  # noqa: BLE001 - every other escape is the finding
        crash, site = traceback.format_exc(), project_site(exc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if alarm.fired and not hang:
        hang, site = True, site or "(the code under test caught the alarm)"
    return Outcome(code, out.getvalue(), err.getvalue(), crash, hang, site)


#: Where the project's own code lives (a crash is reported at its innermost frame there).
_PROJECT = (f"{os.sep}esdash{os.sep}", f"{os.sep}plugins{os.sep}")


def project_site(exc: BaseException) -> str:
    """``esdash/x.py:12 (function)`` of the innermost frame in esdash or its plugins."""
    site = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if any(part in frame.filename for part in _PROJECT) and "tests" not in frame.filename:
            short = frame.filename.split(f"{os.sep}main{os.sep}", 1)[-1]
            site = f"{short}:{frame.lineno} ({frame.name})"
    return site or "outside esdash"


@dataclass
class Case:
    """One fuzz case: the input kind, the command, what was damaged, what must be unchanged,
    which exit codes the command may give, and names a refusal should mention."""

    kind: str
    argv: list[str]
    damage: str
    inputs: list[Path]
    allowed: frozenset[int] = DOCUMENTED
    names: list[str] = field(default_factory=list)
    #: Environment variables the command runs with (``ESDASH_RUNS``, ``ESDASH_CACHE``).
    env: dict[str, str] = field(default_factory=dict)
    #: Text that must never be printed (the content of a secret file).
    forbidden: list[str] = field(default_factory=list)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def verify(case: Case, outcome: Outcome, before: dict[str, tuple[Any, ...]]) -> list[str]:
    """Every way the call broke the rule for bad input (empty: it kept it)."""
    problems: list[str] = []
    if outcome.hang:
        problems.append(f"hang at {outcome.site}: no exit within its time limit")
    if outcome.crash:
        problems.append(f"uncaught exception at {outcome.site}: {last_line(outcome.crash)}")
    text = outcome.out + outcome.err
    if "Traceback (most recent call last)" in text:
        where = f" at {outcome.site}" if outcome.site else ""
        problems.append(f"traceback printed{where}: {last_line(outcome.err or outcome.out)}")
    if outcome.code is not None and outcome.code not in case.allowed:
        problems.append(
            f"exit code {outcome.code} not in {sorted(case.allowed)}: {last_line(outcome.err)}"
        )
    if outcome.code not in (0, None) and not outcome.crash:
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        if not lines:
            problems.append(f"exit code {outcome.code} with nothing on stderr")
        elif len(lines) > MAX_ERROR_LINES:
            problems.append(f"{len(lines)} lines on stderr for one refusal: {lines[0][:120]}")
        elif case.names and not any(name in outcome.err for name in case.names):
            problems.append(f"refusal names none of {case.names}: {lines[0][:200]}")
    shown = [secret for secret in case.forbidden if secret in text]
    if shown:
        problems.append(f"a secret's content was printed: {shown[0][:12]!r}...")
    gone = changed(before, snapshot([*case.inputs, *LINK_TARGETS]))
    if gone:
        problems.append(f"input changed: {', '.join(sorted(gone)[:5])}")
    return problems


def report(case: Case, problems: list[str]) -> str:
    return (
        f"kind {case.kind} / command esdash {' '.join(case.argv)} / damage {case.damage}\n  "
        + "\n  ".join(problems)
    )


#: A callable that records a failure (survey mode) or raises it.
Sink = Callable[[Case, list[str]], None]


def raise_failure(case: Case, problems: list[str]) -> None:
    raise AssertionError(report(case, problems))


def run_case(case: Case, sink: Sink = raise_failure) -> Outcome:
    """Snapshot the inputs, call the CLI in this process, count the case, check the rule."""
    before = snapshot([*case.inputs, *LINK_TARGETS])
    started = time.monotonic()
    with environment(**case.env):
        outcome = call_main(case.argv)
    COUNTS[case.kind] += 1
    slow_log = os.environ.get("ESDASH_FUZZ_SLOW_LOG")
    if slow_log and time.monotonic() - started > 1.0:
        with open(slow_log, "a", encoding="utf-8") as log:
            log.write(f"{time.monotonic() - started:.1f} s: {report(case, [])}\n")
    problems = verify(case, outcome, before)
    if problems:
        sink(case, problems)
    return outcome


def copy_seed(seed: Path, into: Path) -> Path:
    """A private copy of a seed file or directory in ``into`` (links kept as links)."""
    into.mkdir(parents=True, exist_ok=True)
    target = into / seed.name
    if seed.is_dir():
        shutil.copytree(seed, target, symlinks=True)
    else:
        shutil.copy2(seed, target)
    return target


def files_under(root: Path, suffixes: Sequence[str] = ()) -> list[Path]:
    """Regular files below ``root`` in a stable order, optionally by suffix."""
    found = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return [p for p in found if not suffixes or p.suffix in suffixes]


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Environment variables set for one case and restored after it."""
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A private directory for one case, removed after it (FIFOs and links included).

    In memory (``/dev/shm``) where there is one: a case copies and removes a run directory,
    which on a loaded disk costs more than the command it tests.
    """
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="fuzz-case-", dir=where))
    try:
        yield path
    finally:
        for entry in path.rglob("*"):
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink():
                    entry.chmod(0o700)
        shutil.rmtree(path, ignore_errors=True)


def examples(count: int) -> int:
    """``count`` scaled by ``ESDASH_FUZZ_SCALE`` (e.g. 0.1 while working on the harness,
    10 for a long campaign); the default 1 is what CI runs."""
    scale = float(os.environ.get("ESDASH_FUZZ_SCALE") or 1)
    return max(1, round(count * scale))
