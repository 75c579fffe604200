"""The shared OpenSearch cluster is secure: TLS, the bench user only, anonymous refused.

Checked from outside, as a client on this machine would see it, and from inside (the node
processes' user, the security plugin's own view of its users and of the request).
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from engines import Cluster
from support import prereqs

from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]


def test_anonymous_requests_get_401_with_a_basic_challenge(os_cluster: Cluster) -> None:
    status, headers, _body = os_cluster.request("GET", "/", auth=False)
    assert status == 401
    challenge = {k.lower(): v for k, v in headers.items()}["www-authenticate"]
    assert challenge.startswith("Basic")


def test_the_bench_user_gets_200_from_opensearch(os_cluster: Cluster) -> None:
    status, headers, body = os_cluster.request("GET", "/")
    assert status == 200
    assert {k.lower(): v for k, v in headers.items()}["x-opensearch-version"].startswith(
        "OpenSearch/3.4.0"
    )
    assert body["version"]["distribution"] == "opensearch"
    assert body["cluster_name"] == "esdash-osbench"


def test_a_wrong_password_gets_401(os_cluster: Cluster) -> None:
    import dataclasses

    wrong = dataclasses.replace(
        os_cluster, credentials=dataclasses.replace(os_cluster.credentials, password="nope")
    )
    assert wrong.request("GET", "/")[0] == 401


def test_tls_with_the_runs_own_ca_and_no_plain_http(os_cluster: Cluster) -> None:
    """The node's certificate chains to the run's CA and names the address; http:// fails."""
    host, port = os_cluster.urls[0].removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(os_cluster.credentials.ca_certs))
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        subject = dict(item[0] for item in tls.getpeercert()["subject"])
        assert subject["organizationName"] == "esdash"
    with pytest.raises(ssl.SSLCertVerificationError):
        untrusted = ssl.create_default_context()  # the system CAs do not know the run's CA
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            untrusted.wrap_socket(raw, server_hostname=host),
        ):
            pass
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://{host}:{port}/", timeout=10).read()


def test_the_bench_user_is_the_only_user(os_cluster: Cluster) -> None:
    """No demo users: internal_users.yml holds the bench user only, and it is all_access."""
    users = os_cluster.ok("GET", "/_plugins/_security/api/internalusers")
    assert set(users) == {os_cluster.credentials.username}
    info = os_cluster.ok("GET", "/_plugins/_security/authinfo")
    assert info["user_name"] == os_cluster.credentials.username
    assert "all_access" in info["roles"]
    config = os_cluster.ok("GET", "/_plugins/_security/api/securityconfig")
    assert config["config"]["dynamic"]["http"]["anonymous_auth_enabled"] is False


def test_nodes_run_as_the_unprivileged_user_in_the_foreground(os_cluster: Cluster) -> None:
    """Each node is its rank's direct child (no -d daemon), running as the node user."""
    import pwd

    want = pwd.getpwnam(prereqs.es_user()).pw_uid
    statuses = RunDir.open(os_cluster.run).node_statuses()
    assert len(statuses) == 2
    for status in statuses.values():
        assert status.state == "running" and status.pid
        proc = Path(f"/proc/{status.pid}")
        uids = [
            line for line in (proc / "status").read_text().splitlines() if line.startswith("Uid:")
        ]
        assert int(uids[0].split()[1]) == want != 0
        assert "org.opensearch.bootstrap.OpenSearch" in (proc / "cmdline").read_bytes().decode()


def test_painless_runs(os_cluster: Cluster) -> None:
    answer = os_cluster.ok(
        "POST",
        "/_scripts/painless/_execute",
        {"script": {"source": "params.a * 2", "params": {"a": 21}}},
    )
    assert json.dumps(answer) == '{"result": "42"}'
