"""Encryption mode ``gocryptfs``: every node keeps its data on a GoCryptFS mount.

The paper's second setup: Elasticsearch writes plaintext into a FUSE file system that stores
only ciphertext on disk, so a stolen disk or a snapshot of the shared file system reveals no
documents.  This module sets that file system up around each node and tears it down again.

Layout (per node, keyed by rank like plain data, so a later job reuses it from any host)::

    <data_root>/<rank>/          root's (0711): the node account cannot swap what is in it
    <data_root>/<rank>/cipher/   the gocryptfs cipher directory: all that is ever on disk
    <data_root>/<rank>/plain/    the mount point; the node's ``path.data`` while it runs
    .../plain/.esdash-jvm/       inside the mount: the JVM's temporary files, heap dumps,
                                 crash files and GC logs (a heap dump holds documents)

Everything lives below ``<data_root>/<rank>``, so ``--fresh`` (which deletes that directory)
also deletes the ciphertext, and nothing else in esdash needs to know about the mode.

Password flow.  The password comes from ``password_file`` (refused unless only its owner may
read it, and that owner is the invoking user or root) or from ``password_command`` (run
without a shell, like gocryptfs' ``-extpass``; its standard output is the password).  The rank
reads it with the invoking user's rights and writes it into a pipe to gocryptfs' standard
input, gocryptfs running as the node user.  So the node user never needs to read the file,
and the password is never on a command line (``ps``), in an environment, in the session file,
the run directory or a log.  Every rank reads it on its own host (the file must be there, e.g.
in a shared home; a command runs once per rank, without a terminal).

Mount lifecycle.  ``gocryptfs -fg`` runs as a child of the rank, as the node user (FUSE only
lets the mounting uid *and* gid use a mount without ``allow_other``, so even root cannot look
inside).  After the node stopped, the rank unmounts with ``fusermount3 -u`` as that user —
never lazily, so a busy mount is reported instead of being pulled from under a process — and
waits for gocryptfs to exit.  That happens in a ``finally``, so it also runs when the node
crashed, on Ctrl-C and on SIGTERM (``scancel``, a Slurm time limit).

What a rank cannot clean up itself:

- A SIGKILLed rank leaves its gocryptfs serving an idle mount.  ``esdash cluster down`` (and
  the end of ``up --foreground``/``esdash run``) calls :meth:`GocryptfsMode.release_storage`
  for the ranks of the run on its own host, and the next ``up`` on any host releases a
  leftover mount before mounting.  Both unmount only a mount nothing uses.
- Slurm signals every process of a step at once, gocryptfs included; gocryptfs then unmounts
  itself (lazily when the node still has files open) and exits, so the node's last writes
  during its shutdown may fail.  Acknowledged writes are safe: Elasticsearch fsyncs its
  translog before it acknowledges.  No mount is left behind.
- A gocryptfs killed outright leaves a dead mount ("Transport endpoint is not connected");
  the next mount attempt (or ``down``) unmounts it, which is always safe.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from esdash.plugin_api import (
    BadInput,
    ClusterError,
    Dir,
    EncryptionMode,
    HostCheck,
    HostProbe,
    Option,
    OptionValues,
    Owner,
    Register,
    describe,
    group_name,
    hookimpl,
    make_dirs,
    run_as_user,
    user_name,
)

#: The FUSE device every unprivileged mount opens (through the setuid ``fusermount3``).
FUSE_DEVICE = Path("/dev/fuse")
#: gocryptfs' exit code for a password that does not unlock the master key.
EXIT_WRONG_PASSWORD = 12
#: gocryptfs' exit code for an unusable mount point (not empty, not a directory).
EXIT_MOUNTPOINT = 10
#: How long a mount may take to appear (scrypt with a large N takes seconds on slow CPUs).
MOUNT_TIMEOUT = 60.0
#: How long an unmount is retried while the mount is busy (a node still closing its files).
UNMOUNT_TIMEOUT = 30.0
#: How long a password command may run.
COMMAND_TIMEOUT = 60.0
#: gocryptfs reads at most this many bytes of password from standard input.
MAX_PASSWORD = 2048
CIPHER = "cipher"
PLAIN = "plain"
#: Inside the mount: the JVM's temporary files, heap dumps, crash files and GC logs.
SCRATCH = ".esdash-jvm"
_SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_INSTALL = "install gocryptfs and fuse3 on every compute node (Debian/Ubuntu: apt-get install "
_INSTALL += "gocryptfs fuse3)"
_KEY_FILE = "encryption.password_file"
_KEY_COMMAND = "encryption.password_command"


def _log(message: str) -> None:
    """A line in the rank's output (the run's ``launcher.log``)."""
    print(f"esdash gocryptfs on {socket.gethostname()}: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Where one node's ciphertext and mount point are."""

    root: Path

    @property
    def cipher(self) -> Path:
        return self.root / CIPHER

    @property
    def plain(self) -> Path:
        return self.root / PLAIN

    @property
    def config(self) -> Path:
        return self.cipher / "gocryptfs.conf"


