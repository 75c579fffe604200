"""The Elasticsearch backend: find and understand a distribution directory.

Supports the integ-test-zip that Maven Central publishes (no bundled JDK, only the modules
apm, transport-netty4, x-pack-core and x-pack-security; no scripting) and the official
7.17/8.x/9.x tarballs (bundled JDK, full module set).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from esdash.java import find_java
from esdash.plugin_api import (
    Backend,
    BadInput,
    ClusterError,
    Distribution,
    NodeCommand,
    NodeRequest,
    Option,
    hookimpl,
)

#: The module set of the integ-test-zip; a distribution with only these is that flavor.
INTEG_TEST_MODULES = frozenset({"apm", "transport-netty4", "x-pack-core", "x-pack-security"})
SUPPORTED_MAJORS = (7, 8, 9)


def _version_of(home: Path) -> str | None:
    """The version from ``lib/elasticsearch-<version>.jar`` (present in every flavor)."""
    for jar in sorted((home / "lib").glob("elasticsearch-*.jar")):
        match = re.fullmatch(r"elasticsearch-(\d+\.\d+\.\d+(?:-[A-Za-z0-9]+)?)\.jar", jar.name)
        if match:
            return match.group(1)
    return None


class ElasticsearchBackend(Backend):
    name = "elasticsearch"
    description = "Elasticsearch 7.17/8.x/9.x from a tarball or the Maven integ-test-zip"
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
        home = Path(home).expanduser()
        launcher = home / "bin" / "elasticsearch"
        if not launcher.is_file():
            raise BadInput(
                f"{home} is not an Elasticsearch distribution (no bin/elasticsearch); run "
                f"`esdash fetch elasticsearch` or point cluster.home at an unpacked tarball"
            )
        version = _version_of(home)
        if version is None:
            raise BadInput(
                f"{home}: cannot tell the Elasticsearch version "
                "(no lib/elasticsearch-<version>.jar)"
            )
        modules_dir = home / "modules"
        if not modules_dir.is_dir():
            raise BadInput(f"{home}: no modules/ directory; unpack the distribution again")
        modules = tuple(sorted(p.name for p in modules_dir.iterdir() if p.is_dir()))
        problems: list[str] = []
        major = int(version.split(".")[0])
        if major not in SUPPORTED_MAJORS:
            problems.append(f"version {version} is not supported (use 7.17, 8.x or 9.x)")
        elif major == 7 and not version.startswith("7.17."):
            problems.append(f"version {version}: of the 7.x line only 7.17 is supported")
        flavor = "integ-test-zip" if set(modules) <= INTEG_TEST_MODULES else "default"
        if (home / "jdk").is_dir():
            flavor += "+bundled-jdk"
        return Distribution(
            home=home,
            version=version,
            flavor=flavor,
            modules=modules,
            scripting="lang-painless" in modules,
            problems=tuple(problems),
        )

    # ----------------------------------------------------------------- configuration

    def node_settings(self, request: NodeRequest) -> dict[str, Any]:
        topology, node = request.topology, request.node
        settings: dict[str, Any] = {
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
            settings["xpack.security.enabled"] = False
        else:
            settings.update(request.security.settings)
        return settings

    def write_node_config(self, request: NodeRequest, settings: Mapping[str, Any]) -> None:
        config = request.dirs.config
        template = request.distribution.home / "config"
        if config.exists():
            shutil.rmtree(config)
        # The zip ships config/ as 0660 root; a copy per node that its user may write is
        # needed anyway: Elasticsearch creates its keystore there on first start.
        shutil.copytree(template, config)
        for root, _dirs, files in os.walk(config):
            os.chmod(root, 0o750)
            for name in files:
                os.chmod(os.path.join(root, name), 0o640)
        # JSON is valid YAML, and one line per setting keeps the file readable.
        lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
        (config / "elasticsearch.yml").write_text(
            "# Written by esdash for this run; edits are overwritten on the next start.\n"
            + "\n".join(lines)
            + "\n"
        )
        _absolute_jvm_paths(config / "jvm.options", request.dirs.logs)
        options_d = config / "jvm.options.d"
        options_d.mkdir(exist_ok=True)
        (options_d / "heap.options").write_text(f"-Xms{request.heap}\n-Xmx{request.heap}\n")
        if request.security is not None:
            request.security.install(config, request.owner)

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
            env["ES_JAVA_HOME"] = str(find_java(home).java_home)
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

    # ------------------------------------------------------------------------ client

    def client(self, endpoints: list[str], credentials: Any | None) -> Any:
        from elasticsearch import Elasticsearch

        from esdash.cluster.security import client_kwargs

        scheme = "http" if credentials is None else "https"
        hosts = [f"{scheme}://{endpoint}" for endpoint in endpoints]
        return Elasticsearch(hosts, request_timeout=30, **client_kwargs(credentials))

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


def _absolute_jvm_paths(jvm_options: Path, logs: Path) -> None:
    """Point the GC log, error file and heap dumps of ``jvm.options`` at the node's logs.

    The templates use paths relative to the working directory, which 7.17 sets to the
    (read-only, shared) distribution directory.
    """
    if not jvm_options.exists():
        return
    text = jvm_options.read_text()
    text = re.sub(r"(?<=[=:])logs/", f"{logs}/", text)
    text = re.sub(r"(?m)^(-XX:HeapDumpPath=)data$", rf"\g<1>{logs}", text)
    jvm_options.write_text(text)


@hookimpl
def esdash_register_backends(register) -> None:
    register(ElasticsearchBackend())
