"""The real ``nyc_taxis`` track of elastic/rally-tracks, run end to end in test mode on the
shared Elasticsearch cluster.

The track as published (a copy of the data-only checkout beside the repository) with its
``-1k`` corpus generated from its own mapping: create-index with the track's settings, the
bulk task with 8 clients, refresh, force-merge and the index-stats wait, then its searches.
On the integ-test zip the plan refuses ``autohisto_agg`` (``auto_date_histogram`` lives in
the aggregations module the zip lacks) and adapts ``scaled_float``; every other task runs
and has Rally-named metrics with the clients the plan gave it.  The OpenSearch runs of
``http_logs`` and ``geonames`` are in ``tests/opensearch/test_os_real_tracks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session
from support.rally_corpus import write_test_mode_corpora
from support.rally_tracks import assert_every_task_ran, copy_track, rally_metrics

pytestmark = [pytest.mark.es, pytest.mark.mpi]

BENCH = "[benchmark]\nworkers_per_node = 1\nbulk_size = 500\nwarmup_max = 0\n"


def test_nyc_taxis_runs_every_task_in_test_mode(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    scratch = shared_tmp / "real-nyc_taxis"
    track = copy_track("nyc_taxis", scratch / "tracks")
    corpus = scratch / "corpus"
    written = write_test_mode_corpora(track, corpus)
    session = write_session(
        scratch, "real-nyc-taxis", 2,
        track=f'name = "rally"\npath = "{track}"\ntest_mode = true\ncorpus_dir = "{corpus}"',
        tables=BENCH,
    )  # fmt: skip
    plan = json.loads(esdash("plan", str(session), "--json", env_runs=runs).stdout)["tasks"]
    refused = {t["name"]: t["reason_kind"] for t in plan if t["status"] != "run"}
    assert refused == {"autohisto_agg": "module"}, refused
    result = esdash(
        "run", str(session), "--cluster", str(cluster_run), env_runs=runs, check=False,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("results: "))
    run = Path(line.split(": ", 1)[1]).parent
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok", results.get("reason")
    assert results["ingest"]["docs_sent"] == sum(written.values()) == 1000
    assert results["ingest"]["docs_rejected"] == 0
    assert_every_task_ran(plan, rally_metrics(run, scratch / "report", runs), results)
