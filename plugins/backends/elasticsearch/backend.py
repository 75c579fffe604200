"""The Elasticsearch backend: node configuration, the node command, fetch, doctor, control."""

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
    HostProbe,
    JsonMapping,
    JsonObject,
    NodeCommand,
    NodeRequest,
    Option,
    find_java,
    point_jvm_files,
)

from . import distribution, doctor, security


class ElasticsearchBackend(Backend):
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
            "node.roles": ["master", "data", "ingest"]
            if node.master_eligible
            else ["data", "ingest"],
            "path.data": str(request.dirs.data),
            "path.logs": str(request.dirs.logs),
            # An explicit address (not _iface_), so extra addresses on the interface never
            # move the node into production mode by accident.
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
            settings["cluster.initial_master_nodes"] = [m.name for m in topology.masters]
        if request.security is None:
            # Mandatory: without it Elasticsearch auto-configures security on its own.
            settings.update(security.disabled_settings())
        else:
            settings.update(security.security_settings())
        return settings

    def write_node_config(self, request: NodeRequest, settings: JsonMapping) -> None:
        config = request.dirs.config
        template = request.distribution.home / "config"
        if config.exists():
            shutil.rmtree(config)
        # The zip ships config/ as 0660 root; a copy per node that its user may write is
        # needed anyway: Elasticsearch creates its keystore there on first start.  Its
        # account's alone: it will hold the node's TLS key and the file realm.
        shutil.copytree(template, config)
        for root, _dirs, files in os.walk(config):
            os.chmod(root, 0o700)
            for name in files:
                os.chmod(os.path.join(root, name), 0o600)
        # JSON is valid YAML, and one line per setting keeps the file readable.
        lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
        (config / "elasticsearch.yml").write_text(
            "# Written by esdash for this run; edits are overwritten on the next start.\n"
            + "\n".join(lines)
            + "\n"
        )
        _absolute_jvm_paths(config / "jvm.options", request.dirs.jvm or request.dirs.logs)
        options_d = config / "jvm.options.d"
        options_d.mkdir(exist_ok=True)
        (options_d / "heap.options").write_text(f"-Xms{request.heap}\n-Xmx{request.heap}\n")
        if request.security is not None:
            security.install_node_security(config, request.security, owner=request.owner.uid)

    def node_command(self, request: NodeRequest) -> NodeCommand:
        home = request.distribution.home
        env = {
            "ES_PATH_CONF": str(request.dirs.config),
            "ES_TMPDIR": str(request.dirs.tmp),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(request.dirs.tmp),
            # The launcher JVM writes its flag-probing files to java.io.tmpdir; keep them
            # in the node's tmp instead of leaving a directory in /tmp per start.
            "CLI_JAVA_OPTS": f"-Djava.io.tmpdir={request.dirs.tmp}",
        }
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


def _absolute_jvm_paths(jvm_options: Path, target: Path) -> None:
    """The JVM's own files in ``target`` (:func:`~esdash.plugin_api.point_jvm_files`)."""
    if jvm_options.exists():
        jvm_options.write_text(point_jvm_files(jvm_options.read_text(), target))
