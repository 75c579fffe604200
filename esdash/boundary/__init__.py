"""The privilege boundary: every file operation of the root side where others can write.

When esdash runs as root, the search nodes run as an unprivileged account, and that account
(like every other local user) is untrusted: anything that compromises a network-facing
search engine runs with its rights.  Whatever root does in a directory such an account can
write -- read a node's log, create its directories, hand them over, delete them -- goes
through this package, which

* works from directory descriptors, one path component at a time, never following a
  symbolic link (``O_NOFOLLOW``, ``follow_symlinks=False``);
* refuses what the other account could have planted: a symbolic link, a hard link, a FIFO
  or device, a directory replaced by something else, an entry owned by a third account;
* writes files under an unpredictable name created exclusively, then renames them into
  place, and sets owners and modes on descriptors, never by path afterwards;
* refuses, as root, a directory another user owns or can rewrite
  (:func:`require_trusted_path`, the rule OpenSSH's StrictModes applies to ``~/.ssh``).

A refusal is a :class:`BoundaryViolation`: one line naming the path and what was found
there, raised before anything was changed.
"""

from esdash.boundary.anchored import (
    PRIVATE_UMASK,
    BoundaryViolation,
    Dir,
    Ids,
    account,
    clean_text,
    describe,
    fill_new_file,
    make_dirs,
    private_files,
)
from esdash.boundary.trust import FOREIGN_FLAG, require_trusted_path, trusted_path_problem

__all__ = [
    "FOREIGN_FLAG",
    "PRIVATE_UMASK",
    "BoundaryViolation",
    "Dir",
    "Ids",
    "account",
    "clean_text",
    "describe",
    "fill_new_file",
    "make_dirs",
    "private_files",
    "require_trusted_path",
    "trusted_path_problem",
]
