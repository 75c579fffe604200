"""The ``rally`` track: Rally track directories rendered and mapped onto esdash's model.

The fixtures under ``tests/fixtures/rally/`` are small tracks written in the layout of
Elastic's published ones (``rally.collect`` of operation and challenge files, parameters
with defaults, a challenge collecting ``common/`` files relative to itself, the helper
macro, a corpus with action lines).  Both load in Rally 2.13 itself (``esrally info``).
"""

from __future__ import annotations

import bz2
import logging
import shutil
from pathlib import Path

import pytest
from esdash_plugins.tracks import rally
from esdash_plugins.tracks.rally import template as rally_template

from esdash.errors import BadInput
from esdash.plugin.manager import load_plugins
from esdash.plugin.options import validate
from esdash.plugin_api import Query

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rally"
WEBLOGS = FIXTURES / "weblogs"
ACTIONS = FIXTURES / "actions"


@pytest.fixture
def track() -> rally.RallyTrack:
    return rally.RallyTrack()


@pytest.fixture
def weblogs(tmp_path: Path) -> Path:
    """A private copy of the weblogs fixture, for tests that change files."""
    return Path(shutil.copytree(WEBLOGS, tmp_path / "weblogs"))


def options(path: Path, **more) -> dict:
    return {"path": path, **more}


# ------------------------------------------------------------------ registration, options


def test_registered_through_its_entry_point_with_declared_options():
    plugins = load_plugins()
    item = plugins.registries["track"]["rally"]
    assert item.plugin == "track-rally"
    values, problems = validate(
        item.obj.options,
        {"path": "weblogs", "track_params": ["bulk_size=10"], "challenge": "x"},
        "track",
        FIXTURES,
    )
    assert not problems
    assert values["path"] == WEBLOGS and values["track_params"] == ("bulk_size=10",)
    assert values["index"] is None and values["corpus_dir"] is None
    _, problems = validate(item.obj.options, {}, "track", FIXTURES)
    assert [p.key for p in problems] == ["track.path"]


# --------------------------------------------------------------------- the default challenge


def test_index_body_is_the_rendered_body_file(track):
    body = track.index_body(options(WEBLOGS))
    assert body["settings"] == {"index.number_of_shards": 1, "index.number_of_replicas": 0}
    assert body["mappings"]["dynamic"] == "strict"
    assert body["mappings"]["properties"]["path"]["fields"]["raw"] == {"type": "keyword"}
    assert track.index_name(options(WEBLOGS)) == "weblogs"
    assert track.index == "weblogs"


def test_search_tasks_become_query_steps_with_converted_timing(track):
    steps = {s.name: s for s in track.query_steps(options(WEBLOGS))}
    assert list(steps) == [
        "match-all",
        "status-range",
        "recent",
        "slow-requests",
        "archive-only",  # searches the track's other index, weblogs-archive
        "scroll",
        "node-stats",
    ]
    # a search with pages scrolls (Rally's deprecated form of scroll-search): 5 pages of 10
    scroll = steps["scroll"].queries[0]
    assert (scroll.pages, scroll.body["size"], scroll.index) == (5, 10, "weblogs")

    # 2 clients at 40 ops/s together (the step's total rate), 100 + 200 iterations per
    # client, counted (as Rally counts them), not converted to time.
    match_all = steps["match-all"]
    # no "cache" in the operation: request_cache is not sent, the index decides (as Rally)
    assert match_all.queries == (
        Query("match-all", {"query": {"match_all": {}}}, "weblogs", request_cache=None),
    )
    assert (match_all.warmup, match_all.duration, match_all.target_throughput) == (
        None,
        None,
        40,
    )
    assert (match_all.warmup_iterations, match_all.iterations) == (100, 200)
    assert match_all.clients == 2  # the task's clients, spread over the bench ranks

    status = steps["status-range"]
    assert (status.warmup, status.duration, status.target_throughput) == (5, 20, None)
    assert status.queries[0].index == "weblogs*"
    assert status.queries[0].body["query"]["range"]["status"]["gte"] == 400

    # Iterations without a rate are counted all the same; a time period makes a step timed.
    recent = steps["recent"]
    assert (recent.warmup, recent.duration) == (None, None)
    assert (recent.warmup_iterations, recent.iterations) == (10, 50)
    assert (status.warmup_iterations, status.iterations) == (None, None)
    assert recent.queries[0].body["sort"] == [{"@timestamp": "desc"}]
    assert recent.queries[0].body["query"]["range"]["@timestamp"]["gte"].startswith("now-")

    slow = steps["slow-requests"]
    assert slow.queries[0].requires == ("scripting",)
    assert (slow.warmup, slow.duration, slow.target_throughput) == (2, 10, 5)

    # node-stats is a timed request like a search: Rally's GET /_nodes/stats, no body
    stats = steps["node-stats"].queries[0]
    assert (stats.method, stats.path, stats.body) == ("GET", "/_nodes/stats", {})


