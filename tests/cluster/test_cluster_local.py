"""Real clusters started with `esdash cluster up` through mpiexec on this machine.

One secure 3-node cluster is shared by the tests of this module (each start costs ~30 s
here); single-node clusters cover failure handling and security off.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest
from support.cli import (
    ESDASH,
    esdash,
    java_pids_under,
    pids_alive,
    run_dir_from,
    status_json,
    write_session,
)

pytestmark = [pytest.mark.es, pytest.mark.mpi]


def request(url: str, *, ca: Path | None = None, auth: tuple[str, str] | None = None):
    """GET ``url``; return (status, body as JSON or text)."""
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, context=context, timeout=10) as response:
            body = response.read().decode()
            return response.status, json.loads(body) if body.startswith(("{", "[")) else body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def three_nodes(shared_tmp: Path):
    """A secure 3-node cluster on loopback; brought down (and checked) at the end."""
    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "three", 3)
    result = esdash("cluster", "up", str(session), env_runs=runs)
    run = run_dir_from(result.stdout)
    yield session, run, runs, result.stdout
    esdash("cluster", "down", str(run), env_runs=runs)
    assert java_pids_under(run) == []


def test_up_prints_endpoints_and_credentials(three_nodes) -> None:
    _, run, _, output = three_nodes
    assert "is green with 3 node(s)" in output
    endpoints = [line for line in output.splitlines() if line.startswith("  https://127.0.0.1:")]
    assert len(endpoints) == 3, output
    assert f"credentials (user, password, CA): {run}/credentials.json" in output
    assert (run / "credentials.json").stat().st_mode & 0o777 == 0o600
    # the line it offers to try works as pasted into a shell, and does not show the password
    line = next(x for x in output.splitlines() if x.startswith("try it: ")).removeprefix("try it: ")
    password = json.loads((run / "credentials.json").read_text())["password"]
    assert password not in output and line.startswith("curl --cacert ")
    answer = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["status"] == "green"


def test_status_shows_every_node_running(three_nodes) -> None:
    _, run, runs, _ = three_nodes
    info = status_json(run, runs)
    assert info["health"]["status"] == "green"
    assert info["health"]["number_of_nodes"] == 3
    assert sorted(info["nodes"]) == ["0", "1", "2"]
    assert {n["state"] for n in info["nodes"].values()} == {"running"}
    assert len(pids_alive([n["pid"] for n in info["nodes"].values()])) == 3


def test_security_is_on_by_default(three_nodes) -> None:
    _, run, _, _ = three_nodes
    creds = json.loads((run / "credentials.json").read_text())
    topology = json.loads((run / "topology.json").read_text())
    node = topology["nodes"][1]
    url = f"https://{node['address']}:{node['http_port']}"
    ca = Path(creds["ca_certs"])
    assert request(url + "/", ca=ca)[0] == 401  # anonymous
    assert request(url + "/", ca=ca, auth=(creds["username"], "wrong"))[0] == 401
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP served
        urllib.request.urlopen(f"http://{node['address']}:{node['http_port']}/", timeout=5)
    code, nodes = request(
        url + "/_cat/nodes?format=json&h=name,node.role,ip",
        ca=ca,
        auth=(creds["username"], creds["password"]),
    )
    assert code == 200
    roles = {n["name"]: n["node.role"] for n in nodes}
    assert sorted(roles) == ["node-0", "node-1", "node-2"]
    # <= 3 nodes: only the first is master-eligible (the reference made more)
    assert "m" in roles["node-0"] and "m" not in roles["node-1"] and "m" not in roles["node-2"]


def test_node_config_follows_the_topology(three_nodes) -> None:
    _, run, _, _ = three_nodes
    yml = (run / "nodes" / "2" / "config" / "elasticsearch.yml").read_text()
    assert 'node.name: "node-2"' in yml
    assert "discovery.seed_hosts: [" in yml
    assert 'cluster.initial_master_nodes: ["node-0"]' in yml
    assert "xpack.security.transport.ssl.enabled: true" in yml
    users = run / "nodes" / "2" / "config" / "users"
    assert users.stat().st_mode & 0o777 == 0o600


def test_a_different_size_on_the_same_data_is_refused(three_nodes, shared_tmp) -> None:
    session, _, runs, _ = three_nodes
    bigger = session.with_name("three-bigger.toml")
    bigger.write_text(session.read_text().replace("nodes = 3", "nodes = 2"))
    bigger.write_text(bigger.read_text().replace('name = "three"', 'name = "three"', 1))
    result = esdash("cluster", "up", str(bigger), env_runs=runs, check=False)
    assert result.returncode == 2, result.stderr
    assert "holds the data of a 3-node cluster" in result.stderr
    assert "--fresh" in result.stderr


def test_single_node_without_security_then_node_death(shared_tmp: Path) -> None:
    """Security off serves plain HTTP; a node that dies is reported with its log tail."""
    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "plain", 1, security=False)
    # with the example third-party plugin loaded, whose observers would log to the run dir
    plugins = Path(__file__).resolve().parents[2] / ".venv" / "test-plugins"
    assert plugins.is_dir(), "run scripts/provision: it installs the test plugin packages"
    env = {**os.environ, "PYTHONPATH": str(plugins)}
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    try:
        topology = json.loads((run / "topology.json").read_text())
        node = topology["nodes"][0]
        # (GET / is not served by the integ-test-zip; the health API is)
        code, body = request(f"http://{node['address']}:{node['http_port']}/_cluster/health")
        assert code == 200 and body["cluster_name"] == "esdash-plain"
        assert not (run / "credentials.json").exists()
        pid = status_json(run, runs)["nodes"]["0"]["pid"]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            node_status = status_json(run, runs)["nodes"]["0"]
            if node_status["state"] == "failed":
                break
            time.sleep(0.5)
        assert node_status["state"] == "failed"
        assert "node-0 exited with code" in node_status["message"]
        assert "log_tail" in node_status
    finally:
        esdash("cluster", "down", str(run), env_runs=runs, env=env)
    assert java_pids_under(run) == []
    # a cluster alone is no session run: observers are called by `esdash run` only
    # (tests/bench/test_run.py checks those calls)
    assert not (run / "example-plugin-events.log").exists()


def test_foreground_cluster_stops_on_sigterm_and_reuses_data(shared_tmp: Path) -> None:
    """`up --foreground` under SIGTERM (a Slurm time limit) stops every node; data stays."""
    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "fg", 1, security=False)
    env = {**os.environ, "ESDASH_RUNS": str(runs)}

    def start() -> tuple[subprocess.Popen, Path, str]:
        proc = subprocess.Popen(
            [*ESDASH, "cluster", "up", str(session), "--foreground"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("stop it with") or "http://" in line:
                break
        run = run_dir_from("".join(lines))
        topology = json.loads((run / "topology.json").read_text())
        node = topology["nodes"][0]
        return proc, run, f"http://{node['address']}:{node['http_port']}"

    proc, run, url = start()
    try:
        put = urllib.request.Request(
            f"{url}/keep/_doc/1?refresh=true",
            data=b'{"a": 1}',
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        assert urllib.request.urlopen(put, timeout=30).status == 201
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert java_pids_under(run) == []
    assert json.loads((run / "nodes" / "0" / "status.json").read_text())["state"] == "stopped"

    proc, run2, url = start()
    try:
        assert run2 != run
        assert json.loads((run2 / "run.json").read_text())["data_reuse"] == "reused"
        code, doc = request(f"{url}/keep/_doc/1")
        assert code == 200 and doc["_source"] == {"a": 1}
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=120) == 0
    assert java_pids_under(run2) == []
