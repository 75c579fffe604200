"""Golden: every file of the run directories written before the typed records existed
(``tests/fixtures/runs/dev-*``) reads into its record, writes back and reads again the same,
and loses nothing on the way; ``report``, ``compare`` and the read model open those runs.

"Loses nothing": every field of the file is a field of its record (the record types cover
what esdash writes), and writing the record back gives the same values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from esdash.cli import main
from esdash.rundir import files
from esdash.rundir.layout import RunDir
from esdash.rundir.records import (
    ClusterSample,
    NodeStatus,
    Results,
    RunInfo,
    StreamRecord,
    Topology,
)
from esdash.rundir.stream import JsonlFollower, StreamReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUNS = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def _same(found: Any, written: Any, path: str = "$") -> None:
    """Every value of the file (``found``) is in the written record, equal."""
    if isinstance(found, dict):
        assert isinstance(written, dict), path
        for key, value in found.items():
            assert key in written, f"{path}.{key}: not a field of the record (lost on write)"
            _same(value, written[key], f"{path}.{key}")
    elif isinstance(found, list):
        assert isinstance(written, list | tuple) and len(found) == len(written), path
        for k, (a, b) in enumerate(zip(found, written, strict=True)):
            _same(a, b, f"{path}[{k}]")
    else:
        assert found == written, path


def _round_trip(path: Path, kind: type) -> None:
    record = files.read(path, kind)
    written = json.loads(files.encode(record))
    _same(json.loads(path.read_text()), written)
    assert files.convert(written, kind, path) == record


def test_fixtures_exist():
    assert [run.name for run in RUNS] == ["dev-20261121-032918", "dev2-20261121-033750"]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_file_round_trips(run: Path):
    rundir = RunDir(run)
    _round_trip(rundir.info_file, RunInfo)
    _round_trip(rundir.topology_file, Topology)
    _round_trip(rundir.results_file, Results)
    statuses = rundir.node_status_files()
    assert statuses
    for _rank, path in statuses:
        _round_trip(path, NodeStatus)
    lines = ((rundir.stream_file, StreamRecord), (rundir.cluster_samples_file, ClusterSample))
    for name, kind in lines:
        follower = JsonlFollower(name, kind)
        records = follower.read_all()
        assert records and follower.problems == []
        for line, record in zip(name.read_text().splitlines(), records, strict=True):
            written = json.loads(files.encode(record))
            _same(json.loads(line), written)
            assert msgspec.convert(written, kind) == record


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_old_runs_read_as_format_1_and_new_results_say_their_format(run: Path):
    results = RunDir(run).read_results()
    assert results.format == 1
    reader = StreamReader(RunDir(run).stream_file)
    reader.read_all()
    assert reader.header is not None and reader.finished


def test_report_and_compare_open_the_old_runs(tmp_path: Path, capsys):
    out = tmp_path / "report"
    args = ["--format", "json,md", "--no-figures", "--out", str(out)]
    assert main(["report", *map(str, RUNS), *args]) == 0
    report = json.loads((out / "report.json").read_text())
    assert {r["run"] for r in report["runs"]} == {run.name for run in RUNS}
    assert main(["compare", str(RUNS[0]), str(RUNS[1])]) == 0
    assert "req/s" in capsys.readouterr().out
