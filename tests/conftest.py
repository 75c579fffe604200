"""Shared fixtures and the prerequisite policy for the whole test suite.

Markers (declared in pyproject.toml) say what real infrastructure a test needs: ``es``,
``mpi``, ``slurm``, ``gocryptfs``, ``netns``.  A test whose prerequisite is missing is skipped
with the reason, or fails under CI (``CI=true``); the checks live in ``support/prereqs.py``.
The infrastructure fixtures check their own prerequisite too, so using one without the
marker behaves the same way.

Everything a fixture starts is stopped by PID at teardown; the test process is a child
subreaper (``support/procs.py``) so daemonised grandchildren can be reaped, and the terminal
summary lists any process a test left running.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import prereqs, procs
from support.es import EsNode
from support.net import free_ports
from support.netns import NetnsHosts
from support.slurm import SlurmCluster

#: JVM options for every search-engine node the tests start, through the engines' own
#: variables (``ES_JAVA_OPTS``, ``OPENSEARCH_JAVA_OPTS``), which esdash passes to its nodes:
#: the C1 compiler only.  The tests assert what the nodes answer, never how fast, and a node
#: that does not run the C2 compiler starts with half the CPU (a 3-node secure Elasticsearch
#: cluster: 43 CPU-seconds to green, 22 with this) on a machine where the suite runs
#: several clusters at once.  A variable set already (even empty) is kept: ``ES_JAVA_OPTS=
#: scripts/test`` runs the suite on fully compiling nodes.  ``bench/`` scripts, which
#: measure, do not read this file.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def pytest_configure(config: pytest.Config) -> None:
    procs.become_subreaper()
    for variable in ("ES_JAVA_OPTS", "OPENSEARCH_JAVA_OPTS"):
        os.environ.setdefault(variable, TEST_JVM_OPTIONS)


#: Fixtures that start or need real infrastructure whatever the test's markers say.
INFRA_FIXTURES = frozenset(
    {"es_home", "java_home", "shared_cluster", "slurm_cluster", "netns_hosts", "es_node_factory"}
)


#: Session fixtures whose users must share one test process when the integration tier runs
#: on several (pytest-xdist ``--dist loadgroup``): one cluster or daemon set per group, not
#: one per process -- and Slurm's daemons and the namespaces have fixed names and ports.
SHARED_GROUPS = (
    ("slurm_cluster", "slurm"),
    ("netns_hosts", "netns"),
    ("os_cluster", "opensearch"),
    ("shared_cluster", "es-shared"),
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers: a test that needs infrastructure (a prerequisite marker, or a fixture of
    :data:`INFRA_FIXTURES`) is ``integration``; every other test is the unit tier, which
    ``scripts/test`` runs first, alone (``-m "not integration"``), so it fails fast.

    Every test also gets an ``xdist_group``, the process that runs it when the suite runs on
    several (pytest-xdist): the shared fixture it uses (:data:`SHARED_GROUPS`), else its
    file, so a module's fixtures are made once and its tests run in their order."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        needs = any(item.get_closest_marker(name) for name in prereqs.CHECKS)
        if needs or INFRA_FIXTURES & fixtures:
            item.add_marker(pytest.mark.integration)
        group = next(
            (g for name, g in SHARED_GROUPS if name in fixtures), item.nodeid.split("::")[0]
        )
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, under CI, fail) before any fixture starts infrastructure that can't work."""
    for name in prereqs.CHECKS:
        if item.get_closest_marker(name) is not None:
            prereqs.require(name)


