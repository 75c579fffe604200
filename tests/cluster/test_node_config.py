"""What the Elasticsearch backend writes for a node, and how it explains failures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from esdash.cluster.topology import RankReport, plan_topology
from esdash.plugin.manager import get_plugins
from esdash.plugin_api import NodeDirs, NodeRequest, Owner

pytestmark = pytest.mark.es


def request_for(es_home: Path, tmp_path: Path, nodes: int, rank: int) -> NodeRequest:
    backend = get_plugins().backend("elasticsearch")
    reports = [RankReport(r, "h", "lo", "127.0.0.1") for r in range(nodes)]
    topology = plan_topology("esdash-t", reports, 9250, 9350)
    node_dir = tmp_path / str(rank)
    return NodeRequest(
        distribution=backend.inspect(es_home),
        topology=topology,
        node=topology.nodes[rank],
        dirs=NodeDirs(node_dir / "config", node_dir / "data", node_dir / "logs", node_dir / "tmp"),
        heap="512m",
        owner=Owner.current(),
        options={"container": None, "container_runtime": "apptainer"},
    )


def read_yml(config: Path) -> dict:
    lines = (config / "elasticsearch.yml").read_text().splitlines()
    return {k: json.loads(v) for k, v in (line.split(": ", 1) for line in lines if ": " in line)}


def test_multi_node_settings(es_home: Path, tmp_path: Path) -> None:
    backend = get_plugins().backend("elasticsearch")
    request = request_for(es_home, tmp_path, 4, 3)
    backend.write_node_config(request, backend.node_settings(request))
    yml = read_yml(request.dirs.config)
    assert yml["node.name"] == "node-3"
    assert yml["node.roles"] == ["data", "ingest"]  # rank 3 of 4: not master-eligible
    assert yml["discovery.seed_hosts"] == ["127.0.0.1:9350", "127.0.0.1:9351", "127.0.0.1:9352"]
    assert yml["cluster.initial_master_nodes"] == ["node-0", "node-1", "node-2"]
    assert yml["http.port"] == 9253 and yml["transport.port"] == 9353
    assert yml["xpack.security.enabled"] is False
    assert "discovery.type" not in yml
    heap = (request.dirs.config / "jvm.options.d" / "heap.options").read_text()
    assert heap.split() == ["-Xms512m", "-Xmx512m"]
    assert (request.dirs.config / "jvm.options").exists()  # the templates were copied


def test_single_node_settings(es_home: Path, tmp_path: Path) -> None:
    backend = get_plugins().backend("elasticsearch")
    request = request_for(es_home, tmp_path, 1, 0)
    settings = backend.node_settings(request)
    assert settings["discovery.type"] == "single-node"
    assert "cluster.initial_master_nodes" not in settings
    assert settings["node.roles"] == ["master", "data", "ingest"]


def test_bare_and_container_commands(es_home: Path, tmp_path: Path, monkeypatch) -> None:
    backend = get_plugins().backend("elasticsearch")
    request = request_for(es_home, tmp_path, 1, 0)
    bare = backend.node_command(request)
    assert bare.argv == [str(es_home / "bin" / "elasticsearch")]
    assert bare.env["ES_PATH_CONF"] == str(request.dirs.config)
    assert Path(bare.env["ES_JAVA_HOME"], "bin", "java").exists()
    # The engine's own variable for added JVM options reaches the node, and only when set.
    monkeypatch.setenv("ES_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
    assert backend.node_command(request).env["ES_JAVA_OPTS"] == "-XX:TieredStopAtLevel=1"
    monkeypatch.delenv("ES_JAVA_OPTS")
    assert "ES_JAVA_OPTS" not in backend.node_command(request).env
    # A container runtime is not installable here; a stand-in executable on PATH lets us
    # check the command line the backend builds (the runtime itself is not exercised).
    fake = tmp_path / "bin" / "apptainer"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    image = tmp_path / "es.sif"
    contained = request.__class__(
        **{**request.__dict__, "options": {"container": image, "container_runtime": "apptainer"}}
    )
    command = backend.node_command(contained)
    assert command.argv[:3] == ["apptainer", "exec", "--cleanenv"]
    assert f"{es_home}:{es_home}:ro" in command.argv
    assert str(request.dirs.data) in command.argv
    assert command.argv[-2:] == [str(image), str(es_home / "bin" / "elasticsearch")]
    assert f"ES_PATH_CONF={request.dirs.config}" in command.argv


def test_exit_78_names_the_failed_bootstrap_checks() -> None:
    backend = get_plugins().backend("elasticsearch")
    log = (
        "[2026-11-21T02:00:00][ERROR][o.e.b.Elasticsearch] node validation exception\n"
        "bootstrap check failure [1] of [2]: max file descriptors [20000] for elasticsearch "
        "process is too low, increase to at least [65535]\n"
        "bootstrap check failure [2] of [2]: max virtual memory areas vm.max_map_count "
        "[65530] is too low, increase to at least [262144]\n"
    )
    message = backend.explain_exit(78, log)
    assert "max file descriptors [20000]" in message
    assert "vm.max_map_count [65530]" in message
    assert "ulimit -n 65535" in message and "sysctl -w vm.max_map_count=262144" in message
    assert backend.explain_exit(1, "something else") is None
