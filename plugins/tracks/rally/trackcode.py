"""A track's own Python, run only when the session trusts it, and never in esdash's process.

A Rally track's ``track.py`` (an OpenSearch Benchmark workload's ``workload.py``) and the
modules beside it are code their author wrote: importing them runs whatever they say, with
esdash's rights (root, when esdash runs as root) and its memory (the session's secrets).
So esdash runs them only when the session says so (``trust_code = true`` in ``[track]``,
or ``--trust-track-code`` on the command line: :data:`TRUST_HOW`), and then only in a child
process (:class:`TrackCode`, the program :mod:`esdash_plugins.tracks.rally.child`):

* as the account ``nobody`` when esdash runs as root (no supplementary groups), else as the
  user running esdash; with a fresh minimal environment, the track directory as its working
  directory, umask 077, stdin on ``/dev/null``, its memory, open files and processes
  limited, and at most :data:`TIME_LIMIT` seconds for each answer;
* it answers with data only (JSON lines on a pipe): what ``register(registry)`` registered,
  the sampled parameters of a source, what a runner sent to a recording client.

The child starts when a track load first needs the code and ends with that load
(:meth:`TrackCode.close`); what it answered is remembered per file version
(:data:`_LOADED`, :data:`_SAMPLES`, :data:`_RECORDED`), so later loads of the same track in
one esdash process ask nothing again and get the same bodies.  A failure of the user's
code, of the child or of its time limit is a :class:`BadInput` of one line naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from esdash.plugin_api import BadInput, JsonObject

from . import child
from . import template as tpl

#: The track option that lets esdash run the track's own code.
TRUST_OPTION = "trust_code"
#: How a user trusts a track's code, for messages.
TRUST_HOW = "trust_code = true in the session's [track] table, or --trust-track-code"
#: The account that runs a track's code when esdash runs as root.
UNPRIVILEGED = "nobody"
#: Seconds the child may take for one answer (loading the file, sampling one source, ...).
TIME_LIMIT = 60.0
#: Seconds the child has to end once esdash closes its requests, before it is killed.
END_GRACE = 5.0
#: The largest answer esdash reads (a source's samples stop at 4 MB of bodies).
MAX_ANSWER = 256 * 1024**2


def trusted(options: Mapping[str, Any]) -> bool:
    """Whether the session trusts the track's own code (``trust_code``)."""
    return bool(options.get(TRUST_OPTION))


def untrusted(path: Path) -> str:
    """Why a task that needs the track's code is refused when the session does not trust it."""
    return (
        f"{path} is the track's own code, which esdash runs only when the session trusts it "
        f"(set {TRUST_HOW})"
    )


def code_files(python_file: Path) -> tuple[Path, ...]:
    """The files of the track's own code: ``python_file`` and every Python module or
    package beside it (``track.py`` may import them; Rally puts its directory on
    ``sys.path``).  ``python_file`` first, the others by name."""
    directory = python_file.parent
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        entries = []
    beside = [
        p
        for p in entries
        if p != python_file
        and ((p.suffix == ".py" and p.is_file()) or (p.is_dir() and (p / "__init__.py").is_file()))
    ]
    return (python_file, *beside)


@dataclass(frozen=True)
class Account:
    """Who runs a track's code: ``nobody`` for root, else the user running esdash."""

    name: str
    uid: int
    gid: int
    home: str
    #: Whether esdash switches to it (it runs as root).
    switch: bool


def account() -> Account:
    """The account that runs a track's code in this process, or BadInput saying why none."""
    if os.geteuid() != 0:
        uid = os.geteuid()
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            return Account(str(uid), uid, os.getegid(), "/", False)
        return Account(entry.pw_name, uid, os.getegid(), entry.pw_dir, False)
    try:
        entry = pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        raise BadInput(
            f"esdash runs a track's own code as the account {UNPRIVILEGED} when it runs as "
            f"root, and this machine has no account {UNPRIVILEGED}; create it, or run esdash "
            f"as an unprivileged user"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise BadInput(
            f"the account {UNPRIVILEGED} is root (uid {entry.pw_uid}, gid {entry.pw_gid}) on "
            f"this machine; esdash never runs a track's own code as root"
        )
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, True)


def runs_as() -> str:
    """Who would run a track's code, for the plan: ``nobody`` (root) or the user's name."""
    if os.geteuid() == 0:
        return UNPRIVILEGED
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


@dataclass(frozen=True)
class Registered:
    """What the file's ``register(registry)`` registered, by name."""

    param_sources: tuple[str, ...]
    runners: tuple[str, ...]
    track_processors: int
    standard_value_sources: int


@dataclass(frozen=True)
class Samples:
    """What a parameter source gave for one operation: its parameters, in the order given."""

    source: str
    params: tuple[JsonObject, ...]
    #: Why sampling stopped before :data:`child.MAX_SAMPLES` (None: it did not).
    stopped: str | None = None


#: What each file version registered, by (resolved path, mtime, size).
_LOADED: dict[tuple[str, int, int], Registered] = {}
#: The samples of each source, by file version, source, operation and its parameters.
_SAMPLES: dict[str, Samples] = {}
#: What each runner sent, by file version, operation type and the operation.
_RECORDED: dict[str, JsonObject] = {}


