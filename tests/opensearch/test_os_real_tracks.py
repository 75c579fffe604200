"""Real tracks of elastic/rally-tracks, run end to end in test mode on shared OpenSearch.

Each track is used as published (a copy of the data-only checkout beside the repository),
with the ``-1k`` corpus files Rally's test mode reads generated from the track's own
mappings (``support.rally_corpus``).  The tracks need what the Elasticsearch integ-test zip
lacks (``match_only_text``, painless), so they run on OpenSearch:

- ``http_logs``: seven indices filled by one bulk task, searches of ``logs-*``, force-merges
  and index-stats in the schedule;
- ``geonames`` with a ``track.py`` written here (the published one is not in the data-only
  copy), whose three parameter sources give the ``large_*terms`` searches their bodies;
- ``big5`` with ``target_opensearch=true`` (the track's own OpenSearch variant): a composable
  template and a data stream, filled by its bulk task, then 37 searches;

Every task the plan runs must show up in the run's Rally-named metrics (one entry per task,
``throughput``/``latency``/``service_time``/``error_rate``) with the clients the plan gave it,
and every document of every corpus must be in the cluster.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engines import Cluster, os_session
from support.cli import esdash
from support.rally_corpus import write_test_mode_corpora
from support.rally_tracks import assert_every_task_ran, copy_track, rally_metrics

pytestmark = [pytest.mark.opensearch, pytest.mark.mpi]

BENCH = "[benchmark]\nworkers_per_node = 1\nbulk_size = 500\nwarmup_max = 0\n"
#: What the assembled OpenSearch lacks for these tracks (the plan refuses it, naming the module).
REFUSED = {
    "geonames": {"expression": "module"},  # lang-expression is not assembled
    "http_logs": {"terms_enum": "module"},  # _terms_enum is Elasticsearch's (x-pack-core)
}

GEONAMES_TRACK_PY = """
import random

COUNTRIES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def terms(params):
    return {"terms": {"country_code.raw": random.sample(COUNTRIES, params.get("size", 3))}}


def pure_terms(track, params, **kwargs):
    return {"index": "geonames", "body": {"query": terms(params)}}


class FilteredTerms:
    def __init__(self, track, params, **kwargs):
        self._index = track.indices[0].name

    def partition(self, partition_index, total_partitions):
        return self

    def params(self):
        body = {"query": {"bool": {"filter": [terms({}), {"range": {"population": {"gte": 10}}}]}}}
        return {"index": self._index, "body": body}


def prohibited_terms(track, params, **kwargs):
    return {"body": {"query": {"bool": {"must_not": [terms({"size": 2})]}}}}


def register(registry):
    registry.register_param_source("pure-terms-query-source", pure_terms)
    registry.register_param_source("filtered-terms-query-source", FilteredTerms)
    registry.register_param_source("prohibited-terms-query-source", prohibited_terms)
"""


def prepare(
    name: str, scratch: Path, params: tuple[str, ...] = ()
) -> tuple[Path, Path, dict[str, int]]:
    """The track's copy and its corpus directory with the generated ``-1k`` files."""
    track = copy_track(name, scratch / "tracks")
    if name == "geonames":
        (track / "track.py").write_text(GEONAMES_TRACK_PY)
    corpus = scratch / f"corpus-{name}"
    return track, corpus, write_test_mode_corpora(track, corpus, {"track_params": list(params)})


