"""Numbers you can trust, end to end: settle, global warm-up, balanced and mirrored rounds,
references.

One `esdash run` against the session's shared secure 2-node cluster (real MPI ranks, real
Elasticsearch) with a fresh ingest, a force-merge after it, a short global warm-up, two
steps in two balanced rounds and a reference no cluster can meet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.errors import EXIT_THRESHOLD
from esdash.rundir.stream import StreamReader

pytestmark = [pytest.mark.es, pytest.mark.mpi]

STEPS = [
    {
        "name": name,
        "search_queries": [{"name": name, "body": body}],
        "warmup_time_secs": 1,
        "execution_time_secs": 3,
    }
    for name, body in (
        ("everything", {"query": {"match_all": {}}}),
        ("mri", {"query": {"term": {"modality": "MRI"}}}),
    )
]


def results_dir(stdout: str) -> Path:
    line = next(line for line in stdout.splitlines() if line.startswith("results: "))
    return Path(line.split(": ", 1)[1]).parent


def test_a_settled_warmed_balanced_run_reports_rounds_flags_and_a_missed_reference(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
):
    cluster_run, runs = shared_cluster
    (shared_tmp / "trust-steps.json").write_text(json.dumps(STEPS))
    bench = (
        '[benchmark]\nworkers_per_node = 1\nbulk_size = 250\nqueries = "trust-steps.json"\n'
        'after_ingest = "force-merge"\nwarmup_max = "6s"\nwarmup_round = "1s"\n'
        'order = "balanced"\nrepetitions = 2\nseed = 11\n'
        "[references.everything]\nthroughput = [1000000, -0.10, 0.10]\n"
    )
    session = write_session(
        shared_tmp, "trust", 2, track='name = "mri"\ndocuments = 1500', tables=bench
    )
    result = esdash(
        "run",
        str(session),
        "--cluster",
        str(cluster_run),
        "--reingest",
        env_runs=runs,
        check=False,
    )
    assert result.returncode == EXIT_THRESHOLD, result.stdout + result.stderr
    out = result.stdout
    assert "MISS everything throughput (median of 2 rounds)" in out
    assert "1 reference figure(s) missed" in out
    assert "settle (force-merge after ingest): refresh" in out
    assert "global warm-up: " in out
    assert "rounds: 2 in balanced order (seed 11)" in out
    run = results_dir(out)
    results = json.loads((run / "results.json").read_text())
    assert (
        results["format"] == 3 and "seconds actually measured" in results["throughput_definition"]
    )
    actions = [a["action"] for a in results["settle"]["actions"]]
    assert actions == ["refresh", "flush", "force-merge", "wait"]
    assert all(a["ok"] for a in results["settle"]["actions"])
    warm = results["global_warmup"]
    assert 1 <= warm["rounds"] <= 4 and set(warm["queries"]) == {"everything", "mri"}
    assert all(q["rounds"] and q["rounds"][0] > 0 for q in warm["queries"].values())
    # balanced over 2 steps: each round has both, the second in the other order
    rounds = results["rounds"]
    assert sorted(map(sorted, rounds["sequences"])) == [["everything", "mri"]] * 2
    assert rounds["sequences"][0] == rounds["sequences"][1][::-1]
    for step in results["steps"]:
        assert step["status"] == "measured"
        assert step["steadiness"]["throughput"]["n"] >= 2
        caches = step["caches"]
        assert caches["segments"] >= 1 and caches["request_cache_hits"] == 0
    by_query = {q["query"]: q for q in rounds["queries"]}
    assert by_query["everything"]["n"] == 2 and by_query["everything"]["kind"] == "range"
    events = {getattr(r, "kind", None) for r in StreamReader(run / "stream.jsonl").read_all()}
    assert {"settle", "warmup", "steps"} <= events
    # the global warm-up's requests are no step's
    assert results["unattributed_requests"] == {}
    # compare judges each run against its session's references too, and says what it pooled
    compared = esdash("compare", str(run), str(run), env_runs=runs, check=False)
    assert compared.returncode == EXIT_THRESHOLD, compared.stdout + compared.stderr
    assert "repetitions: baseline 1 run(s) x 2 rounds inside each run" in compared.stdout
    assert "MISS everything throughput (median of 2 rounds)" in compared.stdout


def test_by_default_the_steps_run_listed_then_reversed_and_each_query_is_their_median(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
):
    """``order = "auto"`` (the default; the test helper otherwise asks for ``listed``):
    two mirrored rounds on a real cluster, each query's figure the median of its two."""
    cluster_run, runs = shared_cluster
    (shared_tmp / "mirror-steps.json").write_text(json.dumps(STEPS))
    bench = (
        '[benchmark]\nworkers_per_node = 1\nbulk_size = 250\nqueries = "mirror-steps.json"\n'
        'order = "auto"\n'
    )
    session = write_session(
        shared_tmp, "mirror", 2, track='name = "mri"\ndocuments = 1500', tables=bench
    )
    out = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs).stdout
    assert "rounds: 2 in mirrored order (as listed, then reversed)" in out
    results = json.loads((results_dir(out) / "results.json").read_text())
    rounds = results["rounds"]
    assert (rounds["order"], rounds["repetitions"]) == ("mirrored", 2)
    assert rounds["sequences"] == [["everything", "mri"], ["mri", "everything"]]
    ran = [(s["name"], s["round"], s["position"], s["status"]) for s in results["steps"]]
    assert ran == [
        ("everything", 0, 0, "measured"),
        ("mri", 0, 1, "measured"),
        ("mri", 1, 0, "measured"),
        ("everything", 1, 1, "measured"),
    ]
    for query in rounds["queries"]:
        values = query["values"]
        assert len(values) == 2 and all(v > 0 for v in values)
        assert query["median"] == pytest.approx(sum(values) / 2, abs=0.01)


@pytest.mark.parametrize(
    ("steps", "order", "expected"),
    [
        (
            3,
            'order = "balanced"\nrepetitions = 4',
            'order = "balanced" over 3 step(s) needs a multiple of 6 rounds (minimum 6), found 4',
        ),
        (
            2,
            'order = "auto"\nrepetitions = 3',
            'order = "mirrored" over 2 step(s) needs a multiple of 2 rounds (minimum 2), found '
            '3; set repetitions = 4 or order = "listed"',
        ),
    ],
    ids=["balanced", "mirrored"],
)
def test_session_check_names_the_rounds_an_order_needs(
    shared_tmp: Path, steps: int, order: str, expected: str
):
    name = f"rounds-{steps}"
    (shared_tmp / f"{name}.json").write_text(
        json.dumps([{**STEPS[0], "name": f"s{k}"} for k in range(steps)])
    )
    bench = f'[benchmark]\nqueries = "{name}.json"\n{order}\n'
    session = write_session(shared_tmp, name, 1, tables=bench)
    result = esdash("session", "check", str(session), env_runs=shared_tmp / "runs", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"benchmark.repetitions: {expected}" in result.stdout + result.stderr
