"""What ``esdash doctor`` checks for every JVM search engine: its distribution and node user.

Elasticsearch and OpenSearch are read and run alike: a distribution in esdash's cache or at
``--home`` that the backend inspects, and nodes that refuse root and must read every file of
it (and run its Java) *as the unprivileged user they run as*.  These checks look at the
machine that way; a backend adds what is its own (Java rules, painless, plugins).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path

from esdash.errors import EsdashError
from esdash.plugin.host import HostCheck, last_line, run_as_user, shorten
from esdash.plugin.values import Distribution
from esdash.rundir.records import JsonObject


def fetch_fix(engine: str) -> str:
    """How to get a distribution of ``engine`` (a backend name: ``opensearch``)."""
    return f"esdash fetch {engine}, or pass --home pointing at an unpacked tarball"


def assumed_version(dist: Distribution | None, default: str, title: str) -> tuple[str, str]:
    """The version the checks are for (``dist``'s, else ``default``) and how they name it
    (``OpenSearch 3.4.0 (assumed: no distribution)``)."""
    version = dist.version if dist else default
    return version, f"{title} {version}" + ("" if dist else " (assumed: no distribution)")


def distribution_check(
    home: Path | None,
    cache: Path,
    engine: str,
    inspect: Callable[[Path], Distribution],
    supported: str,
    with_plugins: bool = False,
) -> tuple[HostCheck, Distribution | None]:
    """Find and inspect the distribution (``home`` is None: nothing in ``cache``).

    ``supported`` names the versions esdash runs (``OpenSearch 2.x or 3.x``); the check's
    data lists the installed plugins too when ``with_plugins``.
    """
    fix = fetch_fix(engine)
    if home is None:
        detail = f"no {engine} distribution in the cache ({cache}) and no --home"
        return HostCheck("distribution", "fail", detail, fix), None
    home = Path(home).expanduser()
    if not home.exists():
        return HostCheck("distribution", "fail", f"{home} does not exist", fix), None
    try:
        dist = inspect(home)
    except EsdashError as exc:  # BadInput: not a (supported) distribution
        return HostCheck("distribution", "fail", str(exc), fix), None
    except OSError as exc:  # e.g. an unreadable or half-unpacked directory
        return HostCheck("distribution", "fail", f"cannot read {home}: {exc}", fix), None
    data: JsonObject = {
        "home": str(dist.home),
        "version": dist.version,
        "flavor": dist.flavor,
        "modules": list(dist.modules),
    }
    if with_plugins:
        data["plugins"] = list(dist.plugins)
    data["scripting"] = dist.scripting
    summary = (
        f"{engine} {dist.version} ({dist.flavor}) at {dist.home}; "
        f"{len(dist.modules)} modules: {shorten(list(dist.modules))}"
    )
    if dist.problems:
        detail = f"{summary}; " + "; ".join(dist.problems)
        return HostCheck("distribution", "fail", detail, f"use {supported}: {fix}", data), dist
    return HostCheck("distribution", "pass", summary, data=data), dist


def unreadable_paths(user: str, home: Path, engine: str, java_exe: Path | None = None) -> list[str]:
    """Paths of the distribution (and the java binary) that ``user`` cannot use.

    Runs ``find -readable`` as the user, which asks the kernel (access(2)), so ACLs and every
    parent directory count, not just mode bits.  The integ-test-zips ship ``config/`` as
    0660, which bites when root unpacks them.
    """
    script = (
        f'test -x "$1/bin/{engine}" || echo "$1/bin/{engine} (not executable)"\n'
        'if [ -n "$2" ] && [ ! -x "$2" ]; then echo "$2 (not executable)"; fi\n'
        'find "$1" \\( ! -readable -o -type d ! -executable \\) -print 2>&1\n'
    )
    argv = ["sh", "-c", script, "sh", str(home), str(java_exe or "")]
    proc = run_as_user(argv, timeout=60, as_user=user)
    problems = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 and not problems:
        problems.append(last_line(proc.stderr) or f"probe exited with {proc.returncode}")
    return problems


def node_user_check(
    name: str,
    user: str,
    engine: str,
    title: str,
    dist: Distribution | None,
    java_exe: Path | None = None,
    chmod_note: str = "",
) -> HostCheck:
    """``engine`` (its launcher's name; ``title`` in messages) must not run as root, and its
    nodes' ``user`` must be able to read its distribution (and run ``java_exe``); the check
    is called ``name``.

    ``chmod_note`` follows the ``chmod`` of the fix for unreadable files.
    """
    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        fix = (
            f"create it: useradd -m -s /bin/bash {user}; or pass --user/ESDASH_USER naming an "
            "existing unprivileged user"
        )
        return HostCheck(name, "fail", f"no user {user!r} on this machine", fix)
    data: JsonObject = {"user": user, "uid": entry.pw_uid, "esdash_runs_as": me}
    if entry.pw_uid == 0:
        return HostCheck(
            name,
            "fail",
            f"{user!r} is uid 0: {title} refuses to run as root",
            "useradd -m -s /bin/bash esdash (the default node user when esdash runs as root), "
            "or pass --user/ESDASH_USER naming an unprivileged user"
            if root
            else "drop --user/ESDASH_USER: without root, the nodes run as you",
            data,
        )
    if not root and entry.pw_uid != os.geteuid():
        return HostCheck(
            name,
            "fail",
            f"esdash runs as {me!r}, not root, so the nodes run as {me!r} and cannot switch "
            f"to {user!r}",
            f"run esdash as root to use {user!r}, or drop --user/ESDASH_USER",
            data,
        )
    how = "nodes are switched to it (no supplementary groups)" if root else "nodes run as you"
    if dist is None:
        return HostCheck(
            name,
            "pass",
            f"{user} (uid {entry.pw_uid}), {how}; distribution access not checked "
            "(no distribution)",
            data=data,
        )
    problems = unreadable_paths(user, dist.home, engine, java_exe)
    if problems:
        data["unreadable"] = problems
        return HostCheck(
            name,
            "fail",
            f"{user} cannot use {len(problems)} path(s): {shorten(problems, 3)}",
            f"chmod -R a+rX {dist.home}{chmod_note}, and keep the JDK and every parent "
            f"directory readable by {user}",
            data,
        )
    return HostCheck(
        name,
        "pass",
        f"{user} (uid {entry.pw_uid}), {how}; can read {dist.home}"
        + (f" and run {java_exe}" if java_exe else ""),
        data=data,
    )
