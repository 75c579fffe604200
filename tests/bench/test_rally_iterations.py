"""Rally's ``iterations``, counted for real on the shared 2-node cluster with 2 bench ranks.

A task timed by iterations sends exactly ``warmup-iterations`` + ``iterations`` requests per
client, whatever the machine's speed, and its step ends when every client of every rank is
done: rank 0 hears each rank's "done" and says when the next step starts, so the run does not
wait out a time limit.  A task without any timing sends one request per client (Rally's
default), a parallel block of counted searches sends its tasks' requests together, and a
timed step after counted ones still measures its full time.  A ramp-up starts the clients
one after another over its time, as Rally's ``ramp-up-time-period`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.bench.channel import ChannelReader
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 100\n'
    'warmup_max = "0s"\n'
)


def search(name: str, body: dict, clients: int, **timing: object) -> dict:
    return {
        "operation": {"name": name, "operation-type": "search", "body": body},
        "clients": clients,
        **timing,
    }


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    index = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"colour": {"type": "keyword"}, "n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(index))
    colours = ("red", "green", "blue")
    docs = "".join(json.dumps({"colour": colours[i % 3], "n": i}) + "\n" for i in range(300))
    (directory / "docs.json").write_text(docs)
    red = {"query": {"term": {"colour": "red"}}}
    track = {
        "version": 2,
        "indices": [{"name": "tally", "body": "index.json"}],
        "corpora": [
            {
                "name": "tally",
                "documents": [
                    {"source-file": "docs.json", "document-count": 300, "target-index": "tally"}
                ],
            }
        ],
        "schedule": [
            {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 100}},
            # 3 clients over 2 ranks (2 + 1): 4 warm-up and 10 measured requests each
            search("counted", red, 3, **{"warmup-iterations": 4, "iterations": 10}),
            # paced at 4/s over its 2 clients: 6 requests each, about 3 s
            search(
                "paced", {"query": {"match_all": {}}}, 2, iterations=6, **{"target-throughput": 4}
            ),
            # no timing at all: Rally sends one request per client
            search("once", red, 1),
            {
                "parallel": {
                    "tasks": [
                        search("p-five", red, 1, iterations=5),
                        search("p-three", {"query": {"match_all": {}}}, 1, iterations=3),
                    ]
                }
            },
            search("timed", red, 2, **{"time-period": 2}),
            # 2 clients (one per rank) starting over 2 s of a 2 s warm-up: the second at 1 s
            search(
                "ramped",
                red,
                2,
                **{"warmup-time-period": 2, "ramp-up-time-period": 2, "time-period": 1},
            ),
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def test_iterations_are_counted_and_a_counted_step_ends_when_every_client_is_done(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    track = write_track(shared_tmp / "tally-track")
    session = write_session(
        shared_tmp, "iterations", 2, track=f'name = "rally"\npath = "{track}"', tables=BENCH
    )
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    run = next(
        Path(line.split(": ", 1)[1]).parent
        for line in result.stdout.splitlines()
        if line.startswith("results: ")
    )
    results = json.loads((run / "results.json").read_text())
    steps = {step["name"]: step for step in results["steps"]}
    assert list(steps) == ["counted", "paced", "once", "p-five+p-three", "timed", "ramped"]
    assert all(step["status"] == "measured" for step in steps.values()), steps

    def sent(step: str, query: str | None = None) -> int:
        numbers = steps[step]["queries"][query or step]
        assert numbers["failed"] == 0, numbers
        return numbers["ok"]

    counted = steps["counted"]
    assert (counted["planned"]["warmup_iterations"], counted["planned"]["iterations"]) == (4, 10)
    assert sent("counted") == 3 * 10
    assert counted["warmup"]["requests"] == 3 * 4
    assert set(counted["queries"]["counted"]["per_rank"]) == {"1", "2"}
    assert sent("paced") == 2 * 6
    assert sent("once") == 1
    # the block's 5 + 3 requests, spread over its 2 clients (4 each), both queries sent
    block = "p-five+p-three"
    assert sent(block, "p-five") + sent(block, "p-three") == 8
    assert sent(block, "p-five") > 0 and sent(block, "p-three") > 0
    # the counted steps ended when their clients were done, long before their 60 s limit
    for name in ("counted", "paced", "once", block):
        assert steps[name]["duration_s"] < 30, steps[name]
    # a timed step after them measures its time, starting when rank 0 said
    assert steps["timed"]["duration_s"] >= 1.5 and sent("timed") > 0

    # the ramp-up: client 1 of 2 (rank 2's) started its warm-up no earlier than 1 s into the
    # step (client 0 at once, unless its rank came late); both measured
    starts = {}
    for rank in (1, 2):
        for record in ChannelReader(RunDir(run).rank_channel(rank)).read():
            if record.get("kind") == "final":
                (ramped,) = [s for s in record["steps"] if s["step"] == "ramped"]
                starts.update(ramped["client_starts"])
    assert set(starts) == {"0", "1"} and starts["1"] >= 1.0, starts
    assert set(steps["ramped"]["queries"]["ramped"]["per_rank"]) == {"1", "2"}

    # Rally's metric names for the counted tasks too
    out = shared_tmp / "iterations-report"
    esdash(
        "report", str(run), "--format", "rally", "--no-figures", "--out", str(out), env_runs=runs
    )
    document = json.loads((out / "rally.json").read_text())
    (only,) = document["runs"]
    metrics = {entry["task"]: entry for entry in only["op_metrics"]}
    assert metrics["counted"]["throughput"]["unit"] == "ops/s"
    assert metrics["counted"]["error_rate"] == 0
