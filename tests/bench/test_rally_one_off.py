"""A Rally track's administrative tasks, sent once by rank 0 on the shared cluster.

The track written here creates its index, puts a composable template before its bulk task,
then after it puts a cluster setting, force-merges the index to one segment, sends two
untimed raw requests (one the cluster refuses), sleeps, deletes the template and searches.
The test checks that the cluster really received them (the setting, the index setting the
raw request put, one segment, the template gone), that ``results.json`` records every
request with its status and time (the refused one as an error, the run going on as Rally's
does by default), and that the ``rally`` report gives each one Rally's one service-time
sample.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster.control import control_client
from esdash.plugin.control import ControlClient, ControlError
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDEX = "oneoff-docs"
TEMPLATE = "esdash-oneoff-template"
#: A cluster setting the track puts (transient), reset when the test ends.
SETTING = "indices.recovery.max_bytes_per_sec"
BENCH = '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 20\n'


def task(name: str, kind: str, **spec: object) -> dict[str, object]:
    return {"operation": {"name": name, "operation-type": kind, **spec}}


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    # refreshed often, so the ingest leaves several segments for the force-merge to merge
    index = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "5ms"},
        "mappings": {"properties": {"n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(index))
    (directory / "docs.json").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(400)))
    template = {"index_patterns": ["esdash-oneoff-never-*"], "template": {"settings": {}}}
    schedule = [
        task("create", "create-index"),
        task("put-template", "create-composable-template", template=TEMPLATE, body=template),
        task("bulk", "bulk", **{"bulk-size": 20}),
        task("settings", "put-settings", body={"transient": {SETTING: "41mb"}}),
        task("merge", "force-merge", **{"max-num-segments": 1}),
        task(
            "window",
            "raw-request",
            method="PUT",
            path=f"/{INDEX}/_settings",
            body={"index": {"max_result_window": 12345}},
        ),
        task("missing", "raw-request", path="/esdash-oneoff-no-such-index/_settings"),
        task("pause", "sleep", duration=0.2),
        task("drop-template", "delete-composable-template", template=TEMPLATE),
        {
            **task("match-all", "search", body={"query": {"match_all": {}}}),
            "warmup-time-period": 0,
            "time-period": 1,
        },
    ]
    track = {
        "version": 2,
        "indices": [{"name": INDEX, "body": "index.json"}],
        "corpora": [
            {
                "name": "docs",
                "documents": [
                    {"source-file": "docs.json", "document-count": 400, "target-index": INDEX}
                ],
            }
        ],
        "schedule": schedule,
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


@pytest.fixture(scope="module")
def cluster(shared_cluster: tuple[Path, Path]) -> Iterator[tuple[Path, Path, ControlClient]]:
    """The shared cluster and a control client; what the track changed is undone after."""
    run = RunDir.open(shared_cluster[0])
    control = control_client(run, "elasticsearch", run.read_topology().nodes)
    try:
        yield shared_cluster[0], shared_cluster[1], control
    finally:
        control.request("reset", "PUT", "/_cluster/settings", {"transient": {SETTING: None}})
        control.delete_index(INDEX)
        with contextlib.suppress(ControlError):  # deleted by the track, as it should be
            control.request("cleanup", "DELETE", f"/_index_template/{TEMPLATE}", None)
        control.close()


def test_administrative_tasks_reach_the_cluster_once(
    cluster: tuple[Path, Path, ControlClient], shared_tmp: Path
) -> None:
    cluster_run, runs, control = cluster
    track = write_track(shared_tmp / "oneoff-track")
    session = write_session(
        shared_tmp, "oneoff", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    plan = esdash("plan", str(session), env_runs=runs, timeout=300).stdout
    assert (
        f"sent once by rank 0 after the ingest: POST /{INDEX}/_forcemerge?max_num_segments=1"
        in plan
    )
    assert f"sent once by rank 0 before the ingest: PUT /_index_template/{TEMPLATE}" in plan

    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs, timeout=300)
    found = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
    assert found, result.stdout + result.stderr
    run = Path(found[0].split(": ", 1)[1]).parent
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok", results.get("reason")

    # every request once, in schedule order, before and after the ingest
    records = results["track_requests"]
    assert [(r["name"], r["operation"], r["when"], r["status"]) for r in records] == [
        ("put-template", "create-composable-template", "before-ingest", "ok"),
        ("settings", "put-settings", "after-ingest", "ok"),
        ("merge", "force-merge", "after-ingest", "ok"),
        ("window", "raw-request", "after-ingest", "ok"),
        ("missing", "raw-request", "after-ingest", "error"),
        ("pause", "sleep", "after-ingest", "ok"),
        ("drop-template", "delete-composable-template", "after-ingest", "ok"),
    ]
    assert all(r["seconds"] > 0 for r in records)
    assert records[5]["seconds"] >= 0.2  # the sleep
    missing = records[4]
    assert missing["http_status"] == 404 and "index_not_found_exception" in missing["error"]
    assert results["steps"][0]["status"] == "measured"  # the run went on, as Rally's does

    # the cluster received them: the setting, the merge, the raw request, the template
    settings = control.request("read", "GET", "/_cluster/settings?flat_settings=true", None)
    assert settings["transient"][SETTING] == "41mb"
    stats = control.index_stats(INDEX, ("segments",))
    assert stats["indices"][INDEX]["primaries"]["segments"]["count"] == 1
    index_settings = control.index_settings(INDEX)[INDEX]["settings"]
    assert index_settings["index.max_result_window"] == "12345"
    with pytest.raises(ControlError) as gone:
        control.request("read", "GET", f"/_index_template/{TEMPLATE}", None)
    assert gone.value.status == 404

    # the end-of-run summary has a line per request
    assert f"merge (force-merge, after-ingest): POST /{INDEX}/_forcemerge" in result.stdout

    # Rally's metrics: one service-time sample per administrative task
    out = shared_tmp / "oneoff-report"
    esdash(
        "report", str(run), "--format", "rally", "--no-figures", "--out", str(out), env_runs=runs
    )
    (only,) = json.loads((out / "rally.json").read_text())["runs"]
    metrics = {entry["task"]: entry for entry in only["op_metrics"]}
    merge = metrics["merge"]
    assert merge["service_time"]["50_0"] == pytest.approx(records[2]["seconds"] * 1000)
    assert merge["error_rate"] == 0 and metrics["missing"]["error_rate"] == 1
    assert list(metrics)[:3] == ["put-template", "bulk", "settings"]
