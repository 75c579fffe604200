"""Sessions on the static engine: esdash's ranks measured against nodes with set answers.

The static engine (``tests/plugin_packages/esdash-static-engine``, installed by
``scripts/provision`` into ``.venv/test-plugins``) is a backend whose nodes are small HTTP
servers answering from a table, with set latencies and failure rates.  A test about esdash's
own ranks -- a signal in a phase, a killed or frozen load rank, what the results keep --
runs on it under ``mpiexec`` in seconds and without a JVM's CPU; what depends on an engine's
behaviour stays on Elasticsearch and OpenSearch.  Tests using it carry the
``static_engine`` marker (its prerequisite check is ``prereqs._check_static_engine``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from support.cli import processes

ROOT = Path(__file__).resolve().parents[2]
#: Where scripts/provision installs the test plugin packages.
TEST_PLUGINS = ROOT / ".venv" / "test-plugins"
#: The engine's "distribution": the installed package, which holds the node's server.
HOME = TEST_PLUGINS / "esdash_static_engine"


def env_for(static: bool) -> dict[str, str]:
    """The environment of an esdash command: one that finds the static engine, or this
    process's own."""
    return env() if static else dict(os.environ)


def env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an esdash command that should find the static engine."""
    found = dict(os.environ if base is None else base)
    found["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(TEST_PLUGINS), found.get("PYTHONPATH", "")) if p
    )
    return found


def cluster_table(
    *,
    search_latency: str = "2ms",
    bulk_latency: str = "1ms",
    search_failures: float = 0.0,
    bulk_rejections: float = 0.0,
) -> str:
    """The lines of a session's ``[cluster]`` table (and its backend options) that put it
    on the static engine; for ``support.cli.write_session(extra_cluster=...)``."""
    return (
        f'backend = "static-engine"\nhome = "{HOME}"\n'
        f"[cluster.backend_options]\n"
        f'search_latency = "{search_latency}"\nbulk_latency = "{bulk_latency}"\n'
        f"search_failures = {search_failures}\nbulk_rejections = {bulk_rejections}\n"
    )


def node_pids_under(run: Path) -> list[int]:
    """The static-engine node servers of run directory ``run`` (their config is under it)."""
    return [
        pid
        for pid, _ppid, cmdline in processes()
        if "esdash_static_engine" in cmdline and str(run) in cmdline
    ]
