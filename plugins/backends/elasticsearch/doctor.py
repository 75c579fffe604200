"""What ``esdash doctor`` checks for Elasticsearch: distribution, painless, Java, node user.

The checks look at the machine as the nodes will see it: the distribution as
:func:`.distribution.inspect` understands it, the Java runtime the backend hands the nodes
(:func:`esdash.plugin_api.find_java` with ``ES_JAVA_HOME``), and the distribution's files
*as the unprivileged user Elasticsearch runs as* (:func:`esdash.plugin_api.run_as_user`).
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
    JavaRuntime,
    JsonObject,
    find_java,
    java_check,
    last_line,
    run_as_user,
    shorten,
)

from . import distribution as dist_module

FETCH_FIX = "esdash fetch elasticsearch, or pass --home pointing at an unpacked tarball"


def probes(home: Path | None, user: str, cache: Path) -> list[HostProbe]:
    """The checks, in display order; the distribution is read once, here."""
    distribution_check, dist = load_distribution(home, cache)
    java_home = dist.home if dist else home
    try:
        runtime: JavaRuntime | None = find_java(java_home, dist_module.JAVA_HOME_VARIABLE)
    except EsdashError:
        runtime = None  # the java check says why
    version = dist.version if dist else dist_module.DEFAULT_VERSION
    for_what = f"Elasticsearch {version}" + ("" if dist else " (assumed: no distribution)")
    need = dist_module.min_java_major(version)
    found = [
        HostProbe(
            "java",
            lambda: java_check(java_home, dist_module.JAVA_HOME_VARIABLE, need, for_what),
        ),
        HostProbe("distribution", lambda: distribution_check),
    ]
    if dist is not None:
        found.append(HostProbe("scripting", lambda: check_scripting(dist)))
    found.append(HostProbe("es-user", lambda: check_user(user, dist, runtime)))
    return found


def load_distribution(home: Path | None, cache: Path) -> tuple[HostCheck, Distribution | None]:
    """Find and inspect the distribution (``home`` is None: nothing in ``cache``)."""
    if home is None:
        detail = f"no elasticsearch distribution in the cache ({cache}) and no --home"
        return HostCheck("distribution", "fail", detail, FETCH_FIX), None
    home = Path(home).expanduser()
    if not home.exists():
        return HostCheck("distribution", "fail", f"{home} does not exist", FETCH_FIX), None
    try:
        dist = dist_module.inspect(home)
    except EsdashError as exc:  # BadInput: not a (supported) distribution
        return HostCheck("distribution", "fail", str(exc), FETCH_FIX), None
    except OSError as exc:  # e.g. an unreadable or half-unpacked directory
        return HostCheck("distribution", "fail", f"cannot read {home}: {exc}", FETCH_FIX), None
    data: JsonObject = {
        "home": str(dist.home),
        "version": dist.version,
        "flavor": dist.flavor,
        "modules": list(dist.modules),
        "scripting": dist.scripting,
    }
    summary = (
        f"elasticsearch {dist.version} ({dist.flavor}) at {dist.home}; "
        f"{len(dist.modules)} modules: {shorten(list(dist.modules))}"
    )
    if dist.problems:
        detail = f"{summary}; " + "; ".join(dist.problems)
        fix = "use Elasticsearch 7.17, 8.x or 9.x: esdash fetch elasticsearch"
        return HostCheck("distribution", "fail", detail, fix, data), dist
    return HostCheck("distribution", "pass", summary, data=data), dist


def check_scripting(dist: Distribution) -> HostCheck:
    """Painless is what the MRI track's brain-age query needs; the integ-test-zip lacks it."""
    if dist.scripting:
        return HostCheck("scripting", "pass", "painless is available (lang-painless module)")
    detail = f"no painless in this {dist.flavor} distribution: the MRI brain-age query needs it"
    if dist.flavor.startswith("integ-test-zip"):
        detail += " (this flavor also lacks _reindex, _update_by_query and ingest processors)"
    return HostCheck(
        "scripting",
        "warn",
        detail,
        "use an official tarball, e.g. elasticsearch-"
        f"{dist.version}-linux-x86_64.tar.gz from artifacts.elastic.co, and pass --home",
    )


def _unreadable(user: str, home: Path, java_exe: Path | None) -> list[str]:
    """Paths of the distribution (and the java binary) that ``user`` cannot use.

    Runs ``find -readable`` as the user, which asks the kernel (access(2)), so ACLs and every
    parent directory count, not just mode bits.  The integ-test-zip ships ``config/`` as 0660,
    which bites when root unpacks it.
    """
    script = (
        'test -x "$1/bin/elasticsearch" || echo "$1/bin/elasticsearch (not executable)"\n'
        'if [ -n "$2" ] && [ ! -x "$2" ]; then echo "$2 (not executable)"; fi\n'
        'find "$1" \\( ! -readable -o -type d ! -executable \\) -print 2>&1\n'
    )
    argv = ["sh", "-c", script, "sh", str(home), str(java_exe or "")]
    proc = run_as_user(argv, timeout=60, as_user=user)
    problems = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 and not problems:
        problems.append(last_line(proc.stderr) or f"probe exited with {proc.returncode}")
    return problems


def check_user(user: str, dist: Distribution | None, runtime: JavaRuntime | None) -> HostCheck:
    """Elasticsearch must not run as root and must be able to read its distribution."""
    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    user_fix = (
        f"create it: useradd -m -s /bin/bash {user}; or pass --user/ESDASH_USER naming an "
        "existing unprivileged user"
    )
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return HostCheck("es-user", "fail", f"no user {user!r} on this machine", user_fix)
    data: JsonObject = {"user": user, "uid": entry.pw_uid, "esdash_runs_as": me}
    if entry.pw_uid == 0:
        return HostCheck(
            "es-user",
            "fail",
            f"{user!r} is uid 0: Elasticsearch refuses to run as root",
            "useradd -m -s /bin/bash esdash (the default ES user when esdash runs as root), "
            "or pass --user/ESDASH_USER naming an unprivileged user"
            if root
            else "drop --user/ESDASH_USER: without root, the nodes run as you",
            data,
        )
    if not root and entry.pw_uid != os.geteuid():
        return HostCheck(
            "es-user",
            "fail",
            f"esdash runs as {me!r}, not root, so the nodes run as {me!r} and cannot switch "
            f"to {user!r}",
            f"run esdash as root to use {user!r}, or drop --user/ESDASH_USER",
            data,
        )
    how = "nodes are switched to it (no supplementary groups)" if root else "nodes run as you"
    if dist is None:
        return HostCheck(
            "es-user",
            "pass",
            f"{user} (uid {entry.pw_uid}), {how}; distribution access not checked "
            "(no distribution)",
            data=data,
        )
    java_exe = runtime.executable if runtime else None
    problems = _unreadable(user, dist.home, java_exe)
    if problems:
        data["unreadable"] = problems
        return HostCheck(
            "es-user",
            "fail",
            f"{user} cannot use {len(problems)} path(s): {shorten(problems, 3)}",
            f"chmod -R a+rX {dist.home} (the integ-test-zip ships config/ as 0660), and keep "
            f"the JDK and every parent directory readable by {user}",
            data,
        )
    return HostCheck(
        "es-user",
        "pass",
        f"{user} (uid {entry.pw_uid}), {how}; can read {dist.home}"
        + (f" and run {java_exe}" if java_exe else ""),
        data=data,
    )
