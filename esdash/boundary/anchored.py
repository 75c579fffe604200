"""Directories held by descriptor, and what root does below them without following links.

A :class:`Dir` is a directory opened once with ``O_NOFOLLOW``; every later operation names
one entry relative to its descriptor, so nobody can swap a path component underneath it.
Each operation states which accounts may own what it finds (``owners``) and refuses
anything else with a :class:`BoundaryViolation` before it changes a thing:

========================  =============================================================
found                     refused because
========================  =============================================================
a symbolic link           following it would let the other account choose root's target
a hard link (2+ names)    the same inode lives elsewhere, maybe in a file root guards
a FIFO, socket, device    reading would block or have side effects
another owner             a third account's file is none of this operation's business
another file system       a mount the other account made (FUSE) inside its directory
========================  =============================================================

When esdash does not run as root, the same code runs with the invoking user as the only
owner: the checks then cost a few ``fstat`` calls and change nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from esdash.errors import EsdashError

#: A (uid, gid) pair to give an entry to.
Ids = tuple[int, int]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: How much of a file :meth:`Dir.tail` reads from its end.
TAIL_BYTES = 64 * 1024


class BoundaryViolation(EsdashError):
    """Something another account could have planted was found where root was to act.

    One line: the path, what was found there and what esdash expected; nothing was changed.
    """

    def __init__(self, path: Path, found: str, expected: str) -> None:
        super().__init__(
            f"{path}: {found}, where esdash expects {expected}; refused without touching it "
            f"(another account may have put it there)"
        )
        self.path = path
        self.found = found


def account(uid: int) -> str:
    """``esdash (uid 1001)``: an owner as a person reads it."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def describe(st: os.stat_result) -> str:
    """What kind of entry ``st`` is, in words (``a symbolic link``, ``a FIFO``...)."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISREG(mode) and st.st_nlink > 1:
        return f"a hard link (a file with {st.st_nlink} names)"
    return "a regular file"


def clean_text(text: str) -> str:
    """``text`` without control characters (terminal escapes), keeping newlines and tabs.

    Text another account wrote (a node's log) reaches root's terminal through error
    messages; an ``ESC [`` sequence there could rewrite what root sees.
    """
    return "".join(
        ch if ch in "\n\t" or not unicodedata.category(ch).startswith("C") else "?" for ch in text
    )


def _check_name(name: str) -> None:
    """One path component, never ``..`` or a path: the descriptor is the only anchor."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single path component: {name!r}")


def _owned_by(owners: Iterable[int] | None) -> set[int]:
    """The accounts whose entries an operation accepts (default: this process' own)."""
    return {os.geteuid()} if owners is None else set(owners)


def fill_new_file(fd: int, data: bytes, mode: int, ids: Ids | None = None) -> None:
    """Give the new file open as ``fd`` its owner ``ids`` and ``mode`` first, then ``data``,
    synced: nobody else can read it at any moment, and it is on disk when this returns.
    The caller opened ``fd`` (how decides what a planted link does) and closes it."""
    if ids is not None:
        os.fchown(fd, *ids)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "wb", closefd=False) as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


