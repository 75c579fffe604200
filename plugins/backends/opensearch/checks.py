"""What an OpenSearch session needs at launch, checked before anything starts.

``esdash run``, ``cluster up``, ``submit`` and sweeps run launch-stage checks before they
launch a rank; without this one a missing Java 21 or security plugin would surface only as a
node that fails to start a minute later.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from esdash.plugin_api import (
    CheckContext,
    EsdashError,
    Finding,
    PreflightCheck,
    default_distribution,
    java_version,
)

from . import distribution
from .java import FIX, min_java_major, release_major, resolve_java

NAME = "opensearch"


class OpenSearchLaunch(PreflightCheck):
    """A Java new enough for the distribution, and its security plugin when security is on."""

    name = "opensearch-launch"
    description = "OpenSearch sessions have a Java >= 21 and, when secure, the security plugin"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        cluster = context.session.cluster
        if cluster.backend.name != NAME:
            return
        home = cluster.home or default_distribution(NAME)
        if home is None:
            return  # the core's distribution check names the fix
        try:
            found = distribution.inspect(Path(home))
        except EsdashError:
            return  # likewise
        if cluster.security and not distribution.has_security(found):
            yield Finding(
                "cluster.security",
                f"{found.home} has no {distribution.SECURITY_PLUGIN} plugin, so it cannot run "
                "securely; run `esdash fetch opensearch` (it installs the plugin) or set "
                "cluster.security = false",
            )
        need = min_java_major(found.version)
        try:
            runtime = resolve_java(found.home, need)
            major = release_major(runtime.java_home) or java_version(runtime.executable).major
        except EsdashError as exc:
            yield Finding("cluster.backend", f"no Java for OpenSearch {found.version}: {exc}")
            return
        if major < need:
            yield Finding(
                "cluster.backend",
                f"OpenSearch {found.version} needs Java >= {need}, but {runtime.java_home} "
                f"({runtime.source}) is Java {major}; {FIX}",
            )
