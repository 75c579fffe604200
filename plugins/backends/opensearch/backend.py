"""The OpenSearch backend: node configuration, the node command, fetch, doctor, control.

A node runs **in the foreground as its rank's child**, like an Elasticsearch node: esdash's
core starts :meth:`OpenSearchBackend.node_command` as the unprivileged owner with
die-with-parent.  ``bin/opensearch -d`` is never used: it returns before the JVM exists (the
pid file appears 9-22 s later), so a daemonised node could be neither supervised nor stopped
reliably.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from esdash.plugin_api import (
    OPENSEARCH_NAMES,
    ClusterError,
    ControlClient,
    Credentials,
    EsdashError,
    JsonObject,
    JvmBackend,
    NodeCommand,
    NodeRequest,
    NodeSecurity,
)

from . import distribution, security
from .doctor import probes
from .java import JAVA_HOME_VARIABLE, java_env


class OpenSearchBackend(JvmBackend):
    name = "opensearch"
    description = (
        "OpenSearch 2.x/3.x from a tarball, or 3.4.0 assembled from Maven Central "
        "(painless, security plugin)"
    )
    default_version = distribution.DEFAULT_VERSION

    names = OPENSEARCH_NAMES
    inspect = staticmethod(distribution.inspect)
    fetch = staticmethod(distribution.fetch)
    doctor = staticmethod(probes)

    # ----------------------------------------------------------------- configuration

    def security_settings(self, request: NodeRequest) -> JsonObject:
        if request.security is None:
            return security.disabled_settings(distribution.has_security(request.distribution))
        if not distribution.has_security(request.distribution):
            raise ClusterError(
                f"{request.distribution.home} has no {distribution.SECURITY_PLUGIN} plugin, "
                "so this cluster cannot run securely; run `esdash fetch opensearch` (it "
                "installs the plugin), install it into the tarball, or set "
                "cluster.security = false"
            )
        return security.security_settings(request.security.node_cert, request.security.ca_cert)

    def install_security(self, request: NodeRequest, node_security: NodeSecurity) -> None:
        security.install_node_security(request.dirs.config, node_security, owner=request.owner.uid)

    def jvm_options(self, request: NodeRequest, text: str) -> str:
        """3.x names its ``-javaagent`` jar relative to the working directory: make it the
        distribution's."""
        home = request.distribution.home
        return re.sub(r"(?<=-javaagent:)agent/", f"{home}/agent/", text)

    def node_command(self, request: NodeRequest) -> NodeCommand:
        home = request.distribution.home
        env = self.launcher_env(request)
        try:
            env.update(java_env(home))
        except EsdashError as exc:  # BadInput from find_java: it names the variable to fix
            raise ClusterError(f"no Java for OpenSearch: {exc}") from None
        # The launcher's own checks run `bin/opensearch-keystore` relative to the working
        # directory; from the node's tmp it finds none and skips a JVM start.
        return NodeCommand([str(home / "bin" / "opensearch")], env, request.dirs.tmp)

    # ------------------------------------------------------------------------ control

    def control_client(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float = 30.0
    ) -> ControlClient:
        from .control import OpenSearchControl  # opensearch-py: only to talk to a cluster

        return OpenSearchControl(endpoints, credentials, timeout)

    def explain_exit(self, code: int, log_tail: str) -> str | None:
        if "can not run opensearch as root" in log_tail.lower():
            return "OpenSearch refuses to run as root: set cluster.run_as to an unprivileged user"
        found = re.search(r"bootstrap check failure \[\d+\] of \[\d+\]: ([^\n]+)", log_tail)
        if found:
            return (
                f"OpenSearch's bootstrap checks failed ({found.group(1).strip()}); they are "
                "enforced when a node binds a non-loopback address. Fix as root before the job: "
                "`ulimit -n 65535` and `sysctl -w vm.max_map_count=262144`"
            )
        if "UnsupportedClassVersionError" in log_tail or "JavaVersionChecker" in log_tail:
            return f"the Java is too old for this OpenSearch; export {JAVA_HOME_VARIABLE}"
        if "Missing plugin [" in log_tail:
            return (
                "a plugin's parent plugin is missing; assemble the distribution again with "
                "`esdash fetch opensearch` (it marks optional parents optional)"
            )
        return None
