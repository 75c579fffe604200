"""A node of a JVM search engine: the settings and config directory Elasticsearch and
OpenSearch nodes share.

OpenSearch began as a fork of Elasticsearch 7.10, and a node of either is configured the
same way: one YAML file of flat dotted settings in a copy of the distribution's
``config/`` directory, the heap in ``jvm.options.d/``, the JVM's own files pointed at one
place in ``jvm.options``.  What differs is a handful of names (the YAML file, the role of a
master-eligible node: OpenSearch renamed "master" to "cluster_manager"), which
:class:`JvmEngine` holds.  :class:`JvmBackend` is the :class:`~esdash.plugin.api.Backend`
built on these, so that a backend writes only what is its own (security, its launcher's
environment, what its ``jvm.options`` needs besides).
"""

from __future__ import annotations

import json
import os
import shutil
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from esdash.plugin.api import Backend
from esdash.plugin.java import point_jvm_files
from esdash.plugin.security import NodeSecurity
from esdash.plugin.values import NodeRequest
from esdash.rundir.records import JsonMapping, JsonObject


@dataclass(frozen=True)
class JvmEngine:
    """The names a JVM engine gives to what every node's configuration says."""

    #: The settings file in the node's config directory (``elasticsearch.yml``).
    config_file: str
    #: The role of a master-eligible node (``master``; OpenSearch: ``cluster_manager``).
    master_role: str
    #: The setting naming the nodes that elect the first master.
    initial_masters: str
    #: The launcher's variables for the config directory, the temporary directory, and
    #: the JVM options it adds to ``jvm.options`` (``ES_PATH_CONF``, ``ES_TMPDIR``,
    #: ``ES_JAVA_OPTS``).
    conf_variable: str
    tmp_variable: str
    java_opts_variable: str


#: Where a node keeps its TLS files (:meth:`~esdash.plugin.security.NodeSecurity.install_tls`
#: names them), relative to its config directory: the names are the same on every node, so
#: its settings are too, and both engines resolve relative paths in their TLS settings
#: against the config directory (and read only files inside it).
NODE_CERTS_DIR = "certs"
NODE_KEY = f"{NODE_CERTS_DIR}/node.key"
NODE_CERT = f"{NODE_CERTS_DIR}/node.crt"
NODE_CA_CERT = f"{NODE_CERTS_DIR}/ca.crt"

ELASTICSEARCH_NAMES = JvmEngine(
    "elasticsearch.yml",
    "master",
    "cluster.initial_master_nodes",
    "ES_PATH_CONF",
    "ES_TMPDIR",
    "ES_JAVA_OPTS",
)
OPENSEARCH_NAMES = JvmEngine(
    "opensearch.yml",
    "cluster_manager",
    "cluster.initial_cluster_manager_nodes",
    "OPENSEARCH_PATH_CONF",
    "OPENSEARCH_TMPDIR",
    "OPENSEARCH_JAVA_OPTS",
)


def jvm_node_settings(request: NodeRequest, engine: JvmEngine) -> JsonObject:
    """The settings every node has: names, roles, paths, addresses, discovery."""
    topology, node = request.topology, request.node
    roles = ["data", "ingest"]
    settings: JsonObject = {
        "cluster.name": topology.cluster_name,
        "node.name": node.name,
        "node.roles": [engine.master_role, *roles] if node.master_eligible else roles,
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
        settings[engine.initial_masters] = [m.name for m in topology.masters]
    return settings


def write_jvm_node_config(
    request: NodeRequest,
    settings: JsonMapping,
    engine: JvmEngine,
    jvm_options: Callable[[str], str] = lambda text: text,
) -> None:
    """``request.dirs.config``: the distribution's ``config/``, private to the node's account,
    with ``settings`` in the engine's YAML file and the heap in ``jvm.options.d``.

    ``jvm.options`` gets the JVM's own files in the node's JVM directory
    (:func:`~esdash.plugin.java.point_jvm_files`), then whatever ``jvm_options`` changes.
    The copy is the node's own: the engine creates its keystore there, and the backend adds
    the node's TLS key and users.
    """
    config = request.dirs.config
    if config.exists():
        shutil.rmtree(config)
    # The integ-test-zips ship config/ as 0660 root, and OpenSearch's security plugin warns
    # about every config file others could read: 0700 directories and 0600 files.
    shutil.copytree(request.distribution.home / "config", config)
    for root, _dirs, files in os.walk(config):
        os.chmod(root, 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)
    # JSON is valid YAML, and one line per setting keeps the file readable.
    lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
    (config / engine.config_file).write_text(
        "# Written by esdash for this run; edits are overwritten on the next start.\n"
        + "\n".join(lines)
        + "\n"
    )
    options = config / "jvm.options"
    if options.exists():
        target = request.dirs.jvm or request.dirs.logs
        options.write_text(jvm_options(point_jvm_files(options.read_text(), target)))
    options_d = config / "jvm.options.d"
    options_d.mkdir(exist_ok=True)
    heap = options_d / "heap.options"
    heap.write_text(f"-Xms{request.heap}\n-Xmx{request.heap}\n")
    heap.chmod(0o600)


class JvmBackend(Backend):
    """A :class:`~esdash.plugin.api.Backend` for a JVM engine configured like Elasticsearch.

    It writes every node's settings and config directory (:func:`jvm_node_settings`,
    :func:`write_jvm_node_config`, with the engine's :attr:`names`); a subclass gives what
    turns security on or off (:meth:`security_settings`, :meth:`install_security`) and may
    change the node's ``jvm.options`` (:meth:`jvm_options`).
    """

    names: ClassVar[JvmEngine]

    @abstractmethod
    def security_settings(self, request: NodeRequest) -> JsonObject:
        """The settings that turn security on (``request.security`` set) or off."""

    @abstractmethod
    def install_security(self, request: NodeRequest, security: NodeSecurity) -> None:
        """Put ``security`` (TLS files, users) into the node's config directory."""

    def jvm_options(self, request: NodeRequest, text: str) -> str:
        """``jvm.options`` as the node needs it (its JVM files already pointed at)."""
        return text

    def launcher_env(self, request: NodeRequest) -> dict[str, str]:
        """The environment a node's launcher script starts with: nothing of esdash's own.

        The node's config and temporary directories, a plain ``PATH`` and locale, its ``HOME``
        in its temporary directory, and the engine's own JVM-options variable
        (``ES_JAVA_OPTS``) when the ranks' environment sets it: the engine's convention for
        options a site or a test adds (the JVM's options, all of them, are read back from
        every node after settling into ``results.json``: :mod:`esdash.bench.facts`).
        """
        env = {
            self.names.conf_variable: str(request.dirs.config),
            self.names.tmp_variable: str(request.dirs.tmp),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(request.dirs.tmp),
        }
        java_opts = os.environ.get(self.names.java_opts_variable)
        if java_opts:
            env[self.names.java_opts_variable] = java_opts
        return env

    def node_settings(self, request: NodeRequest) -> JsonObject:
        settings = jvm_node_settings(request, self.names)
        settings.update(self.security_settings(request))
        return settings

    def write_node_config(self, request: NodeRequest, settings: JsonMapping) -> None:
        options = self.jvm_options
        write_jvm_node_config(request, settings, self.names, lambda text: options(request, text))
        if request.security is not None:
            self.install_security(request, request.security)
