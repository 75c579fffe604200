"""Ingest into a data stream on the shared OpenSearch cluster: preparation and ``create``.

A data stream accepts only ``create`` actions and has no ``_meta.esdash`` of its own, so a
plan marks it (``PlannedIndex.data_stream``): rank 0's preparation deletes an existing
stream of that name (as Rally does) and leaves it to the index template to make it anew on
the first document, and the bulk bodies of its corpus carry ``{"create": ...}`` lines.  A
plain index of that name is refused, never deleted.  (Elasticsearch's integ-test zip lacks
the data-streams module, so this runs on OpenSearch.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import Cluster

from esdash.bench.index_reuse import IndexRefused, prepare_index
from esdash.bench.slices import read_slice
from esdash.cluster.control import control_client
from esdash.plugin.control import ControlClient
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin.index_stamp import stamp_index_body
from esdash.plugin.values import Corpus
from esdash.rundir.layout import RunDir
from esdash.rundir.records import BenchPlan, PlannedIndex

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

MAIN, STREAM, PLAIN = "dsi-main", "dsi-stream-x", "plain-dsi"
TEMPLATE = {
    "index_patterns": ["dsi-stream-*"],
    "data_stream": {},
    "template": {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"@timestamp": {"type": "date"}, "n": {"type": "integer"}}},
    },
}


@pytest.fixture(scope="module")
def control(os_cluster: Cluster) -> Iterator[ControlClient]:
    run = RunDir.open(os_cluster.run)
    client = control_client(run, "opensearch", run.read_topology().nodes)
    try:
        yield client
    finally:
        os_cluster.request("DELETE", f"/_data_stream/{STREAM}")
        os_cluster.request("DELETE", "/_index_template/dsi-template")
        for index in (MAIN, PLAIN):
            client.delete_index(index)
        client.close()


def write_corpus(path: Path, count: int) -> Corpus:
    path.write_text(
        "".join(
            json.dumps({"@timestamp": 1_700_000_000_000 + n * 1000, "n": n}) + "\n"
            for n in range(count)
        )
    )
    return Corpus(path, count)


def plan_of(main: Corpus, stream: Corpus, name: str = STREAM) -> BenchPlan:
    body = {"settings": {"number_of_shards": 1, "number_of_replicas": 0}}
    return BenchPlan(
        index=MAIN,
        index_body=stamp_index_body(body, {"documents": main.documents}),
        corpus_path=str(main.path),
        corpus_documents=main.documents,
        corpus_has_actions=False,
        bulk_size=7,
        steps=(),
        interval=1.0,
        seed=1,
        ranks=1,
        more_indices=(
            PlannedIndex(
                name=name,
                body={},
                corpus_path=str(stream.path),
                corpus_documents=stream.documents,
                op_type="create",
                data_stream=True,
            ),
        ),
    )


def ingest(cluster: Cluster, plan: BenchPlan, offsets: Path) -> None:
    """Every index's corpus as one rank sends it: its slice's bulk bodies, in order."""
    for unit in plan.all_indices:
        corpus = Corpus(Path(unit.corpus_path), unit.corpus_documents)
        (part,) = plan_slices(corpus, 1, offsets)
        for batch in read_slice(corpus, part, plan.bulk_size, unit.name, op_type=unit.op_type):
            answer = cluster.ok("POST", "/_bulk", batch.body.decode(), ndjson=True)
            assert answer["errors"] is False, answer
    cluster.ok("POST", f"/{plan.index_names}/_refresh")


def test_a_data_stream_is_made_anew_and_filled_with_create_actions(
    os_cluster: Cluster, control: ControlClient, tmp_path: Path
) -> None:
    cluster = os_cluster
    cluster.request("DELETE", f"/_data_stream/{STREAM}")
    control.delete_index(MAIN)
    cluster.ok("PUT", "/_index_template/dsi-template", TEMPLATE)
    # a stream left by an earlier run, holding other documents
    cluster.ok("POST", f"/{STREAM}/_doc?refresh=true", {"@timestamp": 1, "n": -1})
    plan = plan_of(write_corpus(tmp_path / "main.json", 12), write_corpus(tmp_path / "s.json", 30))
    assert plan.data_streams == (STREAM,)

    prepared = prepare_index(plan, control)
    assert prepared["indices"] == [MAIN, STREAM]
    assert f"data stream {STREAM} deleted and ingested anew" in prepared["reason"]
    assert not control.index_exists(STREAM)  # the template makes it on the first document
    ingest(cluster, plan, tmp_path / "offsets")

    streams = cluster.ok("GET", f"/_data_stream/{STREAM}")["data_streams"]
    assert [s["name"] for s in streams] == [STREAM]
    assert control.count(STREAM) == 30 and control.count(MAIN) == 12

    # again: the index is reused by its fingerprint, the stream is made anew
    prepared = prepare_index(plan, control)
    assert prepared["indices"] == [STREAM]
    assert f"index {MAIN} reused with 12 documents" in prepared["reason"]
    ingest(cluster, plan, tmp_path / "offsets")
    assert control.count(STREAM) == 30


def test_a_plain_index_of_the_streams_name_is_refused_and_kept(
    os_cluster: Cluster, control: ControlClient, tmp_path: Path
) -> None:
    control.delete_index(PLAIN)
    control.create_index(PLAIN, {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    plan = plan_of(
        write_corpus(tmp_path / "main.json", 3), write_corpus(tmp_path / "s.json", 3), PLAIN
    )
    with pytest.raises(IndexRefused, match=f"{PLAIN} exists but is not a data stream"):
        prepare_index(plan, control)
    assert control.index_exists(PLAIN)
