"""``esdash session check`` refuses what a run would refuse about the ``[encryption]`` table.

The encryption mode's ``check_options`` runs in ``session check`` and again before any run
launches (``cluster up``, ``run``, ``submit``): one code path, so both give the same message,
naming the session file, the key and the fix, with exit code 2.  Nothing here starts a node:
a refused session never gets that far.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = [sys.executable, "-m", "esdash", "session", "check"]
NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")


def session(directory: Path, name: str, encryption: str) -> Path:
    """A session whose ``[encryption]`` table is ``encryption`` (lines after ``[encryption]``)."""
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "{NODE_USER}"\ndata_dir = "data"\n'
        f"[encryption]\n{encryption}\n"
        f'[track]\nname = "mri"\ndocuments = 100\n'
    )
    return path


def secret(path: Path, content: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(content)
    path.chmod(mode)
    return path


def check(*files: Path) -> subprocess.CompletedProcess:
    result = subprocess.run([*CHECK, *map(str, files)], capture_output=True, text=True)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def refused(path: Path) -> str:
    result = check(path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    return result.stderr


# ------------------------------------------------------------------------------ gocryptfs


def test_gocryptfs_with_both_password_sources(tmp_path: Path) -> None:
    password = secret(tmp_path / "pass", b"pw\n")
    path = session(
        tmp_path,
        "both",
        f'mode = "gocryptfs"\npassword_file = "{password}"\npassword_command = "cat {password}"',
    )
    stderr = refused(path)
    assert f"{path}: encryption.password_file: set exactly one of encryption.password_file" in (
        stderr
    )
    assert "encryption.password_command" in stderr
    assert "both are set" in stderr


def test_gocryptfs_without_a_password_source(tmp_path: Path) -> None:
    path = session(tmp_path, "neither", 'mode = "gocryptfs"')
    stderr = refused(path)
    assert f"{path}: encryption.password_file: set exactly one of" in stderr
    assert "neither is set" in stderr


def test_gocryptfs_password_file_others_can_read(tmp_path: Path) -> None:
    password = secret(tmp_path / "pass", b"pw\n", mode=0o644)
    path = session(tmp_path, "open", f'mode = "gocryptfs"\npassword_file = "{password.name}"')
    stderr = refused(path)
    assert f"{path}: encryption.password_file: {password} has mode 0644" in stderr
    assert f"chmod 600 {password}" in stderr


def test_gocryptfs_missing_password_file_and_command(tmp_path: Path) -> None:
    path = session(tmp_path, "nofile", 'mode = "gocryptfs"\npassword_file = "absent.pass"')
    stderr = refused(path)
    assert f"{path}: encryption.password_file: {tmp_path / 'absent.pass'} does not exist" in stderr
    assert "(umask 077; head -c 32 /dev/urandom" in stderr
    command = session(
        tmp_path, "nocmd", 'mode = "gocryptfs"\npassword_command = "no-such-password-tool x"'
    )
    stderr = refused(command)
    assert f"{command}: encryption.password_command: 'no-such-password-tool' is not an " in stderr


# ------------------------------------------------------------------------------------ abe


def test_abe_key_file_others_can_read(tmp_path: Path) -> None:
    key = secret(tmp_path / "abe.key", os.urandom(32), mode=0o644)
    path = session(tmp_path, "abeopen", f'mode = "abe"\nkey_file = "{key.name}"')
    stderr = refused(path)
    assert f"{path}: encryption.key_file: key file {key} has mode 0644" in stderr
    assert f"chmod 600 {key}" in stderr


def test_abe_key_file_missing(tmp_path: Path) -> None:
    path = session(tmp_path, "abemissing", 'mode = "abe"\nkey_file = "abe.key"')
    stderr = refused(path)
    key = tmp_path / "abe.key"
    assert f"{path}: encryption.key_file: key file {key} does not exist" in stderr
    assert f"head -c 32 /dev/urandom > {key}" in stderr


@pytest.mark.parametrize(
    ("table", "found"),
    [
        ('mode = "abe"', "found: none"),
        ('mode = "abe"\nkey_file = "k"\npassphrase_command = "cat p"', "found: key_file, pass"),
    ],
    ids=["none", "two"],
)
def test_abe_needs_exactly_one_key_source(tmp_path: Path, table: str, found: str) -> None:
    path = session(tmp_path, "abesource", table)
    stderr = refused(path)
    assert f"{path}: encryption.key_file: set exactly one of encryption.key_file, " in stderr
    assert found in stderr


def test_abe_short_key_and_open_passphrase_file(tmp_path: Path) -> None:
    short = secret(tmp_path / "short.key", b"too short")
    path = session(tmp_path, "abeshort", f'mode = "abe"\nkey_file = "{short.name}"')
    assert "encryption.key_file: key file " in refused(path)
    assert "a key needs at least 32 random bytes" in refused(path)
    phrase = secret(tmp_path / "phrase", b"correct horse\n", mode=0o640)
    path = session(tmp_path, "abephrase", f'mode = "abe"\npassphrase_file = "{phrase.name}"')
    assert f"{path}: encryption.passphrase_file: passphrase file {phrase} has mode 0640" in (
        refused(path)
    )


# ------------------------------------------------------------------- valid sessions pass


def test_valid_sessions_still_pass_and_every_file_is_reported(tmp_path: Path) -> None:
    password = secret(tmp_path / "pass", b"pw\n")
    key = secret(tmp_path / "abe.key", os.urandom(32))
    phrase = secret(tmp_path / "phrase", b"correct horse\n")
    good = [
        session(tmp_path, "plain", 'mode = "none"'),
        session(tmp_path, "gcfile", f'mode = "gocryptfs"\npassword_file = "{password.name}"'),
        session(tmp_path, "gccmd", f'mode = "gocryptfs"\npassword_command = "cat {password}"'),
        session(tmp_path, "abekey", f'mode = "abe"\nkey_file = "{key.name}"'),
        session(tmp_path, "abephrase", f'mode = "abe"\npassphrase_file = "{phrase.name}"'),
        session(tmp_path, "abecmd", f'mode = "abe"\npassphrase_command = "cat {phrase}"'),
    ]
    result = check(*good)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        f"ok  {path}" for path in good
    ]
    assert "encryption gocryptfs" in result.stdout and "encryption abe" in result.stdout
    # Checking changed nothing: no salt file, no data root.
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".toml") == [
        "abe.key",
        "pass",
        "phrase",
    ]

    bad = session(tmp_path, "bad", 'mode = "gocryptfs"')
    mixed = check(good[0], bad, good[3])
    assert mixed.returncode == 2
    assert mixed.stdout.count("ok  ") == 2
    assert f"{bad}: encryption.password_file: set exactly one of" in mixed.stderr


# ------------------------------------------------------------ one code path with the run


def test_run_and_cluster_up_refuse_with_the_same_message(tmp_path: Path) -> None:
    """Refused before anything is launched: no run directory, no data root, no node."""
    key = secret(tmp_path / "abe.key", os.urandom(32), mode=0o644)
    path = session(tmp_path, "abesame", f'mode = "abe"\nkey_file = "{key.name}"')
    expected = f"{path}: encryption.key_file: key file {key} has mode 0644"
    assert expected in refused(path)
    runs = tmp_path / "runs"
    env = {**os.environ, "ESDASH_RUNS": str(runs), "ESDASH_CACHE": str(tmp_path / "cache")}
    for command in (["cluster", "up"], ["run"]):
        result = subprocess.run(
            [sys.executable, "-m", "esdash", *command, str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert result.returncode == 2, result.stdout + result.stderr
        assert expected in result.stderr
        assert "Traceback" not in result.stderr
    assert not runs.exists()
    assert not (tmp_path / "data").exists()


def test_a_reference_to_a_query_the_steps_never_run_is_named_before_a_run(tmp_path: Path) -> None:
    path = session(tmp_path, "refs", 'mode = "none"')
    path.write_text(path.read_text() + "[references.age_wieght]\nthroughput = [1, -0.1, 0.1]\n")
    result = check(path)
    assert result.returncode == 2
    assert (
        "references.age_wieght: no query called 'age_wieght' in the session's steps "
        '(did you mean "age_weight"?)' in result.stderr
    )


# ------------------------------------------------------------------- the session's track

RALLY = Path(__file__).resolve().parent / "fixtures" / "rally" / "weblogs"


def rally_session(directory: Path, name: str, track: str) -> Path:
    """A session running the ``rally`` track with the ``[track]`` lines ``track``."""
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "{NODE_USER}"\ndata_dir = "data"\n'
        f'[track]\nname = "rally"\n{track}\n'
    )
    return path


def broken_json(directory: Path) -> tuple[Path, Path]:
    """A copy of the weblogs track with a comma missing in a collected file."""
    import shutil

    track = Path(shutil.copytree(RALLY, directory / "weblogs"))
    queries = track / "operations" / "queries.json"
    queries.write_text(queries.read_text().replace('"name": "recent",', '"name": "recent"', 1))
    return track, queries


def track_cases(directory: Path) -> dict[str, tuple[str, str]]:
    """Each broken ``[track]`` table, with the key and text its one-line error must carry."""
    track, queries = broken_json(directory)
    return {
        "path": (f'path = "{directory / "nope"}"', f"track.path: {directory / 'nope'} does not"),
        "json": (f'path = "{track}"', f"track.path: {track / 'track.json'}: the track is not"),
        "challenge": (
            f'path = "{RALLY}"\nchallenge = "append-and-qurey"',
            "track.challenge: " + f"{RALLY / 'track.json'} has no challenge 'append-and-qurey' "
            '(did you mean "append-and-query"?)',
        ),
        "params": (
            f'path = "{RALLY}"\ntrack_params = ["bulk_sise=10"]',
            "track.track_params: bulk_sise not used by ",
        ),
    }


@pytest.mark.parametrize("case", ["path", "json", "challenge", "params"])
def test_a_track_that_does_not_load_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    table, expected = track_cases(tmp_path)[case]
    path = rally_session(tmp_path, case, table)
    stderr = refused(path)
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"esdash: error: {path}: {expected}"), stderr
    if case == "json":  # the file and line of the broken text
        assert f"this text is at {tmp_path / 'weblogs' / 'operations' / 'queries.json'}:" in stderr
    if case == "params":
        assert '(did you mean "bulk_size"?)' in stderr


@pytest.mark.parametrize("case", ["path", "json", "challenge", "params"])
def test_submit_dry_run_refuses_the_same_track_and_writes_no_script(
    tmp_path: Path, case: str
) -> None:
    table, expected = track_cases(tmp_path)[case]
    path = rally_session(tmp_path, case, table)
    runs = tmp_path / "runs"
    env = {**os.environ, "ESDASH_RUNS": str(runs), "ESDASH_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "submit", str(path), "--bench", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"{path}: {expected}" in result.stderr
    assert "wrote" not in result.stdout
    assert not runs.exists() or not any(runs.rglob("*"))  # no run directory, no job script


def test_a_rally_session_that_loads_passes(tmp_path: Path) -> None:
    path = rally_session(tmp_path, "good", f'path = "{RALLY}"\ntrack_params = ["bulk_size=10"]')
    result = check(path)
    assert result.returncode == 0, result.stderr
    assert "track rally" in result.stdout
    assert result.stderr == ""  # what the track runs is `esdash plan`'s to show, not a log


def test_a_missing_corpus_is_refused_in_one_line_with_its_sizes(tmp_path: Path) -> None:
    """The corpus check runs in ``session check``: the missing files, their sizes and the
    total, under the session key the fix is about; nothing is written."""
    smoke = RALLY.parent / "smoke"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = rally_session(tmp_path, "nocorpus", f'path = "{smoke}"\ncorpus_dir = "{corpus}"')
    stderr = refused(path)
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(
        f"esdash: error: {path}: track.corpus_dir: 2 corpus file(s) of {smoke / 'track.json'} "
        "are missing: documents.json of corpus 'logs' (1,500 documents; uncompressed-bytes "
        "30,000; compressed-bytes 2,000 as documents.json.bz2)"
    ), stderr
    assert "total 30,400 bytes (30.4 kB) uncompressed" in stderr
    assert not any(corpus.iterdir())
