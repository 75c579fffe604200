"""A Rally track's own ``track.py``: its parameter sources sampled into query bodies.

Each test writes a small track with its ``track.py`` (the way Rally's tracks register
sources: a function, a class with ``partition``), plans it with the ``rally`` track, trusting
its code (``trust_code``: the code runs in a child process, as ``nobody`` when the tests run
as root, so the tracks lie in a directory every account can read), and checks the queries
esdash would send: the bodies the source gave (in order, the index and ``cache`` it asked
for), the same bodies on every load (seeded), and every failure of the user's code as one
line naming ``track.py``, never a traceback.  Without trust nothing of it runs
(``tests/security/test_track_code.py`` checks that through the command line).  Scroll searches
(``scroll-search``, ``pages``) are planned here too; ``bench.json`` written before these
fields existed still decodes.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from esdash_plugins.tracks import rally
from esdash_plugins.tracks.rally import trackcode as rally_trackcode
from esdash_plugins.tracks.rally import trackpy as rally_trackpy

from esdash.bench import loadgen
from esdash.errors import BadInput
from esdash.plugin_api import ALL_PAGES
from esdash.rundir.records import PlannedQuery

INDEX_BODY = {"mappings": {"properties": {"color": {"type": "keyword"}}}}

FUNCTION_SOURCE = """
import random

COLORS = ["red", "green", "blue", "black", "white", "pink", "gray", "teal"]


def colors(track, params, **kwargs):
    color = random.choice(COLORS)
    return {
        "body": {"query": {"term": {"color": color}}},
        "index": None,
        "cache": params.get("cache"),
        "type": None,
    }


def register(registry):
    registry.register_param_source("colors", colors)
"""

CLASS_SOURCE = """
import random


class Sizes:
    def __init__(self, track, params, **kwargs):
        self._index = track.indices[0].name
        self._challenge = track.selected_challenge_or_default.name
        self._operation = kwargs["operation_name"]
        self._left = params["count"]
        self._part = None

    def partition(self, partition_index, total_partitions):
        self._part = f"{partition_index}/{total_partitions}"
        return self

    def params(self):
        if self._left == 0:
            raise StopIteration()
        self._left -= 1
        tag = f"{self._challenge}:{self._operation}:{self._part}"
        return {
            "index": self._index,
            "body": {"query": {"range": {"size": {"gte": random.randint(1, 1000)}}}, "tag": tag},
            "results-per-page": 5,
            "knn_vector_store": object(),
        }


def register(registry):
    registry.register_param_source("sizes", Sizes)
    registry.register_track_processor(object())
"""


def write_track(
    directory: Path, track_py: str | None, operations: list[dict], schedule: list[dict]
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "index.json").write_text(json.dumps(INDEX_BODY))
    (directory / "documents.json").write_text('{"color": "red"}\n')
    spec = {
        "version": 2,
        "indices": [{"name": "items", "body": "index.json"}],
        "corpora": [
            {"name": "items", "documents": [{"source-file": "documents.json", "document-count": 1}]}
        ],
        "operations": [{"name": "ingest", "operation-type": "bulk", "bulk-size": 10}, *operations],
        "schedule": [{"operation": "ingest"}, *schedule],
    }
    (directory / "track.json").write_text(json.dumps(spec))
    if track_py is not None:
        (directory / "track.py").write_text(track_py)
    return directory


def source_track(directory: Path, track_py: str, source: str, **op: object) -> Path:
    operation = {"name": "from-source", "operation-type": "search", "param-source": source, **op}
    task = {"operation": "from-source", "time-period": 5}
    return write_track(directory, track_py, [operation], [task])


def trusting(path: Path) -> dict:
    """The track's options, trusting its code."""
    return {"path": path, "trust_code": True}


def queries(path: Path) -> dict:
    steps = rally.RallyTrack().query_steps(trusting(path))
    return {q.name: q for s in steps for q in s.queries}


