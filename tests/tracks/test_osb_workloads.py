"""OpenSearch Benchmark workloads read by the ``rally`` track (issue 18).

OSB forked Rally's format under other names: ``workload.json``, ``test_procedures``,
``benchmark.helpers``, ``workload.py``, and the shared ``common_operations`` directory of the
opensearch-benchmark-workloads repository, collected as ``../../common_operations/...`` from
a workload's ``test_procedures/``.  The workload here is written by the test in that
repository's layout, then loaded, planned and asked for its corpus as a run would; the
errors for a test procedure that does not exist, none marked default or none defined say
"test procedure", and a Rally track keeps its own names and its confinement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from esdash_plugins.tracks.rally import RallyTrack
from esdash_plugins.tracks.rally.dialect import OSB, RALLY, dialect_of, track_python_file

from esdash.errors import BadInput

COMMON = {
    "workload_setup.json": """\
{{ benchmark.collect(parts="delete_index.json") }},
{{ benchmark.collect(parts="create_index.json") }},
{{ benchmark.collect(parts="check_cluster_health.json") }},
{{ benchmark.collect(parts="index_append.json") }}
""",
    "delete_index.json": '{"operation": "delete-index"}',
    "create_index.json": """\
{
  "operation": {
    "operation-type": "create-index",
    "settings": {{ index_settings | default(default_index_settings | default({})) | tojson }}
  }
}""",
    "check_cluster_health.json": """\
{
  "name": "check-cluster-health",
  "operation": {
    "operation-type": "cluster-health",
    "index": "{{ index_name }}",
    "request-params": {"wait_for_status": "green"},
    "retry-until-success": true
  }
}""",
    "index_append.json": """\
{
  "operation": "index-append",
  "warmup-time-period": 0,
  "clients": {{ bulk_indexing_clients | default(1) }}
},
{"name": "refresh-after-index", "operation": "refresh"}""",
}

WORKLOAD = """\
{% import "benchmark.helpers" as benchmark with context %}
{
  "version": 2,
  "description": "Movies, written by the test",
  "indices": [{"name": "movies", "body": "index.json"}],
  "corpora": [
    {
      "name": "movies",
      "documents": [{"source-file": "documents.json", "document-count": 3}]
    }
  ],
  "operations": [
    {{ benchmark.collect(parts="operations/*.json") }}
  ],
  "test_procedures": [
    {{ benchmark.collect(parts="test_procedures/*.json") }}
  ]
}
"""

OPERATIONS = """\
{"name": "index-append", "operation-type": "bulk", "bulk-size": {{ bulk_size | default(2) }}},
{
  "name": "title-match",
  "operation-type": "search",
  "index": "movies",
  "body": {"query": {"match": {"title": "night"}}}
}
"""

TEST_PROCEDURES = """\
{
  "name": "index-and-search",
  "description": "ingest, then one query",
  "default": true,
  "schedule": [
    {% with default_index_settings={"index.number_of_replicas": 0}, index_name="movies" %}
    {{ benchmark.collect(parts="../../common_operations/workload_setup.json") }},
    {% endwith %}
    {"operation": "title-match", "warmup-iterations": 5, "iterations": 20, "clients": 1}
  ]
},
{
  "name": "index-only",
  "schedule": [
    {% with index_name="movies" %}
    {{ benchmark.collect(parts="../../common_operations/workload_setup.json") }}
    {% endwith %}
  ]
}
"""

INDEX = """\
{
  "settings": {"index.number_of_shards": {{ number_of_shards | default(1) }}},
  "mappings": {"properties": {"title": {"type": "text"}, "year": {"type": "integer"}}}
}
"""

WORKLOAD_PY = """\
def register(registry):
    registry.register_param_source("movie-titles", lambda workload, params, **kw: None)
