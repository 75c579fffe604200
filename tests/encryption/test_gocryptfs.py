"""Clusters on GoCryptFS through the CLI: real Elasticsearch, MPI ranks and gocryptfs mounts.

Every node's data directory is a gocryptfs mount while the cluster runs; ``down``, SIGTERM
to every process (a Slurm time limit), Ctrl-C and a killed rank all end with no mount and no
gocryptfs process left; data survives into the next ``up``.  The leak test plants unique
markers in documents and scans the raw bytes on disk: found without encryption (positive
control), absent with gocryptfs.  Passwords come from root-owned 0600 files the ES user
cannot read, and never show up in a process' command line or environment, the run
directory or esdash's output.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import secrets
import signal
import string
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support import gocryptfs as g
from support.cli import ESDASH, esdash, java_pids_under, run_dir_from, status_json, write_session

pytestmark = [pytest.mark.es, pytest.mark.mpi, pytest.mark.gocryptfs]


@pytest.fixture
def workdir(shared_tmp: Path, es_user: str, request: pytest.FixtureRequest):
    """A directory for one test's sessions, data and runs; no mount may outlive the test."""
    path = shared_tmp / f"gc-{request.node.name[:40]}"
    path.mkdir()
    path.chmod(0o755)  # the ES user passes through; the password files in it are root's
    yield path
    leftover = g.mounts_under(path)
    for point in leftover:
        g.unmount(Path(point), es_user)
    g.stop_pids(g.gocryptfs_pids(path))
    assert leftover == [], f"mounts left behind: {leftover}"


def password_file(directory: Path, password: str, mode: int = 0o600) -> Path:
    path = directory / f"pass-{secrets.token_hex(4)}"
    path.write_text(password + "\n")
    path.chmod(mode)
    return path


def gocryptfs_session(directory: Path, name: str, nodes: int, passfile: Path | None) -> Path:
    source = f'password_file = "{passfile.name}"\n' if passfile else ""
    table = f'[encryption]\nmode = "gocryptfs"\n{source}scrypt_n = 10\n'
    return write_session(directory, name, nodes, security=False, tables=table)


def url_of(run: Path, rank: int = 0) -> str:
    node = json.loads((run / "topology.json").read_text())["nodes"][rank]
    return f"http://{node['address']}:{node['http_port']}"


def call(method: str, url: str, body: bytes | None = None, ndjson: bool = False):
    kind = "application/x-ndjson" if ndjson else "application/json"
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def assert_clean(data: Path, run: Path) -> None:
    """No mount, no gocryptfs and no Elasticsearch left of a run."""
    assert g.mounts_under(data) == []
    assert g.gocryptfs_pids(data) == []
    assert java_pids_under(run) == []


def assert_mounted(data: Path, rank: int, uid: int) -> None:
    entry = g.mount_entry(data / str(rank) / "plain")
    assert entry is not None, f"node {rank}: nothing mounted"
    assert entry["fstype"] == "fuse.gocryptfs"
    assert entry["source"] == str(data / str(rank) / "cipher")
    assert f"user_id={uid}," in entry["options"]


def secret_free(password: str, *places: Path | str) -> None:
    """``password`` is in none of the files under the given directories, nor in the texts."""
    for place in places:
        if isinstance(place, Path):
            assert g.files_containing(place, [password.encode()]) == {}, place
        else:
            assert password not in place


