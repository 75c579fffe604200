"""A control client for a run's cluster: its backend's client, its nodes, its credentials.

Every control operation of the core (index preparation, refresh, health, node statistics)
takes its client from here, so the engine's own client library speaks to the cluster
(:class:`esdash.plugin.control.ControlClient`), never a hand-written request.
"""

from __future__ import annotations

from esdash.cluster import pki
from esdash.plugin.control import ControlClient
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.rundir.layout import RunDir
from esdash.rundir.records import NodePlan


def control_client(
    cluster_run: RunDir,
    backend_name: str,
    nodes: tuple[NodePlan, ...],
    timeout: float = 30.0,
    plugins: PluginSet | None = None,
) -> ControlClient:
    """A client of backend ``backend_name`` for ``nodes`` of the cluster of ``cluster_run``.

    With security on (the run has credentials) it speaks HTTPS, verifies the nodes against
    the cluster's CA and authenticates as the cluster's superuser.
    """
    backend = (plugins or get_plugins()).backend(backend_name)
    run = cluster_run
    credentials = pki.read_credentials(run.path) if run.credentials_file.exists() else None
    endpoints = [node.http_address for node in nodes]
    return backend.control_client(endpoints, credentials, timeout)
