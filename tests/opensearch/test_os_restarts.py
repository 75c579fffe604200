"""Clusters this directory's shared one cannot show: a restart on reused data, security off.

Each starts its own 1-node cluster (the shared cluster must stay as it is).

* **Reuse**: a second ``cluster up`` on the same data root gets a new CA and a new bench
  password; the security plugin initialises its index only when the index is missing, so the
  backend names the index after the CA, and the new password must work.
* **Security off** works and is said out loud, as for Elasticsearch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from engines import cluster_of, os_session
from support.cli import esdash, java_pids_under, run_dir_from

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]


def _up(session: Path, runs: Path) -> tuple[Path, str]:
    result = esdash("cluster", "up", str(session), env_runs=runs, timeout=600)
    return run_dir_from(result.stdout), result.stdout


def _down(run: Path, runs: Path) -> None:
    esdash("cluster", "down", str(run), env_runs=runs)
    assert java_pids_under(run) == []


def test_a_restart_on_reused_data_accepts_the_new_password(shared_tmp: Path) -> None:
    runs = shared_tmp / "runs-reuse"
    session = os_session(shared_tmp, "osreuse", 1, track='name = "mri"')
    first, _ = _up(session, runs)
    try:
        cluster = cluster_of(first, runs, "opensearch")
        cluster.ok("PUT", "/kept", {"settings": {"number_of_replicas": 0}})
        cluster.ok("POST", "/kept/_doc?refresh=true", {"n": 1})
    finally:
        _down(first, runs)
    second, _ = _up(session, runs)
    try:
        again = cluster_of(second, runs, "opensearch")
        assert again.credentials.password != cluster.credentials.password
        assert again.ok("GET", "/kept/_count")["count"] == 1  # the data was reused
        assert again.request("GET", "/", auth=False)[0] == 401
        old = dataclasses.replace(again.credentials, password=cluster.credentials.password)
        assert dataclasses.replace(again, credentials=old).request("GET", "/")[0] == 401
    finally:
        _down(second, runs)


def test_security_off_runs_plain_http_and_says_so(shared_tmp: Path) -> None:
    import json
    import urllib.request

    runs = shared_tmp / "runs-plain"
    session = os_session(shared_tmp, "osplain", 1, track='name = "mri"')
    session.write_text(session.read_text().replace("security = true", "security = false"))
    run, output = _up(session, runs)
    try:
        assert "security is off (cluster.security = false): no TLS, no authentication" in output
        url = [line.strip() for line in output.splitlines() if "http://" in line][0]
        with urllib.request.urlopen(url + "/", timeout=30) as response:
            assert json.load(response)["version"]["distribution"] == "opensearch"
    finally:
        _down(run, runs)
