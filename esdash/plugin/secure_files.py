"""Files that guard a cluster: keys, certificates, passwords, written so nobody else gets them.

Used by esdash's PKI and credentials (:mod:`esdash.cluster.pki`) and by every backend that
installs them into a node's config directory.  A file is written with its final mode from the
first byte on (no window with umask defaults), never through a symlink (in a shared directory
somebody could have planted one pointing at a file of theirs), and can be handed to the
unprivileged user a node runs as.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from esdash.boundary import fill_new_file
from esdash.errors import ClusterError


class SecurityFilesError(ClusterError):
    """Credentials or certificates are missing, malformed or readable by other users."""


def owner_ids(owner: str | int | None) -> tuple[int, int] | None:
    """(uid, gid of the user's primary group) for ``owner``, or None to keep the caller's."""
    if owner is None:
        return None
    try:
        entry = pwd.getpwuid(owner) if isinstance(owner, int) else pwd.getpwnam(owner)
    except KeyError:
        raise SecurityFilesError(f"no such user {owner!r} to give the node's files to") from None
    return entry.pw_uid, entry.pw_gid


def make_private_dir(path: Path, ids: tuple[int, int] | None = None) -> None:
    """Create ``path`` (mode 0700, owned by ``ids``); refuse a symlink or a file there."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink() or not path.is_dir():
        raise SecurityFilesError(f"{path} must be a directory, not a symlink or a file")
    if ids is not None:
        os.chown(path, *ids)
    os.chmod(path, 0o700)


def write_private(
    path: Path,
    data: bytes,
    mode: int,
    ids: tuple[int, int] | None = None,
    *,
    exclusive: bool = False,
) -> None:
    """Write ``data`` with ``mode`` (and owner ``ids``) from the first byte on, synced.

    ``exclusive`` refuses an existing file (:class:`FileExistsError`).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, mode)
    try:
        fill_new_file(fd, data, mode, ids)
    finally:
        os.close(fd)


def read_pki_file(path: Path) -> bytes:
    """A file of the cluster PKI, or an error saying it is missing."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise SecurityFilesError(
            f"{path} is missing from the cluster PKI; recreate it with create_cluster_pki"
        ) from None
