"""The paper's seven MRI queries return exactly the documents their conditions select.

The same generated corpus goes into each engine; every query runs with
``track_total_hits: true`` and its hit count must equal the count computed in Python over
that corpus with the query's own condition (``tests/tracks/query_eval.py`` evaluates the
query body itself, script filter included).  On OpenSearch all seven run, brain_age's
painless script filter too; on Elasticsearch brain_age is skipped only where the
distribution has no painless (the Maven integ-test-zip has no lang-painless module).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import Cluster
from esdash_plugins.tracks import mri
from tracks.query_eval import matches

from esdash.plugin.capabilities import missing_capability
from esdash.plugin.manager import get_plugins
from esdash.rundir.layout import RunDir

DOCS = 3000
SEED = 7
INDEX = "hits-mri"
QUERIES = [step.queries[0] for step in mri.MriTrack().query_steps({})]

ENGINES = [
    pytest.param("opensearch", marks=[pytest.mark.opensearch, pytest.mark.mpi]),
    pytest.param("elasticsearch", marks=[pytest.mark.es, pytest.mark.mpi]),
]


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return list(mri.generate(DOCS, SEED))


@pytest.fixture(scope="module", params=ENGINES)
def loaded(request: pytest.FixtureRequest, corpus: list[dict]) -> Iterator[Cluster]:
    """The engine's shared cluster with the corpus in ``hits-mri`` (2 shards, refreshed)."""
    fixture = "os_cluster" if request.param == "opensearch" else "es_cluster"
    cluster: Cluster = request.getfixturevalue(fixture)
    cluster.request("DELETE", f"/{INDEX}")
    body = mri.MriTrack().index_body({"shards": 2, "replicas": 0})
    cluster.ok("PUT", f"/{INDEX}", body)
    for start in range(0, DOCS, 1000):
        lines = []
        for doc in corpus[start : start + 1000]:
            lines += ['{"index":{}}', json.dumps(doc)]
        answer = cluster.ok("POST", f"/{INDEX}/_bulk", "\n".join(lines) + "\n", ndjson=True)
        assert answer["errors"] is False
    cluster.ok("POST", f"/{INDEX}/_refresh")
    try:
        yield cluster
    finally:
        cluster.request("DELETE", f"/{INDEX}")


def expected_hits(query: dict, corpus: list[dict]) -> int:
    text_fields = {f for f, p in mri.mapping()["properties"].items() if p["type"] == "text"}
    return sum(matches(query, doc, text_fields) for doc in corpus)


@pytest.mark.parametrize("query", QUERIES, ids=[q.name for q in QUERIES])
def test_hit_count_matches_python(loaded: Cluster, corpus: list[dict], query) -> None:
    if "scripting" in query.requires:
        home = RunDir.open(loaded.run).read_info().home
        distribution = get_plugins().backend(loaded.backend).inspect(Path(str(home)))
        if not distribution.scripting:
            # Elasticsearch's integ-test-zip has no painless: the plan refuses the query
            # with the reason, and the cluster indeed cannot run it.
            assert loaded.backend == "elasticsearch", "every OpenSearch test cluster has painless"
            reason = missing_capability(tuple(query.requires), distribution, query.body)
            assert reason is not None and "painless" in reason
            status, _headers, answer = loaded.request("POST", f"/{INDEX}/_search", query.body)
            assert status == 400 and "painless" in str(answer), (status, answer)
            return
    body = {**query.body, "track_total_hits": True, "size": 0}
    answer = loaded.ok("POST", f"/{INDEX}/_search", body)
    total = answer["hits"]["total"]
    want = expected_hits(dict(query.body["query"]), corpus)
    assert want > 0, "a query that matches nothing proves nothing"
    assert total == {"value": want, "relation": "eq"}, (loaded.backend, query.name)