#: Scratch dirs kept because of ESDASH_TEST_KEEP=1, reported in the terminal summary.
_KEPT: list[Path] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Runs after session fixtures are torn down: whatever is still our child leaked."""
    leaked = procs.children()
    if leaked:
        terminalreporter.section("processes left running by tests", red=True)
        for pid, cmd in leaked:
            terminalreporter.write_line(f"pid {pid}: {cmd[:200]}")
    for path in _KEPT:
        terminalreporter.write_line(f"kept test scratch dir (ESDASH_TEST_KEEP=1): {path}")


def pytest_unconfigure(config: pytest.Config) -> None:
    procs.reap_orphans()


@pytest.fixture(scope="session")
def es_home() -> Path:
    """The Elasticsearch distribution: ``ESDASH_TEST_ES_HOME`` or the newest in the cache."""
    prereqs.require("es")
    home = prereqs.es_home()
    assert home is not None  # guaranteed by the "es" check
    return home


@pytest.fixture(scope="session")
def es_user() -> str:
    """The unprivileged user for Elasticsearch and gocryptfs (``ESDASH_TEST_USER``)."""
    return prereqs.es_user()


@pytest.fixture(scope="session")
def java_home() -> Path:
    """The JDK for ``ES_JAVA_HOME`` (the integ-test-zip bundles none)."""
    prereqs.require("es")
    home = prereqs.java_home()
    assert home is not None
    return home


@pytest.fixture(scope="session")
def shared_tmp() -> Iterator[Path]:
    """A session scratch dir every user can traverse (pytest's own tmp dirs are 0700).

    Give subdirectories to the unprivileged user with ``support.procs.user_dir``.  Set
    ``ESDASH_TEST_KEEP=1`` to keep it (logs of daemons and nodes) after the run.
    """
    path = Path(tempfile.mkdtemp(prefix=f"esdash-test-{os.getpid()}-"))
    path.chmod(0o755)
    yield path
    if os.environ.get("ESDASH_TEST_KEEP") == "1":
        _KEPT.append(path)
    else:
        shutil.rmtree(path)


@pytest.fixture(scope="session")
def shared_cluster(shared_tmp: Path) -> Iterator[tuple[Path, Path]]:
    """A secure 2-node cluster (``esdash cluster up``) for tests that do not hurt it.

    Yields its run directory and the runs directory; ``esdash run --cluster RUN`` attaches
    to it.  Tests that kill or stop nodes start their own.
    """
    prereqs.require("es")
    prereqs.require("mpi")
    from support.cli import esdash, java_pids_under, run_dir_from, write_session

    runs = shared_tmp / "runs"
    session = write_session(shared_tmp, "benchc", 2, track='name = "mri"\ndocuments = 1500')
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs).stdout)
    try:
        yield run, runs
    finally:
        esdash("cluster", "down", str(run), env_runs=runs)
        assert java_pids_under(run) == []


@pytest.fixture(scope="session")
def slurm_cluster(shared_tmp: Path) -> Iterator[SlurmCluster]:
    """A private Slurm (own munged, slurmctld, slurmd ``lo1..lo3`` with CPUs=4 each), idle."""
    prereqs.require("slurm")
    cluster = SlurmCluster.start(shared_tmp / "slurm")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def netns_hosts() -> Iterator[NetnsHosts]:
    """Three network namespaces with "eth" (127.77.0.1N) and "opa" (127.78.0.1N) links."""
    prereqs.require("netns")
    hosts = NetnsHosts.create(3)
    try:
        yield hosts
    finally:
        hosts.destroy()


@pytest.fixture
def es_node_factory(
    es_home: Path, es_user: str, java_home: Path, shared_tmp: Path
) -> Iterator[Callable[..., EsNode]]:
    """Make (not start) single Elasticsearch nodes; every node made is stopped at teardown.

    ``factory(name, **overrides)`` returns an :class:`EsNode` in ``shared_tmp/es/<name>`` on
    free loopback ports; call ``.start()`` on it.
    """
    made: list[EsNode] = []

    def factory(name: str, **overrides: object) -> EsNode:
        http_port, transport_port = free_ports(2)
        fields: dict = {
            "home": es_home,
            "user": es_user,
            "java_home": java_home,
            "workdir": shared_tmp / "es" / name,
            "http_port": http_port,
            "transport_port": transport_port,
        }
        fields.update(overrides)
        node = EsNode(**fields)
        made.append(node)
        return node

    yield factory
    for node in made:
        node.stop()
