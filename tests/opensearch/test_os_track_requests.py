"""A track's administrative requests through the OpenSearch control client, for real.

Rank 0 sends Rally's administrative tasks with :meth:`ControlClient.request` (opensearch-py's
``transport.perform_request``); here :func:`esdash.bench.track_requests.send` sends a few
against the shared OpenSearch cluster: a composable template put and read back, a query
string kept, a delete of a missing data stream that Rally lets pass (404), an error answer
recorded with its status and a request that never reaches a cluster stopping the phase.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from engines import Cluster

from esdash.bench.track_requests import AFTER_INGEST, TrackRequestFailed, send
from esdash.cluster.control import control_client
from esdash.plugin.control import ControlClient, ControlError
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir
from esdash.rundir.records import PlannedRequest

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

TEMPLATE = "esdash-os-oneoff"


@pytest.fixture(scope="module")
def control(os_cluster: Cluster) -> Iterator[ControlClient]:
    run = RunDir.open(os_cluster.run)
    client = control_client(run, "opensearch", run.read_topology().nodes)
    try:
        yield client
    finally:
        with contextlib.suppress(ControlError):
            client.request("cleanup", "DELETE", f"/_index_template/{TEMPLATE}", None)
        client.close()


def request(name: str, method: str, path: str, **more: object) -> PlannedRequest:
    fields: dict[str, object] = {"when": AFTER_INGEST, **more}
    return PlannedRequest(name=name, operation="raw-request", method=method, path=path, **fields)


def test_requests_are_sent_once_and_recorded(control: ControlClient) -> None:
    body = {"index_patterns": ["esdash-os-oneoff-never-*"], "priority": 7}
    planned = [
        request("put", "PUT", f"/_index_template/{TEMPLATE}", body=body),
        request("gone", "DELETE", "/_data_stream/esdash-os-no-such-stream", missing_ok=True),
        request("missing", "GET", "/esdash-os-no-such-index/_settings"),
        request("before", "GET", "/_cluster/health", when="before-ingest"),
    ]
    results = send(control, planned, AFTER_INGEST)
    assert [(r.name, r.status, r.http_status) for r in results] == [
        ("put", "ok", None),
        ("gone", "ok", None),  # a 404 Rally ignores
        ("missing", "error", 404),  # an error answer: recorded, the phase goes on
    ]
    assert "index_not_found_exception" in (results[2].error or "")
    answer = control.request("read", "GET", f"/_index_template/{TEMPLATE}?flat_settings=true", None)
    (template,) = answer["index_templates"]
    assert template["index_template"]["priority"] == 7


def test_no_answer_stops_the_phase() -> None:
    backend = get_plugins().backend("opensearch")
    nowhere = backend.control_client(["127.0.0.1:9"], None, 5.0)  # nothing listens there
    try:
        planned = [request("lost", "GET", "/_cluster/health"), request("never", "GET", "/")]
        with pytest.raises(TrackRequestFailed, match="'lost'.*got no answer") as failed:
            send(nowhere, planned, AFTER_INGEST)
        assert [r.name for r in failed.value.sent] == ["lost"]
        assert failed.value.result.http_status is None
    finally:
        nowhere.close()
