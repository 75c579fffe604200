"""The flag of an ingest that lost documents, from real recorder payloads to the summary.

The end-to-end run (every document rejected by a real cluster) is in test_all_rejected.py;
these cover the wording for all, some and none rejected, and the example reason.
"""

from __future__ import annotations

from support.records import header

from esdash.bench.recorder import Recorder
from esdash.bench.rejections import ingest_flag
from esdash.bench.results import RunAccumulator, build_results
from esdash.rundir.records import Final, IngestResult, Results
from esdash.view.summary import render_summary

HEADER = header(run_id="rej-1", started=1000.0, interval=1.0, bench_ranks=[{"rank": 1}], steps=[])
STRICT = "strict_dynamic_mapping_exception"
MESSAGE = f"{STRICT}: [1:2] mapping set to strict, dynamic introduction of [x] within [_doc]"


def ingested(indexed: int, rejected: int) -> Results:
    """Results of one rank's ingest: bulk requests of 500, ``rejected`` refused as strict."""
    recorder = Recorder(rank=1, clock=lambda: 0.0)
    left_indexed, left_rejected = indexed, rejected
    while left_indexed or left_rejected:
        refused = min(left_rejected, 500)
        taken = min(left_indexed, 500 - refused)
        if refused:
            recorder.record_bulk_rejections("bulk", "n1", {STRICT: refused}, {STRICT: MESSAGE})
        recorder.record("bulk", "n1", 0.05, 0.05, taken, 1000)
        left_indexed, left_rejected = left_indexed - taken, left_rejected - refused
    acc = RunAccumulator(interval=1.0)
    acc.add_interval("ingest", None, 1, recorder.drain(), seq=0)
    acc.set_window("ingest", None, 1.0)
    results = build_results(HEADER, acc, Final(t=2.0, status="ok", reason=None, wall=1002.0))
    assert results.ingest is not None
    results.ingest.docs_sent = indexed + rejected
    results.ingest.docs_rejected = rejected
    return results


def test_every_document_rejected_is_flagged_with_its_reason_and_an_example() -> None:
    results = ingested(0, 2000)
    assert results.ingest is not None
    assert results.ingest.docs == 0
    flag = ingest_flag(results.ingest)
    assert flag == (
        f"every document was rejected (2,000 of 2,000; bulk_item_{STRICT} 2,000): "
        f"the steps ran on an empty index; e.g. {MESSAGE}"
    )
    results.ingest.flag = flag
    assert f"WARNING: ingest: {flag}\n" in render_summary(results)


def test_some_documents_rejected_are_flagged_as_missing_from_the_index() -> None:
    results = ingested(1500, 500)
    assert results.ingest is not None
    assert ingest_flag(results.ingest) == (
        f"500 of 2,000 documents were rejected (bulk_item_{STRICT} 500): "
        f"the steps ran on an index without them; e.g. {MESSAGE}"
    )


def test_an_ingest_without_rejections_has_no_flag() -> None:
    results = ingested(2000, 0)
    assert results.ingest is not None
    assert ingest_flag(results.ingest) is None
    assert "WARNING" not in render_summary(results)


def test_without_the_workers_counts_the_streams_counts_stand_in() -> None:
    """A rank that never sent its final report: the rejections by reason still flag."""
    ingest = IngestResult(docs=0, rejected_docs={"http_429": 300})
    assert ingest_flag(ingest) == (
        "every document was rejected (300 of 300; http_429 300): the steps ran on an empty index"
    )