"""

DOCUMENTS = [
    {"title": "Night of the Living Dead", "year": 1968},
    {"title": "A Night at the Opera", "year": 1935},
    {"title": "Nosferatu", "year": 1922},
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    """A workload in the opensearch-benchmark-workloads layout: ``<repo>/movies`` beside
    ``<repo>/common_operations``."""
    repo = tmp_path / "opensearch-benchmark-workloads"
    for name, text in COMMON.items():
        write(repo / "common_operations" / name, text)
    movies = repo / "movies"
    write(movies / "workload.json", WORKLOAD)
    write(movies / "index.json", INDEX)
    write(movies / "operations" / "default.json", OPERATIONS)
    write(movies / "test_procedures" / "default.json", TEST_PROCEDURES)
    write(movies / "workload.py", WORKLOAD_PY)
    write(movies / "documents.json", "".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    return movies


def error_of(path: Path, **options: object) -> str:
    with pytest.raises(BadInput) as info:
        RallyTrack().load({"path": path, **options})
    return str(info.value)


def test_a_workload_loads_with_its_default_test_procedure(workload: Path) -> None:
    loaded = RallyTrack().load({"path": workload})
    assert loaded.track_file == workload / "workload.json"
    assert (loaded.challenge, loaded.challenges) == (
        "index-and-search",
        ("index-and-search", "index-only"),
    )
    assert (loaded.index, loaded.ingest) == ("movies", "index-append")
    assert [step.name for step in loaded.steps] == ["title-match"]
    # benchmark.helpers rendered the index body; the with-block reached common_operations
    assert loaded.index_body["settings"] == {
        "index.number_of_shards": 1,
        "index.number_of_replicas": 0,
    }
    assert loaded.index_body["mappings"]["properties"]["year"] == {"type": "integer"}
    assert any(note.startswith("workload.py: ") for note in loaded.notes), loaded.notes
    assert loaded.summary().startswith(
        f"OpenSearch Benchmark workload 'movies' ({workload / 'workload.json'}), "
        f"test procedure 'index-and-search', index 'movies':"
    )


def test_a_workload_is_planned_task_by_task(workload: Path) -> None:
    tasks = RallyTrack().plan({"path": workload}, None)
    assert [task.name for task in tasks] == [
        "delete-index",
        "create-index",
        "check-cluster-health",
        "index-append",
        "refresh-after-index",
        "title-match",
    ]
    by_name = {task.name: task for task in tasks}
    assert by_name["index-append"].ingest
    assert by_name["title-match"].status == "run"
    assert all(task.status != "refused" for task in tasks), [
        (t.name, t.reason) for t in tasks if t.status == "refused"
    ]


def test_another_test_procedure_its_parameters_and_corpus(workload: Path, tmp_path: Path) -> None:
    track = RallyTrack()
    options = {"path": workload, "challenge": "index-only", "track_params": ["bulk_size=3"]}
    loaded = track.load(options)
    assert (loaded.challenge, loaded.steps) == ("index-only", ())
    assert [t.name for t in track.plan(options, None)][-1] == "refresh-after-index"
    corpus = track.corpus(options, tmp_path / "cache")
    assert Path(corpus.path).read_text().count("\n") == 3
    assert corpus.documents == 3


def test_a_missing_test_procedure_is_named_with_the_workloads_words(workload: Path) -> None:
    message = error_of(workload, challenge="index-and-serach")
    assert message == (
        f"track.challenge: {workload / 'workload.json'} has no test procedure "
        f"'index-and-serach' (did you mean \"index-and-search\"?); its test procedures: "
        f"index-and-search, index-only"
    )


def test_no_default_test_procedure(workload: Path) -> None:
    procedures = workload / "test_procedures" / "default.json"
    procedures.write_text(procedures.read_text().replace('"default": true,', ""))
    message = error_of(workload)
    assert message == (
        f"{workload / 'workload.json'}: the workload marks no test procedure as default; "
        f"choose one with track.challenge (index-and-search, index-only)"
    )


def test_a_workload_without_test_procedures(workload: Path) -> None:
    spec = workload / "workload.json"
    text = spec.read_text()
    spec.write_text(text.replace('"test_procedures"', '"challenges"'))  # Rally's key
    message = error_of(workload)
    assert message.endswith(
        "workload: must define exactly one of 'test_procedures', 'test_procedure' or "
        "'schedule' (found none of them)"
    ), message
    assert message.startswith(str(spec)), message


def test_a_single_test_procedure_object(workload: Path) -> None:
    spec = workload / "workload.json"
    spec.write_text(
        spec.read_text().replace(
            '"test_procedures": [\n    {{ benchmark.collect(parts="test_procedures/*.json") }}\n'
            "  ]",
            '"test_procedure": {"name": "only", "schedule": [{"operation": "title-match"}]}',
        )
    )
    loaded = RallyTrack().load({"path": spec})  # the file itself, too
    assert (loaded.challenge, loaded.challenges) == ("only", ("only",))
    assert "test procedure 'nope'" in error_of(spec, challenge="nope")


def test_collecting_beyond_common_operations_is_refused(workload: Path) -> None:
    outside = write(workload.parent / "elsewhere" / "ops.json", '{"operation": "refresh"}')
    procedures = workload / "test_procedures" / "default.json"
    procedures.write_text(
        procedures.read_text().replace(
            "common_operations/workload_setup.json", "elsewhere/ops.json", 1
        )
    )
    message = error_of(workload)
    assert "benchmark.collect(parts='../../elsewhere/ops.json') reaches " in message
    assert f"{outside.resolve()}, outside the track directory" in message
    assert str((workload.parent / "common_operations").resolve()) in message


def test_a_rally_track_does_not_reach_common_operations(workload: Path) -> None:
    track = workload.parent / "rally-track"
    write(
        track / "track.json",
        WORKLOAD.replace("benchmark", "rally").replace("test_procedures", "challenges"),
    )
    write(track / "index.json", INDEX)
    write(track / "operations" / "default.json", OPERATIONS)
    write(
        track / "challenges" / "default.json",
        TEST_PROCEDURES.replace("benchmark.collect", "rally.collect"),
    )
    (track / "documents.json").write_text((workload / "documents.json").read_text())
    message = error_of(track)
    assert "rally.collect(parts='../../common_operations/workload_setup.json') reaches " in message
    assert message.endswith("a track may collect only its own files"), message


def test_the_python_file_of_a_track_directory(workload: Path, tmp_path: Path) -> None:
    assert dialect_of(workload) is OSB
    assert track_python_file(workload) == workload / "workload.py"
    rally_dir = tmp_path / "rally"
    write(rally_dir / "track.json", "{}")
    assert dialect_of(rally_dir) is RALLY
    assert track_python_file(rally_dir) == rally_dir / "track.py"
    # an OSB workload that still carries Rally's track.json is read as the Rally track
    write(workload / "track.json", "{}")
    assert track_python_file(workload) == workload / "track.py"
