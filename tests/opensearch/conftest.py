"""The OpenSearch tests' one cluster: secure, 2 nodes, started once per test session.

Every test in this directory that needs a running OpenSearch shares :func:`os_cluster`
(``esdash cluster up`` of a 2-node secure session, ``esdash cluster down`` at the end), so the
suite pays OpenSearch's start-up once.  Its prerequisites (the assembled distribution with
painless and the security plugin, a Java >= 21, the unprivileged user, MPI) are checked by
``support.prereqs``: a missing one skips the tests on a developer machine and **fails** them
under CI.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import Cluster, cluster_of, os_session
from support import prereqs
from support.cli import esdash, java_pids_under, run_dir_from

#: Seconds from ``esdash cluster up`` to a green cluster, for the report of a test run.
STARTUP: dict[str, float] = {}


@pytest.fixture(scope="session")
def os_cluster(shared_tmp: Path) -> Iterator[Cluster]:
    """A secure 2-node OpenSearch cluster (``esdash cluster up``) shared by every test here."""
    prereqs.require("opensearch")
    prereqs.require("mpi")
    runs = shared_tmp / "runs"
    session = os_session(shared_tmp, "osbench", 2, track='name = "mri"\ndocuments = 1500')
    started = time.monotonic()
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, timeout=600).stdout)
    STARTUP["opensearch-2-nodes"] = time.monotonic() - started
    try:
        yield cluster_of(run, runs, "opensearch")
    finally:
        esdash("cluster", "down", str(run), env_runs=runs)
        assert java_pids_under(run) == []


@pytest.fixture(scope="session")
def es_cluster(shared_cluster: tuple[Path, Path]) -> Cluster:
    """The suite's shared secure 2-node Elasticsearch cluster, in this directory's terms."""
    return cluster_of(shared_cluster[0], shared_cluster[1], "elasticsearch")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for what, seconds in STARTUP.items():
        terminalreporter.write_line(f"{what}: green after {seconds:.1f} s (esdash cluster up)")
