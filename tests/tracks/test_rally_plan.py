"""``esdash plan``: every task of a track, what esdash does with it or why it cannot.

The fixture ``tests/fixtures/rally/planned`` has parallel blocks (one of searches only, one
mixed), tasks asking for several clients, an operation esdash does not run, a search whose
queries come from a parameter source and a task whose runner its ``track.py`` registers.
Refusals that depend on the distribution are checked against the lists the backends report
(modules, mappers): the Elasticsearch integ-test-zip, OpenSearch with and without modules.
The real tracks of ``elastic/rally-tracks`` are planned when ``../shared/rally-tracks`` is
there (else the fixtures stand in, and the test says so); the loader's confinement to the
track directory is checked last.
"""

from __future__ import annotations

import gzip
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from esdash_plugins.backends.elasticsearch.distribution import SERVER_MAPPERS_8
from esdash_plugins.backends.opensearch.distribution import MODULES, mappers_of
from esdash_plugins.tracks import mri, rally

from esdash.errors import BadInput
from esdash.plugin.api import REASON_KINDS, PlannedTask
from esdash.plugin.values import Distribution

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rally"
PLANNED = FIXTURES / "planned"
WEBLOGS = FIXTURES / "weblogs"
REAL_TRACKS = Path(
    os.environ.get("ESDASH_RALLY_TRACKS")
    or Path(__file__).resolve().parents[3] / "shared" / "rally-tracks" / "tracks"
)
KEYS = ["name", "operation", "clients", "schedule", "parallel", "status", "reason_kind"]
KEYS += ["reason", "esdash"]

ES_ZIP = Distribution(
    Path("/es"),
    "8.19.21",
    "integ-test-zip",
    ("apm", "transport-netty4", "x-pack-core", "x-pack-security"),
    scripting=False,
    mappers=SERVER_MAPPERS_8,
)
_OS_ALL = tuple(sorted({m.name for m in MODULES} | {"transport-netty4"}))
OS_FULL = Distribution(
    Path("/os"), "3.4.0", "assembled", _OS_ALL, scripting=True, mappers=mappers_of(_OS_ALL)
)
OS_BARE = Distribution(
    Path("/os"),
    "3.4.0",
    "integ-test-zip",
    ("transport-netty4",),
    scripting=False,
    mappers=mappers_of(("transport-netty4",)),
)
DISTRIBUTIONS = {"es-zip": ES_ZIP, "os-full": OS_FULL, "os-bare": OS_BARE}


def by_name(tasks: tuple[PlannedTask, ...]) -> dict[str, PlannedTask]:
    return {task.name: task for task in tasks}


def check_against_lists(task: PlannedTask, distribution: Distribution) -> None:
    """A distribution refusal names what the distribution reports it lacks."""
    reason = task.reason or ""
    if task.reason_kind == "module":
        module = re.search(r"needs the (\S+) (module|plugin)", reason)
        assert module, reason
        installed = distribution.modules if module.group(2) == "module" else distribution.plugins
        assert module.group(1) not in installed, reason
    elif task.reason_kind == "mapper" and "which Elasticsearch has" in reason:
        assert "x-pack-core" not in distribution.modules, reason  # not an Elasticsearch
    elif task.reason_kind == "mapper":
        found = re.search(r"is of type (\S+), from the (\S+) module", reason)
        assert found, reason
        assert found.group(1) not in distribution.mappers, reason
        assert found.group(2) not in distribution.modules, reason
    elif task.reason_kind == "field_type":
        found = re.search(r"is of type (\S+),", reason)
        assert found, reason
        assert distribution.mappers and found.group(1) not in distribution.mappers, reason


def session(directory: Path, track: str, **benchmark: str) -> Path:
    path = directory / "plan.toml"
    bench = "".join(f"{key} = {value}\n" for key, value in benchmark.items())
    path.write_text(
        'name = "plan"\n[cluster]\nnodes = 2\nheap = "256m"\nrun_as = "esdash"\n'
        f"[benchmark]\nworkers_per_node = 3\n{bench}[track]\n{track}\n"
    )
    return path


