"""``leakage.json``: the typed record, its round trip through RunDir, and damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from support.leakage import report

from esdash.errors import EXIT_BAD_INPUT
from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage


def test_the_plugins_json_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.read_leakage() is None  # no client-side mode, or no analysis
    record = msgspec.convert(report(), type=Leakage)
    run.write_leakage(record)
    assert run.leakage_file.parent == tmp_path
    assert json.loads(run.leakage_file.read_text()) == report()  # exactly the schema, no more
    again = run.read_leakage()
    assert again == record
    age, sex, header = again.fields
    assert age.domain == 101 and header.domain is None
    assert age.best_attack().name == "sorting"  # the most exact of the applicable attacks
    assert sex.best_attack().within_1pct is None
    assert header.best_attack().name == "frequency"  # sorting does not apply


def test_a_damaged_file_names_the_file_and_the_json_path(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    data = report()
    data["fields"][1]["attacks"][0]["exact"] = 1.5  # shares are fractions
    run.leakage_file.write_text(json.dumps(data))
    with pytest.raises(RunFileError) as caught:
        run.read_leakage()
    message = str(caught.value)
    assert message.startswith(f"{run.leakage_file}: ")
    assert "$.fields[1].attacks[0].exact" in message and "\n" not in message
    assert caught.value.exit_code == EXIT_BAD_INPUT
    del data["fields"][1]["attacks"][0]["exact"]
    del data["names"]
    run.leakage_file.write_text(json.dumps(data))
    with pytest.raises(RunFileError, match=r"missing required field `names`"):
        run.read_leakage()
    run.leakage_file.write_text('{"version": 1, "thr')
    with pytest.raises(RunFileError, match="not valid JSON"):
        run.read_leakage()
