"""The OpenSearch control client against the shared secure OpenSearch cluster.

Mirrors ``tests/cluster/test_control.py`` (Elasticsearch): every operation of
:class:`esdash.plugin.control.ControlClient` once, on an index and a data stream of this
module's own; the engine is recognised from response headers; refusals come back as
:class:`ControlError` naming the operation, the engine's reason and the HTTP status.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from engines import Cluster

from esdash.cluster.control import control_client
from esdash.plugin.control import OPENSEARCH, ControlClient, ControlError
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

INDEX = "control-test"


@pytest.fixture(scope="module")
def control(os_cluster: Cluster) -> Iterator[ControlClient]:
    run = RunDir.open(os_cluster.run)
    client = control_client(run, "opensearch", run.read_topology().nodes)
    try:
        yield client
    finally:
        client.delete_index(INDEX)
        client.close()


def test_info_names_the_engine_and_version(control: ControlClient) -> None:
    info = control.info()
    assert info.engine == OPENSEARCH
    assert info.version == "3.4.0"
    assert info.cluster_name == "esdash-osbench"
    assert control.engine == OPENSEARCH and 503 in control.retry_statuses


def test_health_waits_and_a_timed_out_wait_is_a_result(control: ControlClient) -> None:
    health = control.health(wait_for_status="green", wait_for_nodes="2", timeout=60)
    assert health.ok and health.status == "green" and health.number_of_nodes == 2
    assert health.timed_out is False
    waited = control.health(wait_for_nodes=">=5", timeout=1)
    assert waited.timed_out is True and waited.number_of_nodes == 2
    quiet = control.health(
        wait_for_no_relocating_shards=True, wait_for_no_initializing_shards=True, timeout=30
    )
    assert quiet.ok and quiet.timed_out is False


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
    assert "docs" in control.index_stats(INDEX)["indices"][INDEX]["primaries"]
    flat = control.index_settings(INDEX)[INDEX]
    assert flat["settings"]["index.number_of_shards"] == "2"
    assert "index.codec" in flat["defaults"]  # read back with the defaults
    with pytest.raises(ControlError) as refused:
        control.create_index(INDEX, body)
    assert refused.value.status == 400 and refused.value.operation == "create index"
    assert "resource_already_exists_exception" in str(refused.value)
    control.delete_index(INDEX)
    assert not control.index_exists(INDEX)
    with pytest.raises(ControlError) as missing:
        control.count(INDEX)
    assert missing.value.status == 404 and "index_not_found_exception" in str(missing.value)


def test_node_stats_have_every_node_and_opensearch_roles(control: ControlClient) -> None:
    nodes = control.node_stats(["jvm", "thread_pool"])["nodes"]
    assert len(nodes) == 2
    assert all("heap_used_percent" in n["jvm"]["mem"] for n in nodes.values())
    info = control.nodes_info(["jvm"])["nodes"]
    assert len(info) == 2 and all(n["jvm"]["version"] for n in info.values())
    every = control.node_stats()["nodes"]
    roles = {n["name"]: n["roles"] for n in every.values()}
    assert any("cluster_manager" in r for r in roles.values()), roles
    assert not any("master" in r for r in roles.values()), roles


def test_templates_and_data_streams(control: ControlClient) -> None:
    """Data streams are part of OpenSearch's core: the assembled distribution has them."""
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
    control.create_data_stream("control-test-logs")
    assert control.index_exists("control-test-logs")
    control.delete_data_stream("control-test-logs")
    assert not control.index_exists("control-test-logs")


def test_wrong_password_is_a_401_control_error(os_cluster: Cluster) -> None:
    wrong = dataclasses.replace(os_cluster.credentials, password="not-the-password")
    endpoints = [url.removeprefix("https://") for url in os_cluster.urls]
    backend = get_plugins().backend("opensearch")
    with backend.control_client(endpoints, wrong) as client, pytest.raises(ControlError) as refused:
        client.health()
    assert refused.value.status == 401 and refused.value.operation == "cluster health"


def test_an_unreachable_node_is_a_control_error_without_status() -> None:
    backend = get_plugins().backend("opensearch")
    client = backend.control_client(["127.0.0.1:9"], None, timeout=2)
    with client, pytest.raises(ControlError) as refused:
        client.health()
    assert refused.value.status is None and "cluster health" in str(refused.value)


def test_the_elasticsearch_client_refuses_opensearch(os_cluster: Cluster) -> None:
    """Engines are told apart by headers: elasticsearch-py names the engine that answered."""
    endpoints = [url.removeprefix("https://") for url in os_cluster.urls]
    backend = get_plugins().backend("elasticsearch")
    client = backend.control_client(endpoints, os_cluster.credentials)
    with client, pytest.raises(ControlError) as refused:
        client.info()
    assert "opensearch" in str(refused.value)


@pytest.mark.es
def test_the_opensearch_client_refuses_elasticsearch(es_cluster: Cluster) -> None:
    endpoints = [url.removeprefix("https://") for url in es_cluster.urls]
    backend = get_plugins().backend("opensearch")
    client = backend.control_client(endpoints, es_cluster.credentials)
    with client, pytest.raises(ControlError) as refused:
        client.info()
    assert "not OpenSearch" in str(refused.value)