def run_track(
    cluster: Cluster, scratch: Path, name: str, params: tuple[str, ...] = ()
) -> tuple[list[dict], dict, dict]:
    """Plan and run one real track (with its ``track_params``): its plan, results and Rally
    metrics by task name."""
    track, corpus, written = prepare(name, scratch, params)
    # trust_code: geonames' searches take their bodies from the track.py written above
    options = f'path = "{track}"\ntest_mode = true\ncorpus_dir = "{corpus}"\ntrust_code = true'
    options += f"\ntrack_params = {json.dumps(list(params))}" if params else ""
    session = os_session(
        scratch, f"real-{name}", 2, track=f'name = "rally"\n{options}', tables=BENCH
    )
    planned = esdash("plan", str(session), "--json", env_runs=cluster.runs)
    plan = json.loads(planned.stdout)["tasks"]
    result = esdash(
        "run", str(session), "--cluster", str(cluster.run), env_runs=cluster.runs,
        check=False, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("results: "))
    run = Path(line.split(": ", 1)[1]).parent
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok", results.get("reason")
    assert results["ingest"]["docs_sent"] == sum(written.values())
    assert results["ingest"]["docs_rejected"] == 0
    return plan, results, rally_metrics(run, scratch / f"report-{name}", cluster.runs)


@pytest.mark.parametrize("name", ["http_logs", "geonames"])
def test_a_real_track_runs_every_task_in_test_mode(
    os_cluster: Cluster, shared_tmp: Path, name: str
) -> None:
    scratch = shared_tmp / f"real-{name}"
    plan, results, metrics = run_track(os_cluster, scratch, name)
    refused = {t["name"]: t["reason_kind"] for t in plan if t["status"] != "run"}
    assert refused == REFUSED.get(name, {}), refused
    assert_every_task_ran(plan, metrics, results)
    if name == "http_logs":  # seven indices, each with its own 1,000 documents
        assert len(results["ingest"]["per_index"]) == 7
        assert set(results["ingest"]["per_index"].values()) == {1000}
    if name == "geonames":  # the bodies came from the track.py written above
        for task in ("large_terms", "large_filtered_terms", "large_prohibited_terms"):
            assert metrics[task]["error_rate"] == 0


BIG5_STREAM, BIG5_TEMPLATE = "logs-benchmark-dev", "logs-benchmark-template"


def test_big5_fills_its_data_stream_and_runs_every_search(
    os_cluster: Cluster, shared_tmp: Path
) -> None:
    """big5 as its track parameter ``target_opensearch`` writes it for OpenSearch: the
    composable template (``data_stream.timestamp_field``) makes the ``logs-benchmark-dev``
    data stream, the eight ``-1k`` files land in its backing index as ``create`` actions, and
    every search of the default challenge runs with its Rally metric names.  The ISM policy
    is refused: the assembled OpenSearch has no index-management plugin."""
    cluster = os_cluster
    cluster.request("DELETE", f"/_data_stream/{BIG5_STREAM}")
    params = ("target_opensearch=true",)
    try:
        plan, results, metrics = run_track(cluster, shared_tmp / "real-big5", "big5", params)
        refused = {t["name"]: t["reason_kind"] for t in plan if t["status"] != "run"}
        assert refused == {"create-ilm-policy": "module"}, refused
        sent = [(r["name"], r["status"], r["error"]) for r in results["track_requests"]]
        assert sent == [("create-index-template", "ok", None), ("create-data-stream", "ok", None)]
        assert_every_task_ran(plan, metrics, results)
        searches = [t["name"] for t in plan if t["operation"] == "search"]
        assert len(searches) == 37 and all(metrics[s]["error_rate"] == 0 for s in searches)
        (stream,) = cluster.ok("GET", f"/_data_stream/{BIG5_STREAM}")["data_streams"]
        backing = [index["index_name"] for index in stream["indices"]]
        assert backing and all(name.startswith(f".ds-{BIG5_STREAM}-") for name in backing)
        cluster.ok("POST", f"/{BIG5_STREAM}/_refresh")
        counts = [cluster.ok("GET", f"/{name}/_count")["count"] for name in backing]
        assert sum(counts) == results["ingest"]["docs_sent"] == 8 * 1000
    finally:
        cluster.request("DELETE", f"/_data_stream/{BIG5_STREAM}")
        cluster.request("DELETE", f"/_index_template/{BIG5_TEMPLATE}")