def test_two_nodes_on_gocryptfs_up_index_down_and_reuse(workdir: Path, es_user: str) -> None:
    runs = workdir / "runs"
    password = secrets.token_urlsafe(24)
    session = gocryptfs_session(workdir, "gc2", 2, password_file(workdir, password))
    data = workdir / "data-gc2"
    uid = pwd.getpwnam(es_user).pw_uid

    up = esdash("cluster", "up", str(session), env_runs=runs)
    run = run_dir_from(up.stdout)
    try:
        assert "is green with 2 node(s)" in up.stdout
        for rank in (0, 1):
            assert_mounted(data, rank, uid)
            yml = (run / "nodes" / str(rank) / "config" / "elasticsearch.yml").read_text()
            assert str(data / str(rank) / "plain") in yml  # path.data is the mount
        assert g.processes_mentioning(password.encode()) == []
        code, _ = call("PUT", f"{url_of(run, 1)}/keep/_doc/1?refresh=true", b'{"a": "kept"}')
        assert code == 201
    finally:
        down = esdash("cluster", "down", str(run), env_runs=runs)
    assert_clean(data, run)
    log = (run / "launcher.log").read_text()
    assert log.count("initialised ") == 2 and log.count("unmounted ") == 2

    up2 = esdash("cluster", "up", str(session), env_runs=runs)
    run2 = run_dir_from(up2.stdout)
    try:
        assert json.loads((run2 / "run.json").read_text())["data_reuse"] == "reused"
        for rank in (0, 1):
            assert_mounted(data, rank, uid)
        code, doc = call("GET", f"{url_of(run2)}/keep/_doc/1")
        assert code == 200 and doc["_source"] == {"a": "kept"}
        assert "initialised " not in (run2 / "launcher.log").read_text()
    finally:
        down2 = esdash("cluster", "down", str(run2), env_runs=runs)
    assert_clean(data, run2)
    outputs = [r.stdout + r.stderr for r in (up, down, up2, down2)]
    secret_free(password, run, run2, data, *outputs)

    # The data root remembers its mode: plain nodes are refused before anything starts.
    recorded = json.loads((data / "esdash-data.json").read_text())["encryption"]
    assert recorded == {"mode": "gocryptfs", "node_data": "gocryptfs-cipher"}
    plain = write_session(workdir, "gc2", 2, security=False, tables='[encryption]\nmode = "none"')
    before = sorted(runs.iterdir())
    refused = esdash("cluster", "up", str(plain), env_runs=runs, check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        f'{data} holds node data written with encryption.mode = "gocryptfs" (gocryptfs-cipher '
        f'node directories), and this session asks for encryption.mode = "none"'
    ) in refused.stderr
    assert "choose another cluster.data_dir" in refused.stderr and "--fresh" in refused.stderr
    assert sorted(runs.iterdir()) == before  # refused before a run directory was created
    assert sorted(p.name for p in (data / "0").iterdir()) == ["cipher", "plain"]


def test_wrong_password_is_a_clear_error_and_leaves_no_mount(workdir: Path, es_user: str) -> None:
    runs = workdir / "runs"
    data = workdir / "data-gcwrong"
    g.init_cipher(data / "0" / "cipher", secrets.token_urlsafe(16), es_user)
    wrong = secrets.token_urlsafe(16)
    session = gocryptfs_session(workdir, "gcwrong", 1, password_file(workdir, wrong))
    result = esdash("cluster", "up", str(session), env_runs=runs, check=False)
    assert result.returncode == 4, result.stderr
    assert f"wrong password for the encrypted node data in {data / '0' / 'cipher'}" in result.stderr
    assert "--fresh" in result.stderr
    [run] = runs.iterdir()
    assert_clean(data, run)
    secret_free(wrong, run, result.stdout + result.stderr)


def test_password_file_others_can_read_is_refused_before_launch(workdir: Path) -> None:
    runs = workdir / "runs"
    passfile = password_file(workdir, "pw", mode=0o644)
    session = gocryptfs_session(workdir, "gcopen", 1, passfile)
    result = esdash("cluster", "up", str(session), env_runs=runs, check=False)
    assert result.returncode == 2, result.stderr
    assert f"{session}: encryption.password_file: {passfile} has mode 0644" in result.stderr
    assert f"chmod 600 {passfile}" in result.stderr
    assert not runs.exists()  # refused before any run was created


def test_a_password_source_is_required(workdir: Path) -> None:
    runs = workdir / "runs"
    session = gocryptfs_session(workdir, "gcnone", 1, None)
    result = esdash("cluster", "up", str(session), env_runs=runs, check=False)
    assert result.returncode == 2, result.stderr
    assert "encryption.password_file: set exactly one of encryption.password_file" in result.stderr


def test_a_dead_mount_left_behind_is_released_by_the_next_up(workdir: Path, es_user: str) -> None:
    runs = workdir / "runs"
    password = secrets.token_urlsafe(16)
    data = workdir / "data-gcstale"
    g.init_cipher(data / "0" / "cipher", password, es_user)
    g.dead_mount(data / "0" / "cipher", data / "0" / "plain", password, es_user)
    session = gocryptfs_session(workdir, "gcstale", 1, password_file(workdir, password))
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs).stdout)
    try:
        log = (run / "launcher.log").read_text()
        assert f"unmounted a dead mount left behind at {data / '0' / 'plain'}" in log
        assert_mounted(data, 0, pwd.getpwnam(es_user).pw_uid)
        assert len(g.gocryptfs_pids(data)) == 1
    finally:
        esdash("cluster", "down", str(run), env_runs=runs)
    assert_clean(data, run)


