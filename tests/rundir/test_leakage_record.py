"""``leakage.json``: the typed record, its round trip through RunDir, and damaged files.

Files written before lengths and the majority-guess baseline were measured still read: a
real one from esdash at commit 1d0c61a (``tests/fixtures/leakage/``) and the support
report without the new fields; a reader ignores fields it does not know.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from support.leakage import before_lengths, report

from esdash.errors import EXIT_BAD_INPUT
from esdash.rundir.files import RunFileError
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage
from esdash.view import leakage as view

#: ``esdash leakage sessions/quickstart-abe.toml --documents 2000 --out ...`` at commit
#: 1d0c61a: the last format without ``length_classes`` and ``baseline``.
GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "leakage" / "leakage-1d0c61a.json"


def test_the_plugins_json_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.read_leakage() is None  # no client-side mode, or no analysis
    record = msgspec.convert(report(), type=Leakage)
    run.write_leakage(record)
    assert run.leakage_file.parent == tmp_path
    assert json.loads(run.leakage_file.read_text()) == report()  # exactly the schema, no more
    again = run.read_leakage()
    assert again == record
    age, sex, sequence, header = again.fields
    assert age.domain == 101 and header.domain is None
    assert age.best_attack().name == "sorting"  # the most exact of the applicable attacks
    assert sex.best_attack().within_1pct is None
    assert header.best_attack().name == "frequency"  # sorting does not apply
    assert sequence.best_attack().name == "length" and sequence.length_classes == 3
    assert sex.baseline.name == "majority guess" and sex.baseline.exact == 0.505
    assert again.names.length_classes == 1


def test_a_file_from_before_lengths_reads_shows_dashes_and_gains_nulls(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.leakage_file.write_text(json.dumps(before_lengths()))
    record = run.read_leakage()
    assert record is not None and record.names.length_classes is None
    assert all(f.length_classes is None and f.baseline is None for f in record.fields)
    age = view.field_row(record.fields[0])
    assert dict(zip(view.HEADERS, age, strict=True)) | {"verdict": ""} == {
        "field": "PatientAge", "scheme": "OPE", "learns": "order", "distinct": "101",
        "lengths": "-", "domain": "101", "best attack": "sorting", "exact": "100%",
        "within 1 %": "100%", "majority guess": "-", "majority within 1 %": "-", "verdict": "",
    }  # fmt: skip
    # written back, the new fields are there as nulls and nothing else changed
    run.write_leakage(record)
    written = json.loads(run.leakage_file.read_text())
    assert written["names"].pop("length_classes") is None
    for item in written["fields"]:
        assert item.pop("length_classes") is None and item.pop("baseline") is None
    assert written == before_lengths()


def test_a_real_file_of_the_last_format_without_lengths_reads(tmp_path: Path) -> None:
    data = json.loads(GOLDEN.read_text())
    assert "baseline" not in data["fields"][0] and data["version"] == 1
    run = RunDir(tmp_path)
    run.leakage_file.write_bytes(GOLDEN.read_bytes())
    record = run.read_leakage()
    assert record is not None and len(record.fields) == len(data["fields"]) == 63
    sequence = next(f for f in record.fields if f.field == "SequenceType")
    assert sequence.learns == "equality" and sequence.best_attack().exact == 0.0  # the old claim
    rows = view.rows(record, view.COMPACT)
    assert all(row[-1] == "-" for row in rows)  # no majority guess in that file


def test_a_newer_file_with_fields_this_reader_does_not_know_reads(tmp_path: Path) -> None:
    data = report()
    data["padding"] = {"bucket": 64}
    data["fields"][0]["bucket"] = 16
    data["fields"][0]["baseline"]["spread"] = 0.1
    run = RunDir(tmp_path)
    run.leakage_file.write_text(json.dumps(data))
    assert run.read_leakage() == msgspec.convert(report(), type=Leakage)


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
    for where, value in (("baseline", {"exact": -0.1}), ("length_classes", -1)):
        data = report()
        if isinstance(value, dict):
            data["fields"][2][where].update(value)
        else:
            data["fields"][2][where] = value
        run.leakage_file.write_text(json.dumps(data))
        with pytest.raises(RunFileError, match=rf"\$\.fields\[2\]\.{where}"):
            run.read_leakage()
    data = report()
    del data["fields"][1]["attacks"][0]["exact"]
    del data["names"]
    run.leakage_file.write_text(json.dumps(data))
    with pytest.raises(RunFileError, match=r"missing required field `names`"):
        run.read_leakage()
    run.leakage_file.write_text('{"version": 1, "thr')
    with pytest.raises(RunFileError, match="not valid JSON"):
        run.read_leakage()
