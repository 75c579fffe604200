"""``esdash leakage SESSION``: the leakage report before any data is ingested, no cluster.

The ABE plugin's analysis itself is tested in ``test_leakage.py``; here the command around
it: track, corpus and key resolved as ``esdash run`` resolves them, the table, ``--json``,
``--out``, the progress it prints, the scratch directory it removes, and the refusal of
modes that store plaintext on the nodes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from support.cli import esdash, write_session

from esdash.errors import EXIT_BAD_INPUT
from esdash.rundir.records import Leakage
from esdash.view.leakage import share

DOCUMENTS = 300


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An isolated cache (the generated corpus) and temporary directory (the scratch dir)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    return {**os.environ, "ESDASH_CACHE": str(tmp_path / "cache"), "TMPDIR": str(scratch)}


def abe_session(tmp_path: Path) -> Path:
    key = tmp_path / "abe.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    tables = f'[encryption]\nmode = "abe"\nkey_file = "{key}"\n'
    return write_session(
        tmp_path, "leaky", 1, track='name = "mri"\ndocuments = 20000', tables=tables, ports=False
    )


def test_an_abe_session_gets_its_report_as_json_a_file_and_a_table(tmp_path, env) -> None:
    session = abe_session(tmp_path)
    out = tmp_path / "reports" / "leakage-of-leaky.json"
    runs = tmp_path / "runs"
    args = ("leakage", str(session), "--documents", str(DOCUMENTS))
    result = esdash(*args, "--json", "--out", str(out), env_runs=runs, env=env)
    report = msgspec.json.decode(result.stdout, type=Leakage)  # the record, exactly
    assert json.loads(out.read_text()) == json.loads(result.stdout)
    assert report.documents == DOCUMENTS  # --documents: a sample of that size
    fields = {item.field: item for item in report.fields}
    assert {"PatientAge", "PatientSex", "ismrmrdHeader", "StudyDate"} <= set(fields)
    assert fields["PatientAge"].domain is not None and fields["ismrmrdHeader"].domain is None
    assert report.threat_model and report.references
    # it says what it does while it works, on stderr; the scratch run directory is gone
    assert "attacks on the ciphertexts of a corpus of 300 documents begin" in result.stderr
    # the key is read before the corpus is made: a missing key fails before the slow part
    said = result.stderr
    assert said.index("reading the key") < said.index("preparing the corpus")
    assert f"esdash: leakage: {out}" in result.stderr
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert not runs.exists()  # no run directory: nothing ran

    table = esdash(*args, env_runs=runs, env=env).stdout
    assert "What the cluster can learn, per encrypted field" in table
    header = next(line for line in table.splitlines() if "best attack" in line)
    assert header.split() == [
        "field", "scheme", "learns", "distinct", "domain", "best", "attack", "exact",
        "within", "1", "%", "majority", "guess",
    ]  # fmt: skip
    row = next(line for line in table.splitlines() if line.split()[:1] == ["PatientAge"])
    assert row.split()[-1].endswith("%")
    # SequenceType: three values of three lengths, recovered by length alone, beside the
    # majority guess (the share of its most frequent value)
    sequence = fields["SequenceType"]
    assert sequence.learns == "equality, length" and sequence.length_classes == 3
    assert sequence.best_attack().name == "length" and sequence.best_attack().exact == 1.0
    assert sequence.baseline is not None and 0.25 < sequence.baseline.exact < 0.5
    row = next(line for line in table.splitlines() if line.split()[:1] == ["SequenceType"])
    assert row.split()[-4:] == ["length", "100%", "-", share(sequence.baseline.exact)]
    assert "Verdicts\n- " in table and fields["PatientAge"].verdict in table
    assert "Threat model\n" in table and "References\n- " in table


@pytest.mark.parametrize(
    ("mode", "tables", "said"),
    [
        ("none", "", "(the search engine reads every value)"),
        (
            "gocryptfs",
            'password_file = "gocryptfs.pass"\n',
            "(only the disks are encrypted, the search engine reads every value)",
        ),
    ],
)
def test_modes_that_store_plaintext_on_the_nodes_are_refused(tmp_path, env, mode, tables, said):
    session = write_session(
        tmp_path, mode, 1, tables=f'[encryption]\nmode = "{mode}"\n{tables}', ports=False
    )
    result = esdash("leakage", str(session), env_runs=tmp_path / "runs", env=env, check=False)
    assert result.returncode == EXIT_BAD_INPUT
    assert result.stdout == ""
    assert result.stderr == (
        f"esdash: error: {session}: encryption.mode = {mode!r} stores plaintext on the nodes "
        f"{said}; leakage applies to client-side modes (abe); set encryption.mode to one of "
        f"them\n"
    )
    assert not (tmp_path / "cache").exists()  # refused before any corpus was generated


def test_a_missing_key_is_refused_before_the_corpus_is_made(tmp_path, env) -> None:
    session = abe_session(tmp_path)
    (tmp_path / "abe.key").unlink()
    result = esdash("leakage", str(session), env_runs=tmp_path / "runs", env=env, check=False)
    assert result.returncode == EXIT_BAD_INPUT and result.stdout == ""
    assert f"encryption.key_file: key file {tmp_path / 'abe.key'} does not exist" in result.stderr
    assert "preparing the corpus" not in result.stderr
    assert not (tmp_path / "cache" / "corpora").exists()  # the slow part never began


REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_abe_session_shows_length_leakage_and_the_baseline(tmp_path, env) -> None:
    """``esdash leakage sessions/quickstart-abe.toml`` as the README shows it (a smaller
    sample), with its key where the session's comments put it; a weak key is refused."""
    home = tmp_path / "home"
    key = home / ".config" / "esdash" / "abe.key"
    key.parent.mkdir(parents=True)
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    session = REPO / "sessions" / "quickstart-abe.toml"
    args = ("leakage", str(session), "--documents", str(DOCUMENTS))
    table = esdash(*args, env_runs=tmp_path / "runs", env={**env, "HOME": str(home)}).stdout
    header = next(line for line in table.splitlines() if "best attack" in line)
    assert header.split()[-2:] == ["majority", "guess"]
    row = next(line for line in table.splitlines() if line.split()[:1] == ["SequenceType"])
    assert row.split()[-4:-1] == ["length", "100%", "-"] and row.split()[-1].endswith("%")
    assert "- SequenceType: 3 distinct values in 3 length classes, 100 % of records " in table
    assert "the length of every AES-SIV value" in table  # the threat model says it

    key.write_bytes(b"\x00" * 32)
    refused = esdash(*args, env_runs=tmp_path / "runs", env={**env, "HOME": str(home)}, check=False)
    assert refused.returncode == EXIT_BAD_INPUT and refused.stdout == ""
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("esdash: error: ")]
    assert f"key file {key} is refused as a weak key: its 32 bytes take only 1" in line
