"""The OpenSearch backend without a running cluster: distribution, fetch, Java, config, doctor.

These read the assembled distribution in esdash's cache (``esdash fetch opensearch``; a
missing one skips them, or fails them under CI) and write node configurations into tmp dirs.
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import bcrypt
import pytest
from esdash_plugins.backends.opensearch import distribution, java, security
from support import prereqs

from esdash.cluster import pki
from esdash.plugin.manager import get_plugins
from esdash.plugin.values import NodeDirs, NodeRequest, Owner
from esdash.rundir.records import NodePlan, Topology

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def home() -> Path:
    prereqs.require("opensearch")
    found = prereqs.os_home()
    assert found is not None
    return found


def test_the_backend_is_registered_through_its_entry_point() -> None:
    plugins = get_plugins()
    assert plugins.registries["backend"]["opensearch"].plugin == "opensearch"
    assert plugins.backend("opensearch").default_version == "3.4.0"


def test_the_assembled_distribution_has_painless_security_and_mappers(home: Path) -> None:
    found = get_plugins().backend("opensearch").inspect(home)
    assert found.version == "3.4.0" and found.flavor == "assembled"
    assert found.scripting and found.problems == ()
    assert {m.name for m in distribution.MODULES} <= set(found.modules)
    assert "transport-netty4" in found.modules
    assert found.plugins == ("opensearch-security",)
    assert {"scaled_float", "join", "percolator", "keyword", "text"} <= set(found.mappers)
    marker = json.loads((home / distribution.ASSEMBLY_MARKER).read_text())
    assert marker["security_optional_parents"] == ["rule-framework"]
    descriptor = (home / "plugins/opensearch-security/plugin-descriptor.properties").read_text()
    assert "rule-framework;optional=true" in descriptor
    assert (home / "plugins/opensearch-security/commons-collections4-4.5.0.jar").is_file()
    painless = (home / "modules/lang-painless/plugin-descriptor.properties").read_text()
    assert "classname=org.opensearch.painless.PainlessModulePlugin" in painless
    lib = {distribution._artifact_name(j.name) for j in (home / "lib").glob("*.jar")}
    for module in (home / "modules").iterdir():
        dup = lib & {distribution._artifact_name(j.name) for j in module.glob("*.jar")}
        assert not dup, f"{module.name} repeats jars of lib/ (jar hell): {dup}"


def test_a_bare_or_foreign_home_is_refused(tmp_path: Path) -> None:
    backend = get_plugins().backend("opensearch")
    with pytest.raises(Exception, match="not an OpenSearch distribution"):
        backend.inspect(tmp_path)


def test_fetch_is_idempotent_and_quick_when_done(home: Path) -> None:
    said: list[str] = []
    started = time.monotonic()
    again = get_plugins().backend("opensearch").fetch("3.4.0", home.parent, said.append)
    assert again == home and said == [] and time.monotonic() - started < 1


def test_fetch_refuses_versions_it_cannot_assemble_with_the_reason(tmp_path: Path) -> None:
    backend = get_plugins().backend("opensearch")
    with pytest.raises(Exception) as refused:
        backend.fetch("3.5.0", tmp_path, print)
    assert "opensearch-security:3.5.0.0" in str(refused.value)
    assert "3.4.0" in str(refused.value) and "cluster.home" in str(refused.value)
    assert not list(tmp_path.iterdir()), "nothing is downloaded for a refused version"
    with pytest.raises(Exception, match="expected a version"):
        backend.fetch("latest", tmp_path, print)


def test_esdash_fetch_cli_prints_the_home_and_refuses_with_exit_code(home: Path) -> None:
    from support.cli import esdash

    env = {**os.environ, "ESDASH_CACHE": str(home.parent)}
    done = esdash("fetch", "opensearch", env_runs=home.parent, env=env)
    assert done.stdout.strip() == str(home)
    refused = esdash("fetch", "opensearch", "--version", "2.19.0", env_runs=home.parent,
                     env=env, check=False)  # fmt: skip
    assert refused.returncode != 0 and "not published there" in refused.stderr


def test_patching_the_security_zip_makes_parents_optional(tmp_path: Path) -> None:
    source = tmp_path / "security.zip"
    with zipfile.ZipFile(source, "w") as zf:
        zf.writestr(
            "plugin-descriptor.properties",
            "name=opensearch-security\nextended.plugins=workload-management;optional=true,"
            "rule-framework\n",
        )
        zf.writestr("opensearch-security-3.4.0.0.jar", b"jar")
    extra = tmp_path / "commons-collections4-4.5.0.jar"
    extra.write_bytes(b"cc4")
    target = tmp_path / "patched.zip"
    assert distribution.patch_security_zip(source, target, [extra]) == ["rule-framework"]
    with zipfile.ZipFile(target) as zf:
        text = zf.read("plugin-descriptor.properties").decode()
        assert (
            "extended.plugins=workload-management;optional=true,rule-framework;optional=true"
            in text
        )
        assert zf.read("commons-collections4-4.5.0.jar") == b"cc4"


def test_java_21_or_newer_is_found_even_when_path_has_17(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's default Java is 17; the backend takes the newest JDK >= 21 in /usr/lib/jvm."""
    monkeypatch.delenv("OPENSEARCH_JAVA_HOME", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    prereqs.require("opensearch")
    runtime = java.resolve_java(None)
    assert (java.release_major(runtime.java_home) or 0) >= 21
    monkeypatch.setenv("OPENSEARCH_JAVA_HOME", "/nonexistent-jdk")
    with pytest.raises(Exception, match="OPENSEARCH_JAVA_HOME=/nonexistent-jdk"):
        java.resolve_java(None)


def test_doctor_checks_java_distribution_painless_security_and_user(home: Path) -> None:
    from esdash.host.doctor import run_checks

    checks = {c.name: c for c in run_checks(home, prereqs.es_user(), backend="opensearch")}
    for name in ("java", "distribution", "scripting", "security-plugin", "opensearch-user"):
        assert checks[name].status == "pass", (name, checks[name].detail)
    assert "needs >= 21" in checks["java"].detail


def test_doctor_names_the_fix_for_a_java_that_is_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    from esdash_plugins.backends.opensearch import doctor, java

    # The JDK OpenSearch runs on here, asked for a Java newer than any: always "too old",
    # on every machine that can run OpenSearch at all.
    monkeypatch.setenv("OPENSEARCH_JAVA_HOME", str(java.resolve_java(None).java_home))
    check = doctor.check_java(None, 99, "OpenSearch 99")
    assert check.status == "fail" and "OPENSEARCH_JAVA_HOME" in (check.fix or "")


def _request(home: Path, tmp_path: Path, security_on: bool) -> NodeRequest:
    nodes = tuple(
        NodePlan(
            rank=i, name=f"node-{i}", host="localhost", interface="lo", address="127.0.0.1",
            http_port=9260 + i, transport_port=9360 + i, master_eligible=True,
        )
        for i in range(2)
    )  # fmt: skip
    topology = Topology(cluster_name="esdash-unit", nodes=nodes)
    node_security = None
    if security_on:
        made = pki.create_cluster_pki(tmp_path / "pki", "esdash-unit", [["127.0.0.1"]] * 2)
        credentials = pki.create_credentials(tmp_path, ca_certs=made.ca_cert)
        node_security = pki.node_security(made, 0, credentials)
    dirs = NodeDirs(tmp_path / "config", tmp_path / "data", tmp_path / "logs", tmp_path / "tmp")
    backend = get_plugins().backend("opensearch")
    return NodeRequest(
        distribution=backend.inspect(home), topology=topology, node=nodes[0], dirs=dirs,
        heap="256m", owner=Owner.current(), options={}, security=node_security,
    )  # fmt: skip


def test_node_config_is_per_node_secure_and_cluster_manager(home: Path, tmp_path: Path) -> None:
    backend = get_plugins().backend("opensearch")
    request = _request(home, tmp_path, security_on=True)
    settings = backend.node_settings(request)
    assert settings["node.roles"] == ["cluster_manager", "data", "ingest"]
    assert settings["cluster.initial_cluster_manager_nodes"] == ["node-0", "node-1"]
    assert settings["plugins.security.nodes_dn"] == ["CN=*,OU=esdash-unit,O=esdash"]
    assert settings["plugins.security.config_index_name"].startswith(".esdash_security_")
    backend.write_node_config(request, settings)
    config = request.dirs.config
    yml = (config / "opensearch.yml").read_text()
    assert '"plugins.security.ssl.http.enabled": true' not in yml  # flat keys, JSON values
    assert "plugins.security.ssl.http.enabled: true" in yml
    jvm = (config / "jvm.options").read_text()
    assert f"file={request.dirs.logs}/gc.log" in jvm
    assert f"-XX:ErrorFile={request.dirs.logs}/hs_err_pid%p.log" in jvm
    assert f"-XX:HeapDumpPath={request.dirs.logs}" in jvm
    assert f"-javaagent:{home}/agent/" in jvm
    assert (config / "jvm.options.d/heap.options").read_text() == "-Xms256m\n-Xmx256m\n"
    users = json.loads(
        (config / "opensearch-security/internal_users.yml").read_text().split("\n", 1)[1]
    )
    credentials = request.security.credentials  # type: ignore[union-attr]
    assert set(users) == {"_meta", credentials.username}
    stored = users[credentials.username]["hash"].encode()
    assert stored.startswith(b"$2a$12$") and bcrypt.checkpw(credentials.password.encode(), stored)
    auth = (config / "opensearch-security/config.yml").read_text()
    assert '"anonymous_auth_enabled": false' in auth
    for path in [*config.rglob("*")]:
        if path.is_file():
            assert path.stat().st_mode & 0o077 == 0, path  # the plugin warns about others
    command = backend.node_command(request)
    assert command.argv == [str(home / "bin" / "opensearch")] and "-d" not in command.argv
    assert command.env["OPENSEARCH_PATH_CONF"] == str(config)
    assert int(java.release_major(Path(command.env["OPENSEARCH_JAVA_HOME"])) or 0) >= 21


def test_security_off_is_written_explicitly(home: Path, tmp_path: Path) -> None:
    backend = get_plugins().backend("opensearch")
    settings = backend.node_settings(_request(home, tmp_path, security_on=False))
    assert settings["plugins.security.disabled"] is True
    assert not any(k.startswith("plugins.security.ssl") for k in settings)


def test_bcrypt_hashes_are_salted() -> None:
    assert security.bcrypt_hash("pw", rounds=4) != security.bcrypt_hash("pw", rounds=4)


def test_the_launch_check_refuses_an_old_java_and_accepts_the_default(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from esdash_plugins.backends.opensearch.checks import OpenSearchLaunch

    from esdash.plugin.checks import CheckContext
    from esdash.session import load_session

    path = tmp_path / "s.toml"
    path.write_text(
        f'name = "s"\n[cluster]\nbackend = "opensearch"\nnodes = 1\nhome = "{home}"\n'
        '[track]\nname = "mri"\n'
    )
    context = CheckContext(session=load_session(path), plugins=get_plugins())
    monkeypatch.delenv("OPENSEARCH_JAVA_HOME", raising=False)
    assert list(OpenSearchLaunch().run(context)) == []
    old = Path("/usr/lib/jvm/java-17-openjdk-amd64")
    if (old / "bin" / "java").exists():
        monkeypatch.setenv("OPENSEARCH_JAVA_HOME", str(old))
        (finding,) = OpenSearchLaunch().run(context)
        assert finding.key == "cluster.backend" and "needs Java >= 21" in finding.message
