"""Damaged files of a run directory, and of the authors' result files, through every reader.

A copy of a real, completed run (``tests/fixtures/runs/dev-…``, plus a ``bench.json`` and a
``health.json`` as a run writes them) gets one file damaged at a time: emptied, replaced by
``[]`` or ``{"status": 5}``, cut in half, given non-UTF-8 bytes, ``NaN``, a time of
``1e308``, a 400-digit integer or a value of the wrong type.  Then ``esdash report``,
``compare``, ``cluster status`` and ``cluster down`` run in-process, and the live view's
readers (:class:`~esdash.view.source.RunSource` into :class:`~esdash.view.model.RunModel`)
and the run list (:func:`esdash.view.runs.list_runs`) read the directory.

The rule (issue 17, item 1): a refusal is exit code 2 with one ``esdash: error:`` line that
names the damaged file (and, for a value, its JSON path); never a traceback; the input files
are byte for byte what they were.  Where a file is optional to a reader (``run.json`` to the
report, ``bench.json`` to everyone but the bench ranks) the reader goes on without it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from esdash.cli import main
from esdash.view import runs
from esdash.view.model import RunModel, ViewParams
from esdash.view.source import RunSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = "dev-20261121-032918"
OTHER = FIXTURES / "runs" / "dev2-20261121-033750"
AUTHORS = FIXTURES / "authors"

BENCH_PLAN: dict[str, Any] = {
    "index": "mri",
    "index_body": {"mappings": {}},
    "corpus_path": "/data/corpus.json",
    "corpus_documents": 100,
    "corpus_has_actions": False,
    "bulk_size": 100,
    "interval": 1.0,
    "seed": 7,
    "ranks": 1,
    "steps": [
        {
            "name": "search",
            "think_time": 0.0,
            "warmup": 1.0,
            "duration": 2.0,
            "target_throughput": None,
            "queries": [{"name": "age", "index": "mri", "body": {"query": {"match_all": {}}}}],
        }
    ],
}
HEALTH = {"ok": True, "time": 1795231800.0, "cluster_name": "dev", "status": "green"}


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``data`` (a copy) with the value at ``path`` replaced by ``value``."""
    data = json.loads(json.dumps(data))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _raw(data: Any, marker: str, literal: str) -> bytes:
    """JSON text of ``data`` with the string ``marker`` written as a bare ``literal``."""
    return json.dumps(data).replace(json.dumps(marker), literal).encode()


def _value(path: tuple[Any, ...], literal: str) -> Callable[[Any, bytes], bytes]:
    return lambda data, _: _raw(_set(data, path, "@@"), "@@", literal)


