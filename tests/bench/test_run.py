"""`esdash run` end to end against real Elasticsearch nodes and real MPI ranks.

The session's secure 2-node cluster is shared (`esdash run --cluster RUN`); faults (lost ranks,
lost nodes, signals) are in ``tests/faults``.  Steps are short: the point is behaviour, not numbers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support.cli import ESDASH, esdash, write_session
from support.distributions import RECORDER, install_distribution, observer_hooks
from support.records import as_json

from esdash.rundir.stream import StreamReader

pytestmark = [pytest.mark.es, pytest.mark.mpi]

BENCH = '[benchmark]\nworkers_per_node = 1\nwarmup = "1s"\nduration = "2s"\nbulk_size = 200\n'


@pytest.fixture
def cluster(shared_cluster: tuple[Path, Path]) -> tuple[Path, Path]:
    """The session's secure 2-node cluster (conftest); every run here attaches to it."""
    return shared_cluster


def bench_session(directory: Path, name: str, *, track: str, bench: str = BENCH) -> Path:
    """A session for `--cluster` runs (its cluster table must match the running cluster)."""
    return write_session(directory, name, 2, track=track, tables=bench)


def run_output(result: subprocess.CompletedProcess) -> Path:
    for line in result.stdout.splitlines():
        if line.startswith("results: "):
            return Path(line.split(": ", 1)[1]).parent
    raise AssertionError(f"no results line:\n{result.stdout}\n{result.stderr}")


def records(run: Path) -> list[dict]:
    reader = StreamReader(run / "stream.jsonl")
    found = [as_json(record) for record in reader.read_all()]
    assert reader.problems == []  # every line a valid record
    return found


def match_all_step(path: Path, seconds: int, name: str = "s", warmup: int = 0) -> Path:
    """A query file with one step of one ``match_all`` query called ``all``."""
    step = {
        "name": name,
        "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
        "warmup_time_secs": warmup,
        "execution_time_secs": seconds,
    }
    path.write_text(json.dumps([step]))
    return path


def start_run(runs: Path, *args: str) -> subprocess.Popen:
    """`esdash run ARGS` in the background, its output captured."""
    env = {**os.environ, "ESDASH_RUNS": str(runs)}
    return subprocess.Popen(
        [*ESDASH, "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_observer_hooks_are_called_once_each_with_the_real_run(
    cluster, shared_tmp: Path, tmp_path: Path
) -> None:
    """A plugin installed through an entry point sees the run exactly as it was stored.

    Every observer hook of the contract is called: the session hooks once each, the interval
    hook once per interval record of ``stream.jsonl``, and ``esdash_session_finished`` gets
    the results that ``results.json`` holds.
    """
    cluster_run, runs = cluster
    site = tmp_path / "site"
    site.mkdir()
    install_distribution(site, "esdash-recorder", "recorder", RECORDER)
    log = tmp_path / "observed.jsonl"
    session = bench_session(shared_tmp, "observed", track='name = "mri"\ndocuments = 1500')
    env = {**os.environ, "PYTHONPATH": str(site), "ESDASH_OBSERVER_LOG": str(log)}
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs, env=env)
    run = run_output(result)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted({call["hook"] for call in calls}) == observer_hooks()
    assert calls[0]["hook"] == "esdash_session_started" and calls[0]["run_dir"] == str(run)
    assert calls[-1]["hook"] == "esdash_session_finished" and calls[-1]["run_dir"] == str(run)
    assert [c["hook"] for c in calls].count("esdash_session_started") == 1
    assert [c["hook"] for c in calls].count("esdash_session_finished") == 1
    assert {call["session"] for call in calls} == {"observed"}
    intervals = [r for r in records(run) if r["type"] == "interval"]
    assert [c["record"] for c in calls if c["hook"] == "esdash_interval"] == intervals
    assert calls[-1]["results"] == json.loads((run / "results.json").read_text())


