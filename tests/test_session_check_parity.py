"""``esdash session check`` refuses what ``esdash run`` refuses, before any cluster starts.

Issue 17, item 4: each condition below used to pass ``session check`` and stop the run
later (some after the cluster step started, some after the whole benchmark).  Each case
runs ``esdash session check`` in process (exit 2, one line naming the session file and the
key or file), and, where the run refuses through a function of its own, calls that function
too (the one ``esdash run`` calls, without starting a cluster) and expects the same line.
Nothing here starts a node: ``ESDASH_RUNS`` and ``ESDASH_CACHE`` point into the test's
directory, which holds no distribution.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from esdash_plugins.encryption import gocryptfs
from esdash_plugins.encryption.abe import keys

from esdash.cli import main
from esdash.cluster import dataroot
from esdash.errors import BadInput
from esdash.plugin.manager import get_plugins
from esdash.plugin_api import QueryNotSupported
from esdash.run import start
from esdash.run.job import client_codec_for, prepare_workload
from esdash.session import Session, load_session

NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")
RALLY = Path(__file__).resolve().parent / "fixtures" / "rally" / "weblogs"


@pytest.fixture(autouse=True)
def scratch_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs and cache inside the test's directory: no distribution, nothing shared."""
    monkeypatch.setenv("ESDASH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))


def session_file(directory: Path, name: str, *, cluster: str = "", rest: str = "") -> Path:
    """A one-node session (MRI track unless ``rest`` brings its own ``[track]``)."""
    path = directory / f"{name}.toml"
    track = "" if "[track]" in rest else '[track]\nname = "mri"\ndocuments = 100\n'
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "{NODE_USER}"\ndata_dir = "data"\n'
        f"{cluster}\n{rest}\n{track}"
    )
    return path


