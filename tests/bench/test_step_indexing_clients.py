"""The clients of a step's indexing load, against a real node of the shared cluster.

Without MPI or a run: :class:`IndexingRun` threads send a small corpus to an index of their
own.  A client whose part is sent stops (only ``ingest-percentage`` of it is sent, split so
that the clients send different documents), a looped client keeps sending until the rank
is aborted (it stops then, and the abort is what :meth:`IndexingRun.finish` raises) or
until the step's end.  Waits have generous bounds; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from esdash.bench.rank_state import Aborted
from esdash.bench.recorder import SharedRecorder
from esdash.bench.step_indexing import IndexingClient, IndexingRun, documents_to_send
from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.http import Connection, Target
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin.values import Corpus
from esdash.rundir.layout import RunDir
from esdash.rundir.records import PlannedIndexing

pytestmark = [pytest.mark.es, pytest.mark.mpi]  # the shared cluster is started with MPI

DOCUMENTS = 30


@pytest.fixture
def target(shared_cluster: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Any, ...]]:
    """A fresh index, a corpus of 30 documents, a control client and a connection maker."""
    run = RunDir.open(shared_cluster[0])
    nodes = run.read_topology().nodes
    control = control_client(run, "elasticsearch", nodes)
    credentials = pki.read_credentials(shared_cluster[0])
    index = f"step-clients-{uuid.uuid4().hex[:8]}"
    control.create_index(index, {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    corpus = tmp_path / "docs.json"
    corpus.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(DOCUMENTS)))

    def connect() -> Connection:
        return Connection(Target(nodes[0].name, nodes[0].http_address, True), credentials, 60.0)

    try:
        yield index, corpus, control, connect
    finally:
        control.delete_index(index)
        control.close()


def load_of(index: str, corpus: Path, **more: object) -> PlannedIndexing:
    return PlannedIndexing(
        name="during",
        index=index,
        corpus_path=str(corpus),
        corpus_documents=DOCUMENTS,
        bulk_size=4,
        **more,  # type: ignore[arg-type]
    )


def clients_of(load: PlannedIndexing, connect: Any) -> list[IndexingClient]:
    parts = plan_slices(Corpus(Path(load.corpus_path), load.corpus_documents), load.clients)
    return [IndexingClient(load, n, connect(), parts[n]) for n in range(load.clients)]


def test_clients_send_their_share_of_their_own_parts_and_stop(target: tuple[Any, ...]) -> None:
    index, corpus, control, connect = target
    load = load_of(index, corpus, clients=2, ingest_percentage=50.0)
    clients = clients_of(load, connect)
    recorder = SharedRecorder(1)
    run = IndexingRun(clients, time.time() + 600, recorder, lambda: None)
    run.start()
    for thread in run.threads:  # each stops once its part is sent, long before the end
        thread.join(timeout=120)
        assert not thread.is_alive()
    indexed = run.finish()
    expected = sum(documents_to_send(c.part, 50.0) for c in clients)
    assert indexed == {"during": expected} and expected == 16  # 8 of each 15
    control.refresh(index)
    answer = control.request(
        "search", "POST", f"/{index}/_search", {"size": 100, "sort": ["n"], "_source": ["n"]}
    )
    found = [hit["_source"]["n"] for hit in answer["hits"]["hits"]]
    assert found == [*range(8), *range(15, 23)]  # the first half of each client's part
    payload = recorder.drain()
    assert payload.ops["during"].docs == expected


def test_a_looped_client_runs_until_the_rank_is_aborted(target: tuple[Any, ...]) -> None:
    index, corpus, control, connect = target
    load = load_of(index, corpus, looped=True)
    clients = clients_of(load, connect)
    aborted: list[str] = []

    def watch() -> None:
        if aborted:
            raise Aborted(aborted[0])

    run = IndexingRun(clients, time.time() + 600, SharedRecorder(1), watch)
    run.start()
    deadline = time.monotonic() + 120
    while clients[0].indexed <= DOCUMENTS and time.monotonic() < deadline:
        time.sleep(0.05)  # looped: more than the corpus once
    assert clients[0].indexed > DOCUMENTS
    aborted.append("SIGTERM")
    with pytest.raises(Aborted, match="SIGTERM"):
        run.finish()
    assert not any(thread.is_alive() for thread in run.threads)


def test_a_looped_client_stops_at_the_steps_end(target: tuple[Any, ...]) -> None:
    index, corpus, _, connect = target
    load = load_of(index, corpus, looped=True)
    run = IndexingRun(clients_of(load, connect), time.time() + 1, SharedRecorder(1), lambda: None)
    run.start()
    for thread in run.threads:  # nobody stops it: the end does
        thread.join(timeout=120)
        assert not thread.is_alive()
    run.finish()