def test_mri_run_writes_a_complete_run_directory(cluster, shared_tmp: Path) -> None:
    cluster_run, runs = cluster
    session = bench_session(shared_tmp, "mri-e2e", track='name = "mri"\ndocuments = 1500')
    result = esdash(
        "run", str(session), "--cluster", str(cluster_run), "--reingest", env_runs=runs, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = run_output(result)
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok"
    assert results["ingest"]["docs_sent"] == 1500 and results["ingest"]["docs_rejected"] == 0
    steps = {s["name"]: s for s in results["steps"]}
    for name in ("body_part", "vendor", "age", "body_part_resolution", "vendor_body_part"):
        query = steps[name]["queries"][name]
        assert query["requests"] > 0 and query["errors"] == {}, name
        assert query["latency"]["gmean"] > 0
    # the integ-test-zip has no painless: reported, never silently skipped
    assert "needs scripting" in steps["brain_age"]["unsupported"]["brain_age"]
    assert "brain_age/brain_age: not run: needs scripting" in result.stdout
    stream = records(run)
    assert stream[0]["type"] == "header" and stream[-1]["type"] == "final"
    assert {r["phase"] for r in stream if r["type"] == "interval"} >= {"warmup", "measure"}
    assert json.loads((run / "results-authors-format.json").read_text())[0]["search_results"]


def test_reused_index_is_not_ingested_again(cluster, shared_tmp: Path) -> None:
    cluster_run, runs = cluster
    session = bench_session(
        shared_tmp,
        "mri-reuse",
        track='name = "mri"\ndocuments = 1500',
        bench=BENCH + 'queries = "one-step.json"\n',
    )
    match_all_step(shared_tmp / "one-step.json", 1, name="all")
    esdash("run", str(session), "--cluster", str(cluster_run), "--reingest", env_runs=runs)
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    assert "index mri reused with 1500 documents" in result.stdout
    results = json.loads((run_output(result) / "results.json").read_text())
    assert results["ingest"] is None or not results["ingest"].get("docs_sent")


def test_bulk_rejections_are_counted_by_reason(cluster, shared_tmp: Path) -> None:
    """Documents the strict mapping refuses are counted by reason, never silently lost."""
    cluster_run, runs = cluster
    track = shared_tmp / "badtrack"
    (track / "operations").mkdir(parents=True)
    (track / "index.json").write_text(
        json.dumps(
            {
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": {"dynamic": "strict", "properties": {"n": {"type": "integer"}}},
            }
        )
    )
    docs = [{"n": i} for i in range(90)] + [{"n": "not a number"}] * 7 + [{"x": 1}] * 3
    (track / "docs.json").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (track / "track.json").write_text(
        json.dumps(
            {
                "version": 2,
                "indices": [{"name": "bad", "body": "index.json"}],
                "corpora": [
                    {
                        "name": "bad",
                        "documents": [
                            {
                                "source-file": "docs.json",
                                "document-count": 100,
                                "target-index": "bad",
                            }
                        ],
                    }
                ],
                "schedule": [
                    {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 50}},
                    {
                        "operation": {
                            "name": "count",
                            "operation-type": "search",
                            "body": {"query": {"match_all": {}}},
                        },
                        "warmup-time-period": 0,
                        "time-period": 1,
                    },
                ],
            }
        )
    )
    session = bench_session(shared_tmp, "bulkerr", track=f'name = "rally"\npath = "{track}"')
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs, check=False)
    results = json.loads((run_output(result) / "results.json").read_text())
    ingest = results["ingest"]
    assert ingest["docs_sent"] == 100
    assert ingest["docs_rejected"] == 10
    assert ingest["rejected_docs"] == {
        "bulk_item_document_parsing_exception": 7,
        "bulk_item_strict_dynamic_mapping_exception": 3,
    }
    assert "bulk_item_document_parsing_exception 7" in result.stdout  # shown in the summary


def test_warmup_failure_aborts_the_step_with_the_server_message(cluster, shared_tmp: Path):
    cluster_run, runs = cluster
    (shared_tmp / "bad-steps.json").write_text(
        json.dumps(
            [
                {
                    "name": "broken",
                    "search_queries": [{"name": "bad", "body": {"query": {"no_such_query": {}}}}],
                    "warmup_time_secs": 1,
                    "execution_time_secs": 1,
                },
                {
                    "name": "fine",
                    "search_queries": [{"name": "all", "body": {"query": {"match_all": {}}}}],
                    "warmup_time_secs": 1,
                    "execution_time_secs": 1,
                },
            ]
        )
    )
    session = bench_session(
        shared_tmp,
        "warmfail",
        track='name = "mri"\ndocuments = 1500',
        bench=BENCH + 'queries = "bad-steps.json"\n',
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs, check=False)
    assert result.returncode == 1, result.stdout
    results = json.loads((run_output(result) / "results.json").read_text())
    broken, fine = results["steps"]
    assert "parsing_exception" in next(iter(broken["warmup_failed"].values()))
    assert broken["status"].startswith("warm-up failed")
    assert fine["queries"]["all"]["requests"] > 0
    assert "warm-up failed in step(s) broken" in results["reason"]


