"""``esdash export-rally``: esdash tracks written as Rally tracks, and read back unchanged.

The round trips are the contract: exporting a track and importing the directory with the
``rally`` track gives the same index body, the same queries (names, bodies, indices,
required capabilities), the same step timing and rates, and the same documents.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.tracks import mri
from esdash_plugins.tracks.rally import RallyTrack

from esdash.cli import main
from esdash.errors import EXIT_BAD_INPUT, EXIT_PLUGIN, BadInput
from esdash.plugin_api import Corpus, Query, QueryStep, Track
from esdash.report.rally_export import ExportSettings, export_track, jinja_safe_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rally"


class LogsTrack(Track):
    """A track with what a round trip must preserve: shared and multi-query steps, rates,
    a script query, Jinja2 delimiters inside strings and a corpus with action lines."""

    name = "roundtrip-logs"
    description = "logs for the round trip"
    index = "logs"

    def __init__(self, corpus_path: Path) -> None:
        self.corpus_path = corpus_path

    def index_body(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "settings": {"index.number_of_shards": 2},
            "mappings": {"properties": {"msg": {"type": "text"}, "n": {"type": "long"}}},
        }

    def corpus(self, options: Mapping[str, Any], cache_dir: Path) -> Corpus:
        return Corpus(self.corpus_path, None, True)

    def query_steps(self, options: Mapping[str, Any]) -> tuple[QueryStep, ...]:
        braces = Query("braces", {"query": {"match": {"msg": "{{id}} {% raw %} {#x#} {{{"}}})
        script = Query(
            "script",
            {"query": {"script": {"script": {"source": "doc['n'].value > 2"}}}},
            requires=("scripting",),
        )
        other = Query("other-index", {"query": {"match_all": {}}}, index="log*")
        return (
            QueryStep("braces", (braces,)),
            QueryStep("mixed", (braces, script, other), warmup=2.0, duration=8.0),
            QueryStep("paced", (script,), warmup=0.0, duration=4.0, target_throughput=7.5),
            QueryStep("mixed-paced", (braces, other), duration=6.0, target_throughput=3.0),
            QueryStep("counted", (braces,), warmup_iterations=3, iterations=12),
            QueryStep("ramped", (other,), warmup=4.0, duration=5.0, ramp_up=2.0),
        )


@pytest.fixture
def logs_track(tmp_path: Path) -> LogsTrack:
    lines = []
    for number in range(5):
        lines.append(json.dumps({"index": {"_index": "logs", "_id": str(number)}}))
        lines.append(json.dumps({"msg": f"line {{{{{number}}}}}", "n": number}))
    path = tmp_path / "logs.ndjson"
    path.write_text("\n".join(lines) + "\n")
    return LogsTrack(path)


def resolved(step: QueryStep, index: str, settings: ExportSettings) -> tuple:
    """A step as the bench plan would run it: defaults filled in, query indices explicit."""
    return (
        step.name,
        tuple(
            (q.name, json.dumps(q.body, sort_keys=True), q.index or index, tuple(q.requires))
            for q in step.queries
        ),
        # a counted step's times are limits the plan derives; its iterations carry over
        (step.warmup_iterations, step.iterations)
        if step.iterations is not None
        else (
            settings.warmup if step.warmup is None else step.warmup,
            settings.duration if step.duration is None else step.duration,
        ),
        step.ramp_up,
        pytest.approx(
            settings.target_throughput if step.target_throughput is None else step.target_throughput
        ),
    )


def assert_round_trip(
    track: Track, options: Mapping[str, Any], out: Path, cache: Path, settings: ExportSettings
) -> RallyTrack:
    result = export_track(track, options, out, cache, settings)
    imported = RallyTrack()
    back = {"path": out}
    index = track.index or track.name
    assert imported.index_name(back) == index == result.index
    assert imported.index_body(back) == track.index_body(options)
    # the export writes the main index only: a step searching only another index of the
    # source track (weblogs-archive) is refused when the export is read back
    exported = [
        s
        for s in track.query_steps(options)
        if all(q.index is None or fnmatch.fnmatchcase(index, q.index) for q in s.queries)
    ]
    original = [resolved(s, index, settings) for s in exported]
    again = [resolved(s, index, settings) for s in imported.query_steps(back)]
    assert again == original
    corpus = track.corpus(options, cache)
    # documents.json links out of the exported directory, which a track directory may not do
    # on its own; naming the directory as corpus_dir vouches for its links.
    corpus_back = imported.corpus({**back, "corpus_dir": out}, cache)
    assert Path(corpus_back.path).read_bytes() == Path(corpus.path).read_bytes()
    assert corpus_back.includes_action_and_meta_data == corpus.includes_action_and_meta_data
    assert corpus_back.documents == result.documents
    assert [u.split(" ")[0] for u in imported.unsupported_operations(back)] == [
        s.name for s in track.query_steps(options) if s not in exported
    ]
    return imported


def test_mri_round_trip(tmp_path):
    track = mri.MriTrack()
    options = {"documents": 40, "seed": 3, "shards": 2, "replicas": 0}
    settings = ExportSettings()
    assert_round_trip(track, options, tmp_path / "out", tmp_path / "cache", settings)
    spec = json.loads((tmp_path / "out" / "track.json").read_text())
    assert spec["corpora"][0]["documents"] == [
        {
            "source-file": "documents.json",
            "document-count": 40,
            "uncompressed-bytes": (tmp_path / "out" / "documents.json").stat().st_size,
            "target-index": "mri",
        }
    ]
    assert (tmp_path / "out" / "documents.json").is_symlink()
    assert spec["meta"]["esdash-options"] == options
    schedule = spec["challenges"][0]["schedule"]
    assert [t.get("name", t["operation"]) for t in schedule[:4]] == [
        "delete-index",
        {"operation-type": "create-index"},
        "bulk",
        "refresh-after-ingest",
    ]
    assert schedule[4] == {
        "name": "body_part",
        "operation": "body_part",
        "clients": 1,
        "warmup-time-period": 5,
        "time-period": 30,
    }


def test_round_trip_of_shared_multi_query_and_paced_steps(tmp_path, logs_track):
    settings = ExportSettings(warmup=1.0, duration=12.0, bulk_size=50, clients=4)
    assert_round_trip(logs_track, {}, tmp_path / "b", tmp_path / "cache", settings)

    spec = json.loads((tmp_path / "b" / "track.json").read_text())
    operations = [op["name"] for op in spec["operations"]]
    assert operations == ["bulk", "braces", "script", "other-index"]  # shared, not repeated
    assert spec["operations"][0]["bulk-size"] == 50
    assert spec["operations"][2]["meta"] == {"esdash-requires": ["scripting"]}
    assert spec["corpora"][0]["documents"][0]["includes-action-and-meta-data"] is True
    schedule = spec["challenges"][0]["schedule"]
    paced = next(t for t in schedule if t.get("name") == "paced")
    assert paced["target-throughput"] == 7.5 and paced["clients"] == 4
    mixed_paced = next(t for t in schedule if "parallel" in t and "mixed-paced/braces" in str(t))
    block = mixed_paced["parallel"]
    assert block["clients"] == 4 and block["time-period"] == 6
    assert [t["target-throughput"] for t in block["tasks"]] == [1.5, 1.5]
    assert "{{" not in (tmp_path / "b" / "track.json").read_text()


def test_fractional_seconds_are_rounded_up_with_a_note(tmp_path, logs_track):
    settings = ExportSettings(warmup=1.5, duration=12.0)
    result = export_track(logs_track, {}, tmp_path / "out", tmp_path, settings)
    assert "braces: warm-up 1.5 s written as 2 s (Rally takes whole seconds)" in result.notes
    steps = RallyTrack().query_steps({"path": tmp_path / "out"})
    assert [(s.warmup, s.duration) for s in steps] == [
        (2, 12),
        (2, 8),
        (0, 4),
        (2, 6),
        (None, None),  # counted
        (4, 5),
    ]


def test_think_time_is_noted(tmp_path):
    class Thinking(LogsTrack):
        def query_steps(self, options):
            return (QueryStep("slow", (Query("q", {}),), think_time=0.5),)

    corpus = tmp_path / "c.ndjson"
    corpus.write_text('{"index": {}}\n{"a": 1}\n')
    result = export_track(Thinking(corpus), {}, tmp_path / "out", tmp_path)
    assert any("think time 0.5 s has no Rally equivalent" in note for note in result.notes)


def test_session_rates_round_trip(tmp_path, logs_track):
    settings = ExportSettings(warmup=3.0, duration=9.0, clients=3, target_throughput=2.0)
    assert_round_trip(logs_track, {}, tmp_path / "out", tmp_path / "cache", settings)


def test_a_rally_track_exports_to_itself(tmp_path):
    """Importing Elastic-style weblogs and exporting it keeps what esdash runs of it."""
    source = RallyTrack()
    options = {"path": FIXTURES / "weblogs"}
    settings = ExportSettings(clients=2)
    imported = assert_round_trip(source, options, tmp_path / "out", tmp_path / "cache", settings)
    assert [s.name for s in imported.query_steps({"path": tmp_path / "out"})] == [
        "match-all",
        "status-range",
        "recent",
        "slow-requests",
        "scroll",  # exported as Rally's scroll-search, pages and page size kept
        "node-stats",  # a timed request, exported as the node-stats operation it came from
    ]


def test_copy_force_and_refusals(tmp_path, logs_track):
    out = tmp_path / "out"
    export_track(logs_track, {}, out, tmp_path, ExportSettings(copy_corpus=True))
    assert not (out / "documents.json").is_symlink()
    assert (out / "documents.json").read_bytes() == logs_track.corpus_path.read_bytes()
    with pytest.raises(BadInput, match="not empty; choose a new directory or pass --force"):
        export_track(logs_track, {}, out, tmp_path)
    export_track(logs_track, {}, out, tmp_path, force=True)
    assert (out / "documents.json").is_symlink()
    (tmp_path / "file").write_text("")
    with pytest.raises(BadInput, match="is not a directory"):
        export_track(logs_track, {}, tmp_path / "file", tmp_path)
    logs_track.corpus_path.write_text("")
    with pytest.raises(BadInput, match="the corpus is empty"):
        export_track(logs_track, {}, tmp_path / "empty", tmp_path)


@pytest.mark.parametrize("text", ["{{x}}", "{%", "{#", "{{{", "{", "}", "{%-", "a{b"])
def test_jinja_delimiters_are_escaped_and_json_reads_them_back(text, tmp_path):
    import jinja2

    value = {"k": [text, {"n": {}}], text: 1}
    written = jinja_safe_json(value)
    assert json.loads(jinja2.Environment().from_string(written).render()) == value


# ---------------------------------------------------------------------------------- CLI


def test_cli_exports_a_track_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "mri-rally"
    assert main(["export-rally", "mri", str(out), "-o", "documents=25", "-o", "seed=4"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote Rally track {out}" in printed and "25 documents" in printed
    spec = json.loads((out / "track.json").read_text())
    assert spec["meta"]["esdash-options"]["documents"] == 25
    assert spec["corpora"][0]["documents"][0]["document-count"] == 25


def test_cli_exports_a_session_with_its_benchmark_values(tmp_path, monkeypatch):
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    shutil.copytree(FIXTURES / "actions", tmp_path / "actions")
    session = tmp_path / "s.toml"
    session.write_text(
        'name = "rt"\n[cluster]\nnodes = 2\n'
        '[track]\nname = "rally"\npath = "actions"\n'
        '[benchmark]\nworkers_per_node = 3\nwarmup = "2s"\nduration = "10s"\n'
        "target_throughput = 5.0\nbulk_size = 7\n"
    )
    out = tmp_path / "out"
    assert main(["export-rally", str(session), str(out), "--copy"]) == 0
    spec = json.loads((out / "track.json").read_text())
    schedule = spec["challenges"][0]["schedule"]
    assert spec["operations"][0]["bulk-size"] == 7
    assert schedule[2] == {"operation": "bulk", "clients": 6}
    # The tasks keep their own times (errors has no warm-up); 6 ranks share 5/s.
    assert [
        (t["name"], t["warmup-time-period"], t["time-period"], t["target-throughput"])
        for t in schedule[4:]
    ] == [("all-events", 1, 3, 5.0), ("errors", 0, 3, 5.0)]
    assert not (out / "documents.json").is_symlink()


def test_cli_errors_are_messages_with_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    assert main(["export-rally", "no-such-track", str(tmp_path / "o")]) == EXIT_PLUGIN
    assert "no track called 'no-such-track'" in capsys.readouterr().err
    code = main(["export-rally", "mri", str(tmp_path / "o"), "-o", "documets=5"])
    assert code == EXIT_BAD_INPUT
    assert 'track.documets: unknown key (did you mean "documents"?)' in capsys.readouterr().err
    code = main(["export-rally", "rally", str(tmp_path / "o"), "-o", f"path={tmp_path}"])
    assert code == EXIT_BAD_INPUT
    assert f"{tmp_path}/track.json does not exist" in capsys.readouterr().err
    assert main(["export-rally", "mri", str(tmp_path / "o"), "-o", "x"]) == EXIT_BAD_INPUT
    assert "expected KEY=VALUE" in capsys.readouterr().err