#: Damages of a whole file, whatever its content.
WHOLE: dict[str, Callable[[Any, bytes], bytes]] = {
    "empty": lambda data, raw: b"",
    "array": lambda data, raw: b"[]",
    "status 5": lambda data, raw: b'{"status": 5}',
    "truncated": lambda data, raw: raw[: len(raw) // 2],
    "not UTF-8": lambda data, raw: b'{"schema": "\xff\xfe"}',
    "NaN": lambda data, raw: b'{"schema": NaN}',
    "deep": lambda data, raw: b"[" * 100_000,
}

#: Damages of one value, per file: (file, damage) -> how; the path is where the error points.
VALUES: dict[tuple[str, str], tuple[tuple[Any, ...], str]] = {
    ("results.json", "started 1e308"): (("started",), "1e308"),
    ("results.json", "ended -1"): (("ended",), "-1"),
    ("results.json", "huge requests"): (("steps", 2, "queries", "age", "requests"), "9" * 400),
    ("results.json", "latency 1e308"): (("steps", 2, "queries", "age", "latency", "p50"), "1e308"),
    ("results.json", "steps a string"): (("steps",), '"none"'),
    ("results.json", "status a number"): (("status",), "5"),
    ("run.json", "created 1e308"): (("created",), "1e308"),
    ("run.json", "huge launcher pid"): (("launcher", "pid"), "1" + "0" * 30),
    ("run.json", "nodes a list"): (("nodes",), "[]"),
    ("topology.json", "port 1e308"): (("nodes", 0, "http_port"), "1e308"),
    ("topology.json", "nodes null"): (("nodes",), "null"),
}

#: What each reader must do with a damaged file: refuse it (exit 2, naming it) or go on.
REFUSED_BY = {
    "results.json": {"report", "compare"},
    "run.json": {"status", "status --json", "down"},
    "topology.json": {"status", "status --json"},
    "bench.json": set(),
    "health.json": set(),
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A copy of a completed run, with the bench plan and health file a run also writes."""
    path = tmp_path / "runs" / RUN
    shutil.copytree(FIXTURES / "runs" / RUN, path)
    (path / "bench.json").write_text(json.dumps(BENCH_PLAN, indent=2))
    (path / "health.json").write_text(json.dumps(HEALTH, indent=2))
    return path


def _commands(run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(run), "--out", str(out), "--no-figures", "--format", "md,json"],
        "compare": ["compare", str(OTHER), str(run)],
        "status": ["cluster", "status", str(run)],
        "status --json": ["cluster", "status", "--json", str(run)],
        "down": ["cluster", "down", "--grace", "0", str(run)],
    }


def _snapshot(run: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("esdash: error:")]


def _check_readers(
    run: Path, damaged: str, capsys: pytest.CaptureFixture[str], harmless: bool = False
) -> None:
    """Every reader on ``run`` (whose file ``damaged`` is damaged), by the rule above;
    ``harmless``: the damage still makes a valid record (every reader goes on)."""
    refused = set() if harmless else REFUSED_BY[damaged]
    before = _snapshot(run)
    for name, argv in _commands(run, run.parent.parent / "report").items():
        if name == "down" and name not in refused:
            continue  # down on a readable run.json really stops the (long gone) run
        code = main(argv)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, (name, captured.err)
        if name in refused:
            assert code == 2, (name, captured.err)
            errors = _errors(captured.err)
            assert len(errors) == 1 and str(run / damaged) in errors[0], (name, captured.err)
        else:
            assert code == 0, (name, captured.err)
    problems = _watch(run)
    if damaged in ("run.json", "results.json") and not harmless:
        assert any(str(run / damaged) in p for p in problems), problems
    entry = next(e for e in runs.list_runs(run.parent) if e.path == run)
    if damaged in ("run.json", "results.json") and not harmless:
        assert entry.state == runs.DAMAGED and entry.detail.startswith(damaged), entry
    else:
        assert entry.state == "finished", entry
    after = _snapshot(run)
    assert {p: after[p] for p in before} == before, "a reader changed an input file"


def _watch(run: Path) -> list[str]:
    """What the live view reads of ``run``: its problems (it must not raise)."""
    source = RunSource(run, job_state=lambda job: "FINISHED")
    model = RunModel(run.name)
    problems: list[str] = []
    for _ in range(2):
        update = source.poll(log_rank=0)
        problems += update.problems
        model.apply(update)
    for params in (ViewParams(), ViewParams(upto=0), ViewParams(upto=3, span=None)):
        model.snapshot(params, 1795231900.0)
    return problems


@pytest.mark.parametrize("damage", sorted(WHOLE))
@pytest.mark.parametrize("damaged", sorted(REFUSED_BY))
def test_a_damaged_file_is_one_line_naming_it(
    run: Path, damaged: str, damage: str, capsys: pytest.CaptureFixture[str]
):
    path = run / damaged
    raw = path.read_bytes()
    path.write_bytes(WHOLE[damage](json.loads(raw), raw))
    # run.json's fields are all optional and unknown ones ignored: {"status": 5} is valid
    _check_readers(run, damaged, capsys, harmless=(damaged, damage) == ("run.json", "status 5"))


@pytest.mark.parametrize(("damaged", "damage"), sorted(VALUES))
def test_a_damaged_value_is_one_line_naming_the_file_and_the_json_path(
    run: Path, damaged: str, damage: str, capsys: pytest.CaptureFixture[str]
):
    path = run / damaged
    where, literal = VALUES[damaged, damage]
    path.write_bytes(_value(where, literal)(json.loads(path.read_bytes()), b""))
    _check_readers(run, damaged, capsys)
    refusing = "report" if damaged == "results.json" else "status"
    assert main(_commands(run, run.parent.parent / "report")[refusing]) == 2
    (error,) = _errors(capsys.readouterr().err)
    json_path = "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where)
    json_path = json_path.replace(".queries.age", ".queries[...]")  # msgspec's dict values
    assert f"at `{json_path}`" in error, error


def test_a_damaged_node_status_or_stream_line_does_not_stop_a_reader(
    run: Path, capsys: pytest.CaptureFixture[str]
):
    """A node's ``status.json`` and the stream's lines are read by many (the run list, the
    live view, ``cluster status``); a damaged one is left out or reported, not a crash."""
    (run / "nodes" / "0" / "status.json").write_bytes(b'{"rank": 0, "started": 1e308}')
    lines = (run / "stream.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"wall":', b'"wall":1e308,"x":', 1)
    lines[2] = b'{"type": "event", "t": 1, "wall": 1795231760, "kind": "rank_lost", '
    lines[2] += b'"level": "warning", "message": "m", "data": {"rank": "1e400"}}\n'
    (run / "stream.jsonl").write_bytes(b"".join(lines))
    before = _snapshot(run)
    assert main(["cluster", "status", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    problems = _watch(run)
    assert any("stream.jsonl" in p and "line 2" in p for p in problems), problems
    assert _snapshot(run) == before


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("#docs=abc", "#docs=abc: expected a whole number"),
        ("#docs=-5", "#docs=-5: expected a whole number"),
        ("#docs=" + "9" * 40, "expected a whole number from 1 to"),
        ("#repetition=x", "#repetition=x: expected a whole number"),
    ],
)
def test_bad_metadata_of_an_authors_file_is_one_line(
    tmp_path: Path, spec: str, expected: str, capsys: pytest.CaptureFixture[str]
):
    source = AUTHORS / "ingest-3n-2ppn.txt"
    out = tmp_path / "report"
    assert main(["report", f"{source}{spec}", "--no-figures", "--out", str(out)]) == 2
    (error,) = _errors(capsys.readouterr().err)
    assert str(source) in error and expected in error


AUTHORS_DAMAGES: dict[str, tuple[tuple[Any, ...], str, str]] = {
    "error code a string": (
        (0, "search_results", 0, "responses", 0, 0),
        '{"error_code": "x"}',
        "$[0].search_results[0].responses[0][0].error_code",
    ),
    "latency 1e308": (
        (0, "search_results", 0, "responses", 0, 0),
        '{"latency": 1e308, "docs": 1}',
        "$[0].search_results[0].responses[0][0].latency",
    ),
    "neither latency nor error": (
        (0, "search_results", 0, "responses", 0, 0),
        "{}",
        "$[0].search_results[0].responses[0][0]",
    ),
    "responses not a list": ((0, "search_results", 0, "responses"), "5", ".responses"),
    "huge docs": (
        (0, "search_results", 0, "responses", 0, 0),
        '{"latency": 0.1, "docs": ' + "9" * 400 + "}",
        "$[0].search_results[0].responses[0][0].docs",
    ),
    "execution time a string": ((0, "execution_time_secs"), '"300"', "execution_time_secs"),
}


@pytest.mark.parametrize("damage", sorted(AUTHORS_DAMAGES))
def test_a_damaged_authors_query_file_is_one_line_naming_it_and_the_json_path(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
):
    where, literal, json_path = AUTHORS_DAMAGES[damage]
    data = json.loads((AUTHORS / "query-3n-1ppn.json").read_text())
    path = tmp_path / "queries.json"
    path.write_bytes(_raw(_set(data, where, "@@"), "@@", literal))
    before = path.read_bytes()
    for argv in (
        ["report", f"{path}#nodes=3", "--no-figures", "--out", str(tmp_path / "report")],
        ["compare", str(FIXTURES / "runs" / RUN), str(path)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        (error,) = _errors(err)
        assert "Traceback" not in err and str(path) in error and json_path in error, error
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "content", [b"['0:00:01.5', 5]", b"['99999999:00:00.0']", b"['0:00:01.5', None]"]
)
def test_a_damaged_authors_ingest_file_is_one_line(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "ingest.txt"
    path.write_bytes(content)
    assert main(["report", str(path), "--no-figures", "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    (error,) = _errors(err)
    assert "Traceback" not in err and str(path) in error and "H:MM:SS.ff" in error
    assert path.read_bytes() == content


def test_a_fifo_in_place_of_a_run_file_is_refused_at_once(
    run: Path, capsys: pytest.CaptureFixture[str]
):
    """Opening a FIFO blocks until someone writes to it: a reader that did would hang."""
    for name in ("results.json", "session.toml", "stream.jsonl"):
        (run / name).unlink()
        os.mkfifo(run / name)
    assert main(["report", str(run), "--no-figures", "--out", str(run.parent / "report")]) == 2
    (error,) = _errors(capsys.readouterr().err)
    assert str(run / "results.json") in error and "not a regular file" in error
    assert any("stream.jsonl" in p and "not a regular file" in p for p in _watch(run))
    entry = next(e for e in runs.list_runs(run.parent) if e.path == run)
    assert entry.state == runs.DAMAGED


@pytest.mark.parametrize("where", ["latency", "service_time"])
def test_a_damaged_histogram_is_refused_with_its_json_path(
    run: Path, where: str, capsys: pytest.CaptureFixture[str]
):
    path = run / "results.json"
    data = json.loads(path.read_text())
    data["steps"][2]["queries"]["age"]["histograms"][where] = "HISTFAAAAB"  # cut short
    path.write_text(json.dumps(data))
    assert main(["compare", str(OTHER), str(run)]) == 2
    (error,) = _errors(capsys.readouterr().err)
    assert "not an encoded HDR histogram" in error
    assert f"at `$.steps[2].queries.age.histograms.{where}`" in error
