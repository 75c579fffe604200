"""Index reuse by fingerprint against the session's shared 2-node cluster (``run --cluster``).

One sequence of short runs on index ``mri`` (300 documents, one 1-second ``match_all`` step):
the same session twice is reused; another corpus seed and then another shard count are
re-ingested with the difference named; ``--reuse-index=require`` with a difference refuses
before any load and leaves the index as it was; an index esdash did not create is refused
by name and left in place, also with ``--reingest``.  The pure decision is tested in
``test_index_reuse.py``; here the point is the whole path: plan, rank 0, stream, output.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster import pki
from esdash.cluster.control import control_client
from esdash.cluster.http import Connection, Target
from esdash.plugin.control import ControlClient
from esdash.plugin.index_stamp import META_KEY
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDEX = "mri"  # the mri track's index
DOCUMENTS = 300
STEP = {
    "name": "all",
    "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
    "warmup_time_secs": 0,
    "execution_time_secs": 1,
}


@pytest.fixture(scope="module")
def cluster(shared_cluster: tuple[Path, Path]) -> Iterator[tuple[Path, Path, ControlClient]]:
    """The shared cluster, its runs directory and a control client; no foreign ``mri`` left."""
    run = RunDir.open(shared_cluster[0])
    control = control_client(run, "elasticsearch", run.read_topology().nodes)
    try:
        yield shared_cluster[0], shared_cluster[1], control
    finally:
        meta = control.index_meta(INDEX) if control.index_exists(INDEX) else None
        if not (meta and META_KEY in meta):
            control.delete_index(INDEX)  # a foreign index would stop every later mri run
        control.close()


def session(directory: Path, name: str, seed: int, shards: int) -> Path:
    steps = directory / "reuse-steps.json"
    steps.write_text(json.dumps([STEP]))
    track = f'name = "mri"\ndocuments = {DOCUMENTS}\nseed = {seed}\nshards = {shards}'
    bench = (
        '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 300\n'
        f'after_ingest = "none"\nqueries = "{steps}"\n'
    )
    return write_session(directory, name, 2, track=track, tables=bench)


@dataclass
class Outcome:
    """One ``esdash run --cluster``: exit code, output, and what its stream says."""

    code: int
    output: str
    #: The ``index`` and ``failed`` events' messages (None: no such event).
    index: str | None
    failed: str | None
    #: Whether any worker sent a bulk request.
    ingested: bool
    #: Whether any interval record carries ingest progress ("12.0 % (120/1,000 docs)").
    progress: bool


def bench(cluster: tuple[Path, Path, ControlClient], path: Path, *args: str) -> Outcome:
    run, runs, _ = cluster
    result: subprocess.CompletedProcess = esdash(
        "run", str(path), "--cluster", str(run), *args, env_runs=runs, timeout=300, check=False
    )
    output = result.stdout + result.stderr
    found = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
    assert found, output
    stream = Path(found[0].split(": ", 1)[1]).parent / "stream.jsonl"
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    events = {r["kind"]: r["message"] for r in records if r["type"] == "event"}
    ingested = any(r["type"] == "interval" and r["phase"] == "ingest" and r["ops"] for r in records)
    progress = any(r["type"] == "interval" and r.get("ingest") for r in records)
    index, failed = events.get("index"), events.get("failed")
    return Outcome(result.returncode, output, index, failed, ingested, progress)


def ran(outcome: Outcome) -> bool:
    """The run got past the index: it ended ok, or failed later for its own reasons.

    The index decision is what is tested here; a run marked failed afterwards (on this
    shared 2-core machine a slow bulk request can count as a lost node) still made it.
    """
    return outcome.code == 0 or (outcome.code == 1 and "run ended: failed" in outcome.output)


def stamp(control: ControlClient) -> dict:
    meta = control.index_meta(INDEX)
    assert meta is not None and META_KEY in meta, meta
    return meta[META_KEY]


def test_reuse_reingest_and_refusal_by_fingerprint(
    cluster: tuple[Path, Path, ControlClient], shared_tmp: Path
) -> None:
    control = cluster[2]
    directory = shared_tmp / "index-reuse"
    directory.mkdir(exist_ok=True)
    first = session(directory, "reuse-a", seed=1, shards=1)
    # whatever earlier tests left in mri: start from this session's index
    done = bench(cluster, first, "--reingest")
    assert ran(done) and control.count(INDEX) == DOCUMENTS, done.output
    assert (done.index or "").startswith(f"index {INDEX} created"), done.output

    done = bench(cluster, first)
    assert ran(done) and control.count(INDEX) == DOCUMENTS, done.output
    assert done.index == f"index {INDEX} reused with {DOCUMENTS} documents"
    assert f"index {INDEX} reused with {DOCUMENTS} documents" in done.output
    assert not done.ingested
    # no record, line or screen speaks of an ingest that does not happen
    assert not done.progress and "% (0/" not in done.output, done.output

    seeded = session(directory, "reuse-b", seed=2, shards=1)
    done = bench(cluster, seeded)
    assert ran(done) and control.count(INDEX) == DOCUMENTS, done.output
    message = done.index or ""
    assert message.startswith(
        f"index {INDEX} created anew: the existing one differed in corpus ("
    ), message
    assert "seed 1, planned 2" in message and message in done.output
    assert done.ingested and done.progress
    assert stamp(control)["fingerprint"]["corpus"]["origin"]["seed"] == 2

    sharded = session(directory, "reuse-c", seed=2, shards=2)
    done = bench(cluster, sharded)
    assert ran(done) and control.count(INDEX) == DOCUMENTS, done.output
    message = done.index or ""
    assert "differed in settings (index.number_of_shards 1, planned 2)" in message, message
    assert control.count(INDEX) == DOCUMENTS

    before = stamp(control)
    done = bench(cluster, first, "--reuse-index=require")
    assert done.code != 0, done.output
    assert done.index is None and not done.ingested
    reason = done.failed or ""
    assert f"index {INDEX} differs from this session's in corpus (seed 2, planned 1)" in reason
    assert "settings (index.number_of_shards 2, planned 1)" in reason
    assert "--reuse-index=require" in reason and "\n" not in reason and reason in done.output
    assert stamp(control) == before and control.count(INDEX) == DOCUMENTS  # untouched


def test_an_index_esdash_did_not_create_is_refused_and_kept(
    cluster: tuple[Path, Path, ControlClient], shared_tmp: Path
) -> None:
    run, _, control = cluster
    control.delete_index(INDEX)
    control.create_index(
        INDEX,
        {
            "settings": {"number_of_shards": 1},
            "mappings": {"properties": {"x": {"type": "keyword"}}},
        },
    )
    node = RunDir.open(run).read_topology().nodes[0]
    connection = Connection(Target(node.name, node.http_address, True), pki.read_credentials(run))
    try:
        bulk = b"".join(b'{"index":{}}\n{"x":"mine-%d"}\n' % n for n in range(5))
        status, body = connection.request(
            "POST", f"/{INDEX}/_bulk?refresh=true", bulk, "application/x-ndjson"
        )
        assert status == 200 and not json.loads(body)["errors"], body
    finally:
        connection.close()
    directory = shared_tmp / "index-reuse"
    directory.mkdir(exist_ok=True)
    path = session(directory, "reuse-f", seed=1, shards=1)
    for args in ((), ("--reingest",)):
        done = bench(cluster, path, *args)
        assert done.code != 0, done.output
        reason = done.failed or ""
        assert f"index {INDEX} exists but esdash did not create it" in reason, reason
        assert "delete it yourself" in reason and reason in done.output
        assert control.index_exists(INDEX) and control.count(INDEX) == 5
        assert control.index_meta(INDEX) is None