def forget() -> None:
    """Drop what this process remembers of loaded track.py files and their samples."""
    rally_trackcode.forget()


# ----------------------------------------------------------------- sources become bodies


def test_a_function_source_gives_the_bodies_in_the_order_it_returned_them(readable_tmp):
    path = source_track(readable_tmp / "t", FUNCTION_SOURCE, "colors", cache=True)
    query = queries(path)["from-source"]
    assert len(query.variants) == rally_trackpy.MAX_SAMPLES
    assert query.body == query.variants[0]
    colors = [v["query"]["term"]["color"] for v in query.variants]
    assert len(set(colors)) > 1  # several different bodies, as the source drew them
    # the draws are those of Python's generator seeded as esdash seeds it
    rng = random.Random(rally_trackpy.SEED)
    palette = ["red", "green", "blue", "black", "white", "pink", "gray", "teal"]
    assert colors == [rng.choice(palette) for _ in colors]
    # "index": None searches the index esdash creates; "cache" is honoured as Rally does
    assert (query.index, query.request_cache, query.pages) == ("items", True, None)
    notes = "\n".join(rally.RallyTrack().notes(trusting(path)))
    assert "sampled from parameter source 'colors' of track.py (random seed 2013)" in notes


def test_a_class_source_is_partitioned_once_and_may_end(readable_tmp):
    path = source_track(readable_tmp / "t", CLASS_SOURCE, "sizes", count=3)
    query = queries(path)["from-source"]
    # the source ended after 3 parameter sets (StopIteration): 3 bodies, cycled
    assert len(query.variants) == 3
    # it saw the track's index and challenge, its task's name and partition 0 of 1
    assert {v["tag"] for v in query.variants} == {"default:from-source:0/1"}
    assert {v["size"] for v in query.variants} == {5}  # results-per-page is the size
    assert query.index == "items"
    notes = "\n".join(rally.RallyTrack().notes(trusting(path)))
    assert "the source ended after 3 parameter set(s)" in notes
    assert "track processor(s) registered; esdash does not run them" in notes
    assert "does not: knn_vector_store" in notes


def test_samples_are_the_same_on_every_load_and_leave_the_global_generator_alone(readable_tmp):
    # a palette drawn when track.py is imported is reproducible too
    drawn_at_import = FUNCTION_SOURCE.replace(
        'COLORS = ["red"', 'COLORS = random.sample(range(1000), 3) + ["red"'
    )
    path = source_track(readable_tmp / "t", drawn_at_import, "colors")
    random.seed(7)
    expected_next = random.Random(7).random()
    first = queries(path)["from-source"].variants
    assert random.random() == expected_next  # esdash's own draws are not disturbed
    forget()
    again = queries(path)["from-source"].variants
    assert first == again


def test_a_source_searching_another_index_is_refused_with_its_name(readable_tmp):
    source = FUNCTION_SOURCE.replace('"index": None', '"index": "elsewhere"')
    path = source_track(readable_tmp / "t", source, "colors")
    plan = {t.name: t for t in rally.RallyTrack().plan(trusting(path), None)}
    task = plan["from-source"]
    assert (task.status, task.reason_kind) == ("refused", "track_py")
    assert "parameter source 'colors': it searches 'elsewhere'" in (task.reason or "")


# --------------------------------------------------------- the user's code failing


