"""Dry runs write nothing, and check each point; ``session check`` checks a campaign as one.

Issue 17: a ``sweep --dry-run`` after the base session changed rewrote a completed point's
``session.toml`` and ``campaign.json`` (marking the point stale, so ``report`` found no
completed run), planned points whose secrets were missing, and ``session check`` read the
shipped campaign as a broken session.

The commands run in-process through the CLI's ``main`` (no cluster: nothing here starts one).
The campaign directory with a completed point is written by the sweep's own writers
(:class:`esdash.campaign.state.CampaignDir`, :class:`esdash.rundir.layout.RunDir`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from esdash.campaign.plan import plan
from esdash.campaign.spec import load_campaign
from esdash.campaign.state import CampaignDir
from esdash.cli import main
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Attempt

REPO = Path(__file__).resolve().parents[2]
BASE = """\
name = "base"
[cluster]
heap = "256m"
run_as = "esdash"
[track]
name = "mri"
documents = 500
"""
CAMPAIGN = """\
name = "pure"
session = "base.toml"

[axes]
benchmark.workers_per_node = [1, 2]
"""
SECRET = """\
name = "secret"
session = "base.toml"

[axes]
encryption.mode = ["none", "gocryptfs"]

[per_value."encryption.mode".gocryptfs]
encryption.password_file = "gocryptfs.pass"
"""

Snapshot = dict[str, tuple[str, bytes | None, int]]


def snapshot(root: Path) -> Snapshot:
    """Every path under ``root``: its kind, its bytes (files) and its mtime in ns."""
    found: Snapshot = {}
    for path in [root, *sorted(root.rglob("*"))]:
        stat = path.lstat()
        if path.is_symlink():
            found[str(path)] = ("link", os.readlink(path).encode(), stat.st_mtime_ns)
        elif path.is_dir():
            found[str(path)] = ("dir", None, stat.st_mtime_ns)
        else:
            found[str(path)] = ("file", path.read_bytes(), stat.st_mtime_ns)
    return found


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Runs, cache and working directory inside ``tmp_path``, so the snapshot sees any write."""
    monkeypatch.setenv("ESDASH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def completed_campaign(root: Path) -> CampaignDir:
    """The campaign in ``root``, its first point completed (state, run, results.json)."""
    (root / "base.toml").write_text(BASE)
    (root / "pure.toml").write_text(CAMPAIGN)
    campaign = load_campaign(root / "pure.toml")
    directory = CampaignDir(root / "runs" / "campaigns" / campaign.name)
    points = campaign.points(directory.path)
    directory.prepare(campaign, points)
    first = points[0]
    run = RunDir.create(root / "runs", str(first.session["name"]))
    run.results_file.write_text('{"status": "ok"}\n')
    state = directory.read_point(first.id)
    state.status, state.run, state.digest = "completed", str(run.path), first.digest
    state.attempts = [Attempt(run=str(run.path), cluster_run=str(run.path), status="completed")]
    directory.write_point(first, state)
    directory.write_summary(campaign, plan(points, campaign.ingest))
    assert directory.status(first) == "completed"
    return directory


def test_a_dry_run_after_the_base_changed_writes_not_a_byte(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = completed_campaign(scratch)
    base = scratch / "base.toml"
    base.write_text(BASE.replace('heap = "256m"', 'heap = "384m"'))  # every point is stale now
    before = snapshot(scratch)

    code = main(["sweep", str(scratch / "pure.toml"), "--dry-run"])
    out = capsys.readouterr().out

    assert snapshot(scratch) == before
    assert code == 0, out
    assert "2 points, 0 completed, 2 to run on 1 cluster(s)" in out
    assert "workers_per_node=1: ingest (unless the index is complete) (its session changed " in out
    verdict = [line for line in out.splitlines() if line.startswith("esdash sweep: ")][-1]
    assert verdict.endswith("nothing was written")
    # the completed point is still completed on disk, for `report` and the next sweep
    assert '"status": "completed"' in (directory.path / "campaign.json").read_text()


def test_a_dry_run_of_submit_writes_not_a_byte(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    completed_campaign(scratch)
    before = snapshot(scratch)
    code = main(["sweep", str(scratch / "pure.toml"), "--dry-run", "--submit"])
    out = capsys.readouterr().out
    assert snapshot(scratch) == before
    assert code == 0, out
    assert "jobs/nodes-1/job.sbatch (1 node(s), 1 points): not written, not submitted" in out
    assert "#SBATCH --nodes=1" in out


def test_a_missing_secret_fails_the_dry_run_naming_the_point_and_the_file(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (scratch / "base.toml").write_text(BASE)
    (scratch / "secret.toml").write_text(SECRET)
    before = snapshot(scratch)

    code = main(["sweep", str(scratch / "secret.toml"), "--dry-run"])
    captured = capsys.readouterr()

    assert code == 2, captured.out + captured.err
    errors = captured.err.splitlines()
    assert len(errors) == 1, errors
    # the campaign file set the key, so the campaign file is named, then the missing file
    assert errors[0].startswith(
        f"esdash: error: {scratch / 'secret.toml'}: encryption.password_file: "
        f"{scratch / 'gocryptfs.pass'} does not exist"
    ), errors
    assert errors[0].endswith("(point: mode=gocryptfs)")
    assert "  mode=gocryptfs: ingest (unless the index is complete) -- REFUSED" in captured.out
    assert "  mode=none: ingest (unless the index is complete)\n" in captured.out
    assert "1 of 2 point(s) to run would fail" in captured.out
    assert snapshot(scratch) == before


def write_secrets(home: Path) -> None:
    """The two secrets the shipped campaign's encryption modes read (its comments say how)."""
    (home / ".config" / "esdash").mkdir(parents=True)
    password = home / ".esdash-gocryptfs.pass"
    password.write_text("a-password-only-this-test-knows\n")
    password.chmod(0o600)
    key = home / ".config" / "esdash" / "abe.key"
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)


@pytest.mark.parametrize("name", ["campaign-paper-small.toml", "campaign-engines.toml"])
def test_session_check_passes_the_shipped_campaigns(
    name: str, scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = scratch / "home"
    write_secrets(home)
    monkeypatch.setenv("HOME", str(home))
    path = REPO / "sessions" / name
    before = snapshot(scratch)
    code = main(["session", "check", str(path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    assert captured.out.startswith(f"ok  {path}: campaign "), captured.out
    assert "every point passes the session checks" in captured.out
    assert snapshot(scratch) == before


def test_session_check_of_the_shipped_campaign_without_its_secrets_names_them(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(scratch / "home"))
    path = REPO / "sessions" / "campaign-paper-small.toml"
    code = main(["session", "check", str(path)])
    errors = capsys.readouterr().err.splitlines()
    assert code == 2
    assert len(errors) == 3, errors
    assert errors[0].startswith(f"esdash: error: {path}: encryption.password_file: ")
    assert errors[0].endswith(", +1 more)") and "(4 points: " in errors[0]
    assert errors[1].startswith(f"esdash: error: {path}: encryption.key_file: ")
    assert (
        errors[2] == f"esdash: error: {path}: 8 of 12 point(s) would fail their pre-flight checks"
    )


def test_session_check_names_a_broken_point(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One point's value is refused by the session's own validation, another's secret is
    missing: both are named with the campaign file; the other points pass."""
    (scratch / "base.toml").write_text(BASE)
    broken = scratch / "broken.toml"
    broken.write_text(SECRET.replace('"gocryptfs"]', '"gocryptfs"]\ncluster.heap = ["256m", "1k"]'))
    code = main(["session", "check", str(broken)])
    errors = capsys.readouterr().err.splitlines()
    assert code == 2
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"esdash: error: {broken}: cluster.heap: "), errors
    assert errors[0].endswith("(point mode=none heap=1k, mode=gocryptfs heap=1k)"), errors

    broken.write_text(SECRET)
    code = main(["session", "check", str(broken)])
    errors = capsys.readouterr().err.splitlines()
    assert code == 2
    assert errors == [
        f"esdash: error: {broken}: encryption.password_file: "
        + errors[0].split(": encryption.password_file: ", 1)[1],
        f"esdash: error: {broken}: 1 of 2 point(s) would fail their pre-flight checks",
    ]
    assert errors[0].endswith("(point: mode=gocryptfs)")
    assert str(scratch / "gocryptfs.pass") in errors[0]


def test_a_session_file_is_still_checked_as_a_session(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(REPO / "sessions" / "campaign-paper-small-base.toml", scratch / "s.toml")
    code = main(["session", "check", str(scratch / "s.toml")])
    assert code == 0
    assert "paper-small-base: 1 elasticsearch node(s)" in capsys.readouterr().out
