"""The wall-time estimate of a run, phase by phase, and the Slurm time limit made from it.

Issue 29, part 5: every Slurm user has to name ``--time`` before the job runs, and nothing
estimated it.  The estimate is made in-process from real sessions, the real track plugins
(MRI, a Rally track in test mode) and real run directories written by esdash's own writers;
no cluster runs.  Every figure is checked against the rule it comes from: a timed step's
pause, warm-up and measured time; a counted step's time limits
(:func:`esdash.plugin.api.iteration_limit`); the session's bounds; the assumed rates, or a
previous run's measurements.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from esdash_plugins.backends.elasticsearch.distribution import SERVER_MAPPERS_8
from hypothesis import given
from hypothesis import strategies as st

from esdash.plugin.manager import get_plugins
from esdash.plugin.values import Distribution, iteration_limit
from esdash.prepare import walltime
from esdash.prepare.timelimit import job_time, slurm_seconds, slurm_time, time_limit
from esdash.prepare.walltime import BOUND, ESTIMATE, FIXED, estimate_wall_time
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import IngestResult, ProcessRecord, Results
from esdash.session import Session, parse_session

ORDER = ["corpus", "cluster_start", "ingest", "settle", "warmup", "steps", "results"]
ORDER += ["cluster_stop"]
#: The MRI track's seven query steps.
MRI_STEPS = 7
#: A distribution without the scripting module: the MRI track's brain_age is refused.
NO_SCRIPTING = Distribution(
    Path("/es"),
    "8.19.21",
    "integ-test-zip",
    ("apm", "transport-netty4", "x-pack-core", "x-pack-security"),
    scripting=False,
    mappers=SERVER_MAPPERS_8,
)


@pytest.fixture(autouse=True)
def private_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty cache and runs directory: no corpus or run of this machine leaks in."""
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ESDASH_RUNS", str(tmp_path / "runs"))


def mri_session(
    tmp_path: Path, name: str = "timed", nodes: int = 2, **benchmark: object
) -> Session:
    data = {
        "name": name,
        "cluster": {"nodes": nodes, "run_as": "esdash"},
        "track": {"name": "mri", "documents": 3000},
        "benchmark": {
            "warmup": "0.5s",
            "duration": "4s",
            "warmup_max": "45s",
            "settle_timeout": "90s",
            **benchmark,
        },
    }
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n')  # the file a run copies; its content is not read
    return parse_session(data, path)


def estimate(session: Session, **kwargs: object) -> walltime.WallTime:
    return estimate_wall_time(session, get_plugins().track(session.track.name), **kwargs)


def seconds(wall: walltime.WallTime) -> dict[str, float]:
    return {phase.key: phase.seconds for phase in wall.phases}


def kinds(wall: walltime.WallTime) -> dict[str, str]:
    return {phase.key: phase.kind for phase in wall.phases}


# --------------------------------------------------------------------- timed steps


def test_timed_steps_every_phase_in_the_order_a_run_takes_them(tmp_path: Path) -> None:
    wall = estimate(mri_session(tmp_path))
    assert [phase.key for phase in wall.phases] == ORDER
    # a step with 0.5 s of warm-up first pauses for the rest of a second (STEP_PAUSE), in
    # each of the two mirrored rounds order "auto" runs
    assert [(s.pause, s.warmup, s.duration, s.rounds, s.kind) for s in wall.steps] == [
        (0.5, 0.5, 4.0, 2, FIXED)
    ] * MRI_STEPS
    assert seconds(wall) == {
        "corpus": 3000 / walltime.PREPARE_DOCS_PER_S,
        "cluster_start": walltime.CLUSTER_START_S,
        "ingest": 3000 / walltime.INGEST_DOCS_PER_S,
        "settle": 90.0,  # benchmark.settle_timeout
        "warmup": 45.0,  # benchmark.warmup_max
        "steps": MRI_STEPS * 2 * 5.0,
        "results": walltime.RESULTS_S,
        "cluster_stop": walltime.STOP_S,
    }
    assert kinds(wall) == {
        "corpus": ESTIMATE,
        "cluster_start": ESTIMATE,
        "ingest": ESTIMATE,
        "settle": BOUND,
        "warmup": BOUND,
        "steps": FIXED,
        "results": ESTIMATE,
        "cluster_stop": ESTIMATE,
    }
    assert wall.total == pytest.approx(sum(seconds(wall).values()))
    ingest = wall.phase("ingest")
    assert ingest is not None
    # the assumption and where it comes from, in the figure's own line
    assert "3,000 documents (track.documents) at an assumed 1,000 docs/s" in ingest.basis
    assert "2-core machine ran at 347-2,122 docs/s" in ingest.basis