@pytest.mark.parametrize(
    ("track_py", "expected"),
    [
        (
            "import no_such_module_here\n",
            r"track\.py line 1: ModuleNotFoundError: No module named 'no_such_module_here' "
            r"\(importing track\.py\)$",
        ),
        (
            "def register(registry):\n    registry.register_param_source('colors', 1 / 0)\n",
            r"track\.py line 2: ZeroDivisionError: division by zero \(in register\(registry\)\)$",
        ),
        (
            "def colors(track, params, **kwargs):\n    raise ValueError('no\\ncolors')\n\n"
            "def register(registry):\n    registry.register_param_source('colors', colors)\n",
            r"track\.py line 2: ValueError: no colors \(in param source 'colors'\)$",
        ),
        (
            "def colors(track, params, **kwargs):\n    return ['not', 'params']\n\n"
            "def register(registry):\n    registry.register_param_source('colors', colors)\n",
            r"track\.py: in param source 'colors' returned list, not a dict of parameters",
        ),
        (
            "def register(registry):\n    registry.register_param_source('other', print)\n",
            r"track\.py: registers no parameter source 'colors', which operation "
            r"'from-source' names \(it registers: other\)$",
        ),
        ("x = 1\n", r"track\.py: defines no register\(registry\) function"),
        ("def register(registry):\n    return (\n", r"track\.py line 2: SyntaxError: "),
    ],
    ids=["import", "register", "raising", "not-params", "unknown", "no-register", "syntax"],
)
def test_failures_of_the_track_code_are_one_line_naming_track_py(readable_tmp, track_py, expected):
    path = source_track(readable_tmp / "t", track_py, "colors")
    with pytest.raises(BadInput, match=expected) as caught:
        queries(path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(path / "track.py"))