def layout(data_dir: Path) -> Layout:
    """The layout under ``data_dir``, resolved like the kernel shows it in mountinfo.

    Only the parent is resolved: root cannot stat another user's FUSE mount point.
    """
    return Layout(Path(os.path.realpath(data_dir.parent)) / data_dir.name)


# ----------------------------------------------------------------------------- password


def _file_problem(path: Path) -> str | None:
    """Why ``path`` is not an acceptable password file, or None."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return (
            f"{path} does not exist; create it, readable by you alone from its first byte, "
            f"with `(umask 077; head -c 32 /dev/urandom | base64 > {path})`"
        )
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_mode & 0o077:
        return (
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, so other users may read the "
            f"password; `chmod 600 {path}`"
        )
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        owner, invoker = user_name(st.st_uid), user_name(me)
        return (
            f"{path} belongs to {owner}, not to the invoking user {invoker} or root; a "
            f"password file someone else controls is refused (`chown {invoker} {path}`)"
        )
    return None


def check_password_options(options: OptionValues) -> None:
    """Exactly one password source, and an acceptable one; :class:`BadInput` naming the key."""
    file, command = options.get("password_file"), options.get("password_command")
    if (file is None) == (command is None):
        found = "both are set" if file is not None else "neither is set"
        raise BadInput(
            f"{_KEY_FILE}: set exactly one of {_KEY_FILE} (a file only you can read) and "
            f"{_KEY_COMMAND} (a command printing the password), {found}; the password itself "
            f"never goes into the session file"
        )
    if file is not None:
        problem = _file_problem(Path(file)) or _content_problem(Path(file))
        if problem:
            raise BadInput(f"{_KEY_FILE}: {problem}")
        return
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise BadInput(f"{_KEY_COMMAND}: cannot split {command!r} into words: {exc}") from None
    if not argv:
        raise BadInput(f"{_KEY_COMMAND}: empty command; name a program that prints the password")
    if shutil.which(argv[0]) is None:
        raise BadInput(
            f"{_KEY_COMMAND}: {argv[0]!r} is not an executable program here (the command runs "
            f"without a shell; for pipes write `sh -c '...'`)"
        )


def _strip_line_end(raw: bytes) -> bytes:
    """``raw`` without one trailing newline (and a CR before it), as gocryptfs reads it."""
    password = raw[:-1] if raw.endswith(b"\n") else raw
    return password[:-1] if password.endswith(b"\r") else password


def _password_problem(password: bytes) -> str | None:
    """What gocryptfs would refuse or silently cut in ``password`` (line end stripped)."""
    if not password:
        return "an empty password"
    if b"\n" in password or b"\0" in password:
        return "more than one line (or a NUL byte); the password must be one line"
    if len(password) > MAX_PASSWORD:
        return f"a password longer than {MAX_PASSWORD} bytes (gocryptfs reads at most that)"
    return None


def _content_problem(path: Path) -> str | None:
    """Why the password in ``path`` would be refused when the ranks read it, or None.

    Read here, bounded (a wrong path to a large file is not read whole), so ``session
    check`` and the pre-flight before launch refuse an empty, multi-line or too long
    password instead of every rank after the cluster step started.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PASSWORD + 3)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    problem = _password_problem(_strip_line_end(raw))
    if problem is None:
        return None
    return f"{path} holds {problem}; write the password on its first and only line"