def forget() -> None:
    """Drop every answer remembered in this process (tests load a file anew)."""
    _LOADED.clear()
    _SAMPLES.clear()
    _RECORDED.clear()


class TrackCode:
    """A track's own code for one load of the track: a child process, started on demand.

    ``path`` is the file (``track.py`` or ``workload.py``) as the track names it, which
    every message names.  Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.directory = path.parent
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: int | None = None
        self._answers: int | None = None
        self._output: IO[bytes] | None = None
        self._pending = b""
        #: Whether the running child has loaded the file.
        self._loaded = False

    def __enter__(self) -> TrackCode:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        # after an error (Ctrl-C included) the child may be busy in the code: no grace
        self.close(grace=END_GRACE if kind is None else 0)

    # ------------------------------------------------------------------ what it answers

    def _version(self) -> tuple[str, int, int]:
        if not tpl.inside(self.path, self.directory):
            raise BadInput(
                f"{self.path}: resolves to {self.path.resolve()}, outside the track directory "
                f"{self.directory}; esdash runs only a {self.path.name} inside the track "
                f"directory"
            )
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
        return (str(self.path.resolve()), stat.st_mtime_ns, stat.st_size)

    def registered(self) -> Registered:
        """What the file registers (it is run once per file version and process)."""
        key = self._version()
        if key not in _LOADED:
            self._ready(key)
        return _LOADED[key]

    def _ready(self, key: tuple[str, int, int]) -> None:
        """The child runs, with the file loaded in it."""
        if self._loaded:
            return
        found = self._exchange(
            {"op": "load", "path": key[0], "directory": str(self.directory.resolve())},
            f"importing {self.path.name}",
        )
        self._loaded = True
        _LOADED.setdefault(
            key,
            Registered(
                tuple(found["param_sources"]),
                tuple(found["runners"]),
                int(found["track_processors"]),
                int(found["standard_value_sources"]),
            ),
        )

    def sample(
        self, name: str, track: Mapping[str, Any], params: Mapping[str, Any], operation: str
    ) -> Samples:
        """Up to :data:`child.MAX_SAMPLES` parameter sets of source ``name`` for
        ``operation`` (``track``: the view :func:`child.track_view` builds)."""
        key = json.dumps(
            [*self._version(), name, operation, _jsonable(params)], sort_keys=True, default=repr
        )
        if key not in _SAMPLES:
            self._ready(self._version())
            found = self._exchange(
                {
                    "op": "sample",
                    "name": name,
                    "track": dict(track),
                    "params": _jsonable(params),
                    "operation": operation,
                },
                f"in param source {name!r}",
            )
            params_given = tuple(found["params"])
            if not params_given:
                raise BadInput(
                    f"{self.path}: parameter source {name!r} gave no parameters "
                    f"(in param source {name!r})"
                )
            _SAMPLES[key] = Samples(name, params_given, found["stopped"])
        return _SAMPLES[key]

    def record(self, op_type: str, op: Mapping[str, Any]) -> JsonObject:
        """What the runner of ``op_type`` sent when called once with ``op``'s parameters
        and a recording client (see :meth:`child.Host.runner`)."""
        key = json.dumps([*self._version(), op_type, _jsonable(op)], sort_keys=True, default=repr)
        if key not in _RECORDED:
            self._ready(self._version())
            _RECORDED[key] = self._exchange(
                {"op": "runner", "type": op_type, "params": _jsonable(op)},
                f"in runner {op_type!r}",
            )
        return _RECORDED[key]

    # ------------------------------------------------------------------ the child process

    def _exchange(self, request: Mapping[str, Any], where: str) -> JsonObject:
        """The child's answer to ``request`` (the child is started first if need be)."""
        if self._process is None:
            self._start()
        self._send(json.dumps(request).encode() + b"\n", where)
        answer = self._receive(where)
        if "failed" in answer:
            raise BadInput(f"{self.path}{answer['failed']}")
        if answer.get("unreadable"):
            self.close()
            raise _unreadable(Path(str(answer["unreadable"])), runs_as())
        return answer

    def _start(self) -> None:
        """Start the child: the account, environment, limits and pipes of the module
        docstring.  Only the two pipes are passed; nothing else of esdash's is open in it."""
        who = account()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": who.home,
            "USER": who.name,
            "LOGNAME": who.name,
            "LANG": "C.UTF-8",
        }
        switch: dict[str, Any] = {}
        if who.switch:
            switch = {"user": who.uid, "group": who.gid, "extra_groups": []}
        program = Path(child.__file__).read_text(encoding="utf-8")
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        # what the code prints: kept for the message if the process ends without an answer
        output = tempfile.TemporaryFile(prefix="esdash-track-code-")  # noqa: SIM115
        argv = [sys.executable, "-I", "-B", "-c", program, str(requests_read), str(answers_write)]
        try:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                cwd=self.directory.resolve(),
                env=env,
                umask=0o077,
                pass_fds=(requests_read, answers_write),
                start_new_session=True,
                **switch,
            )
        except OSError as exc:
            for fd in (requests_write, answers_read):
                os.close(fd)
            output.close()
            raise self._not_started(exc, who) from None
        finally:
            os.close(requests_read)  # the child's ends: open in the child only
            os.close(answers_write)
        self._requests, self._answers, self._output = requests_write, answers_read, output

    def _not_started(self, exc: OSError, who: Account) -> BadInput:
        if exc.filename is not None and Path(exc.filename) == self.directory.resolve():
            return _unreadable(self.directory, who.name)
        return BadInput(
            f"{self.path}: cannot start Python ({sys.executable}) as {who.name} to run it "
            f"({exc.strerror or exc}); install esdash where {who.name} can run its Python"
        )

    def _send(self, data: bytes, where: str) -> None:
        assert self._requests is not None
        deadline = time.monotonic() + TIME_LIMIT
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._too_long(where)
            _, ready, _ = select.select([], [self._requests], [], left)
            if not ready:
                continue
            try:
                sent = os.write(self._requests, view[: select.PIPE_BUF])
            except BrokenPipeError:
                raise self._ended(where) from None
            view = view[sent:]

    def _receive(self, where: str) -> JsonObject:
        """One answer line, within the time limit and :data:`MAX_ANSWER` bytes."""
        assert self._answers is not None
        deadline = time.monotonic() + TIME_LIMIT
        chunks, size = [self._pending], len(self._pending)
        while b"\n" not in chunks[-1]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._too_long(where)
            ready, _, _ = select.select([self._answers], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise self._ended(where)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                self.close(grace=0)
                raise BadInput(
                    f"{self.path}: answered more than {MAX_ANSWER // 1024**2} MiB ({where}); "
                    f"esdash stopped it"
                )
        line, _, self._pending = b"".join(chunks).partition(b"\n")
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            self.close(grace=0)
            raise BadInput(f"{self.path}: its process answered what is not JSON ({where})")
        return answer

    def _too_long(self, where: str) -> BadInput:
        self.close(grace=0)
        return BadInput(
            f"{self.path}: still running after {TIME_LIMIT:g} s ({where}); esdash stopped "
            f"it (a track's own code has {TIME_LIMIT:g} s for each step)"
        )

    def _ended(self, where: str) -> BadInput:
        """The child ended without answering: how, and the last line it printed."""
        process = self._process
        assert process is not None
        found = _exited(process, END_GRACE)
        last = _last_line(self._output)
        self.close(grace=0)
        if found is None:
            how = "stopped answering"
        elif found.si_code == os.CLD_EXITED:
            how = f"ended with exit status {found.si_status}"
        else:
            how = f"was killed by {signal.Signals(found.si_status).name}"
        return BadInput(
            f"{self.path}: the process running it {how} ({where})"
            + (f"; its last output: {last}" if last else "")
        )

    def close(self, grace: float = END_GRACE) -> None:
        """End the child: its requests are closed, so it returns; killed after ``grace``
        seconds, with anything it left in its session."""
        process, self._process = self._process, None
        for fd in (self._requests, self._answers):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._requests = self._answers = None
        if process is not None:
            _exited(process, grace)
            _reap(process)
        if self._output is not None:
            self._output.close()
            self._output = None
        self._pending = b""
        self._loaded = False


def _unreadable(path: Path, who: str) -> BadInput:
    """The account that runs the code cannot read the track: the fix is the user's to make
    (esdash never changes the modes of a user's files)."""
    return BadInput(
        f"{path}: the account {who} that runs the track's code cannot read it; make the "
        f"track directory, its files and the directories above it readable by others "
        f"(chmod o+rX), or copy the track somewhere they are"
    )


def _exited(process: subprocess.Popen[bytes], timeout: float) -> Any:
    """Wait up to ``timeout`` seconds for the child to end, without reaping it (so that its
    process ID, and the group named after it, stay its own): its ``waitid`` result, or
    None while it runs."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Kill the child's session (the child, if it still runs, and whatever it started),
    then reap the child.  Its group is signalled before the reaping, while its ID is
    still the child's."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _last_line(output: IO[bytes] | None) -> str:
    """The last line the child printed, printable and short."""
    if output is None:
        return ""
    with contextlib.suppress(OSError):
        output.seek(0, os.SEEK_END)
        size = output.tell()
        output.seek(max(0, size - 4096))
        text = output.read().decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            shown = "".join(c if c.isprintable() else "?" for c in lines[-1])
            return shown[:300]
    return ""


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=repr))
    except (TypeError, ValueError):
        return repr(value)


def view_of(
    name: str,
    directory: Path,
    indices: Sequence[str],
    challenge: str,
    corpora: Mapping[str, Sequence[tuple[str | None, int]]],
) -> JsonObject:
    """The track as :func:`child.track_view` builds it for a source, as data."""
    return {
        "name": name,
        "root": os.path.abspath(directory),
        "indices": list(indices),
        "challenge": challenge,
        "corpora": [[corpus, [list(doc) for doc in docs]] for corpus, docs in corpora.items()],
    }
