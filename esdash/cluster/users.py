"""Which account a node runs as.

Elasticsearch refuses to run as root, and on shared machines a search node should not have
more rights than it needs.  When esdash runs as root (a provisioning script, a site service),
nodes run as the session's ``cluster.run_as`` user; otherwise they run as the invoking user.
"""

from __future__ import annotations

import os
import pwd

from esdash.errors import BadInput
from esdash.plugin.api import Owner


def resolve_owner(
    run_as: str | None, where: str = "cluster.run_as", session_file: object = None
) -> Owner:
    """The account nodes run as, or a :class:`BadInput` that says how to fix the session.

    ``session_file`` (the session's path), when given, starts the message: the user must
    know which file to edit.
    """
    if os.geteuid() != 0:
        return Owner.current()
    if not run_as:
        session = f"{session_file}: " if session_file is not None else ""
        raise BadInput(
            f"{session}esdash runs as root, and search engines must not: set {where} in the "
            f"session to an unprivileged user (create one with `useradd -m esdash`)"
        )
    try:
        entry = pwd.getpwnam(run_as)
    except KeyError:
        raise BadInput(
            f"{where} = {run_as!r}: no such user on this host; create it with "
            f"`useradd -m {run_as}` or name an existing unprivileged user"
        ) from None
    if entry.pw_uid == 0:
        raise BadInput(f"{where} = {run_as!r} has uid 0; name an unprivileged user")
    return Owner(entry.pw_name, entry.pw_uid, entry.pw_gid)


def chown_tree(path: os.PathLike[str] | str, owner: Owner) -> None:
    """Give ``owner`` everything below ``path`` (only meaningful when running as root)."""
    if os.geteuid() != 0:
        return
    os.chown(path, owner.uid, owner.gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), owner.uid, owner.gid, follow_symlinks=False)
