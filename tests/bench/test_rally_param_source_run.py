"""A Rally track's parameter source and scroll searches, run for real on the shared cluster.

The track (index ``sourced``, 300 generated documents, 100 per colour) has a search whose
bodies come from its ``track.py``: a function source drawing a colour per request, each body
tagging its search with a stats group of that colour (``"stats": ["sourced-red"]``), so the
index's search stats show which bodies reached the cluster.  Two scroll searches read 3
pages of 10 hits and every page of 100 hits (3 full pages, then the empty one that ends it);
each exchange is one timed request whose documents are the pages' hits together, and every
scroll is cleared at its end.  A ``paginated-search`` sorted by ``n`` pages by
``search_after`` through all 300 documents (3 pages of 100: were it not moving on, it would
end after 2 pages with the same hits twice).  A task whose runner the track registers,
sending one search, runs as that search (10 blue hits, the default page).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster import pki
from esdash.cluster.http import Connection, Target
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

INDEX = "sourced"
COLOURS = ("red", "green", "blue")
BENCH = (
    '[benchmark]\nworkers_per_node = 1\nwarmup = "0s"\nduration = "2s"\nbulk_size = 100\n'
    'warmup_max = "0s"\n'
)
TRACK_PY = f'''
import random

COLOURS = {list(COLOURS)!r}


def by_colour(track, params, **kwargs):
    colour = random.choice(COLOURS)
    return {{
        "index": None,
        "body": {{
            "query": {{"term": {{"colour": colour}}}},
            "size": params["hits"],
            "stats": [f"{INDEX}-{{colour}}"],
        }},
    }}


async def count_blue(es, params):
    await es.search(index="{INDEX}", body={{"query": {{"term": {{"colour": "blue"}}}}}})


def register(registry):
    registry.register_param_source("by-colour", by_colour)
    registry.register_runner("count-blue", count_blue, async_runner=True)
'''


def timed(operation: dict) -> dict:
    return {"operation": operation, "clients": 1, "warmup-time-period": 0, "time-period": 2}


def write_track(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    index = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"colour": {"type": "keyword"}, "n": {"type": "integer"}}},
    }
    (directory / "index.json").write_text(json.dumps(index))
    docs = "".join(json.dumps({"colour": COLOURS[i % 3], "n": i}) + "\n" for i in range(300))
    (directory / "docs.json").write_text(docs)
    (directory / "track.py").write_text(TRACK_PY)
    everything = {"query": {"match_all": {}}}
    track = {
        "version": 2,
        "indices": [{"name": INDEX, "body": "index.json"}],
        "corpora": [
            {
                "name": INDEX,
                "documents": [
                    {"source-file": "docs.json", "document-count": 300, "target-index": INDEX}
                ],
            }
        ],
        "schedule": [
            {"operation": {"name": "bulk", "operation-type": "bulk", "bulk-size": 100}},
            timed(
                {
                    "name": "from-source",
                    "operation-type": "search",
                    "param-source": "by-colour",
                    "hits": 5,
                }
            ),
            timed({"name": "blue", "operation-type": "count-blue"}),
            timed(
                {
                    "name": "three-pages",
                    "operation-type": "scroll-search",
                    "index": INDEX,
                    "pages": 3,
                    "results-per-page": 10,
                    "body": everything,
                }
            ),
            timed(
                {
                    "name": "every-page",
                    "operation-type": "scroll-search",
                    "index": INDEX,
                    "pages": "all",
                    "results-per-page": 100,
                    "body": everything,
                }
            ),
            timed(
                {
                    "name": "search-after",
                    "operation-type": "paginated-search",
                    "index": INDEX,
                    "pages": "all",
                    "results-per-page": 100,
                    "body": {"query": {"match_all": {}}, "sort": [{"n": "asc"}]},
                }
            ),
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


def get(run: Path, path: str) -> dict:
    node = RunDir.open(run).read_topology().nodes[0]
    connection = Connection(Target(node.name, node.http_address, True), pki.read_credentials(run))
    try:
        status, body = connection.request("GET", path, None)
    finally:
        connection.close()
    assert status == 200, body
    return json.loads(body)


def test_source_bodies_and_scroll_pages_reach_the_cluster(
    shared_cluster: tuple[Path, Path], shared_tmp: Path
) -> None:
    cluster_run, runs = shared_cluster
    track = write_track(shared_tmp / "sourced-track")
    options = f'name = "rally"\npath = "{track}"\ntrust_code = true'  # runs its track.py
    session = write_session(shared_tmp, "sourced", 2, track=options, tables=BENCH)
    result = esdash("run", str(session), "--cluster", str(cluster_run), env_runs=runs)
    run = next(
        Path(line.split(": ", 1)[1]).parent
        for line in result.stdout.splitlines()
        if line.startswith("results: ")
    )

    # the plan holds the source's bodies: several, each searching one colour
    plan = RunDir.open(run).read_bench_plan()
    planned = {q.name: q for step in plan.steps for q in step.queries}
    bodies = planned["from-source"].variants
    assert len(bodies) == 200
    drawn = {b["query"]["term"]["colour"] for b in bodies}
    assert drawn == set(COLOURS)
    assert (planned["three-pages"].pages, planned["every-page"].pages) == (3, -1)
    assert (planned["search-after"].pages, planned["search-after"].paging) == (-1, "search_after")

    results = json.loads((run / "results.json").read_text())
    steps = {step["name"]: step for step in results["steps"]}
    assert all(step["status"] == "measured" for step in steps.values()), steps
    numbers = {name: steps[name]["queries"][name] for name in steps}
    expected = {
        "from-source": 5,
        "blue": 10,
        "three-pages": 30,
        "every-page": 300,
        "search-after": 300,
    }
    for name, per_request in expected.items():
        got = numbers[name]
        assert got["ok"] > 0 and got["failed"] == 0, (name, got)
        # every request returned the hits its body asks for (a scroll: all of its pages)
        assert got["docs"] == got["ok"] * per_request, (name, got)

    # the cluster saw more than one of the source's bodies: their stats groups
    stats = get(cluster_run, f"/{INDEX}/_stats/search?groups=*")
    groups = stats["indices"][INDEX]["total"]["search"].get("groups", {})
    hit = {g for g, v in groups.items() if v["query_total"] > 0}
    assert hit <= {f"{INDEX}-{c}" for c in COLOURS}
    # every search of the step was one of the source's bodies (one shard each) ...
    assert sum(v["query_total"] for v in groups.values()) == numbers["from-source"]["ok"]
    # ... and they were not all the same: the client cycles 200 draws of three colours
    if numbers["from-source"]["ok"] >= 10:
        assert len(hit) >= 2, groups

    # every scroll was cleared at the end of its exchange (none waits for its keep-alive)
    nodes = get(cluster_run, "/_nodes/stats/indices/search")["nodes"]
    assert sum(n["indices"]["search"]["scroll_current"] for n in nodes.values()) == 0
