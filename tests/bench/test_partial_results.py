"""A search that only some shards answered is an error of its own class, never a success.

On the session's shared secure cluster: two indices map the same field differently, so a
range on it fails on one index's shards and succeeds on the other's -- HTTP 200 with
``_shards.failed`` > 0, exactly what live nodes answer when a node holding shards is gone.
The real load generator and recorder count it as ``partial``; the warm-up refuses it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from esdash.bench import loadgen
from esdash.bench.recorder import Recorder
from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.http import Connection, Target
from esdash.rundir.layout import RunDir
from esdash.stats.merge import Merged

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDICES = {"partial-a": "keyword", "partial-b": "long"}


@pytest.fixture(scope="module")
def connection(shared_cluster: tuple[Path, Path]) -> Iterator[Connection]:
    run = RunDir.open(shared_cluster[0])
    nodes = run.read_topology().nodes
    control = control_client(run, "elasticsearch", nodes)
    for index, kind in INDICES.items():
        control.delete_index(index)
        control.create_index(index, {"mappings": {"properties": {"f": {"type": kind}}}})
    node = nodes[0]
    connection = Connection(
        Target(node.name, node.http_address, True), pki.read_credentials(run.path), 30.0
    )
    try:
        yield connection
    finally:
        connection.close()
        for index in INDICES:
            control.delete_index(index)
        control.close()


def test_shard_failures_are_partial_errors_and_whole_answers_are_not(connection: Connection):
    broken = loadgen.PreparedQuery.of(
        "broken", ",".join(INDICES), {"query": {"range": {"f": {"gte": "abc"}}}}
    )
    whole = loadgen.PreparedQuery.of("whole", ",".join(INDICES), {"query": {"match_all": {}}})
    status, body = connection.request("POST", broken.path, broken.body)
    assert status == 200 and loadgen.partial_reason(body) == "1 of 2 shards failed: partial results"
    status, body = connection.request("POST", whole.path, whole.body)
    assert status == 200 and loadgen.partial_reason(body) is None

    recorder = Recorder(rank=1)
    loadgen.measure(connection, [broken, whole], time.time() + 1.0, recorder, lambda: None)
    ops = Merged().add(recorder.drain(), rank=1).ops
    assert ops["broken"].ok == 0 and ops["broken"].errors == {"partial": ops["broken"].requests}
    assert ops["broken"].last_errors["partial"][0].message.startswith("1 of 2 shards failed")
    assert ops["whole"].ok == ops["whole"].requests > 0 and ops["whole"].errors == {}

    with pytest.raises(loadgen.WarmupFailed, match="1 of 2 shards failed"):
        loadgen.warm_up(connection, [broken], time.time(), Recorder(rank=1), lambda: None)