def test_paced_step_reaches_its_target_and_separates_latency(cluster, shared_tmp: Path):
    """With a target throughput, latency runs from the scheduled send (Rally's definition)."""
    cluster_run, runs = cluster
    match_all_step(shared_tmp / "paced.json", 4, name="paced")
    bench = (
        "[benchmark]\nworkers_per_node = 1\ntarget_throughput = 40\n"
        'queries = "paced.json"\nbulk_size = 200\n'
    )
    session = bench_session(
        shared_tmp, "paced", track='name = "mri"\ndocuments = 1500', bench=bench
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    query = json.loads((run_output(result) / "results.json").read_text())["steps"][0]["queries"][
        "all"
    ]
    # 40/s in total over 4 s (2 workers at 20/s): pacing never sends more than that (a
    # loaded machine may send fewer: each late request goes out at once, none is skipped)
    assert 40 <= query["requests"] <= 170
    assert query["latency"]["gmean"] >= query["service_time"]["gmean"]


def test_thresholds_set_the_exit_code(cluster, shared_tmp: Path) -> None:
    cluster_run, runs = cluster
    match_all_step(shared_tmp / "t.json", 1)
    session = bench_session(
        shared_tmp,
        "thr",
        track='name = "mri"\ndocuments = 1500',
        bench=BENCH + 'queries = "t.json"\n',
    )
    failing = esdash(
        "run",
        str(session),
        "--cluster",
        str(cluster_run),
        "--threshold",
        "all:p50<0.001ms",
        env_runs=runs,
        check=False,
    )
    assert failing.returncode == 3, failing.stdout
    assert "threshold failed" in failing.stdout
    bad = esdash(
        "run",
        str(session),
        "--cluster",
        str(cluster_run),
        "--threshold",
        "all:p50 under 5",
        env_runs=runs,
        check=False,
    )
    assert bad.returncode == 2 and "all:p50 under 5" in bad.stderr


def test_ctrl_c_still_prints_the_summary(cluster, shared_tmp: Path) -> None:
    cluster_run, runs = cluster
    match_all_step(shared_tmp / "long.json", 60, name="long")
    session = bench_session(
        shared_tmp,
        "ctrlc",
        track='name = "mri"\ndocuments = 1500',
        bench=BENCH + 'queries = "long.json"\n',
    )
    proc = start_run(runs, str(session), "--cluster", str(cluster_run))
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "measure step" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + out + err
    assert "aborted" in out and "long" in out  # the summary table is printed
    run = run_output(subprocess.CompletedProcess([], 0, "".join(lines) + out, err))
    assert json.loads((run / "results.json").read_text())["status"] == "aborted"


def test_nyc_taxis_track_runs_every_step(cluster, shared_tmp: Path) -> None:
    cluster_run, runs = cluster
    bench = '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "1s"\nbulk_size = 500\n'
    session = bench_session(
        shared_tmp, "nyc", track='name = "nyc_taxis"\ndocuments = 2000', bench=bench
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    results = json.loads((run_output(result) / "results.json").read_text())
    assert results["status"] == "ok", results["reason"]
    assert results["ingest"]["docs_sent"] == 2000
    measured = [s for s in results["steps"] if s["status"] == "measured"]
    assert len(results["steps"]) == 18
    # the integ-test-zip lacks the aggregations module: reported, not silently skipped
    unsupported = {s["name"]: s["unsupported"] for s in results["steps"] if s["unsupported"]}
    assert list(unsupported) == ["autohisto_agg"]
    assert "auto_date_histogram" in unsupported["autohisto_agg"]["autohisto_agg"]
    assert len(measured) == 17
    assert "scaled_float" in result.stdout  # the mapping change is announced
    for step in measured:
        for name, query in step["queries"].items():
            assert query["requests"] > 0 and not query["errors"], (step["name"], name)