def test_a_job_that_holds_the_cluster_starts_it_before_the_corpus(tmp_path: Path) -> None:
    """``submit`` without ``--bench``: the cluster is up first, then ``run --cluster``."""
    wall = estimate(mri_session(tmp_path), cluster_first=True)
    assert [phase.key for phase in wall.phases][:2] == ["cluster_start", "corpus"]


def test_a_reused_index_ingests_nothing_and_settle_none_is_an_estimate(tmp_path: Path) -> None:
    wall = estimate(mri_session(tmp_path, after_ingest="none", warmup_max="0s"), ingest=False)
    assert seconds(wall)["ingest"] == 0.0
    assert seconds(wall)["settle"] == walltime.SETTLE_NONE_S
    assert kinds(wall)["settle"] == ESTIMATE
    assert seconds(wall)["warmup"] == 0.0
    warmup = wall.phase("warmup")
    assert warmup is not None and "benchmark.warmup_max = 0" in warmup.basis


def test_repetitions_run_every_step_each_round_and_refused_steps_take_no_time(
    tmp_path: Path,
) -> None:
    session = mri_session(tmp_path, repetitions=3, warmup="2s", duration="6s")
    track = get_plugins().track("mri")
    tasks = track.plan(session.track.options, NO_SCRIPTING)
    assert {t.name for t in tasks if t.status == "refused"} == {"brain_age"}
    wall = estimate_wall_time(session, track, tasks=tasks)
    rounds = {step.name: step.rounds for step in wall.steps}
    assert rounds.pop("brain_age") == 0
    assert set(rounds.values()) == {3}
    # 6 steps x 3 rounds x (no pause after 2 s of warm-up + 2 s + 6 s)
    assert seconds(wall)["steps"] == 6 * 3 * 8.0
    steps = wall.phase("steps")
    assert steps is not None and "1 refused step(s) take no time" in steps.basis
    warmup = wall.phase("warmup")
    assert warmup is not None and "over 6 query name(s)" in warmup.basis


# ------------------------------------------------------ a Rally track in test mode


RALLY_TRACK = {
    "version": 2,
    "indices": [{"name": "logs", "body": "index.json"}],
    "corpora": [
        {"name": "logs", "documents": [{"source-file": "documents.json", "document-count": 1500}]}
    ],
    "operations": [
        {"name": "index-append", "operation-type": "bulk", "bulk-size": 500},
        {"name": "match-all", "operation-type": "search", "body": {"query": {"match_all": {}}}},
        {"name": "errors", "operation-type": "search", "body": {"query": {"term": {"l": "e"}}}},
        {"name": "low", "operation-type": "search", "body": {"query": {"range": {"n": {"lt": 9}}}}},
        {"name": "high", "operation-type": "search", "body": {"query": {"term": {"n": 9}}}},
    ],
    "challenges": [
        {
            "name": "smoke",
            "default": True,
            "schedule": [
                {"operation": "index-append", "warmup-time-period": 120, "clients": 4},
                {
                    "operation": "match-all",
                    "clients": 2,
                    "warmup-iterations": 500,
                    "iterations": 1000,
                    "target-throughput": 100,
                },
                {"operation": "errors", "warmup-time-period": 60, "time-period": 300},
                {
                    "parallel": {
                        "warmup-time-period": 30,
                        "time-period": 5,
                        "tasks": [
                            {"operation": "low", "clients": 3},
                            {"operation": "high", "clients": 1},
                        ],
                    }
                },
            ],
        }
    ],
}


