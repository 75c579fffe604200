"""What ``esdash doctor`` reports, and the probes plugins add to it.

The doctor asks the machine whether it can run what a session needs.  esdash checks what
every engine needs (MPI, Slurm, the kernel limits search engines enforce); the backend adds
what its engine needs (the distribution, Java, the node user's access to both) and each
encryption mode what it needs (FUSE and gocryptfs for the gocryptfs mode).  A check is a
:class:`HostProbe`: a name and a function returning a :class:`HostCheck`.  The doctor runs
all probes in parallel threads (most of them start a subprocess), and a probe that raises
becomes a ``fail`` naming it: a doctor that crashes helps nobody.

Probes that look at files as the node user must see them use :func:`run_as_user`: it starts
a command the way :class:`esdash.cluster.node.NodeProcess` starts a node when esdash is root
(``setuid``/``setgid`` to the user, no supplementary groups, no PAM), so the permissions and
limits measured are the ones the nodes get.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

from esdash.rundir.records import JsonObject

Status = Literal["pass", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail")


@dataclass(frozen=True)
class HostCheck:
    """The outcome of one check.  ``data`` holds machine-readable facts for ``--json``."""

    name: str
    status: Status
    detail: str
    fix: str = ""
    data: JsonObject = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} not in {STATUSES}")
        if self.status != "pass" and not self.fix:
            raise ValueError(f"check {self.name}: a {self.status} needs a fix")

    def as_dict(self) -> JsonObject:
        return asdict(self)


@dataclass(frozen=True)
class HostProbe:
    """One check to run: its name (shown if it crashes) and the function that runs it."""

    name: str
    run: Callable[[], HostCheck]


def switches_user(user: str) -> bool:
    """Whether probes for ``user`` switch to it (only root can, and nodes do it then)."""
    return os.geteuid() == 0 and user != "root"


def run_as_user(
    argv: list[str], timeout: float = 20.0, as_user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a probe command; a missing program or a timeout becomes a failed result.

    ``as_user`` runs it as that user when esdash is root (see the module docstring); the
    caller has checked that the user exists.
    """
    switch: dict[str, object] = {}
    if as_user is not None and switches_user(as_user):
        entry = pwd.getpwnam(as_user)
        switch = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    try:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd="/",  # the user may not be allowed into our working directory
            **switch,
        )
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f} s")


def last_line(text: str) -> str:
    """The last non-blank line of a probe's output (where tools put the reason)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def shorten(items: list[str], limit: int = 6) -> str:
    """The first ``limit`` items, and how many more there are."""
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")
