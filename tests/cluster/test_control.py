"""The Elasticsearch control client against the session's real secure cluster.

Every operation of :class:`esdash.plugin.control.ControlClient` is exercised once, on an
index and a data stream of this module's own; the engine is recognised from response
headers; refusals come back as :class:`ControlError` naming the operation, the engine's
reason and the HTTP status.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from esdash.cluster.control import control_client
from esdash.plugin.control import ELASTICSEARCH, OPENSEARCH, ControlClient, ControlError, engine_of
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDEX = "control-test"


@pytest.fixture(scope="module")
def control(shared_cluster: tuple[Path, Path]) -> Iterator[ControlClient]:
    run = RunDir.open(shared_cluster[0])
    client = control_client(run, "elasticsearch", run.read_topology().nodes)
    try:
        yield client
    finally:
        client.delete_index(INDEX)
        client.close()


def test_engine_is_told_from_headers_not_versions() -> None:
    assert engine_of({"X-Elastic-Product": "Elasticsearch"}) == ELASTICSEARCH
    assert engine_of({"x-elastic-product": "elasticsearch"}) == ELASTICSEARCH
    assert engine_of({"X-OpenSearch-Version": "3.4.0"}) == OPENSEARCH
    assert engine_of({"Content-Type": "application/json"}) is None


def test_info_names_the_engine_and_version(control: ControlClient) -> None:
    info = control.info()
    assert info.engine == ELASTICSEARCH
    assert info.version.startswith("8.")
    assert info.cluster_name == "esdash-benchc"
    assert control.engine == ELASTICSEARCH and 503 in control.retry_statuses


def test_health_waits_and_a_timed_out_wait_is_a_result(control: ControlClient) -> None:
    health = control.health(wait_for_status="green", wait_for_nodes="2", timeout=60)
    assert health.ok and health.status == "green" and health.number_of_nodes == 2
    assert health.timed_out is False
    waited = control.health(wait_for_nodes=">=5", timeout=1)
    assert waited.timed_out is True and waited.number_of_nodes == 2


def test_index_lifecycle(control: ControlClient) -> None:
    control.delete_index(INDEX)  # absent: nothing to do, no error
    assert not control.index_exists(INDEX)
    body = {
        "settings": {"number_of_shards": 2, "number_of_replicas": 0},
        "mappings": {"_meta": {"layout": "plain"}, "properties": {"n": {"type": "long"}}},
    }
    control.create_index(INDEX, body)
    assert control.index_exists(INDEX)
    assert control.index_meta(INDEX) == {"layout": "plain"}
    assert control.count(INDEX) == 0
    control.refresh(INDEX)
    control.flush(INDEX)
    control.force_merge(INDEX, max_num_segments=1)
    stats = control.index_stats(INDEX, ["docs"])
    assert stats["indices"][INDEX]["primaries"]["docs"]["count"] == 0
    flat = control.index_settings(INDEX)[INDEX]
    assert flat["settings"]["index.number_of_shards"] == "2"
    assert "index.codec" in flat["defaults"]  # read back with the defaults
    with pytest.raises(ControlError) as refused:
        control.create_index(INDEX, body)
    assert refused.value.status == 400 and refused.value.operation == "create index"
    assert "resource_already_exists_exception" in str(refused.value)
    control.delete_index(INDEX)
    assert not control.index_exists(INDEX)


def test_node_stats_have_every_node(control: ControlClient) -> None:
    nodes = control.node_stats(["jvm", "thread_pool"])["nodes"]
    assert len(nodes) == 2
    assert all("heap_used_percent" in n["jvm"]["mem"] for n in nodes.values())
    info = control.nodes_info(["jvm"])["nodes"]
    assert len(info) == 2 and all(n["jvm"]["version"] for n in info.values())


def test_templates_and_data_streams(control: ControlClient, es_home: Path) -> None:
    """Templates are core; data streams need a module the integ-test-zip leaves out."""
    control.put_component_template(
        "control-test-settings", {"template": {"settings": {"number_of_replicas": 0}}}
    )
    control.put_index_template(
        "control-test-logs",
        {
            "index_patterns": ["control-test-logs*"],
            "data_stream": {},
            "composed_of": ["control-test-settings"],
            "priority": 500,
        },
    )
    if "data-streams" not in get_plugins().backend("elasticsearch").inspect(es_home).modules:
        with pytest.raises(ControlError) as refused:
            control.create_data_stream("control-test-logs")
        assert refused.value.status == 405 and "_data_stream/control-test-logs" in str(
            refused.value
        )
        return
    control.create_data_stream("control-test-logs")
    assert control.index_exists("control-test-logs")
    control.delete_data_stream("control-test-logs")
    assert not control.index_exists("control-test-logs")


def test_wrong_password_is_a_401_control_error(shared_cluster: tuple[Path, Path]) -> None:
    from esdash.cluster import pki

    run = RunDir.open(shared_cluster[0])
    real = pki.read_credentials(run.path)
    wrong = dataclasses.replace(real, password="not-the-password")
    endpoints = [node.http_address for node in run.read_topology().nodes]
    backend = get_plugins().backend("elasticsearch")
    with backend.control_client(endpoints, wrong) as client, pytest.raises(ControlError) as refused:
        client.health()
    assert refused.value.status == 401 and refused.value.operation == "cluster health"