def test_a_search_sends_request_cache_as_its_cache_says(track, weblogs):
    """Rally sends ``request_cache`` only for an operation with ``cache``; so does esdash."""
    queries = weblogs / "operations" / "queries.json"
    text = queries.read_text()
    text = text.replace('"name": "match-all",', '"name": "match-all", "cache": true,')
    text = text.replace('"name": "recent",', '"name": "recent", "cache": false,')
    queries.write_text(text)
    steps = {s.name: s for s in track.query_steps(options(weblogs))}
    assert steps["match-all"].queries[0].request_cache is True
    assert steps["recent"].queries[0].request_cache is False
    assert steps["status-range"].queries[0].request_cache is None

    queries.write_text(text.replace('"cache": true', '"cache": "yes"'))
    with pytest.raises(
        BadInput, match=r"queries.json:2: .*'cache' must be true or false, found 'yes' \(string\)"
    ):
        track.query_steps(options(weblogs))


def test_everything_else_is_listed_with_the_reason(track):
    o = options(WEBLOGS)
    assert track.esdash_operations(o) == [
        f"delete-index (delete-index): {rally.BY_ESDASH['delete-index']}",
        f"create-index (create-index): {rally.BY_ESDASH['create-index']}",
        f"check-cluster-health (cluster-health): {rally.BY_ESDASH['cluster-health']}",
        f"refresh-after-index (refresh): {rally.BY_ESDASH['refresh']}",
    ]
    unsupported = track.unsupported_operations(o)
    # force-merge is sent once by rank 0 (tests/tracks/test_rally_requests.py)
    assert [u.split(":")[0] for u in unsupported] == ["generated-terms (search)"]
    assert "random-terms-source" in unsupported[0] and "track.py" in unsupported[0]
    notes = "\n".join(track.notes(o))
    assert "ignored: bulk-size, clients, warmup-time-period, ingest-percentage" in notes
    assert "status-range (search): ignored request-params" in notes
    assert "match-all (2)" in notes  # its clients
    assert "converted" not in notes and "no time equivalent" not in notes


def test_the_summary_is_logged_once_as_a_warning_when_something_is_not_run(track, caplog):
    with caplog.at_level(logging.INFO, logger=rally.__name__):
        track.query_steps(options(WEBLOGS))
        track.index_body(options(WEBLOGS))
    records = [r for r in caplog.records if r.name == rally.__name__]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert "NOT SUPPORTED, not run" in records[0].getMessage()
    assert "index-update (bulk)" in records[0].getMessage()


def test_the_corpus_is_the_uncompressed_file_next_to_the_track(track, tmp_path):
    corpus = track.corpus(options(WEBLOGS), tmp_path)
    assert corpus.path == WEBLOGS / "documents.json"
    assert corpus.documents == 24 and not corpus.includes_action_and_meta_data
    assert len(corpus.path.read_text().splitlines()) == 24


def test_field_specs_come_from_the_mapping(track):
    specs = {f.path: f.type for f in track.field_specs(options(WEBLOGS))}
    assert specs["path"] == "text+keyword"
    assert specs["agent.version"] == "keyword"
    assert specs["duration_ms"] == "float"


# ---------------------------------------------------------------- options change the track


def test_track_params_reach_every_template_with_their_types(track):
    o = options(
        WEBLOGS,
        track_params=(
            "number_of_shards=4",
            "refresh_interval='30s'",
            "status_from=500",
            'index_settings={"index.codec": "best_compression"}',
            'recent_sort=[{"bytes": "asc"}]',
        ),
    )
    body = track.index_body(o)
    assert body["settings"] == {
        "index.number_of_shards": 4,
        "index.number_of_replicas": 0,
        "index.refresh_interval": "30s",
        "index.codec": "best_compression",  # merged from the create-index task
    }
    steps = {s.name: s for s in track.query_steps(o)}
    assert steps["status-range"].queries[0].body["query"]["range"]["status"]["gte"] == 500
    assert steps["recent"].queries[0].body["sort"] == [{"bytes": "asc"}]