def secret(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    path.chmod(0o600)
    return path


def refused(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> str:
    """``esdash session check`` in process: exit 2, nothing on stdout, exactly one line."""
    capsys.readouterr()
    code = main(["session", "check", *extra, str(path)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert out == ""
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith(f"esdash: error: {path}: "), err
    return err.removeprefix("esdash: error: ").strip()


def passes(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    capsys.readouterr()
    code = main(["session", "check", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    assert out.startswith(f"ok  {path}")


def run_session_stage(session: Session, thresholds: tuple[str, ...] = ()) -> str:
    """What ``esdash run`` refuses before it builds its client codec (no cluster yet)."""
    track = get_plugins().track(session.track.name)
    with pytest.raises(BadInput) as caught:
        client_codec_for(session, track, thresholds)
    return str(caught.value)


def run_launch_stage(session: Session, runs: Path) -> str:
    """What ``esdash run`` / ``cluster up`` refuse when preparing the run directory."""
    with pytest.raises(BadInput) as caught:
        start.prepare(session)
    assert not runs.exists() or not any(runs.iterdir()), "a refused run left a directory"
    return str(caught.value)


# --------------------------------------------------------------- gocryptfs password file

PASSWORDS = {
    "empty": (b"", "holds an empty password"),
    "newline-only": (b"\n", "holds an empty password"),
    "multi-line": (b"first\nsecond\n", "holds more than one line"),
    "nul": (b"pass\x00word\n", "holds more than one line (or a NUL byte)"),
    "too-long": (b"x" * 2049 + b"\n", "holds a password longer than 2048 bytes"),
}


@pytest.mark.parametrize("case", sorted(PASSWORDS))
def test_gocryptfs_password_file_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    content, problem = PASSWORDS[case]
    password = secret(tmp_path / "pass", content)
    path = session_file(
        tmp_path, case, rest='[encryption]\nmode = "gocryptfs"\npassword_file = "pass"'
    )
    line = refused(capsys, path)
    assert line.startswith(f"{path}: encryption.password_file: {password} {problem}"), line
    assert "write the password on its first and only line" in line
    session = load_session(path)
    assert line in run_session_stage(session)
    assert line in run_launch_stage(session, tmp_path / "runs")
    # The ranks read it with the same rules (the check reads at most 2 KiB and a bit).
    with pytest.raises(BadInput, match=problem.removeprefix("holds ").split(" (")[0]):
        gocryptfs.read_password(session.encryption.options)


def test_a_good_password_file_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret(tmp_path / "pass", b"x" * 2048 + b"\r\n")
    path = session_file(
        tmp_path, "good", rest='[encryption]\nmode = "gocryptfs"\npassword_file = "pass"'
    )
    passes(capsys, path)


# ------------------------------------------------------------------- ABE salt (Argon2id)

SALT = "00112233445566778899aabbccddeeff"
DAMAGED_SALTS = {
    "memory": ({"memory_cost": 2**40}, '"memory_cost" is 1099511627776, expected a whole'),
    "iterations": ({"iterations": 10**8}, '"iterations" is 100000000, expected a whole'),
    "float": ({"iterations": 1e8}, '"iterations" is 100000000.0, expected a whole'),
    "lanes": ({"lanes": 0}, '"lanes" is 0, expected a whole number from 1 to 64'),
    "salt": ({"salt": "zz"}, '"salt" must be 8 to 64 bytes as hex text'),
}


def salt_text(**changes: object) -> str:
    return json.dumps({"kdf": "argon2id", "salt": SALT, **keys.ARGON2_DEFAULTS, **changes})


@pytest.mark.parametrize("where", ["data-root", "salt_file"])
@pytest.mark.parametrize("case", sorted(DAMAGED_SALTS))
def test_damaged_abe_salt_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, where: str
) -> None:
    changes, problem = DAMAGED_SALTS[case]
    secret(tmp_path / "phrase", b"correct horse\n")
    if where == "data-root":
        salt = tmp_path / "data" / keys.KDF_FILE
        salt.parent.mkdir()
        table, key = "", "encryption.passphrase_file"
    else:
        salt = tmp_path / "salt.json"
        table, key = 'salt_file = "salt.json"', "encryption.salt_file"
    salt.write_text(salt_text(**changes))
    path = session_file(
        tmp_path, case, rest=f'[encryption]\nmode = "abe"\npassphrase_file = "phrase"\n{table}'
    )
    line = refused(capsys, path)
    assert line.startswith(f"{path}: {key}: salt file {salt}: {problem}"), line
    assert "restore the file the data was first written with" in line
    assert line in run_session_stage(load_session(path))
    assert salt.read_text() == salt_text(**changes)  # never rewritten


def test_argon2_refuses_a_cost_beyond_the_limits_instead_of_deriving() -> None:
    """The derivation itself checks too: a spec from elsewhere never reaches Argon2."""
    kdf = json.loads(salt_text(iterations=10**8))
    with pytest.raises(BadInput, match=r'"iterations" is 100000000, expected .* 1 to 100 '):
        keys.argon2id(b"correct horse", kdf)
    kdf = json.loads(salt_text(memory_cost=keys.ARGON2_LIMITS["memory_cost"] + 1))
    with pytest.raises(BadInput, match=r"1 to 4194304 KiB \(4 GiB\)"):
        keys.argon2id(b"correct horse", kdf)
    cheap = json.loads(salt_text(iterations=1, memory_cost=64, lanes=1))
    assert len(keys.argon2id(b"correct horse", cheap)) == 32


# ------------------------------------------------------------------------ ABE and tracks


def test_abe_with_geo_points_passes_and_the_run_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """geo_point fields are one AES-SIV token each: check and run both accept the track, and
    a geo query is what the run's plan reports as not possible under ABE."""
    secret(tmp_path / "abe.key", os.urandom(32))
    path = session_file(
        tmp_path,
        "geo",
        rest='[encryption]\nmode = "abe"\nkey_file = "abe.key"\n'
        '[track]\nname = "nyc_taxis"\ndocuments = 100',
    )
    passes(capsys, path)
    session = load_session(path)
    codec = client_codec_for(session, get_plugins().track("nyc_taxis"))
    assert codec is not None
    token = codec.encode_query({"query": {"exists": {"field": "pickup_location"}}})
    assert "pickup_location" not in json.dumps(token)
    geo = {"query": {"geo_distance": {"distance": "1km", "pickup_location": [-73.9, 40.7]}}}
    with pytest.raises(QueryNotSupported):
        codec.encode_query(geo)


def test_abe_with_a_field_type_it_cannot_encrypt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    track = Path(shutil.copytree(RALLY, tmp_path / "weblogs"))
    index = track / "index.json"
    index.write_text(
        index.read_text().replace(
            '"client": {"type": "keyword"},',
            '"client": {"type": "keyword"},\n      "area": {"type": "geo_shape"},',
        )
    )
    secret(tmp_path / "abe.key", os.urandom(32))
    path = session_file(
        tmp_path,
        "shape",
        rest=f'[encryption]\nmode = "abe"\nkey_file = "abe.key"\n'
        f'[track]\nname = "rally"\npath = "{track}"',
    )
    line = refused(capsys, path)
    assert line.startswith(f"{path}: encryption.mode: track 'rally' cannot run under \"abe\": ")
    assert "field area: type geo_shape cannot be encrypted by ABE" in line
    assert line in run_session_stage(load_session(path))


# --------------------------------------------------------------------------------- ports

PORTS = {
    "equal": ("http_port = 9200\ntransport_port = 9200", 1, "overlap cluster.http_port = 9200"),
    "ranges": ("http_port = 9200\ntransport_port = 9202", 3, "port(s) 9202-9204, which overlap"),
    "past-65535": ("http_port = 65000\ntransport_port = 9300", 600, "past 65535"),
}


@pytest.mark.parametrize("case", sorted(PORTS))
def test_port_clashes(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    ports, nodes, problem = PORTS[case]
    path = session_file(tmp_path, case, cluster=ports)
    path.write_text(path.read_text().replace("nodes = 1", f"nodes = {nodes}"))
    line = refused(capsys, path)
    key = "cluster.http_port" if case == "past-65535" else "cluster.transport_port"
    assert line.startswith(f"{path}: {key}"), line
    assert problem in line
    assert "leave it unset (auto)" in line
    assert line in run_launch_stage(load_session(path), tmp_path / "runs")


def test_ports_far_enough_apart_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session_file(tmp_path, "apart", cluster="http_port = 29200\ntransport_port = 29203")
    path.write_text(path.read_text().replace("nodes = 1", "nodes = 3"))
    passes(capsys, path)


# ---------------------------------------------------------------------- home and shards


def test_a_nonexistent_cluster_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session_file(tmp_path, "home", cluster='home = "no-such-dir"')
    line = refused(capsys, path)
    assert line.startswith(f"{path}: cluster.home: {tmp_path / 'no-such-dir'} does not exist")
    launch = run_launch_stage(load_session(path), tmp_path / "runs")
    assert line in launch
    assert launch.count("cluster.home") == 1, launch  # said once, not by two checks


def test_a_cluster_home_that_is_no_distribution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    path = session_file(tmp_path, "nodist", cluster='home = "empty"')
    line = refused(capsys, path)
    assert line.startswith(f"{path}: cluster.home: {tmp_path / 'empty'} is not an Elasticsearch")


@pytest.mark.parametrize(
    ("track", "problem"),
    [
        ("shards = 1025", "the index asks for 1,025 primary shards; the engines allow at most "),
        ("shards = 600\nreplicas = 1", "600 shards x 2 copies = 1,200 shards exceed what 1 "),
    ],
    ids=["per-index", "per-node"],
)
def test_too_many_shards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], track: str, problem: str
) -> None:
    path = session_file(tmp_path, "shards", rest=f'[track]\nname = "mri"\ndocuments = 100\n{track}')
    line = refused(capsys, path)
    assert line.startswith(f"{path}: track.shards: {problem}"), line
    assert line in run_session_stage(load_session(path))


# ---------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("age_wieght:p99<500ms", "no query or ingest operation named 'age_wieght' in the "),
        ("age:p99<500", "p99 is a time: give the unit"),
        ("*:latency<5ms", "unknown metric 'latency'"),
    ],
    ids=["target", "unit", "metric"],
)
def test_threshold_typos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, problem: str
) -> None:
    path = session_file(tmp_path, "thresholds")
    line = refused(capsys, path, "--threshold", spec)
    assert line.startswith(f"{path}: --threshold: bad threshold {spec!r}: {problem}"), line
    if "wieght" in spec:
        assert '(did you mean "age_weight"?)' in line
    assert line in run_session_stage(load_session(path), (spec,))


def test_thresholds_that_name_queries_and_ingest_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = session_file(tmp_path, "good")
    specs = ["age:p99<500ms", "*:error_rate<1%", "ingest:docs_per_s>10", "bulk:p50<1s"]
    capsys.readouterr()
    code = main(["session", "check", *(f"--threshold={s}" for s in specs), str(path)])
    assert code == 0, capsys.readouterr().err


# -------------------------------------------------------------------------------- corpus


def corpus(path: Path, lines: int, bad: int | None = None) -> Path:
    with path.open("w") as out:
        for number in range(1, lines + 1):
            out.write("{broken\n" if number == bad else json.dumps({"n": number}) + "\n")
    return path


def test_a_bad_corpus_line_after_line_1000(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = corpus(tmp_path / "documents.json", 1500, bad=1200)
    path = session_file(
        tmp_path, "corpus", rest='[track]\nname = "nyc_taxis"\ndocuments_file = "documents.json"'
    )
    line = refused(capsys, path)
    message = f"corpus {documents}, line 1200: invalid JSON at column 2"
    assert line.startswith(f"{path}: track.documents_file: {message}"), line
    with pytest.raises(BadInput, match=message):
        prepare_workload(load_session(path))  # the run's own check of the corpus it ingests
    cache = tmp_path / "cache" / "corpus-checks"
    assert not cache.exists() or not any(cache.iterdir())  # a refused file is not remembered

    corpus(documents, 1500)  # fixed: checked whole once, then remembered by its identity
    passes(capsys, path)
    (record,) = cache.iterdir()
    remembered = json.loads(record.read_text())
    info = documents.stat()
    assert remembered["identity"]["size"] == info.st_size
    assert remembered["identity"]["inode"] == info.st_ino
    assert remembered["identity"]["mtime_ns"] == info.st_mtime_ns
    assert remembered["documents"] == 1500
    passes(capsys, path)
    assert list(cache.iterdir()) == [record]
    corpus(documents, 1500, bad=1400)  # a changed file is read again
    assert "line 1400" in refused(capsys, path)


# ---------------------------------------------------------------------- data-root marker


@pytest.mark.parametrize(
    "content", ["{", "", '{"cluster_name": "x"}'], ids=["json", "empty", "field"]
)
def test_a_damaged_data_root_marker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    path = session_file(tmp_path, "marker")
    marker = tmp_path / "data" / dataroot.MARKER
    marker.parent.mkdir()
    marker.write_text(content)
    line = refused(capsys, path)
    assert line.startswith(f"{path}: cluster.data_dir: {marker}: damaged data-root marker ("), line
    assert "restore it, or start with --fresh" in line
    session = load_session(path)
    launch = run_launch_stage(session, tmp_path / "runs")
    assert line in launch
    assert launch.count("damaged data-root marker") == 1, launch
    mode = get_plugins().encryption("none")
    with pytest.raises(BadInput, match="damaged data-root marker") as caught:
        dataroot.check_data_root(marker.parent, "esdash-marker", 1, False, mode)  # the ranks'
    assert "\n" not in str(caught.value)
    assert dataroot.check_data_root(marker.parent, "esdash-marker", 1, True, mode) == "fresh"
    assert marker.read_text() == content
