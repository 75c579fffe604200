"""The Elasticsearch backend: node configuration, the node command, fetch, doctor, control."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence

from esdash.plugin_api import (
    ELASTICSEARCH_NAMES,
    ClusterError,
    ControlClient,
    Credentials,
    JsonObject,
    JvmBackend,
    NodeCommand,
    NodeRequest,
    NodeSecurity,
    Option,
    find_java,
)

from . import distribution, security
from .doctor import probes


class ElasticsearchBackend(JvmBackend):
    name = "elasticsearch"
    description = "Elasticsearch 7.17/8.x/9.x from a tarball or the Maven integ-test-zip"
    default_version = distribution.DEFAULT_VERSION
    options = (
        Option(
            "container",
            "path",
            "Apptainer/Singularity image to run each node in (data and config bind-mounted)",
        ),
        Option(
            "container_runtime",
            "str",
            "container runtime command",
            default="apptainer",
            choices=("apptainer", "singularity"),
        ),
    )

    names = ELASTICSEARCH_NAMES
    inspect = staticmethod(distribution.inspect)
    fetch = staticmethod(distribution.fetch)
    doctor = staticmethod(probes)

    # ----------------------------------------------------------------- configuration

    def security_settings(self, request: NodeRequest) -> JsonObject:
        if request.security is None:
            # Mandatory: without it Elasticsearch auto-configures security on its own.
            return security.disabled_settings()
        return security.security_settings()

    def install_security(self, request: NodeRequest, node_security: NodeSecurity) -> None:
        # Elasticsearch creates its keystore in the node's copy of config/ on first start;
        # it will hold the node's TLS key and the file realm.
        security.install_node_security(request.dirs.config, node_security, owner=request.owner.uid)

    def node_command(self, request: NodeRequest) -> NodeCommand:
        home = request.distribution.home
        env = self.launcher_env(request)
        # The launcher JVM writes its flag-probing files to java.io.tmpdir; keep them
        # in the node's tmp instead of leaving a directory in /tmp per start.
        env["CLI_JAVA_OPTS"] = f"-Djava.io.tmpdir={request.dirs.tmp}"
        if "bundled-jdk" not in request.distribution.flavor:
            java = find_java(home, distribution.JAVA_HOME_VARIABLE)
            env[distribution.JAVA_HOME_VARIABLE] = str(java.java_home)
        launcher = str(home / "bin" / "elasticsearch")
        image = request.options.get("container")
        if not image:
            return NodeCommand([launcher], env, request.dirs.tmp)
        runtime = request.options.get("container_runtime") or "apptainer"
        if shutil.which(runtime) is None:
            raise ClusterError(
                f"cluster.backend_options.container is set but {runtime!r} is not on PATH; "
                f"load the site's apptainer/singularity module or remove the option"
            )
        node_root = request.dirs.config.parent
        binds = [f"{home}:{home}:ro", f"{node_root}:{node_root}", f"{request.dirs.data}"]
        if request.dirs.logs.parent != node_root:
            binds.append(str(request.dirs.logs))
        argv = [runtime, "exec", "--cleanenv"]
        for bind in binds:
            argv += ["--bind", bind]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        argv += [str(image), launcher]
        return NodeCommand(argv, {"PATH": env["PATH"], "LANG": "C.UTF-8"}, request.dirs.tmp)

    # ------------------------------------------------------------------------ control

    def control_client(
        self, endpoints: Sequence[str], credentials: Credentials | None, timeout: float = 30.0
    ) -> ControlClient:
        from .control import ElasticsearchControl  # elasticsearch-py: only to talk to a cluster

        return ElasticsearchControl(endpoints, credentials, timeout)

    def explain_exit(self, code: int, log_tail: str) -> str | None:
        if code == 78:
            failures = re.findall(r"bootstrap check failure \[\d+\] of \[\d+\]: ([^\n]+)", log_tail)
            found = "; ".join(dict.fromkeys(f.strip() for f in failures)) or "see the log"
            return (
                f"Elasticsearch's bootstrap checks failed ({found}). They are enforced when a "
                f"node binds a non-loopback address. Fix as root before the job: "
                f"`ulimit -n 65535` (open files) and `sysctl -w vm.max_map_count=262144`; "
                f"or use a loopback-range address for a single-machine test"
            )
        if "can not run elasticsearch as root" in log_tail:
            return (
                "Elasticsearch refuses to run as root: set cluster.run_as to an unprivileged user"
            )
        return None