def test_unknown_track_params_are_refused_with_a_suggestion(track):
    with pytest.raises(BadInput) as info:
        track.index_body(options(WEBLOGS, track_params=("bulk_sise=10",)))
    message = str(info.value)
    assert "bulk_sise not used by" in message and str(WEBLOGS / "track.json") in message
    assert 'did you mean "bulk_size"' in message
    with pytest.raises(BadInput, match="is not key=value"):
        track.index_body(options(WEBLOGS, track_params=("bulk_size",)))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a=5", 5),
        ("a=2.5", 2.5),
        ("a=true", True),
        ("a=True", True),
        ("a=None", None),
        ("a=null", None),
        ("a='5'", "5"),
        ("a=green", "green"),
        ('a={"x": [1]}', {"x": [1]}),
        ("a=", ""),
    ],
)
def test_track_param_values_are_typed_like_rallys_track_params(text, value):
    assert rally_template.parse_param(text) == ("a", value)


def test_another_challenge_with_a_parallel_block_of_searches(track):
    o = options(WEBLOGS, challenge="parallel-queries")
    (step,) = track.query_steps(o)
    assert step.name == "p-match-all+p-status+p-recent"
    assert [q.name for q in step.queries] == ["match-all", "status-range", "recent"]
    # The block's rate is the rates of its tasks together.
    assert (step.warmup, step.duration, step.target_throughput) == (5, 30, 40)
    assert track.unsupported_operations(o) == []


def test_unknown_challenge_and_index_name_the_choices(track):
    with pytest.raises(BadInput) as info:
        track.query_steps(options(WEBLOGS, challenge="paralel-queries"))
    assert "track.challenge" in str(info.value)
    assert 'did you mean "parallel-queries"' in str(info.value)
    assert "append-and-query, parallel-queries" in str(info.value)
    with pytest.raises(BadInput, match=r"track.index: .* has no index 'logs'.*weblogs-archive"):
        track.query_steps(options(WEBLOGS, index="logs"))


def test_the_other_index_has_no_local_corpus(track, weblogs, tmp_path):
    (weblogs / "documents-archive.json").unlink()
    o = options(weblogs, index="weblogs-archive")
    with pytest.raises(BadInput) as info:
        track.corpus(o, tmp_path)
    message = str(info.value)
    assert "documents-archive.json" in message and str(weblogs) in message
    assert "https://example.invalid/weblogs/documents-archive.json.bz2" in message
    assert "track.corpus_dir" in message


def test_action_and_meta_data_corpus_and_top_level_schedule(track, tmp_path):
    o = options(ACTIONS)
    assert track.index_body(o) == {}
    corpus = track.corpus(o, tmp_path)
    assert corpus.path == ACTIONS / "events.json"
    assert corpus.documents == 6 and corpus.includes_action_and_meta_data
    steps = track.query_steps(o)
    assert [(s.name, s.warmup, s.duration) for s in steps] == [
        ("all-events", 1, 3),
        ("errors", 0, 3),  # a measured phase without warm-up has none, as in Rally
    ]
    assert steps[0].queries[0] == Query(
        "all-events", {"query": {"match_all": {}}, "size": 10}, "events", request_cache=None
    )
    assert "their _index decides" in "\n".join(track.notes(o))


# ------------------------------------------------------------------------------ corpora


def test_only_a_compressed_file_asks_to_decompress_it(track, weblogs, tmp_path):
    plain = weblogs / "documents.json"
    (weblogs / "documents.json.bz2").write_bytes(bz2.compress(plain.read_bytes()))
    plain.unlink()
    with pytest.raises(BadInput) as info:
        track.corpus(options(weblogs), tmp_path)
    message = str(info.value)
    assert message.startswith(str(weblogs / "documents.json.bz2"))
    assert f"cd {weblogs} && bunzip2 -k documents.json.bz2" in message


