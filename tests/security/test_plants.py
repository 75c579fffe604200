"""What the node account plants under a real cluster's directories changes nothing of root's.

Issue 28, item 1 and its first "done when".  :data:`TOUCHED` lists every path the root side
touches under a directory the node account can write, with the operation and the command
that performs it.  Each path gets, as the node account, a symbolic link to a root-owned
canary file, a hard link to it, a FIFO and a replaced directory (a link to a root-owned
directory), and then the real commands run: ``cluster up``, ``cluster status``, a node
failure recorded by its rank, ``cluster down``, a restart on the same data root (a new
per-cluster account takes the data over), a ``run --cluster`` that ends, and a gocryptfs
start.  Afterwards the canaries have the same bytes, owner, mode and modification time, no
file under the run and data directories holds the canary text, and each case ended with a
one-line error or was ignored safely.

The node account of these clusters is a per-cluster one (the default as root); once it is
removed its files keep the uid, and the plants are then made with that uid (``setpriv``).
Hard links are made by root on the account's behalf: this kernel's ``fs.protected_hardlinks``
stops the account itself, and esdash must not rely on that sysctl.

The "as ``nobody`` nothing is readable" walk of a plaintext run closes the module.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.cli import esdash, java_pids_under, run_dir_from, write_session
from support.prereqs import es_user

from esdash.cluster.users import account_for
from esdash.rundir.records import NodeAccount

pytestmark = [
    pytest.mark.es,
    pytest.mark.mpi,
    pytest.mark.skipif(os.geteuid() != 0, reason="the privilege boundary is root's"),
]

CANARY_TEXT = "CANARY-7b1e-root-only-secret"

#: Every path the root side touches under a directory the node account can write.
#: (path below the run or data directory, what root does there, the command that does it,
#: what a plant there must end in)
TOUCHED: tuple[tuple[str, str, str, str], ...] = (
    ("nodes/<rank>/logs/<cluster>.log", "reads its last lines", "a rank after its node failed",
     "not read; the status says why in one line"),
    ("nodes/<rank>/stdout.log", "reads its last lines", "a rank after its node failed",
     "root's directory: the node cannot plant here"),
    ("nodes/<rank>/config/", "deletes it, writes it anew, hands it over",
     "cluster up (a start in the same run directory)", "links removed, never followed"),
    ("nodes/<rank>/logs/, nodes/<rank>/tmp/", "makes or checks them, gives them to the node",
     "cluster up", "root's directory: the node cannot swap them"),
    ("<data>/<rank>/ (plain)", "makes or checks it (0700), takes it over from an earlier account",
     "cluster up", "links and FIFOs changed themselves; a hard link stops the start"),
    ("<data>/<rank>/cipher/, plain/ (gocryptfs)", "makes or checks them, lists them",
     "cluster up (gocryptfs)", "a link in their place stops the start in one line"),
    ("<data>/<rank>/cipher/gocryptfs.conf", "looks at it (lstat)", "cluster up (gocryptfs)",
     "anything but a regular file stops the start in one line"),
)  # fmt: skip


@dataclass
class Canaries:
    """A root-owned file and directory the node account must never affect."""

    file: Path
    directory: Path
    seen: dict[Path, tuple] = field(default_factory=dict)

    @classmethod
    def make(cls, where: Path) -> Canaries:
        where.mkdir(mode=0o711, exist_ok=True)
        directory = where / "canary-dir"
        directory.mkdir(mode=0o700)
        (directory / "inside").write_text(CANARY_TEXT)
        file = where / "canary"
        file.write_text(CANARY_TEXT + "\n")
        file.chmod(0o600)
        found = cls(file, directory)
        found.seen = found.now()
        return found

    def now(self) -> dict[Path, tuple]:
        state = {}
        for path in (self.file, self.directory, self.directory / "inside"):
            st = os.lstat(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            state[path] = (digest, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        return state

    def unchanged(self) -> None:
        assert self.now() == self.seen


def node_ids(run: Path) -> tuple[int, int]:
    account = json.loads((run / "run.json").read_text())["node_account"]
    return account["uid"], account["gid"]


def node_ids_of(account: NodeAccount) -> tuple[int, int]:
    return account.uid, account.gid


def shared_ids() -> tuple[int, int]:
    entry = pwd.getpwnam(es_user())
    return entry.pw_uid, entry.pw_gid


def as_ids(ids: tuple[int, int], *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """``argv`` as the node account's uid and gid (it may be removed by now: numbers only)."""
    uid, gid = ids
    command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]
    return subprocess.run(command, capture_output=True, text=True, check=check)


def files_with_canary(*roots: Path) -> list[Path]:
    """Regular files under ``roots`` (no link followed) whose bytes hold the canary text."""
    found = []
    needle = CANARY_TEXT.encode()
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = Path(dirpath) / name
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and needle in path.read_bytes():
                    found.append(path)
    return found


