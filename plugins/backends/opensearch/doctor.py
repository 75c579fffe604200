"""What ``esdash doctor`` checks for OpenSearch: Java >= 21, distribution, painless, security,
node user.

The checks look at the machine as the nodes will see it: the Java runtime the backend hands
them (:func:`.java.resolve_java`: ``OPENSEARCH_JAVA_HOME``, else a JDK new enough), the
distribution as :func:`.distribution.inspect` reads it, and its files *as the unprivileged
user OpenSearch runs as* (:func:`esdash.plugin_api.run_as_user`).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from esdash.plugin_api import (
    Distribution,
    EsdashError,
    HostCheck,
    HostProbe,
    JsonObject,
    java_check,
    last_line,
    run_as_user,
    shorten,
)

from . import distribution as dist_module
from .java import FIX as JAVA_FIX
from .java import JAVA_HOME_VARIABLE, min_java_major, resolve_java

FETCH_FIX = "esdash fetch opensearch, or pass --home pointing at an unpacked tarball"


def probes(home: Path | None, user: str, cache: Path) -> list[HostProbe]:
    """The checks, in display order; the distribution is read once, here."""
    distribution_check, dist = load_distribution(home, cache)
    version = dist.version if dist else dist_module.DEFAULT_VERSION
    for_what = f"OpenSearch {version}" + ("" if dist else " (assumed: no distribution)")
    need = min_java_major(version)
    java_home = dist.home if dist else None
    found = [
        HostProbe("java", lambda: check_java(java_home, need, for_what)),
        HostProbe("distribution", lambda: distribution_check),
    ]
    if dist is not None:
        found.append(HostProbe("scripting", lambda: check_scripting(dist)))
        found.append(HostProbe("security-plugin", lambda: check_security(dist)))
    found.append(HostProbe("opensearch-user", lambda: check_user(user, dist)))
    return found


def check_java(home: Path | None, need: int, for_what: str) -> HostCheck:
    """The runtime the nodes get (:func:`.java.resolve_java`), and whether it is new enough."""
    return java_check(
        home,
        JAVA_HOME_VARIABLE,
        need,
        for_what,
        resolve=lambda found: resolve_java(found, need),
        fix=JAVA_FIX,
    )


def load_distribution(home: Path | None, cache: Path) -> tuple[HostCheck, Distribution | None]:
    """Find and inspect the distribution (``home`` is None: nothing in ``cache``)."""
    if home is None:
        detail = f"no opensearch distribution in the cache ({cache}) and no --home"
        return HostCheck("distribution", "fail", detail, FETCH_FIX), None
    home = Path(home).expanduser()
    if not home.exists():
        return HostCheck("distribution", "fail", f"{home} does not exist", FETCH_FIX), None
    try:
        dist = dist_module.inspect(home)
    except EsdashError as exc:
        return HostCheck("distribution", "fail", str(exc), FETCH_FIX), None
    except OSError as exc:
        return HostCheck("distribution", "fail", f"cannot read {home}: {exc}", FETCH_FIX), None
    data: JsonObject = {
        "home": str(dist.home),
        "version": dist.version,
        "flavor": dist.flavor,
        "modules": list(dist.modules),
        "plugins": list(dist.plugins),
        "scripting": dist.scripting,
    }
    summary = (
        f"opensearch {dist.version} ({dist.flavor}) at {dist.home}; "
        f"{len(dist.modules)} modules: {shorten(list(dist.modules))}"
    )
    if dist.problems:
        fix = "use OpenSearch 2.x or 3.x: esdash fetch opensearch"
        return HostCheck(
            "distribution", "fail", f"{summary}; {'; '.join(dist.problems)}", fix, data
        ), dist
    return HostCheck("distribution", "pass", summary, data=data), dist


def check_scripting(dist: Distribution) -> HostCheck:
    """Painless is what the MRI track's brain-age query needs."""
    if dist.scripting:
        return HostCheck("scripting", "pass", "painless is available (lang-painless module)")
    return HostCheck(
        "scripting",
        "warn",
        f"no painless in this {dist.flavor} distribution: the MRI brain-age query needs it",
        "esdash fetch opensearch (assembles lang-painless), or use an official tarball",
    )


def check_security(dist: Distribution) -> HostCheck:
    """Secure clusters (the default) need the security plugin."""
    if dist_module.has_security(dist):
        return HostCheck("security-plugin", "pass", f"{dist_module.SECURITY_PLUGIN} is installed")
    return HostCheck(
        "security-plugin",
        "fail",
        f"no {dist_module.SECURITY_PLUGIN} plugin in {dist.home}: clusters cannot run securely",
        "esdash fetch opensearch (installs it), or set cluster.security = false",
    )


def _unreadable(user: str, home: Path) -> list[str]:
    """Paths of the distribution that ``user`` cannot use (``find -readable`` as the user)."""
    script = (
        'test -x "$1/bin/opensearch" || echo "$1/bin/opensearch (not executable)"\n'
        'find "$1" \\( ! -readable -o -type d ! -executable \\) -print 2>&1\n'
    )
    proc = run_as_user(["sh", "-c", script, "sh", str(home)], timeout=60, as_user=user)
    problems = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 and not problems:
        problems.append(last_line(proc.stderr) or f"probe exited with {proc.returncode}")
    return problems


def check_user(user: str, dist: Distribution | None) -> HostCheck:
    """OpenSearch refuses to run as root and must be able to read its distribution."""
    name = "opensearch-user"
    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return HostCheck(
            name,
            "fail",
            f"no user {user!r} on this machine",
            f"useradd -m -s /bin/bash {user}; or pass --user naming an unprivileged user",
        )
    data: JsonObject = {"user": user, "uid": entry.pw_uid, "esdash_runs_as": me}
    if entry.pw_uid == 0:
        return HostCheck(
            name,
            "fail",
            f"{user!r} is uid 0: OpenSearch refuses to run as root",
            "pass --user/ESDASH_USER naming an unprivileged user (scripts/provision makes esdash)",
            data,
        )
    if not root and entry.pw_uid != os.geteuid():
        return HostCheck(
            name,
            "fail",
            f"esdash runs as {me!r}, not root, so it cannot switch the nodes to {user!r}",
            f"run esdash as root to use {user!r}, or drop --user/ESDASH_USER",
            data,
        )
    if dist is None:
        return HostCheck(name, "pass", f"{user} (uid {entry.pw_uid}); no distribution to check")
    problems = _unreadable(user, dist.home)
    if problems:
        data["unreadable"] = problems
        return HostCheck(
            name,
            "fail",
            f"{user} cannot use {len(problems)} path(s): {shorten(problems, 3)}",
            f"chmod -R a+rX {dist.home}",
            data,
        )
    return HostCheck(name, "pass", f"{user} (uid {entry.pw_uid}) can read {dist.home}", data=data)
