"""A track's own code runs only when the session trusts it, and never as root.

Issue 28, item 3 and its "done when" (finding H3 of the security audit: ``track.py`` ran as
root during ``session check``, ``plan`` and ``submit --dry-run``).  The track is the
``planned`` fixture (a search from a parameter source, a task of the track's own runner) with
a ``track.py`` written here that leaves a marker file, with what it ran as, when it is
imported.  The commands run as a user runs them:

* without trust, ``session check``, ``plan`` (text and ``--json``) and ``submit --dry-run``
  (and a campaign's ``session check`` and ``sweep --dry-run``) import nothing of it (no
  marker), refuse the tasks that need it (``track_py``, naming the file and how to trust
  it), and ``plan`` and ``session check`` name the files that would run;
* with ``--trust-track-code`` or ``[track] trust_code = true``, as root, the code runs as
  ``nobody`` (the marker is ``nobody``'s, 0600, written without supplementary groups);
* run as another user, the code runs as that user;
* the track's code ending its process is one line, never a traceback of esdash.

pytest's ``tmp_path`` lies under a 0700 directory ``nobody`` cannot enter, so the track is
copied into a directory every account can read (under ``shared_tmp``), and its markers go to
a directory every account can write.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.cli import ESDASH, esdash, write_session

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rally" / "planned"

TRACK_PY = """
import json
import os
import random