def test_the_cli_reports_a_raising_source_as_the_tracks_error(readable_tmp):
    track_py = (
        "def colors(track, params, **kwargs):\n    return params['missing']\n\n"
        "def register(registry):\n    registry.register_param_source('colors', colors)\n"
    )
    path = source_track(readable_tmp / "t", track_py, "colors")
    session = readable_tmp / "plan.toml"
    session.write_text(
        'name = "plan"\n[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "esdash"\n'
        f'[track]\nname = "rally"\npath = "{path}"\ntrust_code = true\n'
    )
    env = {**os.environ, "ESDASH_CACHE": str(readable_tmp / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "plan", str(session)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"{path / 'track.py'} line 2: KeyError: 'missing' (in param source 'colors')" in (
        result.stderr
    )


def test_a_track_py_outside_the_track_directory_is_not_run(readable_tmp):
    outside = readable_tmp / "elsewhere.py"
    outside.write_text(FUNCTION_SOURCE)
    path = source_track(readable_tmp / "t", FUNCTION_SOURCE, "colors")
    (path / "track.py").unlink()
    (path / "track.py").symlink_to(outside)
    with pytest.raises(BadInput, match="outside the track directory") as caught:
        queries(path)
    assert str(caught.value).startswith(str(path / "track.py"))


# ------------------------------------------------------------------------ scroll searches


def test_scroll_searches_carry_their_pages_and_page_size(tmp_path):
    body = {"query": {"match_all": {}}}
    operations = [
        {"name": "five", "operation-type": "scroll-search", "pages": 5, "results-per-page": 20},
        {"name": "every", "operation-type": "scroll-search", "pages": "all", "body": body},
        {"name": "after", "operation-type": "paginated-search", "pages": 2, "body": body},
        {"name": "after-no-pages", "operation-type": "paginated-search", "body": body},
        {
            "name": "over-pit",
            "operation-type": "paginated-search",
            "with-point-in-time-from": "open-pit",
            "pages": 2,
            "body": body,
        },
        {"name": "no-pages", "operation-type": "scroll-search", "body": body},
    ]
    schedule = [{"operation": op["name"], "time-period": 5} for op in operations]
    path = write_track(tmp_path / "t", None, operations, schedule)
    found = queries(path)
    assert (found["five"].pages, found["five"].body) == (5, {"size": 20})
    assert (found["every"].pages, found["every"].body) == (ALL_PAGES, body)
    # paginated-search pages by search_after ("pages" required, as Rally's runner has it);
    # not over a point in time
    assert (found["after"].pages, found["after"].paging) == (2, "search_after")
    assert found["every"].paging == "scroll"
    plan = {t.name: t for t in rally.RallyTrack().plan(trusting(path), None)}
    assert plan["after"].status == "run" and "search_after pages" in plan["after"].esdash
    assert "point in time (with-point-in-time-from)" in (plan["over-pit"].reason or "")
    assert "'pages' must be a number of pages" in (plan["no-pages"].reason or "")
    assert "'pages' must be a number of pages" in (plan["after-no-pages"].reason or "")


# ---------------------------------------------------------------- bench.json, load order


def test_bench_json_of_older_runs_still_decodes():
    old = {"name": "q", "index": "items", "body": {"query": {"match_all": {}}}}
    planned = msgspec.json.decode(json.dumps(old).encode(), type=PlannedQuery)
    assert (planned.variants, planned.pages) == ((), None)
    prepared = loadgen.PreparedQuery.planned(planned)
    assert prepared.body_at(3) == prepared.body and prepared.pages is None


def test_each_client_cycles_the_bodies_from_its_own_reproducible_start():
    variants = tuple({"query": {"term": {"n": n}}} for n in range(10))
    planned = PlannedQuery(name="q", index="items", body=variants[0], variants=variants, pages=None)
    prepared = loadgen.PreparedQuery.planned(planned)
    starts = []
    for seed in (1, 2, 3, 1):
        order = loadgen.query_order([prepared], random.Random(seed))
        sent = [json.loads(order[0].body_at(use) or b"") for use in range(10)]
        assert sorted(sent, key=json.dumps) == sorted(variants, key=json.dumps)  # each once
        starts.append(sent[0]["query"]["term"]["n"])
    assert starts[0] == starts[3]  # the same seed, the same start
    assert len(set(starts[:3])) > 1  # clients differ


# ------------------------------------------------------------------ the track's runners

RUNNERS = """
async def count_red(es, params):
    await es.search(index=params["target"], body={"query": {"term": {"color": "red"}}})
    return {"weight": 1, "unit": "ops"}


async def stats(es, params):
    await es.perform_request("GET", "/items/_stats", params={"level": "shards"})


async def two_searches(es, params):
    await es.search(index="items", body={})
    await es.search(index="items", body={})


async def refresh(es, params):
    await es.indices.refresh(index="items")


def register(registry):
    registry.register_runner("count-red", count_red, async_runner=True)
    registry.register_runner("stats-by-shard", stats, async_runner=True)
    registry.register_runner("two-searches", two_searches, async_runner=True)
    registry.register_runner("refresh-items", refresh, async_runner=True)
"""


def test_a_runner_sending_one_request_runs_others_are_refused_by_name(readable_tmp):
    kinds = ("count-red", "stats-by-shard", "two-searches", "refresh-items", "unregistered")
    operations = [{"name": f"op-{k}", "operation-type": k, "target": "items"} for k in kinds]
    schedule = [{"operation": op["name"], "time-period": 5} for op in operations]
    path = write_track(readable_tmp / "t", RUNNERS, operations, schedule)
    found = queries(path)
    red = found["op-count-red"]
    assert (red.index, red.body, red.path) == ("items", {"query": {"term": {"color": "red"}}}, None)
    stats = found["op-stats-by-shard"]
    assert (stats.method, stats.path, stats.body) == ("GET", "/items/_stats?level=shards", {})
    plan = {t.name: t for t in rally.RallyTrack().plan(trusting(path), None)}
    for name, why in (
        ("op-two-searches", "it sends 2 requests"),
        ("op-refresh-items", "it calls es.indices.refresh"),
        ("op-unregistered", "registers no runner 'unregistered'"),
    ):
        assert (plan[name].status, plan[name].reason_kind) == ("refused", "track_py")
        assert why in (plan[name].reason or ""), plan[name].reason
        assert str(path / "track.py") in (plan[name].reason or "")


def test_running_track_py_writes_nothing_into_the_track_directory(readable_tmp):
    path = source_track(readable_tmp / "t", FUNCTION_SOURCE, "colors")
    (path / "helper.py").write_text("PALETTE = ['red', 'blue']\n")
    (path / "track.py").write_text(
        FUNCTION_SOURCE.replace("COLORS = [", "from helper import PALETTE\nCOLORS = PALETTE + [")
    )
    before = sorted(p.name for p in path.iterdir())
    assert queries(path)["from-source"].variants  # it imported its helper module beside it
    assert sorted(p.name for p in path.iterdir()) == before  # no __pycache__
    # it ran in a child process: nothing of it was imported into this one
    assert not any(name.startswith("esdash_rally_track_") for name in sys.modules)
    assert "helper" not in sys.modules and str(path) not in sys.path


# ------------------------------------------------------- trust, and the child process

MARKED = """
import os
import pwd
import re

MARKS = {marks!r}
with open(os.path.join(MARKS, "imported-%d" % os.getpid()), "w") as mark:
    mark.write("track.py ran")


def colors(track, params, **kwargs):
    return {{"body": {{"query": {{"term": {{"color": "red"}}}}}}}}


async def one_search(es, params):
    await es.search(index="items", body={{"query": {{"match_all": {{}}}}}})


def register(registry):
    registry.register_param_source("colors", colors)
    registry.register_runner("one-search", one_search, async_runner=True)
"""


def marked_track(directory: Path) -> tuple[Path, Path]:
    """A track whose track.py leaves a file in ``marks`` when it is imported, with a
    search from its source and a task of its own runner."""
    marks = directory / "marks"
    marks.mkdir(parents=True)
    marks.chmod(0o777)  # nobody writes its marks here when the tests run as root
    operations = [
        {"name": "from-source", "operation-type": "search", "param-source": "colors"},
        {"name": "own", "operation-type": "one-search"},
    ]
    schedule = [{"operation": op["name"], "time-period": 5} for op in operations]
    path = write_track(directory / "t", MARKED.format(marks=str(marks)), operations, schedule)
    return path, marks


def test_without_trust_nothing_runs_and_its_tasks_are_refused_naming_the_file(readable_tmp):
    path, marks = marked_track(readable_tmp)
    track = rally.RallyTrack()
    tasks = {t.name: t for t in track.plan({"path": path}, None)}
    assert [q.name for s in track.query_steps({"path": path}) for q in s.queries] == []
    assert track.notes({"path": path})
    assert list(marks.iterdir()) == []  # not imported, not run
    for name in ("from-source", "own"):
        task = tasks[name]
        assert (task.status, task.reason_kind) == ("refused", "track_py"), task
        reason = task.reason or ""
        assert f"{path / 'track.py'} is the track's own code" in reason, reason
        assert "trust_code = true in the session's [track] table, or --trust-track-code" in reason
    assert tasks["ingest"].status == "run"
    # the plan names the files that would run, trusted or not
    (path / "helper.py").write_text("X = 1\n")
    (path / "lib").mkdir()
    (path / "lib" / "__init__.py").write_text("")
    line = track.own_code({"path": path}) or ""
    assert line.startswith(
        f"track code: {path / 'track.py'}, {path / 'helper.py'}, {path / 'lib'}: not run"
    ), line
    assert "the session trusts it; esdash runs it in a child process as " in (
        track.own_code(trusting(path)) or ""
    )
    assert list(marks.iterdir()) == []


def test_with_trust_it_runs_once_in_a_child_process(readable_tmp):
    path, marks = marked_track(readable_tmp)
    tasks = {t.name: t for t in rally.RallyTrack().plan(trusting(path), None)}
    assert tasks["from-source"].status == tasks["own"].status == "run"
    assert [q.name for s in rally.RallyTrack().query_steps(trusting(path)) for q in s.queries] == [
        "from-source",
        "own",
    ]
    (mark,) = marks.iterdir()  # imported once: later loads use what it answered
    assert mark.name != f"imported-{os.getpid()}"  # not this process


REPORTS = """
import json, os, resource


def facts(track, params, **kwargs):
    limits = {name: resource.getrlimit(getattr(resource, name))[1]
              for name in ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_CORE")}
    mask = os.umask(0)
    return {"body": {"facts": {
        "pid": os.getpid(), "uid": os.getuid(), "groups": os.getgroups(),
        "cwd": os.getcwd(), "umask": mask, "env": sorted(os.environ), "limits": limits,
        "stdin": os.read(0, 10).decode(),
    }}}


def register(registry):
    registry.register_param_source("facts", facts)
"""


def test_the_child_has_a_fresh_environment_its_track_directory_and_limits(readable_tmp):
    path = source_track(readable_tmp / "t", REPORTS, "facts")
    facts = queries(path)["from-source"].body["facts"]
    assert facts["pid"] != os.getpid()
    assert facts["env"] == ["HOME", "LANG", "LOGNAME", "PATH", "USER"]
    assert facts["cwd"] == str(path.resolve())
    assert facts["umask"] == 0o077
    assert facts["stdin"] == ""  # /dev/null: nothing to read from esdash's terminal
    assert facts["limits"]["RLIMIT_CORE"] == 0
    assert facts["limits"]["RLIMIT_NOFILE"] <= 256
    assert 0 < facts["limits"]["RLIMIT_AS"] <= 8 * 1024**3
    if os.geteuid() == 0:  # as root: nobody, without supplementary groups
        assert facts["uid"] == pwd.getpwnam("nobody").pw_uid
        assert facts["groups"] == []
    else:
        assert facts["uid"] == os.geteuid()


@pytest.mark.parametrize(
    ("track_py", "expected"),
    [
        ("import os\nos._exit(7)\n", ": the process running it ended with exit status 7"),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            ": the process running it was killed by SIGKILL",
        ),
        ("import sys\nsys.exit(3)\n", " line 2: SystemExit: 3"),
    ],
    ids=["os-exit", "killed", "sys-exit"],
)
def test_a_track_py_ending_its_process_is_one_line(readable_tmp, track_py, expected):
    path = source_track(readable_tmp / "t", track_py, "colors")
    with pytest.raises(BadInput) as caught:
        queries(path)
    assert str(caught.value) == f"{path / 'track.py'}{expected} (importing track.py)"


def test_a_track_py_that_never_answers_is_stopped_at_the_time_limit(readable_tmp, monkeypatch):
    """The limit is lowered for the test; the child is really started and really killed."""
    monkeypatch.setattr(rally_trackcode, "TIME_LIMIT", 1.0)
    path = source_track(readable_tmp / "t", "import time\nwhile True:\n    time.sleep(1)\n", "c")
    with pytest.raises(BadInput) as caught:
        queries(path)
    assert str(caught.value) == (
        f"{path / 'track.py'}: still running after 1 s (importing track.py); esdash stopped "
        f"it (a track's own code has 1 s for each step)"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: nobody runs the code")
def test_a_track_directory_nobody_can_read_is_named_and_left_as_it_is(readable_tmp):
    path = source_track(readable_tmp / "private" / "t", FUNCTION_SOURCE, "colors")
    (readable_tmp / "private").chmod(0o700)
    modes = [p.stat().st_mode for p in (readable_tmp / "private", path, path / "track.py")]
    with pytest.raises(BadInput) as caught:
        queries(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: the account nobody that runs the track's code cannot ")
    assert "chmod o+rX" in message and "\n" not in message
    assert [p.stat().st_mode for p in (readable_tmp / "private", path, path / "track.py")] == modes


def test_an_osb_workload_runs_its_workload_py(readable_tmp):
    path = source_track(readable_tmp / "w", FUNCTION_SOURCE, "colors")
    (path / "track.json").rename(path / "workload.json")
    (path / "track.py").rename(path / "workload.py")
    assert len(queries(path)["from-source"].variants) == rally_trackpy.MAX_SAMPLES
    tasks = {t.name: t for t in rally.RallyTrack().plan({"path": path}, None)}
    assert f"{path / 'workload.py'} is the track's own code" in (tasks["from-source"].reason or "")