def refusal_line(result: subprocess.CompletedProcess, needle: str) -> str:
    """The one line of a failed command's output that names ``needle`` (no traceback)."""
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output, output
    lines = [line for line in output.splitlines() if needle in line]
    assert lines, output  # the node's line as it fails, and the command's error
    return lines[-1]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def node_state(run: Path) -> str | None:
    try:
        return json.loads((run / "nodes" / "0" / "status.json").read_text()).get("state")
    except (OSError, ValueError):
        return None


@dataclass
class Study:
    """The module's scratch place: one session, its runs and data, and the canaries."""

    home: Path
    runs: Path
    session: Path
    data: Path
    canaries: Canaries
    outputs: list[str] = field(default_factory=list)

    def esdash(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = esdash(*args, env_runs=self.runs, check=check)
        self.outputs.append(result.stdout + result.stderr)
        return result


@pytest.fixture(scope="module")
def study(shared_tmp: Path) -> Iterator[Study]:
    home = shared_tmp / "plants"
    home.mkdir(mode=0o711)
    canaries = Canaries.make(home / "victim")
    session = write_session(
        home, "plants", 1, user="per-cluster", track='name = "mri"\ndocuments = 1000',
        tables='[benchmark]\nwarmup = "0s"\nduration = "1s"\nwarmup_max = "0s"\n',
    )  # fmt: skip
    found = Study(home, home / "runs", session, home / "data-plants", canaries)
    yield found
    for run in found.runs.glob("plants*"):  # a failed test must not leave a cluster or mount
        esdash("cluster", "down", str(run), env_runs=found.runs, check=False)


def test_1_node_account_plants_in_a_running_cluster(study: Study) -> None:
    """A live cluster: the account cannot plant where root writes; its log link is not read
    when its node fails; status and down change no canary."""
    run = run_dir_from(study.esdash("cluster", "up", str(study.session)).stdout)
    ids = node_ids(run)
    assert pwd.getpwuid(ids[0]).pw_name.startswith("esdash-")  # a per-cluster account
    node_dir = run / "nodes" / "0"
    # root's own directory: nothing can be planted where status.json and stdout.log live
    denied = as_ids(ids, "ln", "-s", str(study.canaries.file), str(node_dir / "x"), check=False)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # the node's log becomes a link to the canary (H1), then the node's server JVM dies
    log = node_dir / "logs" / "esdash-plants.log"
    as_ids(ids, "mv", str(log), str(log.with_suffix(".old")))
    as_ids(ids, "ln", "-s", str(study.canaries.file), str(log))
    # plants in the node's data for the next start's take-over (links, FIFO, dir link)
    data = study.data / "0"
    as_ids(ids, "ln", "-s", str(study.canaries.file), str(data / "evil-link"))
    as_ids(ids, "mkfifo", str(data / "evil-fifo"))
    as_ids(ids, "ln", "-s", str(study.canaries.directory), str(data / "evil-dir"))
    # M3: another cluster's per-cluster account (ids from its data root) and the shared
    # account read nothing of this one: its TLS key, its data
    for other in (node_ids_of(account_for(study.home / "another-data")), shared_ids()):
        for secret in (node_dir / "config" / "certs" / "node.key", data):
            read = as_ids(
                other, "cat" if secret.name == "node.key" else "ls", str(secret), check=False
            )
            assert read.returncode != 0 and "Permission denied" in read.stderr, read
    status = study.esdash("cluster", "status", str(run))
    assert CANARY_TEXT not in status.stdout
    server = [
        pid
        for pid in java_pids_under(run)
        if "org.elasticsearch.bootstrap.Elasticsearch" in Path(f"/proc/{pid}/cmdline").read_text()
    ]
    assert len(server) == 1
    os.kill(server[0], signal.SIGKILL)
    wait_for(lambda: node_state(run) == "failed", 60, "the rank to record the node's failure")
    recorded = json.loads((node_dir / "status.json").read_text())
    assert "the node's log was not read" in recorded["log_tail"]
    assert "a symbolic link" in recorded["log_tail"] and "\n" not in recorded["log_tail"]
    study.esdash("cluster", "down", str(run))
    assert not any(entry.pw_uid == ids[0] for entry in pwd.getpwall())  # account removed
    study.canaries.unchanged()
    assert files_with_canary(run, study.data) == []
    assert not [out for out in study.outputs if CANARY_TEXT in out]


def test_2_a_hard_link_in_node_data_stops_the_next_start(study: Study) -> None:
    """The next start runs its nodes as another account (the session now names the shared
    ``esdash``), so it takes the data over: a hard link to a root file there stops it in one
    line, before any owner changes."""
    text = study.session.read_text()
    study.session.write_text(text.replace('run_as = "per-cluster"', f'run_as = "{es_user()}"'))
    data = study.data / "0"
    os.link(study.canaries.file, data / "evil-hardlink")  # root, on the account's behalf
    result = study.esdash("cluster", "up", str(study.session), check=False)
    assert "refused without touching it" in refusal_line(result, "evil-hardlink: a hard link")
    (data / "evil-hardlink").unlink()
    study.canaries.unchanged()


def test_3_take_over_and_a_run_end_leave_the_canaries_alone(study: Study) -> None:
    """Links, FIFOs and directory links in node data change owner themselves (never their
    targets) when another account takes the data over; a benchmark runs and ends."""
    run = run_dir_from(study.esdash("cluster", "up", str(study.session)).stdout)
    new_uid = node_ids(run)[0]
    assert new_uid == pwd.getpwnam(es_user()).pw_uid
    data = study.data / "0"
    for name in ("evil-link", "evil-fifo", "evil-dir"):
        assert os.lstat(data / name).st_uid == new_uid
    study.esdash("run", str(study.session), "--cluster", str(run))
    study.esdash("cluster", "down", str(run))
    study.canaries.unchanged()
    assert files_with_canary(study.runs, study.data) == []
    assert not [out for out in study.outputs if CANARY_TEXT in out]


def test_4_nobody_reads_nothing_of_a_plaintext_run(study: Study) -> None:
    """As ``nobody``, every file under the run directories and the data directory of the
    plaintext runs above (1,000 MRI documents indexed): nothing can be opened or listed."""
    paths = []
    for root in (study.runs, study.data):
        for dirpath, dirs, names in os.walk(root):
            paths += [Path(dirpath) / name for name in dirs + names]
    assert len(paths) > 50 and any(p.name.endswith(".cfs") or "translog" in str(p) for p in paths)
    probe = (
        "import os,sys\n"
        "for p in sys.stdin.read().split('\\0'):\n"
        "    if not p: continue\n"
        "    try:\n"
        "        if os.path.isdir(p) and not os.path.islink(p): os.listdir(p)\n"
        "        else: os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))\n"
        "        print(p)\n"
        "    except OSError: pass\n"
    )
    readable = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", probe],
        input="\0".join(str(p) for p in paths),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert readable == []


def test_5_gocryptfs_refuses_links_in_place_of_its_directories(study: Study) -> None:
    """C1: ``<rank>/`` is root's now, so the account cannot swap ``plain``; a link found there
    (a data root from an older esdash) or a FIFO as ``gocryptfs.conf`` stops the start in
    one line, and the linked directory keeps its owner and mode."""
    password = study.home / "gc.pass"
    password.write_text("correct horse battery staple gocryptfs\n")
    password.chmod(0o600)
    session = write_session(
        study.home, "plantsgc", 1, user="per-cluster", security=False,
        tables=f'[encryption]\nmode = "gocryptfs"\npassword_file = "{password}"\nscrypt_n = 10\n',
    )  # fmt: skip
    run = run_dir_from(study.esdash("cluster", "up", str(session)).stdout)
    ids = node_ids(run)
    # M4: the JVM's temporary files, heap dumps, crash files and GC logs stay encrypted
    rank_dir = study.home / "data-plantsgc" / "0"
    scratch = rank_dir / "plain" / ".esdash-jvm"
    server = [  # its command line names the mount, not the run directory, in this mode
        Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        for pid in java_pids_under(scratch)
        if b"bootstrap.Elasticsearch" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(server) == 1
    for flag in ("-XX:HeapDumpPath=", "-XX:ErrorFile=", "-Djava.io.tmpdir=", "-Xlog:gc"):
        (value,) = [arg for arg in server[0] if arg.startswith(flag)]
        assert str(scratch) in value, value
    assert not list((run / "nodes" / "0" / "logs").glob("gc.log*"))
    study.esdash("cluster", "down", str(run))
    assert os.lstat(rank_dir).st_uid == 0
    denied = as_ids(ids, "mv", str(rank_dir / "plain"), str(rank_dir / "moved"), check=False)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    (rank_dir / "plain").rmdir()
    (rank_dir / "plain").symlink_to(study.canaries.directory)  # as an older layout allowed
    failed = study.esdash("cluster", "up", str(session), check=False)
    assert "refused without touching it" in refusal_line(failed, "plain: a symbolic link")
    (rank_dir / "plain").unlink()
    (rank_dir / "plain").mkdir(mode=0o700)
    os.chown(rank_dir / "plain", *ids)
    conf = rank_dir / "cipher" / "gocryptfs.conf"
    as_ids(ids, "mv", str(conf), str(conf.with_suffix(".saved")))
    as_ids(ids, "mkfifo", str(conf))
    failed = study.esdash("cluster", "up", str(session), check=False)
    assert "--fresh" in refusal_line(failed, "gocryptfs.conf is a FIFO")
    study.canaries.unchanged()
    assert not [out for out in study.outputs if CANARY_TEXT in out]


def test_the_table_names_every_operation_the_tests_exercise() -> None:
    assert len(TOUCHED) == 7 and all(len(row) == 4 and all(row) for row in TOUCHED)