def test_corpus_dir_and_rallys_data_directory_are_searched(track, weblogs, tmp_path, monkeypatch):
    elsewhere = tmp_path / "data"
    elsewhere.mkdir()
    (weblogs / "documents.json").rename(elsewhere / "documents.json")
    corpus = track.corpus(options(weblogs, corpus_dir=elsewhere), tmp_path)
    assert corpus.path == elsewhere / "documents.json"

    monkeypatch.setenv("RALLY_HOME", str(tmp_path / "home"))
    rally_dir = tmp_path / "home" / ".rally" / "benchmarks" / "data" / "weblogs"
    rally_dir.mkdir(parents=True)
    (elsewhere / "documents.json").rename(rally_dir / "documents.json")
    assert track.corpus(options(weblogs), tmp_path).path == rally_dir / "documents.json"


def test_a_file_of_another_size_than_declared_is_refused(track, weblogs, tmp_path):
    with (weblogs / "documents.json").open("a") as handle:
        handle.write('{"status": 200}\n')
    with pytest.raises(BadInput, match=r"bytes, but .* says uncompressed-bytes 4094"):
        track.corpus(options(weblogs), tmp_path)


def test_several_files_for_the_index_are_joined_once_in_the_cache(track, tmp_path):
    root = tmp_path / "split"
    shutil.copytree(ACTIONS, root)
    spec = (root / "track.json").read_text()
    spec = spec.replace(
        '{"source-file": "events.json", "document-count": 6}',
        '{"source-file": "events.json", "document-count": 6},'
        ' {"source-file": "more.json.zst", "document-count": 1}',
    )
    (root / "track.json").write_text(spec)
    (root / "more.json").write_text('{"index": {"_index": "events"}}\n{"level": "info"}')
    cache = tmp_path / "cache"
    corpus = track.corpus(options(root), cache)
    assert corpus.path.parent == cache and corpus.documents == 7
    lines = corpus.path.read_text().splitlines()
    assert len(lines) == 14 and lines[-1] == '{"level": "info"}'
    assert track.corpus(options(root), cache).path == corpus.path
    assert len(list(cache.iterdir())) == 1


# ----------------------------------------------------------------------------- rendering


def test_collect_textual_and_macro_forms_and_line_origins(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.json").write_text('{"n": {{ n | default(1) }}}')
    (tmp_path / "parts" / "b.json").write_text('{"n": 2}')
    main = tmp_path / "track.json"
    main.write_text(
        '{% import "rally.helpers" as rally with context %}\n'
        "{% set p = 'parts/*.json' %}\n"
        '{"x": [\n    {{ rally.collect(parts="parts/*.json") }}\n],\n'
        ' "y": [{{ rally.collect(parts=p) }}]}\n'
    )
    source = rally_template.assemble(main)
    assert source.files == [main, tmp_path / "parts/a.json", tmp_path / "parts/b.json"]
    line = source.text.split("\n").index('{"n": 2}') + 1
    assert source.origin(line) == (tmp_path / "parts/b.json", 1)
    env = rally_template.environment(tmp_path, {"n": 7})
    data = rally_template.load_json(rally_template.render(source, env, "t"), source, "t")
    assert data == {"x": [{"n": 7}, {"n": 2}], "y": [{"n": 7}, {"n": 2}]}


def test_rallys_date_filters():
    assert rally_template.days_ago("01-01-2024", "11-01-2024") == 10
    assert rally_template.days_ago("01-01-2024", 1704067200.0 + 86400 * 3) == 3
    assert rally_template.get_start_date(0.0) == "1970-01-01"
    assert rally_template.get_end_date("2024-02-28", 2) == "2024-03-01"


def test_the_sandbox_refuses_python_internals_and_runaway_output(tmp_path):
    env = rally_template.environment(tmp_path, {})
    for text, expected in [
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "not allowed in a track template"),
        ("{{ 'x' * 100000000 }}", "not allowed in a track template"),
        ("{{ 10 ** 100000000 }}", "not allowed in a track template"),
        ('{% include "../../etc/passwd" %}', "includes '../../etc/passwd'"),
    ]:
        path = tmp_path / "track.json"
        path.write_text("{}\n" + text)
        with pytest.raises(BadInput) as info:
            rally_template.render(rally_template.assemble(path), env, "the track")
        assert f"{path}:2" in str(info.value) and expected in str(info.value)