class Dir:
    """A directory held open by descriptor (see the module); close it, or use ``with``."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    # ---------------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: Path, owners: Iterable[int] | None = None) -> Dir:
        """The existing directory ``path`` (its last component not a link), owned by
        ``owners``.  Its parents are the kernel's to resolve: they must be trusted (root's
        own, or checked by :func:`esdash.boundary.require_trusted_path`)."""
        path = Path(path)
        try:
            fd = os.open(path, _DIR_FLAGS)
        except OSError as exc:
            raise _refusal(path, exc, "a directory", lambda: os.lstat(path)) from None
        found = cls(fd, path)
        try:
            found._check(os.fstat(fd), owners, "a directory")
        except BaseException:
            found.close()
            raise
        return found

    @classmethod
    def trusted(cls, path: Path) -> Dir:
        """A directory the caller already trusts (root's own run directory, say), opened by
        its path as the kernel resolves it: only what is done below it is guarded."""
        path = Path(path)
        return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)

    def sub(self, name: str, owners: Iterable[int] | None = None) -> Dir:
        """The existing child directory ``name``, owned by ``owners``, on this file system."""
        _check_name(name)
        where = self.path / name
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise _refusal(where, exc, "a directory", lambda: self._lstat(name)) from None
        child = Dir(fd, where)
        try:
            st = os.fstat(fd)
            child._check(st, owners, "a directory")
            if st.st_dev != os.fstat(self.fd).st_dev:
                raise BoundaryViolation(
                    where, "a mount point of another file system", "a plain directory"
                )
        except BaseException:
            child.close()
            raise
        return child

    def make(
        self,
        name: str,
        mode: int,
        ids: Ids | None = None,
        accept: Iterable[int] = (),
    ) -> Dir:
        """The child directory ``name``, created when missing, with ``mode`` and owner ``ids``.

        An existing one must be a directory owned by this process, by ``ids``' user or by
        one of ``accept``; owner and mode are then set on its descriptor (it is created
        0700, so it is never wider than asked for, not even for a moment).
        """
        _check_name(name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode=0o700, dir_fd=self.fd)
        owners = {os.geteuid(), *accept, *((ids[0],) if ids else ())}
        child = self.sub(name, owners)
        try:
            if ids is not None and os.geteuid() == 0:
                os.fchown(child.fd, *ids)
            os.fchmod(child.fd, mode)
        except BaseException:
            child.close()
            raise
        return child

    # ------------------------------------------------------------------- the handle
    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def stat(self) -> os.stat_result:
        return os.fstat(self.fd)

    def set_mode(self, mode: int) -> None:
        os.fchmod(self.fd, mode)

    def set_owner(self, ids: Ids) -> None:
        """Give this directory (not its content) to ``ids`` (a no-op unless root)."""
        if os.geteuid() == 0:
            os.fchown(self.fd, *ids)

    def names(self) -> list[str]:
        """The names of its entries (read through the descriptor)."""
        return sorted(os.listdir(self.fd))

    def lstat(self, name: str) -> os.stat_result | None:
        """What ``name`` is, without following it; None when there is nothing."""
        _check_name(name)
        return self._lstat(name)

    def _lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _check(self, st: os.stat_result, owners: Iterable[int] | None, expected: str) -> None:
        """Refuse ``st`` (of this handle's path) unless it is ``expected`` of ``owners``."""
        allowed = _owned_by(owners)
        wanted = f"{expected} of {' or '.join(account(u) for u in sorted(allowed))}"
        if st.st_uid not in allowed:
            raise BoundaryViolation(self.path, f"{describe(st)} of {account(st.st_uid)}", wanted)

    # -------------------------------------------------------------------- files
    def write(self, name: str, data: bytes, mode: int = 0o600, ids: Ids | None = None) -> None:
        """Replace ``name`` atomically with ``data``: an exclusive, unpredictably named
        temporary file, owner and mode set on its descriptor, synced, then renamed over
        ``name`` (a link planted there is replaced, never followed)."""
        _check_name(name)
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=self.fd
        )
        try:
            fill_new_file(fd, data, mode, ids if os.geteuid() == 0 else None)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise
        finally:
            os.close(fd)

    def open_file(self, name: str, owners: Iterable[int] | None = None) -> int:
        """A read descriptor of the regular file ``name`` (one name, owned by ``owners``);
        FileNotFoundError when there is none."""
        return self._open_single(name, _READ_FLAGS, 0, owners)

    def read(self, name: str, owners: Iterable[int] | None = None, limit: int = 1 << 20) -> bytes:
        """The first ``limit`` bytes of the regular file ``name`` (see :meth:`open_file`)."""
        with os.fdopen(self.open_file(name, owners), "rb") as handle:
            return handle.read(limit)

    def tail(self, name: str, lines: int, owners: Iterable[int] | None = None) -> str:
        """The last ``lines`` lines of ``name`` as clean text ('' when there is no file)."""
        try:
            fd = self.open_file(name, owners)
        except FileNotFoundError:
            return ""
        with os.fdopen(fd, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
        return clean_text("\n".join(text.splitlines()[-lines:]))

    def append(self, name: str, mode: int = 0o600, owners: Iterable[int] | None = None) -> int:
        """A write descriptor appending to the regular file ``name`` (created with ``mode``)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        return self._open_single(name, flags | os.O_CLOEXEC, mode, owners)

    def _open_single(self, name: str, flags: int, mode: int, owners: Iterable[int] | None) -> int:
        """``name`` opened without following it (non-blocking, so a FIFO cannot hang root),
        then refused unless it is a regular file with one name, owned by ``owners``."""
        _check_name(name)
        where = self.path / name
        try:
            fd = os.open(name, flags, mode, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _refusal(where, exc, "a regular file", lambda: self._lstat(name)) from None
        try:
            _require_single_file(where, os.fstat(fd), owners)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # ------------------------------------------------------------------- subtrees
    def remove_tree(self, name: str) -> None:
        """Delete ``name`` and everything below it, never leaving this directory: a link is
        removed itself, a directory through descriptors, depth first, staying on its file
        system (a mount inside is refused, not emptied)."""
        st = self.lstat(name)
        if st is None:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=self.fd)
            return
        with self.sub(name, {st.st_uid}) as below:
            _empty(below)
        os.rmdir(name, dir_fd=self.fd)

    def hand_over(self, name: str, ids: Ids, accept: Iterable[int] = ()) -> None:
        """Give ``name`` and everything below it to ``ids`` (root only; else nothing to do).

        Every entry must belong to this process, to ``ids``' user or to one of ``accept``
        (an earlier node account whose files the new one takes over); hard links and other
        file systems are refused, links are changed themselves (``lchown``), never followed.
        """
        if os.geteuid() != 0:
            return
        allowed = {os.geteuid(), ids[0], *accept}
        with self.sub(name, allowed) as top:
            _chown_walk(top, ids, allowed, change=False)  # a plant anywhere: nothing changes
            _chown_walk(top, ids, allowed, change=True)


def _empty(top: Dir) -> None:
    """Remove everything in ``top`` through descriptors (see :meth:`Dir.remove_tree`)."""
    for name in top.names():
        st = os.stat(name, dir_fd=top.fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            with top.sub(name, {st.st_uid}) as below:
                _empty(below)
            os.rmdir(name, dir_fd=top.fd)
        else:
            os.unlink(name, dir_fd=top.fd)


def _chown_walk(top: Dir, ids: Ids, allowed: set[int], change: bool) -> None:
    """Below ``top`` (already checked), by descriptors only: with ``change`` False every entry
    is checked and nothing changes; with it True entries change owner, each checked again
    as it is reached, ``top`` last (an interrupted walk leaves the top's old owner, so the
    next hand-over starts again)."""
    for name in top.names():
        st = os.stat(name, dir_fd=top.fd, follow_symlinks=False)
        where = top.path / name
        if st.st_uid not in allowed:
            raise BoundaryViolation(
                where,
                f"{describe(st)} of {account(st.st_uid)}",
                f"an entry of {' or '.join(account(u) for u in sorted(allowed))}",
            )
        if stat.S_ISDIR(st.st_mode):
            with top.sub(name, allowed) as child:
                _chown_walk(child, ids, allowed, change)
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise BoundaryViolation(where, describe(st), "a file with one name")
        if change:
            os.chown(name, *ids, dir_fd=top.fd, follow_symlinks=False)
    if change:
        os.fchown(top.fd, *ids)


def _require_single_file(where: Path, st: os.stat_result, owners: Iterable[int] | None) -> None:
    """A regular file with one name, owned by ``owners``, or a :class:`BoundaryViolation`."""
    allowed = _owned_by(owners)
    expected = f"a regular file of {' or '.join(account(u) for u in sorted(allowed))}"
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        raise BoundaryViolation(where, describe(st), expected)
    if st.st_uid not in allowed:
        raise BoundaryViolation(where, f"a file of {account(st.st_uid)}", expected)


def _refusal(
    where: Path, exc: OSError, expected: str, what: Callable[[], os.stat_result | None]
) -> BoundaryViolation | OSError:
    """The error for a failed no-follow open: a violation when a link (or something else
    than ``expected``) is in the way, else the OS error itself (missing, no permission)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO, errno.EISDIR):
        try:
            st = what()
        except OSError:
            st = None
        found = describe(st) if st is not None else "something else"
        return BoundaryViolation(where, found, expected)
    return exc


def make_dirs(path: Path, mode: int) -> list[Path]:
    """Create ``path`` and its missing parents with ``mode`` (whatever the umask); return
    what was created.  Existing directories keep their mode: esdash never widens a
    directory it did not make."""
    missing = []
    for each in [Path(path), *Path(path).parents]:
        if each.exists():
            break
        missing.append(each)
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):
            each.mkdir(mode=0o700)
            os.chmod(each, mode)
    return list(reversed(missing))


#: The umask of every esdash process and every node: what they create is their owner's alone.
PRIVATE_UMASK = 0o077


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Inside, files and directories are created readable by their owner only (umask 077).

    Run files, corpus copies, results and everything a rank or a node writes: a study of
    sensitive data keeps them from the other users of the host.  Where others must pass (the
    node account through the run directory) a mode is set explicitly.  The previous umask is
    restored on the way out (a test calling the CLI in-process keeps its own).
    """
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)