def rally_session(tmp_path: Path, repetitions: int = 1) -> Session:
    track = tmp_path / "track"
    track.mkdir()
    (track / "track.json").write_text(json.dumps(RALLY_TRACK))
    index = {"mappings": {"properties": {"l": {"type": "keyword"}, "n": {"type": "integer"}}}}
    (track / "index.json").write_text(json.dumps(index))
    # test mode reads the -1k file, as Rally names it
    documents = "".join(json.dumps({"l": "e", "n": n}) + "\n" for n in range(40))
    (track / "documents-1k.json").write_text(documents)
    data = {
        "name": "rally-test",
        "cluster": {"run_as": "esdash"},
        "track": {"name": "rally", "path": str(track), "test_mode": True},
        "benchmark": {"warmup": "5s", "duration": "30s", "repetitions": repetitions},
    }
    return parse_session(data, tmp_path / "rally-test.toml")


def test_a_rally_track_in_test_mode_counts_its_counted_step_at_its_limits(
    tmp_path: Path,
) -> None:
    session = rally_session(tmp_path, repetitions=2)
    wall = estimate(session)
    steps = {s.name: (s.pause, s.warmup, s.duration, s.rounds, s.kind) for s in wall.steps}
    assert steps == {
        # counted (test mode: 2 warm-up and 2 measured requests per client): the session's
        # times become its limits, and it starts when the step before has ended
        "match-all": (0.0, iteration_limit(5.0), iteration_limit(30.0), 2, BOUND),
        # test mode: warmup-time-period 60 -> 0 (so a 1 s pause first), time-period 300 -> 10
        "errors": (1.0, 0.0, 10.0, 2, FIXED),
        "low+high": (1.0, 0.0, 5.0, 2, FIXED),  # one step for the parallel block
    }
    assert seconds(wall)["steps"] == 2 * (60.0 + 300.0 + 11.0 + 6.0)
    assert kinds(wall)["steps"] == BOUND  # a counted step's limits bound it
    size = (tmp_path / "track" / "documents-1k.json").stat().st_size
    assert seconds(wall)["ingest"] == size / walltime.INGEST_BYTES_PER_S
    assert seconds(wall)["corpus"] == size / walltime.PREPARE_BYTES_PER_S
    corpus = wall.phase("corpus")
    assert corpus is not None and f"{size} bytes of corpus files" in corpus.basis


# --------------------------------------------------------- a previous run's figures


def previous_run(
    runs: Path, session: Session, nodes: int, launched: float, ready: float | None
) -> RunDir:
    """A run of ``session`` as esdash's writers leave it: run.json, session.toml, results."""
    run = RunDir.create(runs, session.name)
    with run.edit_info() as info:
        info.session_name, info.nodes, info.ready = session.name, nodes, ready
        info.launcher = ProcessRecord(pid=4242, create_time=launched)
    run.write_session(b'name = "timed"\n[track]\nname = "mri"\ndocuments = 2000\n')
    return run


