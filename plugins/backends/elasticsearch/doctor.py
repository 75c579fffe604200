"""What ``esdash doctor`` checks for Elasticsearch: distribution, painless, Java, node user.

The checks look at the machine as the nodes will see it: the distribution as
:func:`.distribution.inspect` understands it, the Java runtime the backend hands the nodes
(:func:`esdash.plugin_api.find_java` with ``ES_JAVA_HOME``), and the distribution's files
*as the unprivileged user Elasticsearch runs as* (:func:`esdash.plugin_api.run_as_user`).
"""

from __future__ import annotations

from pathlib import Path

from esdash.plugin_api import (
    Distribution,
    EsdashError,
    HostCheck,
    HostProbe,
    JavaRuntime,
    assumed_version,
    distribution_check,
    find_java,
    java_check,
    node_user_check,
)

from . import distribution as dist_module


def probes(home: Path | None, user: str, cache: Path) -> list[HostProbe]:
    """The checks, in display order; the distribution is read once, here."""
    dist_check, dist = load_distribution(home, cache)
    java_home = dist.home if dist else home
    try:
        runtime: JavaRuntime | None = find_java(java_home, dist_module.JAVA_HOME_VARIABLE)
    except EsdashError:
        runtime = None  # the java check says why
    version, for_what = assumed_version(dist, dist_module.DEFAULT_VERSION, "Elasticsearch")
    need = dist_module.min_java_major(version)
    found = [
        HostProbe(
            "java",
            lambda: java_check(java_home, dist_module.JAVA_HOME_VARIABLE, need, for_what),
        ),
        HostProbe("distribution", lambda: dist_check),
    ]
    if dist is not None:
        found.append(HostProbe("scripting", lambda: check_scripting(dist)))
    found.append(HostProbe("es-user", lambda: check_user(user, dist, runtime)))
    return found


def load_distribution(home: Path | None, cache: Path) -> tuple[HostCheck, Distribution | None]:
    """Find and inspect the distribution (``home`` is None: nothing in ``cache``)."""
    supported = "Elasticsearch 7.17, 8.x or 9.x"
    return distribution_check(home, cache, "elasticsearch", dist_module.inspect, supported)


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


def check_user(user: str, dist: Distribution | None, runtime: JavaRuntime | None) -> HostCheck:
    """Elasticsearch must not run as root and must be able to read its distribution."""
    java_exe = runtime.executable if runtime else None
    note = " (the integ-test-zip ships config/ as 0660)"
    return node_user_check("es-user", user, "elasticsearch", "Elasticsearch", dist, java_exe, note)
