"""One Elasticsearch node starts as the unprivileged user, answers HTTP, and stops on SIGTERM."""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest
from support.procs import is_gone

pytestmark = pytest.mark.es


def _owner(pid: int) -> str:
    return pwd.getpwuid(Path(f"/proc/{pid}").stat().st_uid).pw_name


def test_single_node_runs_as_user_and_stops(es_node_factory, es_user):
    node = es_node_factory("smoke")
    health = node.start()
    assert health["status"] in ("green", "yellow")
    assert health["number_of_nodes"] == 1

    assert node.server_pid is not None
    assert _owner(node.server_pid) == es_user != "root"
    nodes = node.get("/_nodes/_local")
    (info,) = nodes["nodes"].values()
    assert info["version"] == node.home.name.rsplit("-", 1)[-1]
    assert info["settings"]["path"]["data"] == str(node.workdir / "data")

    rc = node.stop()
    assert rc in (0, 143), node.log_tail()  # 143 = terminated by the SIGTERM we sent
    assert is_gone(node.server_pid)