with open(os.path.join({marks!r}, "imported-%d" % os.getpid()), "w") as mark:
    json.dump({{"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}}, mark)


def random_colors(track, params, **kwargs):
    color = random.choice(["red", "blue"])
    return {{"index": "items", "body": {{"query": {{"term": {{"color": color}}}}}}}}


async def warm_the_cache(es, params):
    await es.search(index="items", body={{"query": {{"match_all": {{}}}}}})


def register(registry):
    registry.register_param_source("random-colors", random_colors)
    registry.register_runner("warm-the-cache", warm_the_cache, async_runner=True)
"""


@pytest.fixture
def scratch(shared_tmp: Path) -> Path:
    """A fresh directory every account can read."""
    path = Path(tempfile.mkdtemp(dir=shared_tmp, prefix="track-code-"))
    path.chmod(0o755)
    return path


def marked_track(scratch: Path, track_py: str = TRACK_PY) -> tuple[Path, Path]:
    """The fixture track with a ``track.py`` that marks its import in ``marks``."""
    track = scratch / "planned"
    track.mkdir()
    for name in ("documents.json", "index.json", "track.json"):
        shutil.copyfile(FIXTURE / name, track / name)
    marks = scratch / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # whoever runs the code may write its marker here
    (track / "track.py").write_text(track_py.format(marks=str(marks)))
    return track, marks


def session_of(scratch: Path, track: Path, trust: bool = False) -> Path:
    """A session of the track, and beside it a campaign of two points over it."""
    options = f'name = "rally"\npath = "{track}"' + ("\ntrust_code = true" if trust else "")
    session = write_session(scratch, "trackcode", 1, track=options)
    (scratch / "campaign.toml").write_text(
        f'name = "trackcode"\nsession = "{session.name}"\n'
        "[axes]\nbenchmark.workers_per_node = [1, 2]\n"
    )
    return session


def commands(session: Path, *flags: str) -> list[list[str]]:
    """Every command the issue names that loads the track without starting anything, and
    the campaign's (its check, a sweep's dry run)."""
    campaign = str(session.parent / "campaign.toml")
    return [
        ["session", "check", str(session), *flags],
        ["plan", str(session), *flags],
        ["plan", "--json", str(session), *flags],
        ["submit", "--dry-run", str(session), *flags],
        ["session", "check", campaign, *flags],
        ["sweep", "--dry-run", campaign, *flags],
    ]


def run(args: list[str], runs: Path) -> subprocess.CompletedProcess[str]:
    result = esdash(*args, env_runs=runs, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    # submit --dry-run may miss a distribution in the cache (exit 2, after loading the track)
    assert result.returncode in ((0, 2) if args[0] == "submit" else (0,)), result.stderr
    return result


def test_without_trust_no_command_runs_the_track_code(scratch: Path) -> None:
    track, marks = marked_track(scratch)
    (track / "helper.py").write_text("PALETTE = ['red']\n")  # a module beside it is named too
    session = session_of(scratch, track)
    files = f"{track / 'track.py'}, {track / 'helper.py'}"
    for args in commands(session):
        result = run(args, scratch / "runs")
        assert list(marks.iterdir()) == [], args
        if args[:2] == ["session", "check"] and args[2] == str(session):
            assert f"    track code: {files}: not run, the session does not trust it" in (
                result.stdout
            )
        if args[0] == "plan":  # named whether trusted or not; --json: on stderr
            shown = result.stderr if "--json" in args else result.stdout
            assert f"track code: {files}: not run" in shown, shown
            assert "trust_code = true in the session's [track] table, or --trust-track-code" in (
                shown
            )
    plan = json.loads(run(["plan", "--json", str(session)], scratch / "runs").stdout)["tasks"]
    refused = {t["name"]: t for t in plan if t["reason_kind"] == "track_py"}
    assert sorted(refused) == ["random-colors", "warm-cache"]
    for task in refused.values():
        assert (
            f"{track / 'track.py'} is the track's own code, which esdash runs only when "
            in (task["reason"])
        )
        assert (
            "set trust_code = true in the session's [track] table, or --trust-track-code"
            in (task["reason"])
        )
    assert list(marks.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the code runs as nobody")
@pytest.mark.parametrize("how", ["flag", "session key"])
def test_trusted_as_root_the_code_runs_as_nobody(scratch: Path, how: str) -> None:
    track, marks = marked_track(scratch)
    session = session_of(scratch, track, trust=how == "session key")
    flags = ("--trust-track-code",) if how == "flag" else ()
    nobody = pwd.getpwnam("nobody")
    for args in commands(session, *flags):
        result = run(args, scratch / "runs")
        found = list(marks.iterdir())
        assert len(found) == 1, (args, found)  # this command imported it, in one process
        (mark,) = found
        info = mark.stat()
        assert (info.st_uid, info.st_gid) == (nobody.pw_uid, nobody.pw_gid), args
        assert info.st_mode & 0o777 == 0o600  # umask 077
        ran_as = json.loads(mark.read_text())
        assert ran_as == {"uid": nobody.pw_uid, "gid": nobody.pw_gid, "groups": []}
        mark.unlink()
        if args[0] == "plan" and "--json" not in args:
            assert "child process as nobody" in result.stdout
            assert "REFUSED [track_py]" not in result.stdout  # the source and runner run


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run esdash as another user")
def test_run_by_another_user_the_code_runs_as_that_user(scratch: Path) -> None:
    user = pwd.getpwnam("esdash")
    track, marks = marked_track(scratch)
    session = session_of(scratch, track, trust=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": user.pw_dir,
        "ESDASH_CACHE": str(scratch / "cache"),
        "ESDASH_RUNS": str(scratch / "runs"),
    }
    result = subprocess.run(
        ["runuser", "-u", "esdash", "--", *ESDASH, "plan", str(session)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "child process as esdash" in result.stdout
    (mark,) = marks.iterdir()
    assert mark.stat().st_uid == user.pw_uid
    assert json.loads(mark.read_text())["uid"] == user.pw_uid


def test_the_track_code_ending_its_process_is_one_line(scratch: Path) -> None:
    track, _marks = marked_track(scratch, "import os\nos._exit(3)\n")
    session = session_of(scratch, track, trust=True)
    result = esdash("plan", str(session), env_runs=scratch / "runs", check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"esdash: error: {session}: track.path: {track / 'track.py'}: the process running it "
        f"ended with exit status 3 (importing track.py)"
    ]
