"""What ``esdash doctor`` checks for OpenSearch: Java >= 21, distribution, painless, security,
node user.

The checks look at the machine as the nodes will see it: the Java runtime the backend hands
them (:func:`.java.resolve_java`: ``OPENSEARCH_JAVA_HOME``, else a JDK new enough), the
distribution as :func:`.distribution.inspect` reads it, and its files *as the unprivileged
user OpenSearch runs as* (:func:`esdash.plugin_api.run_as_user`).
"""

from __future__ import annotations

from pathlib import Path

from esdash.plugin_api import (
    Distribution,
    HostCheck,
    HostProbe,
    assumed_version,
    distribution_check,
    java_check,
    node_user_check,
)

from . import distribution as dist_module
from .java import FIX as JAVA_FIX
from .java import JAVA_HOME_VARIABLE, min_java_major, resolve_java


def probes(home: Path | None, user: str, cache: Path) -> list[HostProbe]:
    """The checks, in display order; the distribution is read once, here."""
    dist_check, dist = load_distribution(home, cache)
    version, for_what = assumed_version(dist, dist_module.DEFAULT_VERSION, "OpenSearch")
    need = min_java_major(version)
    java_home = dist.home if dist else None
    found = [
        HostProbe("java", lambda: check_java(java_home, need, for_what)),
        HostProbe("distribution", lambda: dist_check),
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
    supported = "OpenSearch 2.x or 3.x"
    inspect = dist_module.inspect
    return distribution_check(home, cache, "opensearch", inspect, supported, with_plugins=True)


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


def check_user(user: str, dist: Distribution | None) -> HostCheck:
    """OpenSearch refuses to run as root and must be able to read its distribution."""
    return node_user_check("opensearch-user", user, "opensearch", "OpenSearch", dist)