def test_a_previous_run_of_the_session_gives_its_cluster_start_and_ingest_rate(
    tmp_path: Path,
) -> None:
    session = mri_session(tmp_path)
    runs = tmp_path / "runs"
    older = previous_run(runs, session, nodes=2, launched=1000.0, ready=1042.0)
    files.write(older.results_file, Results(ingest=IngestResult(docs=2000, duration_s=4.0)))
    newer = older.path.with_name(older.name + "-1")  # made later in the same second
    newer.mkdir()
    newer_run = RunDir(newer)
    with newer_run.edit_info() as info:  # started, but never ready and no results
        info.session_name, info.nodes = session.name, 2
    # another session's run and a damaged one are passed over
    other = RunDir.create(runs, "timed2")
    with other.edit_info() as info:
        info.session_name, info.nodes, info.ready = "timed2", 2, 9.0
        info.launcher = ProcessRecord(pid=1, create_time=1.0)
    damaged = runs / f"{session.name}-29991231-235959"
    damaged.mkdir()
    (damaged / "run.json").write_text("{not json")

    wall = estimate(session)
    start, ingest = wall.phase("cluster_start"), wall.phase("ingest")
    assert start is not None and ingest is not None
    assert (start.seconds, start.kind) == (42.0, ESTIMATE)
    assert f"as run {older.name}: 42 s from launch to a healthy cluster" == start.basis
    # 3,000 documents now at the 500 docs/s the earlier run measured
    assert ingest.seconds == pytest.approx(3000 / 500)
    assert f"(run {older.name}: 2,000 docs in 4.0 s)" in ingest.basis
    # a run on another cluster size says nothing of this one's start
    three = estimate(mri_session(tmp_path, nodes=3))
    assert seconds(three)["cluster_start"] == walltime.CLUSTER_START_S
    assert seconds(three)["ingest"] == pytest.approx(3000 / 500)  # the rate still holds


# --------------------------------------------------------------- the time limit


@pytest.mark.parametrize(
    ("total", "limit"),
    [
        (0.0, "00:10:00"),  # at least 10 minutes more
        (1107.0, "00:29:00"),  # 1107 + 600 = 1707 s, up to whole minutes
        (2400.0, "00:50:00"),  # +25 % = 600 s: both rules agree
        (4000.0, "01:24:00"),  # +25 % = 5000 s, up to 84 minutes
        (80000.0, "1-03:47:00"),  # a day and more: sbatch's d-hh:mm:ss
    ],
)
def test_time_limit_is_the_total_plus_25_percent_and_at_least_10_minutes(
    total: float, limit: str
) -> None:
    assert time_limit(total).text == limit
    assert time_limit(total).seconds % 60 == 0
    assert time_limit(total).seconds >= total + max(0.25 * total, 600.0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("5:30", 330),
        ("01:00:00", 3600),
        ("1-12", 129600),
        ("1-12:30", 131400),
        ("2-00:00:10", 172810),
        ("infinite", None),
        ("1:2:3:4", None),
    ],
)
def test_slurm_time_formats_are_read(text: str, seconds: int | None) -> None:
    assert slurm_seconds(text) == seconds


@given(st.floats(min_value=0, max_value=400 * 86400))
def test_slurm_time_reads_back(seconds: float) -> None:
    text = slurm_time(seconds)
    assert slurm_seconds(text) == int(-(-seconds // 1))


def test_a_session_limit_below_the_total_is_kept_and_said_to_be_short() -> None:
    assert job_time(None, 1107.0).text == "00:29:00"
    kept = job_time("15", 1107.0)  # 15 minutes: 900 s < 1107 s
    assert (kept.text, kept.short) == ("15", True)
    assert job_time("00:20:00", 1107.0).short is False
    assert job_time("1:00:00", 1107.0).short is False


# ------------------------------------------------------------------ job.sbatch


def test_job_sbatch_gets_the_default_time_only_when_the_session_sets_none(
    tmp_path: Path,
) -> None:
    """``batch_script`` writes what ``esdash submit`` puts in ``RUN/job.sbatch``."""
    from esdash.launch.slurm import batch_script
    from esdash.prepare.slurm_job import job_request, session_time

    run = RunDir(tmp_path / "run")
    unset = mri_session(tmp_path)
    assert session_time(unset) is None and unset.slurm.time == "00:30:00"  # the option default
    script = batch_script(job_request(unset), run, ["true"], default_time="00:29:00")
    assert "\n#SBATCH --time=00:29:00\n" in script
    assert "\n#SBATCH --time=00:30:00\n" in batch_script(job_request(unset), run, ["true"])
    for own in ("00:30:00", "2-00:00:00"):  # set, even to the default's value: kept
        data = {**unset.source, "slurm": {"time": own}}
        session = parse_session(data, unset.path)
        assert session_time(session) == own
        assert f"\n#SBATCH --time={own}\n" in batch_script(
            job_request(session), run, ["true"], "00:29:00"
        )
