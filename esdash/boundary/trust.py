"""Whether a directory is root's (or the invoking user's) alone: the rule for acting in it.

A run directory tells root which processes to signal, which job to cancel and which storage
to release.  If another user owns it -- or any directory above it, or can write to one of
them and so replace it -- that user chooses what root does: a confused deputy.  As root,
esdash therefore acts only on paths whose every component belongs to root or the invoking
user and is not writable by anyone else, the rule OpenSSH's ``StrictModes`` applies to
``~/.ssh``.  A world-writable directory with the sticky bit (``/tmp``) is accepted on the way:
nobody but an entry's owner may rename or delete it, and the next component is checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from esdash.boundary.anchored import account
from esdash.errors import BadInput

#: The flag of the commands that act, as root, on a run directory another user controls.
FOREIGN_FLAG = "--allow-foreign"


def trusted_path_problem(path: Path, me: int | None = None) -> str | None:
    """Why someone other than root or ``me`` controls ``path`` (None: nobody does).

    The path is resolved first (a link in it is judged by where it leads); components that
    do not exist yet are skipped (their existing parent decides).
    """
    me = os.geteuid() if me is None else me
    resolved = Path(os.path.realpath(path))
    for each in [*reversed(resolved.parents), resolved]:
        try:
            st = os.lstat(each)
        except FileNotFoundError:
            continue
        if st.st_uid not in (0, me):
            return f"{each} belongs to {account(st.st_uid)}"
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if writable and not sticky:
            who = "its group" if st.st_mode & stat.S_IWGRP else "every user"
            if st.st_mode & stat.S_IWGRP and st.st_mode & stat.S_IWOTH:
                who = "its group and every user"
            return f"{each} can be rewritten by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def require_trusted_path(path: Path, what: str, override: str | None = None) -> None:
    """As root, refuse ``path`` (``what``: "run directory") unless root alone controls it.

    One line: the component, who controls it, the fix and ``override`` (a flag) when one
    exists.  Not root: nothing to check (a user can only harm themselves).
    """
    if os.geteuid() != 0:
        return
    problem = trusted_path_problem(path)
    if problem is None:
        return
    flag = f", or pass {override} if you trust it" if override else ""
    raise BadInput(
        f"{what} {path}: {problem}; root acts only on directories that root alone controls "
        f"(another user could name any process for root to signal or any file to write){flag}"
    )