def test_a_killed_rank_leaves_no_mount_after_down(workdir: Path) -> None:
    """SIGKILL skips the rank's ``finally``; ``down`` releases the idle mount it left."""
    runs = workdir / "runs"
    data = workdir / "data-gckill"
    session = gocryptfs_session(workdir, "gckill", 1, password_file(workdir, "pw"))
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs).stdout)
    try:
        es_pid = status_json(run, runs)["nodes"]["0"]["pid"]
        # the node runs under its guard (esdash.launch.guard), which runs under the rank
        guard_pid = int(Path(f"/proc/{es_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        rank_pid = int(Path(f"/proc/{guard_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert b"esdash.cluster.rank" in Path(f"/proc/{rank_pid}/cmdline").read_bytes()
        os.kill(rank_pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while java_pids_under(run) and time.monotonic() < deadline:
            time.sleep(0.5)  # the node's guard stopped both JVMs when the rank died
        assert java_pids_under(run) == []
        assert g.mount_entry(data / "0" / "plain") is not None  # nobody unmounted it yet
    finally:
        down = esdash("cluster", "down", str(run), env_runs=runs, check=False)
    assert "unmounted a live gocryptfs mount" in down.stderr, down.stderr
    assert_clean(data, run)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def start_foreground(session: Path, runs: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [*ESDASH, "cluster", "up", str(session), "--foreground"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ESDASH_RUNS": str(runs)},
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "http://" in line:
            break
    return proc, run_dir_from("".join(lines))


def test_sigterm_to_every_process_and_ctrl_c_leave_no_mount_and_keep_data(
    workdir: Path,
) -> None:
    """A Slurm time limit signals every process of the job at once, gocryptfs included."""
    runs = workdir / "runs"
    data = workdir / "data-gcsig"
    session = gocryptfs_session(workdir, "gcsig", 1, password_file(workdir, "pw"))
    proc, run = start_foreground(session, runs)
    try:
        code, _ = call("PUT", f"{url_of(run)}/keep/_doc/1?refresh=true", b'{"a": 1}')
        assert code == 201
        everyone = [proc.pid, *descendants(proc.pid)]
        assert g.gocryptfs_pids(data)[0] in everyone
        for pid in everyone:
            os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert_clean(data, run)
    assert json.loads((run / "nodes" / "0" / "status.json").read_text())["state"] == "stopped"

    proc, run2 = start_foreground(session, runs)
    try:
        code, doc = call("GET", f"{url_of(run2)}/keep/_doc/1")
        assert code == 200 and doc["_source"] == {"a": 1}
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert_clean(data, run2)


def marker_documents(count: int) -> tuple[list[str], bytes]:
    """Unique random markers (letters only, so they are not JSON-escaped) and a bulk body."""
    rng = random.SystemRandom()
    markers = ["".join(rng.choices(string.ascii_letters, k=24)) for _ in range(count)]
    lines = []
    for number, marker in enumerate(markers):
        lines.append(json.dumps({"index": {"_id": str(number)}}))
        lines.append(json.dumps({"patient": number, "note": f"diagnosis {marker} confirmed"}))
    return markers, ("\n".join(lines) + "\n").encode()


def ingest_and_stop(session: Path, runs: Path, body: bytes) -> tuple[Path, str]:
    up = esdash("cluster", "up", str(session), env_runs=runs)
    run = run_dir_from(up.stdout)
    try:
        url = url_of(run)
        code, result = call("POST", f"{url}/records/_bulk?refresh=true", body, ndjson=True)
        assert code == 200 and not result["errors"], result
        assert call("POST", f"{url}/records/_flush")[0] == 200
    finally:
        down = esdash("cluster", "down", str(run), env_runs=runs)
    return run, up.stdout + up.stderr + down.stdout + down.stderr


def test_planted_markers_reach_the_disk_only_without_encryption(workdir: Path) -> None:
    runs = workdir / "runs"
    markers, body = marker_documents(300)
    needles = [m.encode() for m in markers]
    password = secrets.token_urlsafe(24)
    plain = write_session(
        workdir, "leaknone", 1, security=False, tables='[encryption]\nmode = "none"'
    )
    encrypted = gocryptfs_session(workdir, "leakgc", 1, password_file(workdir, password))

    plain_run, _ = ingest_and_stop(plain, runs, body)
    encrypted_run, output = ingest_and_stop(encrypted, runs, body)
    plain_data, encrypted_data = workdir / "data-leaknone", workdir / "data-leakgc"
    assert_clean(encrypted_data, encrypted_run)

    # Positive control: without encryption the markers are on disk in plaintext.  (Lucene
    # compresses stored fields with LZ4, which may encode a few bytes of a marker as a
    # back-reference, so not every single marker need appear verbatim.)
    found_plain = g.files_containing(plain_data / "0", needles)
    assert len(found_plain) >= 0.9 * len(markers), f"{len(found_plain)} of {len(markers)}"
    # With gocryptfs the cipher directory holds the data, and none of the markers.
    cipher = encrypted_data / "0" / "cipher"
    assert g.bytes_under(cipher) >= 0.5 * g.bytes_under(plain_data / "0")
    assert g.files_containing(cipher, needles) == {}
    assert g.files_containing(encrypted_data, needles) == {}
    secret_free(password, encrypted_run, encrypted_data, output)
