"""One campaign, two engines: ``cluster.backend = ["elasticsearch", "opensearch"]``.

`esdash sweep` starts a 1-node secure cluster of each engine in turn (real nodes, real MPI
ranks), runs the same short step on both, and `esdash report` puts them side by side: both
engines in every table, and the settings each cluster read back with differences flagged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import prereqs
from support.cli import esdash, free_port_blocks

pytestmark = [pytest.mark.opensearch, pytest.mark.es, pytest.mark.mpi]

STEPS = [
    {
        "name": "both",
        "search_queries": [
            {"name": "everything", "body": {"query": {"match_all": {}}}},
            {"name": "mri", "body": {"query": {"term": {"modality": "MRI"}}}},
        ],
        "warmup_time_secs": 1,
        "execution_time_secs": 2,
    }
]


def base_session(root: Path) -> Path:
    http, transport = free_port_blocks(1)
    path = root / "enginesbase.toml"
    path.write_text(
        'name = "enginesbase"\n'
        f'[cluster]\nnodes = 1\nheap = "512m"\nrun_as = "{prereqs.es_user()}"\n'
        f"http_port = {http}\ntransport_port = {transport}\n"
        '[track]\nname = "mri"\ndocuments = 500\n'
        '[benchmark]\nworkers_per_node = 1\nbulk_size = 250\nqueries = "steps.json"\n'
        'after_ingest = "force-merge"\nwarmup_max = "0s"\norder = "listed"\n'
    )
    return path


def test_one_campaign_runs_both_engines_and_the_report_sets_them_side_by_side(
    shared_tmp: Path,
) -> None:
    for prerequisite in ("opensearch", "es", "mpi"):
        prereqs.require(prerequisite)
    root = shared_tmp / "engines"
    root.mkdir()
    root.chmod(0o755)
    runs = root / "runs"
    (root / "steps.json").write_text(json.dumps(STEPS))
    base_session(root)
    campaign = root / "engines.toml"
    campaign.write_text(
        'name = "engines"\nsession = "enginesbase.toml"\nrepetitions = 1\ningest = "once"\n'
        '[axes]\ncluster.backend = ["elasticsearch", "opensearch"]\n'
    )
    directory = root / "campaign"
    esdash("sweep", str(campaign), "--dir", str(directory), "--quiet", env_runs=runs, timeout=900)
    out = root / "report"
    esdash(
        "report", str(directory), "--format", "md,json", "--out", str(out), "--no-figures",
        env_runs=runs,
    )  # fmt: skip
    tables = json.loads((out / "report.json").read_text())["tables"]
    # never pooled: one configuration per engine in the per-configuration tables
    engines = {r.get("engine", "elasticsearch") for r in tables["queries"]["records"]}
    assert engines == {"elasticsearch", "opensearch"}
    assert {r.get("engine", "elasticsearch") for r in tables["ingest"]["records"]} == engines
    side = tables["engines"]["records"]
    for query in ("everything", "mri"):
        record = next(r for r in side if r.get("query") == query)
        assert record["elasticsearch"]["requests_per_s"] > 0
        assert record["opensearch"]["requests_per_s"] > 0
    loads = {r["engine"]: r for r in side if "engine" in r}
    assert loads["elasticsearch"]["ingest_docs_per_s"] > 0
    assert loads["opensearch"]["ingest_docs_per_s"] > 0
    fairness = {r["setting"]: r for r in tables["fairness"]["records"]}
    assert fairness["version"]["opensearch"] == "3.4.0"
    assert fairness["shards"]["elasticsearch"] == fairness["shards"]["opensearch"]
    assert fairness["codec"]["elasticsearch"] == fairness["codec"]["opensearch"] == "default"
    # Each engine's nodes got the options of its own variable (conftest.py sets both), as
    # the nodes themselves report them.
    for engine, variable in (
        ("elasticsearch", "ES_JAVA_OPTS"),
        ("opensearch", "OPENSEARCH_JAVA_OPTS"),
    ):
        flags = fairness["JVM flags"][engine].split()
        assert any(flag.startswith("-Xmx") for flag in flags)
        assert set(os.environ[variable].split()) <= set(flags)
    markdown = (out / "report.md").read_text()
    assert "## Engines side by side" in markdown and "## Is the comparison fair?" in markdown
    assert "| none on opensearch |" in markdown
