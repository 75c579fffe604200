"""An ingest whose every document is rejected: the run finishes and says so loudly.

A track whose mapping refuses every document (here ``"dynamic": "strict"`` with one field, and
documents that carry another) once left the ranks silent for over 12 minutes.  Rejections are
an outcome to report, never a reason to wait: the run must end, count every rejected
document by reason, move the live progress (the documents were sent) and flag that the steps
measured an index without them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.rundir.stream import StreamReader

pytestmark = [pytest.mark.es, pytest.mark.mpi]

DOCS = 2000
BULK = 500
BENCH = '[benchmark]\nworkers_per_node = 1\nwarmup = "1s"\nduration = "2s"\n'


def strict_track(directory: Path, index: str) -> Path:
    """A Rally track whose strict mapping rejects every document of its corpus."""
    directory.mkdir(parents=True)
    (directory / "index.json").write_text(
        json.dumps(
            {
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": {"dynamic": "strict", "properties": {"n": {"type": "integer"}}},
            }
        )
    )
    (directory / "docs.json").write_text("".join(f'{{"x": {i}}}\n' for i in range(DOCS)))
    corpus = {"source-file": "docs.json", "document-count": DOCS, "target-index": index}
    schedule = [
        {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": BULK}},
        {
            "operation": {
                "name": "all",
                "operation-type": "search",
                "body": {"query": {"match_all": {}}},
            },
            "warmup-time-period": 0,
            "time-period": 1,
        },
    ]
    track = {
        "version": 2,
        "indices": [{"name": index, "body": "index.json"}],
        "corpora": [{"name": index, "documents": [corpus]}],
        "schedule": schedule,
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_an_ingest_whose_every_document_is_rejected_finishes_and_says_so(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    track = strict_track(shared_tmp / "allrejected-track", "allrejected")
    session = write_session(
        shared_tmp, "allrejected", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    result = esdash(
        "run", str(session), "--cluster", str(cluster_run), "--reingest",
        env_runs=runs, check=False, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    line = next((x for x in result.stdout.splitlines() if x.startswith("results: ")), None)
    assert line is not None, output
    run = Path(line.split(": ", 1)[1]).parent
    results = json.loads((run / "results.json").read_text())
    ingest = results["ingest"]
    # every document was sent, and every one of them rejected, by a named reason
    assert ingest["docs_sent"] == DOCS, ingest
    assert ingest["docs_rejected"] == DOCS, ingest
    assert ingest["docs"] == 0, ingest
    assert ingest["rejected_docs"] == {"bulk_item_strict_dynamic_mapping_exception": DOCS}
    # flagged in the results, the summary and the stream, not averaged away
    assert ingest["flag"].startswith(f"every document was rejected ({DOCS:,} of {DOCS:,}"), ingest
    assert "strict_dynamic_mapping_exception" in ingest["flag"]
    assert f"WARNING: ingest: every document was rejected ({DOCS:,} of {DOCS:,}" in result.stdout
    reader = StreamReader(run / "stream.jsonl")
    records = [json.loads(x) for x in (run / "stream.jsonl").read_text().splitlines()]
    assert reader.read_all() and reader.problems == []
    flagged = [r for r in records if r["type"] == "event" and r["kind"] == "ingest_rejected"]
    assert len(flagged) == 1 and flagged[0]["level"] == "warning", flagged
    assert flagged[0]["message"] == f"ingest: {ingest['flag']}"
    # said as the ingest ended, before the steps that measure the empty index
    steps = next(r for r in records if r["type"] == "event" and r["kind"] == "steps")
    assert records.index(flagged[0]) < records.index(steps)
    # the live progress counts the documents sent, rejected or not
    progress = [
        r["ingest"]["docs_done"] for r in records if r["type"] == "interval" and r["ingest"]
    ]
    assert progress and progress[-1] == DOCS, progress
    # the steps still ran, on the empty index, and the run ended normally
    assert results["status"] == "ok", results.get("reason")
    assert results["steps"][0]["queries"]["all"]["requests"] > 0
