"""Rally's administrative operations as the one-off requests rank 0 sends.

A track written here has one task of each administrative operation esdash maps
(``plugins/tracks/rally/requests.py``), before and after its bulk task; the requests are
checked against what Rally 2.13's runners send, the plan text against what rank 0 does, and
the refusals against the module lists the backends report (the Elasticsearch integ-test-zip
as its backend inspects it, OpenSearch with its full and its bare module set).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from esdash_plugins.backends.elasticsearch.distribution import INTEG_TEST_MODULES, SERVER_MAPPERS_8
from esdash_plugins.backends.opensearch.distribution import MODULES, mappers_of
from esdash_plugins.tracks import rally
from esdash_plugins.tracks.rally.requests import ONE_OFF_OPERATIONS
from support import prereqs

from esdash.errors import BadInput
from esdash.plugin.values import Distribution

ES_ZIP = Distribution(
    Path("/es"),
    "8.19.21",
    "integ-test-zip",
    tuple(sorted(INTEG_TEST_MODULES)),
    scripting=False,
    mappers=SERVER_MAPPERS_8,
)
_OS_ALL = tuple(sorted({m.name for m in MODULES} | {"transport-netty4"}))
OS_FULL = Distribution(
    Path("/os"), "3.4.0", "assembled", _OS_ALL, scripting=True, mappers=mappers_of(_OS_ALL)
)
OS_BARE = Distribution(
    Path("/os"), "3.4.0", "integ-test-zip", ("transport-netty4",), scripting=False
)

TEMPLATE = {
    "index_patterns": ["logs-*"],
    "data_stream": {},
    "template": {"settings": {"number_of_shards": "{{ shards | default(1) }}"}},
}


def _op(name: str, kind: str, **spec: object) -> dict[str, object]:
    return {"name": name, "operation-type": kind, **spec}


OPERATIONS = [
    _op("drop-templates", "delete-composable-template"),
    _op("templates", "create-composable-template", settings={"index.refresh_interval": "5s"}),
    _op("inline-template", "create-composable-template", template="inline", body={"a": 1}),
    _op("components", "create-component-template"),
    _op("drop-component", "delete-component-template", template="comp"),
    _op("legacy", "create-index-template", template="old", body={"index_patterns": ["o-*"]}),
    _op("drop-legacy", "delete-index-template", template="old"),
    _op(
        "pipeline",
        "put-pipeline",
        id="stamp",
        body={"processors": [{"set": {"field": "x", "value": 1}}]},
    ),
    _op("empty-pipeline", "put-pipeline", id="none", body={"processors": []}),
    _op("stream", "create-data-stream", **{"data-stream": "logs-x"}),
    _op("drop-stream", "delete-data-stream", **{"data-stream": "logs-x"}),
    _op("index-append", "bulk", **{"bulk-size": 10}),
    _op(
        "settings",
        "put-settings",
        body={"transient": {"indices.recovery.max_bytes_per_sec": "50mb"}},
    ),
    _op("merge", "force-merge", **{"max-num-segments": 1}),
    _op("merge-all", "force-merge", index="docs,other"),
    _op(
        "refresh-once",
        "raw-request",
        method="POST",
        path="/docs/_refresh",
        **{"request-params": {"ignore_unavailable": True}},
    ),
    _op("pause", "sleep", duration=0.5),
    _op("recovered", "wait-for-recovery", index="docs"),
    _op("job", "create-ml-job", **{"job-id": "j1"}, body={"analysis_config": {}}),
    _op("drop-job", "delete-ml-job", **{"job-id": "j1"}),
    _op("policy", "create-ilm-policy", **{"policy-name": "p"}, body={"policy": {"phases": {}}}),
    _op("repo", "create-snapshot-repository", repository="r", body={"type": "url"}),
    _op("fs-repo", "create-snapshot-repository", repository="f", body={"type": "fs"}),
    _op("match-all", "search", body={"query": {"match_all": {}}}),
]


def _track(directory: Path, operations: list[dict[str, object]] = OPERATIONS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "index.json").write_text(json.dumps({"mappings": {"properties": {}}}))
    (directory / "template.json").write_text(json.dumps(TEMPLATE))
    (directory / "component.json").write_text(
        json.dumps({"template": {"mappings": {"properties": {}}}, "version": 3})
    )
    (directory / "documents.json").write_text("".join(f'{{"n": {i}}}\n' for i in range(10)))
    schedule = [{"operation": op["name"]} for op in operations]
    schedule[-1].update({"warmup-time-period": 0, "time-period": 1})
    spec = {
        "version": 2,
        "indices": [{"name": "docs", "body": "index.json"}],
        "composable-templates": [
            {"name": "logs", "index-pattern": "logs-*", "template": "template.json"}
        ],
        "component-templates": [{"name": "comp", "template": "component.json"}],
        "corpora": [
            {
                "name": "docs",
                "documents": [{"source-file": "documents.json", "document-count": 10}],
            }
        ],
        "operations": operations,
        "challenges": [{"name": "all", "default": True, "schedule": schedule}],
    }
    (directory / "track.json").write_text(json.dumps(spec))
    return directory


@pytest.fixture
def track_dir(tmp_path: Path) -> Path:
    return _track(tmp_path / "admin")


def _requests(track_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    loaded = rally.load({"path": str(track_dir), "track_params": ["shards=2"]})
    found: dict[str, list[tuple[object, ...]]] = {}
    for one in loaded.one_offs:
        found.setdefault(one.name, []).append(
            (one.when, one.method, one.path, one.body, one.missing_ok)
        )
    return found


def test_each_operation_is_the_request_rallys_runner_sends(track_dir: Path) -> None:
    found = _requests(track_dir)
    before, after = "before-ingest", "after-ingest"
    # the template file rendered with the track parameters, the task's settings merged in
    merged = {
        **TEMPLATE,
        "template": {"settings": {"number_of_shards": "2", "index.refresh_interval": "5s"}},
    }
    assert found == {
        # the track's templates: deletes ignore a missing one, creates carry the settings
        "drop-templates": [(before, "DELETE", "/_index_template/logs", None, True)],
        "templates": [(before, "PUT", "/_index_template/logs", merged, False)],
        "inline-template": [(before, "PUT", "/_index_template/inline", {"a": 1}, False)],
        # a component template is sent as its "template" part only (Rally's runner)
        "components": [
            (
                before,
                "PUT",
                "/_component_template/comp",
                {"template": {"mappings": {"properties": {}}}},
                False,
            )
        ],
        "drop-component": [(before, "DELETE", "/_component_template/comp", None, True)],
        "legacy": [(before, "PUT", "/_template/old", {"index_patterns": ["o-*"]}, False)],
        "drop-legacy": [(before, "DELETE", "/_template/old", None, True)],
        "pipeline": [
            (
                before,
                "PUT",
                "/_ingest/pipeline/stamp",
                {"processors": [{"set": {"field": "x", "value": 1}}]},
                False,
            )
        ],
        "empty-pipeline": [(before, "PUT", "/_ingest/pipeline/none", {"processors": []}, False)],
        "stream": [(before, "PUT", "/_data_stream/logs-x", None, False)],
        "drop-stream": [(before, "DELETE", "/_data_stream/logs-x", None, True)],
        "settings": [
            (
                after,
                "PUT",
                "/_cluster/settings",
                {"transient": {"indices.recovery.max_bytes_per_sec": "50mb"}},
                False,
            )
        ],
        "merge": [(after, "POST", "/docs/_forcemerge?max_num_segments=1", None, False)],
        "merge-all": [(after, "POST", "/docs,other/_forcemerge", None, False)],
        "refresh-once": [(after, "POST", "/docs/_refresh?ignore_unavailable=true", None, False)],
        "pause": [(after, "", "", None, False)],
        "recovered": [(after, "GET", "/docs/_recovery", None, False)],
        "job": [(after, "PUT", "/_ml/anomaly_detectors/j1", {"analysis_config": {}}, False)],
        "drop-job": [(after, "DELETE", "/_ml/anomaly_detectors/j1", None, True)],
        "policy": [(after, "PUT", "/_ilm/policy/p", {"policy": {"phases": {}}}, False)],
        "repo": [(after, "PUT", "/_snapshot/r", {"type": "url"}, False)],
        "fs-repo": [(after, "PUT", "/_snapshot/f", {"type": "fs"}, False)],
    }
    loaded = rally.load({"path": str(track_dir), "track_params": ["shards=2"]})
    pause = next(one for one in loaded.one_offs if one.name == "pause")
    assert pause.seconds == 0.5
    recovered = next(one for one in loaded.one_offs if one.name == "recovered")
    assert recovered.wait == "recovery"


def test_the_plan_says_when_rank_0_sends_each_request(track_dir: Path) -> None:
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": str(track_dir)}, OS_FULL)}
    assert tasks["merge"].status == "run"
    assert tasks["merge"].esdash == (
        "sent once by rank 0 after the ingest: POST /docs/_forcemerge?max_num_segments=1"
    )
    assert tasks["templates"].esdash.startswith(
        "sent once by rank 0 before the ingest: PUT /_index_template/logs"
    )
    assert "matching 'logs-*'" in tasks["drop-templates"].esdash  # not deleted, and said so
    assert tasks["pause"].esdash == "sent once by rank 0 after the ingest: sleeps 0.5 s"
    assert all(t.reason_kind != "unsupported_operation" for t in tasks.values())


#: Per task, the module a distribution must report for it (None: in every server).
NEEDS = {
    "pipeline": "ingest-common",
    "stream": "data-streams",
    "drop-stream": "data-streams",
    "job": "x-pack-ml",
    "drop-job": "x-pack-ml",
    "policy": "x-pack-ilm",
    "repo": "repository-url",
}


@pytest.mark.parametrize(
    "distribution", [ES_ZIP, OS_FULL, OS_BARE], ids=["es-zip", "os", "os-bare"]
)
def test_refusals_follow_the_modules_the_backend_reports(
    track_dir: Path, distribution: Distribution
) -> None:
    track = rally.RallyTrack()
    options = {"path": str(track_dir)}
    tasks = {t.name: t for t in track.plan(options, distribution)}
    modules = set(distribution.modules)
    elasticsearch = "x-pack-core" in modules
    for name in [op["name"] for op in OPERATIONS if op["operation-type"] in ONE_OFF_OPERATIONS]:
        module = NEEDS.get(str(name))
        # OpenSearch has data streams in its server
        lacking = module is not None and module not in modules
        if module == "data-streams" and not elasticsearch:
            lacking = False
        task = tasks[str(name)]
        assert (task.status == "refused") == lacking, (name, task)
        if lacking:
            assert task.reason_kind == "module" and task.reason is not None
            assert f"needs the {module} module" in task.reason
            assert distribution.flavor in task.reason
    # only what the distribution can serve goes into the bench plan
    sent = {r.name for r in track.track_requests(options, distribution)}
    one_offs = {name for name, t in tasks.items() if t.esdash.startswith("sent once")}
    assert sent == {name for name in one_offs if tasks[name].status == "run"}


def test_the_integ_test_zip_lacks_what_its_backend_says(track_dir: Path) -> None:
    """The refusals above hold for the distribution as the backend inspects it, when it is
    installed (the modules directory is what the backend reads)."""
    home = prereqs.es_home()
    if home is None or not (home / "modules").is_dir():
        prereqs.unavailable("the Elasticsearch integ-test-zip is not installed (esdash fetch)")
    from esdash_plugins.backends.elasticsearch.distribution import inspect

    installed = inspect(home)
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": str(track_dir)}, installed)}
    for name, module in NEEDS.items():
        assert (tasks[name].status == "refused") == (module not in installed.modules), name


def test_bad_administrative_tasks_name_the_fix(tmp_path: Path) -> None:
    bad = [
        _op("pipeline", "put-pipeline", id="p"),  # no body
        _op("index-append", "bulk"),
    ]
    with pytest.raises(BadInput, match="'body' is missing"):
        rally.load({"path": str(_track(tmp_path / "a", bad))})
    unknown = [_op("t", "create-composable-template", template="nope"), _op("b", "bulk")]
    with pytest.raises(BadInput, match="'nope' is not among the track's logs"):
        rally.load({"path": str(_track(tmp_path / "b", unknown))})
    negative = [_op("s", "sleep", duration=-1), _op("b", "bulk")]
    with pytest.raises(BadInput, match="'duration' must be >= 0"):
        rally.load({"path": str(_track(tmp_path / "c", negative))})