def _one_line(raw: bytes, source: str) -> bytes:
    """The password from ``raw``: one trailing newline stripped, as gocryptfs does."""
    password = _strip_line_end(raw)
    problem = _password_problem(password)
    if problem:
        raise BadInput(f"{source} gave {problem}")
    return password


def read_password(options: OptionValues) -> bytes:
    """Read the password with this process' rights; errors never contain it."""
    check_password_options(options)
    file = options.get("password_file")
    if file is not None:
        try:
            raw = Path(file).read_bytes()
        except OSError as exc:
            raise BadInput(f"{_KEY_FILE}: cannot read {file}: {exc.strerror}") from None
        return _one_line(raw, f"{_KEY_FILE} ({file})")
    command = options["password_command"]
    try:
        done = subprocess.run(
            shlex.split(command),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BadInput(
            f"{_KEY_COMMAND}: {command!r} did not finish within {COMMAND_TIMEOUT:.0f} s (it "
            f"runs without a terminal, so it cannot prompt)"
        ) from None
    except OSError as exc:
        raise BadInput(f"{_KEY_COMMAND}: cannot run {command!r}: {exc.strerror}") from None
    if done.returncode != 0:
        # Its stderr is shown, its stdout (the password, if any) never.
        errors = done.stderr.decode(errors="replace").strip()[-500:]
        raise BadInput(
            f"{_KEY_COMMAND}: {command!r} exited with code {done.returncode}"
            + (f": {errors}" if errors else "")
        )
    return _one_line(done.stdout, f"{_KEY_COMMAND} ({command!r})")


# ---------------------------------------------------------------------- host and tools


def find_tool(name: str) -> str | None:
    """``shutil.which`` that also searches the usual system directories (a bare PATH)."""
    return shutil.which(name) or shutil.which(name, path=_SEARCH_PATH)


def tools() -> tuple[str, str]:
    """The gocryptfs and fusermount3 executables, or a :class:`ClusterError` with the fix."""
    found = {name: find_tool(name) for name in ("gocryptfs", "fusermount3")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise ClusterError(
            f"{' and '.join(missing)} not found on {socket.gethostname()}: {_INSTALL}"
        )
    return found["gocryptfs"], found["fusermount3"]  # type: ignore[return-value]


def _fuse_state(owner: Owner, device: Path) -> tuple[str, str] | None:
    """Why ``owner`` cannot open the FUSE device here and the fix; None when it can.

    Only the primary group counts: processes started for the node get no supplementary
    groups when root switches to its user.
    """
    host = socket.gethostname()
    if not device.exists():
        return (
            f"{device} does not exist on {host}, so gocryptfs cannot mount",
            "load the FUSE module (as root: `modprobe fuse`), or in a container pass the "
            "device (`--device /dev/fuse`)",
        )
    st = device.stat()
    if not stat.S_ISCHR(st.st_mode):
        return (
            f"{device} on {host} is not a character device",
            "recreate it (as root: `modprobe fuse`)",
        )
    if os.geteuid() != 0 or owner.uid == os.geteuid():
        usable = os.access(device, os.R_OK | os.W_OK)
    elif owner.uid == 0:
        usable = True
    else:
        if st.st_uid == owner.uid:
            bits = st.st_mode >> 6
        elif st.st_gid == owner.gid:
            bits = st.st_mode >> 3
        else:
            bits = st.st_mode
        usable = bits & 0o6 == 0o6
    if usable:
        return None
    return (
        f"{device} on {host} is mode {stat.S_IMODE(st.st_mode):04o} "
        f"{user_name(st.st_uid)}:{st.st_gid}, so the node user {owner.name!r} cannot open it "
        f"and gocryptfs cannot mount",
        f"as root: `chmod 0666 {device}` (the usual udev default; make it permanent with a "
        f"udev rule)",
    )


def fuse_problem(owner: Owner, device: Path = FUSE_DEVICE) -> str | None:
    """Why ``owner`` cannot open the FUSE device here, with the fix; None when it can."""
    state = _fuse_state(owner, device)
    if state is None:
        return None
    what, fix = state
    return f'{what}: {fix}; or use encryption.mode = "none"'


# ----------------------------------------------------------------------------- mounts


@dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``: what is mounted where."""

    mount_point: str
    fstype: str
    source: str
    options: str


def _unescape(field: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash as ``\040``-style octal escapes."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_at(path: Path) -> MountEntry | None:
    """The mount whose mount point is ``path`` (the last one when mounts are stacked)."""
    found = None
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            if _unescape(fields[4]) != str(path):
                continue
            tail = fields[fields.index("-") + 1 :]
            found = MountEntry(_unescape(fields[4]), tail[0], _unescape(tail[1]), tail[2])
    return found


def serving_pids(where: Layout) -> list[int]:
    """The gocryptfs processes serving ``where`` (found by their command line)."""
    want = [str(where.cipher).encode(), str(where.plain).encode()]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"gocryptfs") and all(w in argv for w in want):
            found.append(int(entry.name))
    return found


def _mounted_by(entry: MountEntry) -> Owner | None:
    """The account that mounted a FUSE file system (its ``user_id``/``group_id`` options):
    only it may unmount it with ``fusermount3``."""
    found = dict(
        item.split("=", 1)
        for item in entry.options.split(",")
        if item.startswith(("user_id=", "group_id="))
    )
    if "user_id" not in found or "group_id" not in found:
        return None
    uid, gid = int(found["user_id"]), int(found["group_id"])
    return Owner(user_name(uid), uid, gid)


def _as_owner(owner: Owner) -> dict[str, Any]:
    """Popen arguments that run a child as the node user (uid *and* gid: FUSE checks both)."""
    if os.geteuid() == 0 and owner.uid != 0:
        return {"user": owner.uid, "group": owner.gid, "extra_groups": []}
    return {}


def _env() -> dict[str, str]:
    """A small environment: gocryptfs finds fusermount3 on PATH, and needs nothing else."""
    return {"PATH": f"{os.environ.get('PATH', '')}:{_SEARCH_PATH}".lstrip(":"), "LANG": "C"}


def _unmount(where: Layout, owner: Owner, fusermount: str) -> tuple[bool, str]:
    """One ``fusermount3 -u`` as the node user (never lazy); (unmounted, its message)."""
    done = _as_node(owner, fusermount, "-u", str(where.plain))
    return done.returncode == 0 or mount_at(where.plain) is None, done.stderr.strip()


def _as_node(owner: Owner, *argv: str) -> subprocess.CompletedProcess[str]:
    """A short tool run as the node user (no input, 60 s at most), its output captured."""
    return subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        cwd="/",
        timeout=60,
        check=False,
        **_as_owner(owner),
    )


def _unmount_retrying(where: Layout, owner: Owner, fusermount: str, timeout: float) -> str:
    """Unmount, retrying while busy; '' on success, else fusermount's last message."""
    deadline = time.monotonic() + timeout
    while True:
        ok, message = _unmount(where, owner, fusermount)
        if ok:
            return ""
        if "busy" not in message or time.monotonic() >= deadline:
            return message or "fusermount3 failed"
        time.sleep(0.5)


def release_leftover(where: Layout, owner: Owner, fusermount: str, wait: float) -> str | None:
    """Unmount a mount an earlier run left at ``where.plain``; say what was done.

    Safe by construction: the unmount is not lazy, so a mount something still uses (a running
    node, a shell inside it) stays and is reported with the fix.  A dead mount (its gocryptfs
    was killed) is always unmounted.
    """
    entry = mount_at(where.plain)
    if entry is None:
        return None
    if entry.fstype != "fuse.gocryptfs" or entry.source != str(where.cipher):
        raise ClusterError(
            f"{where.plain} already has a {entry.fstype} file system from {entry.source} mounted; "
            f"unmount it (`umount {where.plain}` as root) or choose another cluster.data_dir"
        )
    pids = serving_pids(where)
    what = f"live gocryptfs mount (pid {', '.join(map(str, pids))})" if pids else "dead mount"
    owner = _mounted_by(entry) or owner  # an earlier run's (per-cluster) account mounted it
    message = _unmount_retrying(where, owner, fusermount, wait)
    if message:
        raise ClusterError(
            f"{where.plain} is still mounted by an earlier run, a {what} that cannot be "
            f"unmounted: {message}. If a cluster on this data root is still running, stop it "
            f"(`esdash cluster down RUN`); otherwise see who uses it (`fuser -vm {where.plain}`) "
            f"and unmount it as {owner.name}: `fusermount3 -u {where.plain}`"
        )
    return f"unmounted a {what} left behind at {where.plain}"


# ------------------------------------------------------------------------ the mount


class Mount:
    """A running ``gocryptfs -fg``: its output goes to the rank's log, its tail kept for errors."""

    def __init__(self, process: subprocess.Popen[bytes], where: Layout, label: str) -> None:
        self.process = process
        self.where = where
        self.tail: deque[str] = deque(maxlen=20)
        self._reader = threading.Thread(target=self._forward, args=(label,), daemon=True)
        self._reader.start()

    def _forward(self, label: str) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            print(f"gocryptfs {label}: {line}", file=sys.stderr, flush=True)

    def output(self) -> str:
        self._reader.join(timeout=2)
        return "\n".join(self.tail)

    def wait_mounted(self, timeout: float) -> None:
        """Return once the mount is in mountinfo; raise if gocryptfs exits or takes too long."""
        deadline = time.monotonic() + timeout
        while True:
            entry = mount_at(self.where.plain)
            if entry is not None and entry.fstype == "fuse.gocryptfs":
                return
            if self.process.poll() is not None:
                return
            if time.monotonic() >= deadline:
                self.terminate()
                raise ClusterError(
                    f"gocryptfs did not mount {self.where.cipher} on {self.where.plain} within "
                    f"{timeout:.0f} s; its output:\n{self.output()}"
                )
            time.sleep(0.02)

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (gocryptfs unmounts itself), then SIGKILL; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


# --------------------------------------------------------------------------- the mode


class GocryptfsMode(EncryptionMode):
    """Node data on a per-rank GoCryptFS mount (see the module docstring for the design)."""

    name = "gocryptfs"
    description = "each node's data directory is a GoCryptFS mount (ciphertext on disk)"
    node_data = "gocryptfs-cipher"
    options = (
        Option(
            "password_file",
            "path",
            "file holding the password (one line; mode 0600, owned by you or root)",
        ),
        Option(
            "password_command",
            "str",
            "command printing the password (run without a shell, like gocryptfs -extpass)",
        ),
        Option(
            "scrypt_n",
            "int",
            "log2 of scrypt's cost when a cipher directory is initialised (gocryptfs -scryptn)",
            16,
            (),
            10,
            28,
        ),
    )

    def check_options(self, options: OptionValues, owner: Owner) -> None:
        """Exactly one acceptable password source (``esdash session check`` and before launch).

        The option declarations cannot say "one of two"; the ranks check again on their hosts
        before they mount.  A password command is checked to exist, not run.
        """
        check_password_options(options)

    def doctor(self, user: str) -> list[HostProbe]:
        return doctor_probes(user)

    @contextmanager
    def node_storage(self, data_dir: Path, owner: Owner, options: OptionValues) -> Iterator[Path]:
        """Initialise (first use) and mount the node's cipher directory; unmount afterwards."""
        where = layout(data_dir)
        gocryptfs, fusermount = tools()
        password = read_password(options)
        problem = fuse_problem(owner)
        if problem:
            raise ClusterError(problem)
        released = release_leftover(where, owner, fusermount, wait=5.0)
        if released:
            _log(released)
        if not _prepare_dirs(where, owner):
            started = time.monotonic()
            _initialise(gocryptfs, where, owner, password, int(options.get("scrypt_n") or 16))
            _log(f"initialised {where.cipher} in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        mount = _mount(gocryptfs, where, owner, password, options)
        _log(f"mounted {where.cipher} on {where.plain} in {time.monotonic() - started:.2f} s")
        del password
        failed = True
        try:
            _make_scratch(where, owner)
            yield where.plain
            failed = False
        finally:
            _teardown(mount, where, owner, fusermount, raise_errors=not failed)

    def node_scratch(self, storage: Path) -> Path | None:
        """The JVM's temporary files, heap dumps, crash files and GC logs stay encrypted:
        in ``.esdash-jvm`` inside the mount (made by :meth:`node_storage`)."""
        return storage / SCRATCH

    def release_storage(self, data_dir: Path, owner: Owner, options: OptionValues) -> str | None:
        """Unmount what a rank that died without cleaning up (SIGKILL) left at ``data_dir``.

        esdash calls this for the ranks on its host when a run is taken down, after the ranks
        are gone.  Returns what was done, or None when nothing was mounted.
        """
        where = layout(data_dir)
        if mount_at(where.plain) is None:
            return None
        _, fusermount = tools()
        released = release_leftover(where, owner, fusermount, wait=UNMOUNT_TIMEOUT)
        for pid in serving_pids(where):
            _wait_gone(pid, 10.0)
        return released


#: Mode of ``<data_root>/<rank>`` in this layout: root's, the node account passes through.
RANK_DIR_MODE = 0o711


def _prepare_dirs(where: Layout, owner: Owner) -> bool:
    """Make ``<rank>/`` (root's), ``cipher/`` and ``plain/`` (the node account's), refusing
    plaintext; return whether ``cipher/`` holds an initialised gocryptfs directory.

    Plaintext here would be data gocryptfs does not protect: a plain node's files in
    ``<rank>/`` (the data root was used with encryption.mode = "none"), or files written into
    the mount point while nothing was mounted.  Everything goes through descriptors
    (:class:`~esdash.plugin_api.Dir`): ``<rank>/`` belongs to root, so the node account cannot
    swap ``cipher/`` or ``plain/`` for links, and a link found in their place is refused
    before any owner or mode changes (finding C1 of the security audit: a planted ``plain``
    link made root give the node account any directory).
    """
    ids = (owner.uid, owner.gid)
    me = (os.geteuid(), os.getegid())
    mode = RANK_DIR_MODE if os.geteuid() == 0 else 0o700
    make_dirs(where.root.parent, mode)
    with (
        Dir.trusted(where.root.parent) as data_root,
        data_root.make(where.root.name, mode, me, accept=(owner.uid,)) as rank_dir,
    ):
        others = [name for name in rank_dir.names() if name not in (CIPHER, PLAIN)]
        if others:
            raise BadInput(
                f"{where.root} holds unencrypted node data ({', '.join(others[:5])}), probably "
                f'from a run with encryption.mode = "none"; gocryptfs would not protect it. '
                f"Start with --fresh to delete it, or choose another cluster.data_dir"
            )
        with rank_dir.make(PLAIN, 0o700, ids) as plain:
            entries = plain.names()
        if entries:
            raise BadInput(
                f"{where.plain} holds files ({', '.join(entries[:5])}) although nothing is "
                f"mounted there: they were written without encryption. Move them away and "
                f"start again"
            )
        with rank_dir.make(CIPHER, 0o700, ids) as cipher:
            cipher_entries = cipher.names()
            config = cipher.lstat(where.config.name)
    if config is not None and not stat.S_ISREG(config.st_mode):
        raise BadInput(
            f"{where.config} is {describe(config)}, not gocryptfs' configuration file; restore "
            f"it, or start with --fresh to delete the encrypted data"
        )
    if cipher_entries and config is None:
        raise BadInput(
            f"{where.cipher} is not a gocryptfs directory (no gocryptfs.conf) but not empty "
            f"either; restore its gocryptfs.conf, or start with --fresh to delete it"
        )
    return config is not None


def _make_scratch(where: Layout, owner: Owner) -> None:
    """``.esdash-jvm`` inside the mount, made by the node account (root cannot enter it)."""
    done = _as_node(owner, "mkdir", "-p", "-m", "700", str(where.plain / SCRATCH))
    if done.returncode != 0:
        raise ClusterError(
            f"cannot make {where.plain / SCRATCH} inside the gocryptfs mount as {owner.name}: "
            f"{done.stderr.strip()}"
        )


def _initialise(
    gocryptfs: str, where: Layout, owner: Owner, password: bytes, scrypt_n: int
) -> None:
    """``gocryptfs -init`` as the node user, the password on standard input."""
    # -q also keeps gocryptfs from printing the master key.
    done = subprocess.run(
        [gocryptfs, "-init", "-q", "-scryptn", str(scrypt_n), str(where.cipher)],
        input=password + b"\n",
        capture_output=True,
        env=_env(),
        cwd="/",
        timeout=MOUNT_TIMEOUT,
        check=False,
        **_as_owner(owner),
    )
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace").strip()
        raise ClusterError(
            f"gocryptfs could not initialise {where.cipher} (exit {done.returncode}): {output}"
        )


def _mount(
    gocryptfs: str, where: Layout, owner: Owner, password: bytes, options: OptionValues
) -> Mount:
    """Start ``gocryptfs -fg`` as the node user and wait until the mount is there."""
    process = subprocess.Popen(
        [gocryptfs, "-fg", "-nosyslog", str(where.cipher), str(where.plain)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_env(),
        cwd="/",
        # Not in the rank's process group: a signal meant for the rank (or mpiexec's group)
        # must not take the file system away while the node still writes to it.
        start_new_session=True,
        **_as_owner(owner),
    )
    mount = Mount(process, where, where.root.name)
    assert process.stdin is not None
    try:
        process.stdin.write(password + b"\n")
        process.stdin.close()
    except BrokenPipeError:
        pass  # gocryptfs exited before reading; its exit code says why
    mount.wait_mounted(MOUNT_TIMEOUT)
    code = process.poll()
    if code is None:
        return mount
    output = mount.output()
    if code == EXIT_WRONG_PASSWORD:
        source = (
            f"{_KEY_FILE} ({options['password_file']})"
            if options.get("password_file") is not None
            else f"{_KEY_COMMAND} ({options['password_command']!r})"
        )
        raise BadInput(
            f"wrong password for the encrypted node data in {where.cipher}: the password from "
            f"{source} does not unlock it. Use the password this directory was initialised with, "
            f"or start with --fresh to delete the encrypted data and begin again"
        )
    if "/dev/fuse" in output or "fuse: device not found" in output:
        raise ClusterError(
            fuse_problem(owner)
            or f"gocryptfs could not open /dev/fuse to mount {where.plain}: {output}; as root: "
            f"`chmod 0666 /dev/fuse` (or `modprobe fuse`)"
        )
    hint = " (the mount point must be an empty directory)" if code == EXIT_MOUNTPOINT else ""
    raise ClusterError(
        f"gocryptfs could not mount {where.cipher} on {where.plain} (exit {code}){hint}; "
        f"its output:\n{output}"
    )


def _teardown(
    mount: Mount, where: Layout, owner: Owner, fusermount: str, raise_errors: bool
) -> None:
    """After the node stopped: unmount, and wait for gocryptfs to exit.

    A mount still busy after :data:`UNMOUNT_TIMEOUT` is left alone (never pulled away lazily
    under a process that uses it) and reported with the fix; ``down`` or the next ``up``
    releases it once it is idle.
    """
    message = ""
    if mount.process.poll() is None or mount_at(where.plain) is not None:
        message = _unmount_retrying(where, owner, fusermount, UNMOUNT_TIMEOUT)
    if message:
        error = (
            f"could not unmount {where.plain} after the node stopped: {message}. See who uses "
            f"it (`fuser -vm {where.plain}`), then unmount it as {owner.name}: "
            f"`fusermount3 -u {where.plain}` (`esdash cluster down` retries it)"
        )
        _log(error)
        if raise_errors:
            raise ClusterError(error)
        return
    try:
        mount.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        mount.terminate()
    mount.output()
    _log(f"unmounted {where.plain}")


def _wait_gone(pid: int, timeout: float) -> None:
    """Wait for a process that is not our child (an orphaned gocryptfs) to exit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return  # exited; whoever adopted it has not reaped it yet
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)


# ---------------------------------------------------------------------- doctor


def doctor_probes(user: str) -> list[HostProbe]:
    """``esdash doctor``: can this host mount gocryptfs directories for the node ``user``?"""
    return [HostProbe("fuse", lambda: check_fuse(user)), HostProbe("gocryptfs", check_tools)]


def check_fuse(user: str, device: Path = FUSE_DEVICE) -> HostCheck:
    """gocryptfs mounts as the node user, who therefore must open /dev/fuse read-write."""
    scope = "only the gocryptfs encryption mode needs it"
    if not device.exists():
        return HostCheck(
            "fuse",
            "warn",
            f"{device} does not exist; {scope}",
            "modprobe fuse (as root), or ask your site for FUSE on compute nodes",
        )
    st = device.stat()
    if not stat.S_ISCHR(st.st_mode):
        return HostCheck(
            "fuse",
            "warn",
            f"{device} is not a character device ({stat.filemode(st.st_mode)}); {scope}",
            f"ask your administrator to restore {device} (character device 10,229)",
        )
    mode = stat.filemode(st.st_mode)
    owner_text = f"{user_name(st.st_uid)}:{group_name(st.st_gid)}"
    data = {"device": str(device), "mode": mode, "owner": owner_text}
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        detail = (
            f"{device} is {mode} {owner_text}; cannot tell for user {user!r}, who does not exist"
        )
        return HostCheck("fuse", "warn", detail, "fix the es-user check first", data)
    problem = _fuse_state(Owner(entry.pw_name, entry.pw_uid, entry.pw_gid), device)
    if problem is not None:
        what, fix = problem
        return HostCheck("fuse", "warn", f"{what}; {scope}", fix, data)
    return HostCheck(
        "fuse", "pass", f"{device} is {mode} {owner_text}: usable by {user}", data=data
    )


def check_tools() -> HostCheck:
    """The gocryptfs mode needs ``gocryptfs`` to mount and ``fusermount3`` to unmount."""
    found = {name: find_tool(name) for name in ("gocryptfs", "fusermount3")}
    missing = [name for name, where in found.items() if not where]
    if missing:
        return HostCheck(
            "gocryptfs",
            "warn",
            f"{', '.join(missing)} not on PATH; only the gocryptfs encryption mode needs them",
            "apt-get install gocryptfs fuse3 (or load your site's module)",
            {"commands": found},
        )
    proc = run_as_user([found["gocryptfs"] or "gocryptfs", "-version"])
    version = (proc.stdout.strip().split(";") or [""])[0] or "version unknown"
    return HostCheck(
        "gocryptfs",
        "pass",
        f"{version} and fusermount3 on PATH",
        data={"commands": found, "version": version},
    )


@hookimpl
def esdash_register_encryption_modes(register: Register[EncryptionMode]) -> None:
    register(GocryptfsMode())
