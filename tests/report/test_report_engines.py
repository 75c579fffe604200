"""Two engines in one report: side by side, with the settings each cluster read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import synthetic

from esdash.report.document import build_report
from esdash.view.inputs import load_inputs

A = [1.0, 1.5, 2.0, 2.5, 3.0]


def facts(engine: str, version: str, replicas: str) -> dict:
    return {
        "cluster": {
            "engine": engine,
            "version": version,
            "nodes": {"n0": {"jvm": "Eclipse Adoptium 21", "heap_max_bytes": 512 * 2**20}},
            "index": {
                "index.number_of_shards": "1",
                "index.number_of_replicas": replicas,
                "index.refresh_interval": "1s",
                "index.codec": "default",
            },
        }
    }


def two_engines(tmp_path: Path, replicas: str = "1") -> list[str]:
    es = synthetic.write_run(
        tmp_path,
        "es",
        {"age": {"age": synthetic.op(A, requests_per_s=300.0)}},
        ingest=synthetic.ingest(4.0),
        extra=facts("elasticsearch", "8.19.21", "1"),
    )
    os_ = synthetic.write_run(
        tmp_path,
        "os",
        {"age": {"age": synthetic.op(A, requests_per_s=250.0)}},
        config={"backend": "opensearch"},
        ingest=synthetic.ingest(5.0),
        extra=facts("opensearch", "3.4.0", replicas),
    )
    return [str(es), str(os_)]


def test_both_engines_are_in_every_table_and_never_pooled(tmp_path: Path) -> None:
    report = build_report(load_inputs(two_engines(tmp_path)))
    queries = report.table("queries")
    assert queries is not None
    setups = [row[0] for row in queries.rows]
    assert setups == ["none", "none on opensearch"]  # two configurations, not two runs of one
    engines = report.table("engines")
    assert engines is not None
    assert engines.headers[1:4] == [
        "elasticsearch req/s",
        "elasticsearch p50 ms",
        "elasticsearch p99 ms",
    ]
    age = engines.records[0]
    assert age["elasticsearch"]["requests_per_s"] == pytest.approx(300.0)
    assert age["opensearch"]["requests_per_s"] == pytest.approx(250.0)
    assert [row[0] for row in engines.rows][-3:] == ["ingest docs/s", "node CPU %", "node heap %"]
    fairness = report.table("fairness")
    assert fairness is not None
    verdicts = {row[0]: row[-1] for row in fairness.rows}
    assert verdicts["version"] == "differs" and verdicts["replicas"] == "yes"
    assert verdicts["shards"] == verdicts["codec"] == verdicts["heap per node"] == "yes"


def test_a_setting_that_differs_between_engines_is_flagged(tmp_path: Path) -> None:
    report = build_report(load_inputs(two_engines(tmp_path, replicas="0")))
    fairness = report.table("fairness")
    assert fairness is not None
    row = next(row for row in fairness.rows if row[0] == "replicas")
    assert row[1:] == ["1", "0", "DIFFERS"]


def test_one_engine_adds_no_engine_tables(tmp_path: Path) -> None:
    run = synthetic.write_run(tmp_path, "es", {"age": {"age": synthetic.op(A)}})
    report = build_report(load_inputs([str(run)]))
    assert report.table("engines") is None and report.table("fairness") is None
