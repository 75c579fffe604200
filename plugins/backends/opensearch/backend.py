"""The OpenSearch backend: node configuration, the node command, fetch, doctor, control.

A node runs **in the foreground as its rank's child**, like an Elasticsearch node: esdash's
core starts :meth:`OpenSearchBackend.node_command` as the unprivileged owner with
die-with-parent.  ``bin/opensearch -d`` is never used: it returns before the JVM exists (the
pid file appears 9-22 s later), so a daemonised node could be neither supervised nor stopped
reliably.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from esdash.plugin_api import (
    Backend,
    ClusterError,
    ControlClient,
    Credentials,
    Distribution,
    EsdashError,
    HostProbe,
    JsonMapping,
    JsonObject,
    NodeCommand,
    NodeRequest,
    point_jvm_files,
)

from . import distribution, doctor, security
from .java import JAVA_HOME_VARIABLE, java_env


class OpenSearchBackend(Backend):
    name = "opensearch"
    description = (
        "OpenSearch 2.x/3.x from a tarball, or 3.4.0 assembled from Maven Central "
        "(painless, security plugin)"
    )
    default_version = distribution.DEFAULT_VERSION

    def inspect(self, home: Path) -> Distribution:
        return distribution.inspect(home)

    def fetch(self, version: str, cache: Path, say: Callable[[str], None]) -> Path:
        return distribution.fetch(version, cache, say)

    def doctor(self, home: Path | None, user: str, cache: Path) -> list[HostProbe]:
        return doctor.probes(home, user, cache)

    # ----------------------------------------------------------------- configuration

    def node_settings(self, request: NodeRequest) -> JsonObject:
        topology, node = request.topology, request.node
        settings: JsonObject = {
            "cluster.name": topology.cluster_name,
            "node.name": node.name,
            "node.roles": ["cluster_manager", "data", "ingest"]
            if node.master_eligible
            else ["data", "ingest"],
            "path.data": str(request.dirs.data),
            "path.logs": str(request.dirs.logs),
            "network.host": node.address,
            "http.port": node.http_port,
            "transport.port": node.transport_port,
        }
        if topology.single_node:
            settings["discovery.type"] = "single-node"
        else:
            # Always explicit: without seed hosts a node probes 127.0.0.1:9300-9305 and can
            # join a stranger's cluster on a shared machine.
            settings["discovery.seed_hosts"] = topology.seed_hosts
            settings["cluster.initial_cluster_manager_nodes"] = [m.name for m in topology.masters]
        if request.security is None:
            installed = distribution.has_security(request.distribution)
            settings.update(security.disabled_settings(installed))
        else:
            if not distribution.has_security(request.distribution):
                raise ClusterError(
                    f"{request.distribution.home} has no {distribution.SECURITY_PLUGIN} plugin, "
                    "so this cluster cannot run securely; run `esdash fetch opensearch` (it "
                    "installs the plugin), install it into the tarball, or set "
                    "cluster.security = false"
                )
            settings.update(
                security.security_settings(request.security.node_cert, request.security.ca_cert)
            )
        return settings

    def write_node_config(self, request: NodeRequest, settings: JsonMapping) -> None:
        config = request.dirs.config
        template = request.distribution.home / "config"
        if config.exists():
            shutil.rmtree(config)
        # A copy per node that its user may write: OpenSearch creates its keystore there,
        # and each node gets its own opensearch.yml and security files.
        shutil.copytree(template, config)
        # 0600: the security plugin warns about every config file others could read.
        for root, _dirs, files in os.walk(config):
            os.chmod(root, 0o700)
            for name in files:
                os.chmod(os.path.join(root, name), 0o600)
        lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
        (config / "opensearch.yml").write_text(
            "# Written by esdash for this run; edits are overwritten on the next start.\n"
            + "\n".join(lines)
            + "\n"
        )
        _absolute_jvm_paths(
            config / "jvm.options", request.dirs.jvm or request.dirs.logs, request.distribution.home
        )
        options_d = config / "jvm.options.d"
        options_d.mkdir(exist_ok=True)
        heap = options_d / "heap.options"
        heap.write_text(f"-Xms{request.heap}\n-Xmx{request.heap}\n")
        heap.chmod(0o600)
        if request.security is not None:
            security.install_node_security(config, request.security, owner=request.owner.uid)

    def node_command(self, request: NodeRequest) -> NodeCommand:
        home = request.distribution.home
        env = {
            "OPENSEARCH_PATH_CONF": str(request.dirs.config),
            "OPENSEARCH_TMPDIR": str(request.dirs.tmp),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(request.dirs.tmp),
        }
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


def _absolute_jvm_paths(jvm_options: Path, target: Path, home: Path) -> None:
    """The JVM's own files in ``target`` (:func:`~esdash.plugin_api.point_jvm_files`), and
    the ``-javaagent`` jar of 3.x, relative to the working directory, in the distribution."""
    if not jvm_options.exists():
        return
    text = point_jvm_files(jvm_options.read_text(), target)
    text = re.sub(r"(?<=-javaagent:)agent/", f"{home}/agent/", text)
    jvm_options.write_text(text)
