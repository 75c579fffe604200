"""A plan refuses what a track's templates and index bodies ask of an engine that lacks it.

Tracks written for Elasticsearch 8/9 install templates with a data stream ``lifecycle``,
ILM policies, time-series index modes, synthetic ``_source`` and ``time_series_metric``
fields; OpenSearch 3.4 answers each with a 400 (every table entry of
``esdash_plugins.tracks.rally.compat`` was sent to one), so a plan on OpenSearch refuses the
template's task, naming what is missing, and every task of the data stream it would make.
The same templates plan to run on an Elasticsearch that has the modules.  OpenSearch plugin
APIs (``/_plugins/_ism``) are refused unless the plugin is installed, a pipeline with a
mustache template without lang-mustache.  No cluster starts:
the plans are made for the distributions the backends report.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from esdash_plugins.backends.elasticsearch.distribution import SERVER_MAPPERS_8
from esdash_plugins.backends.opensearch.distribution import MODULES, mappers_of
from esdash_plugins.tracks import rally
from support.rally_tracks import copy_track

from esdash.plugin.api import PlannedTask
from esdash.plugin.values import Distribution

_OS_MODULES = tuple(sorted({m.name for m in MODULES} | {"transport-netty4"}))
OPENSEARCH = Distribution(
    Path("/os"),
    "3.4.0",
    "assembled",
    _OS_MODULES,
    scripting=True,
    plugins=("opensearch-security",),
    mappers=mappers_of(_OS_MODULES),
)
#: An Elasticsearch with the modules these templates need (not the integ-test zip).
ELASTICSEARCH = Distribution(
    Path("/es"),
    "8.19.21",
    "tarball",
    ("data-streams", "lang-painless", "mapper-extras", "x-pack-core", "x-pack-ilm"),
    scripting=True,
    mappers=(*SERVER_MAPPERS_8, "scaled_float"),
)


def plan(track: Path, distribution: Distribution, *params: str) -> dict[str, PlannedTask]:
    options = {"path": str(track), "test_mode": True, "track_params": list(params)}
    return {t.name: t for t in rally.RallyTrack().plan(options, distribution)}


def test_k8s_metrics_is_refused_on_opensearch_for_its_elasticsearch_templates(tmp_path):
    tasks = plan(copy_track("k8s_metrics", tmp_path), OPENSEARCH)
    component = tasks["create-track-component-templates"]
    assert (component.status, component.reason_kind) == ("refused", "module")
    assert "sets 'lifecycle' (the data stream lifecycle)" in (component.reason or "")
    assert "needs the data-streams module of Elasticsearch" in (component.reason or "")
    assert "assembled distribution 3.4.0 does not have it" in (component.reason or "")
    # Without its component templates the stream is never made: nothing of it runs.
    assert [t.name for t in tasks.values() if t.status == "run"] == []
    bulk = tasks["bulk-index-metrics-with-refresh"]
    assert bulk.reason is not None
    assert bulk.reason.startswith("data stream metrics-kubernetes.pod-rally cannot be made")


def test_k8s_metrics_plans_to_run_on_an_elasticsearch_with_the_modules(tmp_path):
    tasks = plan(copy_track("k8s_metrics", tmp_path), ELASTICSEARCH)
    assert {t.name: t.status for t in tasks.values() if t.status != "run"} == {}


def test_big5_for_opensearch_runs_but_its_ism_policy_needs_the_plugin(tmp_path):
    track = copy_track("big5", tmp_path)
    tasks = plan(track, OPENSEARCH, "target_opensearch=true")
    refused = {n: (t.reason_kind, t.reason) for n, t in tasks.items() if t.status != "run"}
    assert refused == {
        "create-ilm-policy": (
            "module",
            "PUT /_plugins/_ism/policies/logs-benchmark-policy needs the "
            "opensearch-index-management plugin, which this assembled distribution 3.4.0 "
            "does not have installed",
        )
    }
    with_ism = replace(OPENSEARCH, plugins=("opensearch-index-management", "opensearch-security"))
    assert all(t.status == "run" for t in plan(track, with_ism, "target_opensearch=true").values())
    # big5's Elasticsearch template names an ILM policy: nothing of its data stream runs.
    elastic = plan(track, OPENSEARCH)
    assert [t.name for t in elastic.values() if t.status == "run"] == []
    assert "sets index.lifecycle.name" in (elastic["create-index-template"].reason or "")


def template_track(directory: Path, template: dict, stream: bool = True) -> Path:
    """A track whose composable template ``template`` makes the data stream it ingests."""
    directory.mkdir(parents=True, exist_ok=True)
    body = {"index_patterns": ["ds-*"], "template": template}
    if stream:
        body["data_stream"] = {}
    (directory / "template.json").write_text(json.dumps(body))
    (directory / "docs.json").write_text('{"@timestamp": 1}\n')
    track = {
        "version": 2,
        "composable-templates": [{"name": "tpl", "template": "template.json"}],
        "data-streams": [{"name": "ds-x"}],
        "corpora": [
            {
                "name": "c",
                "documents": [
                    {"source-file": "docs.json", "document-count": 1, "target-data-stream": "ds-x"}
                ],
            }
        ],
        "schedule": [
            {"operation": {"operation-type": "create-composable-template"}},
            {"operation": {"operation-type": "bulk"}},
        ],
    }
    (directory / "track.json").write_text(json.dumps(track))
    return directory


#: Template parts OpenSearch 3.4 answers with a 400, the refusal's kind and what it names.
ELASTICSEARCH_ONLY = [
    ({"lifecycle": {"data_retention": "7d"}}, "module", "data-streams"),
    ({"settings": {"index": {"lifecycle": {"name": "p"}}}}, "module", "x-pack-ilm"),
    ({"settings": {"index.mode": "time_series"}}, "mapper", "index.mode: time_series"),
    (
        {"settings": {"index": {"mapping": {"source.mode": "synthetic"}}}},
        "mapper",
        "index.mapping.source.mode: synthetic",
    ),
    ({"mappings": {"_source": {"mode": "synthetic"}}}, "mapper", "_source.mode"),
    (
        {"mappings": {"properties": {"n": {"type": "long", "time_series_metric": "gauge"}}}},
        "mapper",
        "time_series_metric",
    ),
    ({"mappings": {"runtime": {"r": {"type": "long"}}}}, "mapper", "mappings.runtime"),
    ({"mappings": {"properties": {"o": {"subobjects": False}}}}, "mapper", "subobjects on field o"),
    ({"mappings": {"properties": {"v": {"type": "dense_vector"}}}}, "field_type", "dense_vector"),
]


@pytest.mark.parametrize(("template", "kind", "missing"), ELASTICSEARCH_ONLY)
def test_what_opensearch_lacks_refuses_the_template_and_its_stream(
    tmp_path, template, kind, missing
):
    tasks = plan(template_track(tmp_path, template), OPENSEARCH)
    created = tasks["create-composable-template"]
    assert (created.status, created.reason_kind) == ("refused", kind), created
    assert missing in (created.reason or ""), created.reason
    assert "template tpl" in (created.reason or "")
    assert tasks["bulk"].status == "refused"
    assert "data stream ds-x cannot be made" in (tasks["bulk"].reason or "")


def test_a_template_opensearch_has_everything_for_runs(tmp_path):
    template = {
        "settings": {"index": {"number_of_shards": 1, "codec": "best_compression"}},
        "mappings": {
            "_meta": {"managed": True},
            "properties": {"@timestamp": {"type": "date"}, "n": {"type": "long", "meta": {}}},
        },
    }
    tasks = plan(template_track(tmp_path, template), OPENSEARCH)
    assert {n: t.status for n, t in tasks.items()} == {
        "create-composable-template": "run",
        "bulk": "run",
    }


def test_an_index_body_with_an_elasticsearch_index_mode_refuses_the_run(tmp_path):
    (tmp_path / "index.json").write_text(
        json.dumps({"settings": {"index.mode": "logsdb"}, "mappings": {"properties": {}}})
    )
    (tmp_path / "docs.json").write_text("{}\n")
    track = {
        "version": 2,
        "indices": [{"name": "logs", "body": "index.json"}],
        "corpora": [
            {"name": "c", "documents": [{"source-file": "docs.json", "document-count": 1}]}
        ],
        "schedule": [{"operation": {"operation-type": "bulk"}}],
    }
    (tmp_path / "track.json").write_text(json.dumps(track))
    (bulk,) = plan(tmp_path, OPENSEARCH).values()
    assert (bulk.status, bulk.reason_kind) == ("refused", "mapper")
    assert bulk.reason == (
        "index logs uses index.mode: logsdb (an index mode (time_series, logsdb)), which "
        "Elasticsearch has and this assembled distribution 3.4.0 does not have"
    )
    assert plan(tmp_path, ELASTICSEARCH)["bulk"].status == "run"


def test_github_archive_pipeline_needs_mustache_and_without_it_nothing_is_indexed(tmp_path):
    """github_archive's pipeline sets ``@timestamp`` to ``{{{_ingest.timestamp}}}``, a
    mustache template.  OpenSearch without lang-mustache takes the pipeline but writes the
    literal text into the date field, rejecting every document (what a run of the track
    showed); so the plan refuses the pipeline for the module, and, since its template's
    ``index.default_pipeline`` names it, every document would be rejected without it too
    (``pipeline with id [...] does not exist``): nothing of the track runs."""
    track = copy_track("github_archive", tmp_path)
    tasks = plan(track, OPENSEARCH)
    pipeline = tasks["create-ingest-pipeline-pipeline"]
    assert (pipeline.status, pipeline.reason_kind) == ("refused", "module")
    assert pipeline.reason == (
        "PUT /_ingest/pipeline/gharchive-pipeline needs the lang-mustache module, which this "
        "assembled distribution 3.4.0 does not have"
    )
    assert [t.name for t in tasks.values() if t.status == "run"] == []
    assert (tasks["index"].reason or "").startswith(
        "every document sent to gharchive goes through pipeline gharchive-pipeline "
        "(index.default_pipeline of the template task create-index-template puts), which is "
        "never put (create-ingest-pipeline-pipeline is refused)"
    )
    assert (tasks["default"].reason or "").startswith("its index is never filled: ")
    with_mustache = replace(OPENSEARCH, modules=(*OPENSEARCH.modules, "lang-mustache"))
    assert all(t.status == "run" for t in plan(track, with_mustache).values())