def esdash(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ESDASH_CACHE": str(cache)}
    result = subprocess.run(
        [sys.executable, "-m", "esdash", *args], capture_output=True, text=True, env=env
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


# ------------------------------------------------------------------- the --json shape


def test_plan_json_lists_every_task_in_order_with_its_fate(tmp_path):
    path = session(tmp_path, f'name = "rally"\npath = "{PLANNED}"\ntrust_code = true')
    result = esdash("plan", str(path), "--json", cache=tmp_path / "empty-cache")
    assert result.returncode == 0, result.stderr
    # no distribution in the cache: planned without one, said in one line on stderr, with
    # one line for the corpus and one for the track's own code, which the session trusts
    assert result.stderr.count("\n") == 3
    assert "no elasticsearch distribution to plan against" in result.stderr
    assert f"corpus 'items': {PLANNED / 'documents.json'} is present (85 bytes)" in result.stderr
    assert f"track code: {PLANNED / 'track.py'}: the session trusts it; esdash runs it" in (
        result.stderr
    )
    tasks = json.loads(result.stdout)["tasks"]
    assert all(list(task) == KEYS for task in tasks)
    assert [t["name"] for t in tasks] == [
        "delete-index",
        "create-index",
        "ingest",
        "match-all",
        "p-match-all",
        "p-by-color",
        "p-stats",
        "p-scripted",
        "percolate",
        "random-colors",
        "warm-cache",
        "item-stats",
    ]
    plan = {t["name"]: t for t in tasks}
    for task in tasks:
        assert task["status"] in ("run", "refused")
        assert (task["status"] == "refused") == (task["reason_kind"] in REASON_KINDS)
        assert (task["reason"] is None) == (task["status"] == "run")
        assert task["esdash"]

    ingest = plan["ingest"]
    assert (ingest["operation"], ingest["clients"], ingest["schedule"]) == (
        "bulk",
        4,
        {"warmup-time-period": 5},
    )
    assert "the ingest" in ingest["esdash"]

    # clients and schedule as the track gives them; esdash says what it runs instead
    match_all = plan["match-all"]
    assert match_all["clients"] == 8
    assert match_all["schedule"] == {
        "warmup-iterations": 20,
        "iterations": 100,
        "target-throughput": 50,
    }
    assert "its 8 clients are spread over the bench ranks" in match_all["esdash"]
    # 20+100 iterations per client, counted within time limits (ten times the session's
    # 5 s + 30 s, at least 60 s), paced at 50/s over all 8 clients, on 2 x 3 ranks
    assert (
        "-> 20 warm-up (at most 60 s) + 100 measured (at most 300 s) requests per client, "
        "paced at 50 req/s in total, on 8 client(s) over 6 bench rank(s)" in match_all["esdash"]
    )

    # a parallel block of searches is one step; its tasks keep their own clients, schedule
    for name, clients in (("p-match-all", 2), ("p-by-color", 3)):
        assert plan[name]["parallel"] == 5 and plan[name]["clients"] == clients
        assert plan[name]["status"] == "run"
        assert "one query step 'p-match-all+p-by-color'" in plan[name]["esdash"]
        assert "the block's 5 client(s) (the sum of its tasks' clients)" in plan[name]["esdash"]
    assert plan["p-by-color"]["schedule"]["target-throughput"] == "4 ops/s"
    assert plan["p-by-color"]["schedule"]["time-period"] == 10  # the block's default

    # index stats are a timed request (Rally's GET /INDEX/_stats), so they run in parallel
    # with a search too
    assert plan["p-stats"]["parallel"] == plan["p-scripted"]["parallel"] == 6
    assert "one query step 'p-stats+p-scripted'" in plan["p-scripted"]["esdash"]
    assert plan["p-stats"]["status"] == "run"
    assert plan["item-stats"]["status"] == "run"
    assert plan["item-stats"]["esdash"].startswith("GET /_all/_stats as step 'item-stats'")

    # the track's own Python: its parameter source is sampled and runs; its runner, called
    # with a recording client, does more than send one request, and is named
    source = plan["random-colors"]
    assert source["status"] == "run" and source["reason_kind"] is None
    assert source["esdash"].startswith("query step 'random-colors'")
    runner = plan["warm-cache"]
    assert (runner["operation"], runner["reason_kind"]) == ("warm-the-cache", "track_py")
    assert "not one of Rally's operation types" in runner["reason"]
    recorded = f"registered in {PLANNED / 'track.py'}; it calls es.indices.refresh"
    assert recorded in runner["reason"]


def test_plan_text_names_the_distribution_and_every_task(tmp_path):
    path = session(tmp_path, f'name = "rally"\npath = "{PLANNED}"\ntrust_code = true')
    result = esdash("plan", str(path), cache=tmp_path / "empty-cache")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("track rally, 12 task(s), 11 run, 1 refused")
    assert "6 bench rank(s) (3 per node x 2 node(s)) are the clients" in result.stdout
    # no search of the fixture sets "cache": the index default decides, as in Rally
    assert "every search is sent with no request_cache parameter" in result.stdout
    assert "[parallel block 5] p-by-color (search, 3 clients;" in result.stdout
    assert "REFUSED [track_py]: 'warm-the-cache' is not one of Rally's operation types" in (
        result.stdout
    )
    assert lines[3] == (
        f"  track code: {PLANNED / 'track.py'}: the session trusts it; esdash runs it in a "
        f"child process as {'nobody' if os.geteuid() == 0 else pwd.getpwuid(os.getuid())[0]} "
        f"for the tasks that need it"
    )


def test_a_track_py_the_directory_lacks_is_named(tmp_path):
    track = Path(shutil.copytree(PLANNED, tmp_path / "planned"))
    (track / "track.py").unlink()
    plan = by_name(rally.RallyTrack().plan({"path": track}, None))
    for name in ("random-colors", "warm-cache"):
        assert plan[name].reason_kind == "track_py"
        assert f"{track / 'track.py'} would register it, but the track directory holds no " in (
            plan[name].reason or ""
        )


# --------------------------------------------------- refusals by what a distribution lacks


@pytest.mark.parametrize("which", sorted(DISTRIBUTIONS))
def test_query_refusals_match_the_reported_modules(which):
    distribution = DISTRIBUTIONS[which]
    plan = by_name(rally.RallyTrack().plan({"path": PLANNED}, distribution))
    for task in plan.values():
        check_against_lists(task, distribution)
    scripted, percolate = plan["p-scripted"], plan["percolate"]
    if distribution.scripting:
        assert scripted.status == "run"
    else:
        assert scripted.reason_kind == "module" and "lang-painless" in (scripted.reason or "")
    if "percolator" in distribution.modules:
        assert percolate.status == "run"
    else:
        assert percolate.reason_kind == "module"
        assert "needs the percolator module (percolate)" in (percolate.reason or "")
    assert plan["match-all"].status == "run"


def mapping_track(tmp_path: Path, properties: dict) -> Path:
    track = Path(shutil.copytree(PLANNED, tmp_path / "mapped"))
    body = {"mappings": {"properties": properties}}
    (track / "index.json").write_text(json.dumps(body))
    return track


@pytest.mark.parametrize("which", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize(
    "field",
    ["match_only_text", "geo_shape", "wildcard", "constant_keyword", "rank_features", "percolator"],
)
def test_mapping_refusals_match_the_reported_mappers(tmp_path, which, field):
    distribution = DISTRIBUTIONS[which]
    track = mapping_track(tmp_path, {"color": {"type": "keyword"}, "f": {"type": field}})
    tasks = rally.RallyTrack().plan({"path": track}, distribution)
    kinds = {t.reason_kind for t in tasks if t.status == "refused"}
    if field in distribution.mappers:
        assert not kinds & {"mapper", "field_type"}
        return
    ingest = by_name(tasks)["ingest"]
    assert ingest.reason_kind in ("mapper", "field_type")
    assert f"field f is of type {field}," in (ingest.reason or "")
    check_against_lists(ingest, distribution)
    # the run stops when it creates the index: nothing of it runs
    assert all(t.status == "refused" for t in tasks)
    assert by_name(tasks)["match-all"].reason.startswith("its index cannot be created: field f")


def test_scaled_float_is_indexed_as_double_on_the_zip_as_a_run_does(tmp_path):
    track = mapping_track(tmp_path, {"price": {"type": "scaled_float", "scaling_factor": 100}})
    ingest = by_name(rally.RallyTrack().plan({"path": track}, ES_ZIP))["ingest"]
    assert ingest.status == "run"
    assert "scaled_float fields (price) are indexed as double" in ingest.esdash


def test_a_block_with_an_operation_esdash_does_not_run_runs_one_task_after_another(tmp_path):
    (tmp_path / "docs.json").write_text('{"n": 1}\n')
    documents = {"source-file": "docs.json", "document-count": 1, "target-index": "items"}
    (tmp_path / "track.json").write_text(
        json.dumps(
            {
                "indices": [{"name": "items"}],
                "corpora": [{"name": "items", "documents": [documents]}],
                "operations": [{"name": "q", "operation-type": "search", "body": {}}],
                "schedule": [
                    {
                        "parallel": {
                            "tasks": [
                                {"operation": "q", "time-period": 5},
                                {
                                    "operation": {
                                        "name": "snap",
                                        "operation-type": "create-snapshot",
                                    }
                                },
                            ]
                        }
                    }
                ],
            }
        )
    )
    tasks = by_name(rally.RallyTrack().plan({"path": tmp_path}, None))
    assert "one after another" in tasks["q"].esdash and tasks["q"].status == "run"
    assert tasks["snap"].reason_kind == "unsupported_operation"


@pytest.mark.parametrize("which", ["es-zip", "os-full"])
def test_esql_sql_and_eql_are_refused_for_the_module_they_need(tmp_path, which):
    (tmp_path / "docs.json").write_text('{"n": 1}\n')
    documents = {"source-file": "docs.json", "document-count": 1, "target-index": "items"}
    ops = [{"name": kind, "operation-type": kind, "query": "FROM items"} for kind in OPS_SQL]
    (tmp_path / "track.json").write_text(
        json.dumps(
            {
                "indices": [{"name": "items"}],
                "corpora": [{"name": "items", "documents": [documents]}],
                "operations": ops,
                "schedule": [{"operation": kind} for kind in OPS_SQL],
            }
        )
    )
    distribution = DISTRIBUTIONS[which]
    tasks = by_name(rally.RallyTrack().plan({"path": tmp_path}, distribution))
    for kind, module in zip(OPS_SQL, ("x-pack-esql", "x-pack-sql", "x-pack-eql"), strict=True):
        assert tasks[kind].reason_kind == "module"
        assert f"needs the {module} module" in (tasks[kind].reason or "")
        check_against_lists(tasks[kind], distribution)
    # without a distribution to plan against, nothing is known of its modules
    assert rally.RallyTrack().plan({"path": tmp_path}, None)[0].reason_kind == (
        "unsupported_operation"
    )


OPS_SQL = ("esql", "sql", "eql")


def test_tracks_esdash_cannot_run_list_their_tasks_refused(tmp_path):
    (tmp_path / "track.json").write_text(
        json.dumps(
            {
                "data-streams": [{"name": "logs"}],
                "operations": [{"name": "q", "operation-type": "search", "body": {}}],
                "schedule": [{"operation": "q"}, {"operation": "create-snapshot"}],
            }
        )
    )
    tasks = rally.RallyTrack().plan({"path": tmp_path}, None)
    assert [(t.name, t.status, t.reason_kind) for t in tasks] == [
        ("q", "refused", "unsupported_operation"),
        ("create-snapshot", "refused", "unsupported_operation"),
    ]
    # a run still refuses it: nothing goes to the data stream
    with pytest.raises(BadInput, match="no corpus documents go to index 'logs'"):
        rally.RallyTrack().corpus({"path": tmp_path}, tmp_path / "cache")


@pytest.mark.parametrize("with_track_py", [False, True])
def test_documents_from_a_bulk_parameter_source_refuse_the_track_naming_track_py(
    tmp_path, with_track_py
):
    """random_vector's documents come from its track.py, not a corpus: every task is
    refused for that file (or, when it is there, because esdash does not generate documents
    with it), never as an operation esdash lacks."""
    (tmp_path / "track.json").write_text(
        json.dumps(
            {
                "indices": [{"name": "vectors"}],
                "schedule": [
                    {"operation": {"operation-type": "delete-index"}},
                    {
                        "name": "random-indexing",
                        "operation": {
                            "operation-type": "bulk",
                            "param-source": "random-bulk-param-source",
                            "bulk-size": 100,
                        },
                    },
                    {"name": "q", "operation": {"operation-type": "search", "body": {}}},
                ],
            }
        )
    )
    if with_track_py:
        (tmp_path / "track.py").write_text(
            "def register(registry):\n"
            "    registry.register_param_source('random-bulk-param-source', dict)\n"
        )
    tasks = by_name(rally.RallyTrack().plan({"path": tmp_path}, ES_ZIP))
    assert {t.status for t in tasks.values()} == {"refused"}
    assert {t.reason_kind for t in tasks.values()} == {"track_py"}
    bulk = tasks["random-indexing"].reason or ""
    assert "parameter source 'random-bulk-param-source', not a corpus" in bulk
    if with_track_py:
        assert "not generated documents" in bulk
    else:
        assert f"{tmp_path / 'track.py'} would register it, but the track directory" in bulk
    assert "the index's documents come from bulk task 'random-indexing'" in (
        tasks["q"].reason or ""
    )


# ------------------------------------------------------------------- esdash's own tracks


def test_mri_plan_is_the_ingest_and_every_query_step():
    track = mri.MriTrack()
    options = {"documents": 100, "seed": 1, "shards": 1, "replicas": 0}
    tasks = track.plan(options, ES_ZIP)
    steps = [s.name for s in track.query_steps(options)]
    assert [t.name for t in tasks] == ["ingest", *steps]
    assert tasks[0].ingest and tasks[0].operation == "bulk" and tasks[0].status == "run"
    refused = {t.name: t for t in tasks if t.status == "refused"}
    assert list(refused) == ["brain_age"]
    assert refused["brain_age"].reason_kind == "module"
    check_against_lists(refused["brain_age"], ES_ZIP)
    assert all(t.status == "run" for t in track.plan(options, OS_FULL))


def test_mri_plan_through_the_command_resolves_the_session_timing(tmp_path):
    path = session(tmp_path, 'name = "mri"\ndocuments = 100', warmup='"2s"', duration='"7s"')
    result = esdash("plan", str(path), "--json", cache=tmp_path / "empty-cache")
    assert result.returncode == 0, result.stderr
    tasks = json.loads(result.stdout)["tasks"]
    assert tasks[0]["name"] == "ingest" and tasks[0]["clients"] == 6
    ages = next(t for t in tasks if t["name"] == "age")
    assert "query step with 1 query (age)" in ages["esdash"]
    assert (
        "-> 2 s warm-up + 7 s measured, closed loop (unthrottled), on 6 bench rank(s)"
        in (ages["esdash"])
    )
    assert all(t["status"] == "run" for t in tasks)  # no distribution: nothing to refuse


def test_an_abe_session_plan_refuses_what_abe_cannot_express(tmp_path):
    # issue 16: the queries ABE cannot answer are refused when the plan is built, by name
    key = tmp_path / "abe.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    path = session(tmp_path, 'name = "mri"\ndocuments = 100')
    path.write_text(path.read_text() + f'[encryption]\nmode = "abe"\nkey_file = "{key}"\n')
    result = esdash("plan", str(path), "--json", cache=tmp_path / "empty-cache")
    assert result.returncode == 0, result.stderr
    tasks = {t["name"]: t for t in json.loads(result.stdout)["tasks"]}
    refused = {name for name, t in tasks.items() if t["status"] == "refused"}
    assert refused == {"brain_age", "age_weight"}  # no distribution: no module refusals
    weight = tasks["age_weight"]
    assert weight["reason_kind"] == "encryption"
    assert weight["reason"].startswith("age_weight: not possible under ABE: aggs.weight.histogram")
    assert tasks["age"]["status"] == "run"
    key.chmod(0o644)  # a key others may read: the plan says the queries were not checked
    result = esdash("plan", str(path), cache=tmp_path / "empty-cache")
    assert result.returncode == 0, result.stderr
    assert "queries not checked against encryption mode abe: " in result.stdout


def test_a_track_that_does_not_load_fails_the_plan_in_one_line(tmp_path):
    path = session(tmp_path, f'name = "rally"\npath = "{PLANNED}"\nchallenge = "defualt"')
    result = esdash("plan", str(path), cache=tmp_path / "empty-cache")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"{path}: track.challenge: " in result.stderr
    assert "no challenge 'defualt' (did you mean \"default\"?)" in result.stderr


# ------------------------------------------------------------------ the real tracks


def real_or_fixture_tracks(scratch: Path) -> list[Path]:
    """The 34 tracks of elastic/rally-tracks (their gzip-stored bodies unpacked in a copy),
    or this suite's own tracks where the data is not there."""
    if not REAL_TRACKS.is_dir():
        print(f"{REAL_TRACKS} is absent: planning the fixture tracks instead")
        return [PLANNED, WEBLOGS, FIXTURES / "actions"]
    copy = Path(shutil.copytree(REAL_TRACKS, scratch / "tracks"))
    for packed in copy.rglob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
    tracks = sorted(p for p in copy.iterdir() if p.is_dir())
    assert len(tracks) == 34
    return tracks


@pytest.mark.parametrize("which", ["es-zip", "os-full"])
def test_every_task_of_the_real_tracks_is_run_or_refused_with_a_reason(tmp_path, which):
    distribution = DISTRIBUTIONS[which]
    planned = 0
    for track in real_or_fixture_tracks(tmp_path):
        tasks = rally.RallyTrack().plan({"path": track}, distribution)
        assert tasks, track
        for task in tasks:
            assert task.status in ("run", "refused"), (track, task)
            assert task.esdash
            if task.status == "refused":
                assert task.reason_kind in REASON_KINDS and task.reason, (track, task)
                check_against_lists(task, distribution)
                if REAL_TRACKS.is_dir():  # issue 18: every refusal of a real track names
                    # a module, mapper or field type the distribution lacks, or a track.py
                    assert task.reason_kind != "unsupported_operation", (track, task)
            json.dumps(task.to_json())
        planned += len(tasks)
    assert planned


# ------------------------------------------------------------------------ confinement


@pytest.fixture
def confined(tmp_path: Path) -> Path:
    """A copy of the weblogs fixture beside a directory the track must not read."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.json").write_text('{"name": "secret"}')
    return Path(shutil.copytree(WEBLOGS, tmp_path / "weblogs"))


def load_error(track: Path, **options) -> str:
    with pytest.raises(BadInput) as info:
        rally.load({"path": track, **options})
    message = str(info.value)
    assert "\n" not in message
    return message


def test_collect_cannot_reach_outside_the_track(confined):
    ops = confined / "operations" / "queries.json"
    ops.write_text('{{ rally.collect(parts="../../outside/*.json") }},\n' + ops.read_text())
    message = load_error(confined)
    assert message.startswith(f"{ops}:1: rally.collect(parts='../../outside/*.json') reaches ")
    assert "secret.json, outside the track directory" in message


def test_collect_of_a_symlink_out_of_the_track_is_refused(confined):
    link = confined / "operations" / "zz-link.json"
    link.symlink_to(confined.parent / "outside" / "secret.json")
    assert "zz-link.json" not in load_error(confined)  # the resolved file is named
    assert "outside/secret.json, outside the track directory" in load_error(confined)


def test_include_through_a_symlink_is_refused(confined):
    (confined / "inc.json").symlink_to(confined.parent / "outside" / "secret.json")
    track = confined / "track.json"
    text = track.read_text().replace(
        '"version": 2,', '"version": 2, "x": {% include "inc.json" %},'
    )
    track.write_text(text)
    message = load_error(confined)
    assert "includes 'inc.json', which resolves to" in message
    assert "outside the track directory" in message and str(track) in message


def test_an_index_body_outside_the_track_is_refused(confined):
    track = confined / "track.json"
    track.write_text(track.read_text().replace('"body": "index.json"', '"body": "../x.json"', 1))
    message = load_error(confined)
    assert message.startswith(f"{track}: index body '../x.json' resolves to ")


def test_documents_that_resolve_outside_the_track_are_refused(confined, tmp_path):
    documents = confined / "documents.json"
    real = tmp_path / "outside" / "documents.json"
    shutil.move(documents, real)
    documents.symlink_to(real)
    with pytest.raises(BadInput, match="resolves to .*outside the track directory"):
        rally.RallyTrack().corpus({"path": confined}, tmp_path / "cache")
    # a corpus directory the user names is trusted, links and all
    corpus = rally.RallyTrack().corpus(
        {"path": confined, "corpus_dir": confined}, tmp_path / "cache"
    )
    assert corpus.path == documents
    track = confined / "track.json"
    track.write_text(track.read_text().replace('"documents.json.bz2"', '"../../etc/passwd"', 1))
    with pytest.raises(BadInput, match="source-file '../../etc/passwd' points outside"):
        rally.RallyTrack().corpus({"path": confined}, tmp_path / "cache")


# ------------------------------------------------------------- the run does what the plan says


def test_a_step_the_plan_refuses_is_not_sent_by_the_run(tmp_path):
    """A timed request to ``_terms_enum`` is refused by the track's plan where x-pack-core
    is missing (OpenSearch; its body declares nothing :func:`planned_query` could check): the bench
    plan marks that step unsupported with the plan's reason, so the run does not send it
    as 100 % errors; the search beside it stays runnable."""
    from esdash.prepare.plan import plan_refusals, refuse_planned
    from esdash.rundir.records import PlannedQuery, PlannedStep

    (tmp_path / "docs.json").write_text('{"colour": "red"}\n')
    documents = {"source-file": "docs.json", "document-count": 1, "target-index": "items"}
    enum = {"name": "enum", "operation-type": "raw-request", "method": "POST"}
    enum |= {"path": "/items/_terms_enum", "body": {"field": "colour"}}
    (tmp_path / "track.json").write_text(
        json.dumps(
            {
                "indices": [{"name": "items"}],
                "corpora": [{"name": "items", "documents": [documents]}],
                "schedule": [
                    {"operation": {"name": "bulk", "operation-type": "bulk"}},
                    {"operation": enum, "time-period": 5},
                    {"operation": {"name": "q", "operation-type": "search", "body": {}}},
                ],
            }
        )
    )
    options = {"path": tmp_path}
    track = rally.RallyTrack()
    assert by_name(track.plan(options, OS_BARE))["enum"].reason_kind == "module"
    refusals = plan_refusals(track, options, OS_BARE)
    assert list(refusals) == ["enum"]
    assert "x-pack-core" in refusals["enum"][None]
    assert plan_refusals(track, options, ES_ZIP) == {}  # where it runs, nothing is refused

    steps = tuple(
        PlannedStep(
            name=step.name,
            queries=tuple(PlannedQuery(name=q.name, index="items", body={}) for q in step.queries),
            warmup=0.0,
            duration=1.0,
            target_throughput=None,
        )
        for step in track.query_steps(options)
    )
    marked = {step.name: step for step in refuse_planned(steps, refusals)}
    assert marked["enum"].runnable == ()
    (query,) = marked["enum"].queries
    assert query.unsupported is not None and "refused by the plan (module)" in query.unsupported
    assert len(marked["q"].runnable) == 1
