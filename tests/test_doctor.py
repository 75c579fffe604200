"""``esdash doctor``: the checks against this machine, and controlled failures.

The machine-level tests run the real ``esdash`` console script against the provisioned
distribution, Java, MPI and ES user, and compare each verdict with what the test itself reads
from the system.  Failures are produced with real inputs: a missing directory, an empty one,
an unknown user, and tiny shell scripts named ``java``/``mpiexec`` that print what an old JDK
or another MPI prints (real executables on PATH, not mocks of esdash).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.backends.elasticsearch.distribution import JAVA_HOME_VARIABLE, min_java_major
from esdash_plugins.encryption import gocryptfs
from support.prereqs import es_home, es_user, require, venv_bin

from esdash.cli.doctor_cmd import format_table
from esdash.errors import EsdashError
from esdash.host import doctor
from esdash.plugin import java
from esdash.plugin.host import HostCheck, HostProbe

ESDASH = Path(sys.executable).parent / "esdash"
ORDER = [
    "java",
    "distribution",
    "scripting",
    "es-user",
    "mpi",
    "slurm",
    "fuse",
    "gocryptfs",
    "vm.max_map_count",
    "open-files",
]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def run_doctor(*args: str, env: dict[str, str] | None = None, user: str | None = None):
    """Run ``esdash doctor`` as a subprocess (optionally as ``user`` via runuser)."""
    argv = [str(ESDASH), "doctor", *args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=env or dict(os.environ), cwd="/"
    )


def doctor_json(*args: str, **kwargs: Any) -> tuple[int, dict[str, dict[str, Any]]]:
    """Exit code and the checks by name, after checking the JSON shape every caller relies on."""
    proc = run_doctor("--json", *args, **kwargs)
    assert "Traceback" not in proc.stderr, proc.stderr

    def no_infinity(value: str) -> None:
        raise AssertionError(f"not valid JSON: {value}")

    checks = json.loads(proc.stdout, parse_constant=no_infinity)
    assert isinstance(checks, list)
    for check in checks:
        assert set(check) == {"name", "status", "detail", "fix", "data"}
        assert check["status"] in ("pass", "warn", "fail")
        assert check["detail"]
        if check["status"] != "pass":
            assert check["fix"], f"{check['name']} is {check['status']} without a fix"
    names = [check["name"] for check in checks]
    assert len(names) == len(set(names))
    assert names == [name for name in ORDER if name in names]
    failed = any(check["status"] == "fail" for check in checks)
    assert proc.returncode == (1 if failed else 0), proc.stdout + proc.stderr
    return proc.returncode, {check["name"]: check for check in checks}


def clean_env(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ES_JAVA_HOME", "JAVA_HOME")}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def fake_java(directory: Path, version_line: str) -> Path:
    """A JDK-shaped directory whose bin/java prints ``version_line`` like ``java -version``."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "java"
    script.write_text(f"#!/bin/sh\necho '{version_line}' >&2\necho 'Runtime Environment' >&2\n")
    script.chmod(0o755)
    return directory


def fake_layout(home: Path, version: str, modules: tuple[str, ...] = ("x-pack-core",)) -> Path:
    """A directory laid out like a distribution, as far as the backend's inspect reads it."""
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "elasticsearch").write_text("#!/bin/sh\n")
    (home / "bin" / "elasticsearch").chmod(0o755)
    (home / "lib").mkdir()
    (home / "lib" / f"elasticsearch-{version}.jar").write_bytes(b"")
    (home / "config").mkdir()
    (home / "config" / "jvm.options").write_text("-Xms1g\n")
    for module in modules:
        (home / "modules" / module).mkdir(parents=True)
    return home


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory the ES user can reach (pytest's tmp_path sits under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="esdash-doctor-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


# ------------------------------------------------------------------- the real machine


@pytest.mark.es
@pytest.mark.mpi
def test_real_machine_verdicts_match_the_system() -> None:
    require("es")
    require("mpi")
    home, user = es_home(), es_user()
    code, checks = doctor_json("--home", str(home), "--user", user)
    assert list(checks) == ORDER
    assert code == 0, {n: c for n, c in checks.items() if c["status"] == "fail"}

    assert checks["java"]["status"] == "pass"
    assert checks["java"]["data"]["major"] >= 17
    expected_java = java.find_java(home, JAVA_HOME_VARIABLE).executable
    assert checks["java"]["data"]["executable"] == str(expected_java)

    dist = checks["distribution"]
    assert dist["status"] == "pass"
    jars = [p.name for p in (home / "lib").glob("elasticsearch-*.jar")]
    assert f"elasticsearch-{dist['data']['version']}.jar" in jars
    assert dist["data"]["modules"] == sorted(p.name for p in (home / "modules").iterdir())
    painless = (home / "modules" / "lang-painless").is_dir()
    assert checks["scripting"]["status"] == ("pass" if painless else "warn")
    if not painless:
        assert "painless" in checks["scripting"]["detail"]

    assert checks["es-user"]["status"] == "pass"
    assert checks["es-user"]["data"]["user"] == user

    mpi = checks["mpi"]
    assert mpi["status"] == "pass", mpi
    assert mpi["data"]["mpiexec"] == str(venv_bin() / "mpiexec")
    assert mpi["data"]["mpiexec_implementation"] == mpi["data"]["library_implementation"]

    max_map = int(Path("/proc/sys/vm/max_map_count").read_text())
    assert checks["vm.max_map_count"]["status"] == ("pass" if max_map >= 262144 else "warn")
    assert checks["vm.max_map_count"]["data"]["value"] == max_map

    # The console script inherits our limits, so it must report exactly these.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = checks["open-files"]
    assert files["status"] == ("pass" if hard >= 65535 else "warn")
    assert files["data"]["hard"] == (hard if hard != resource.RLIM_INFINITY else "unlimited")

    fuse = Path("/dev/fuse")
    if fuse.exists():
        mode = fuse.stat().st_mode
        usable = mode & 0o006 == 0o006 or os.geteuid() != 0 and os.access(fuse, os.R_OK | os.W_OK)
        assert checks["fuse"]["status"] == ("pass" if usable else "warn")
        assert checks["fuse"]["data"]["mode"] == stat.filemode(mode)

    tools = all(shutil.which(t) for t in ("gocryptfs", "fusermount3"))
    assert checks["gocryptfs"]["status"] == ("pass" if tools else "warn")


@pytest.mark.es
def test_text_table_is_aligned_and_gives_fixes() -> None:
    require("es")
    proc = run_doctor("--home", str(es_home()), "--user", es_user())
    _, checks = doctor_json("--home", str(es_home()), "--user", es_user())
    lines = proc.stdout.splitlines()
    header = re.match(r"^(STATUS\s+)(CHECK\s+)DETAIL$", lines[0])
    assert header, lines[0]
    detail_column = len(header.group(1)) + len(header.group(2))
    for name, check in checks.items():
        [index] = [i for i, line in enumerate(lines) if line.split()[1:2] == [name]]
        row = lines[index]
        assert row.startswith(check["status"].upper())
        assert row[detail_column:] == check["detail"]
        if check["status"] == "pass":
            assert not lines[index + 1].strip().startswith("fix:")
        else:
            assert lines[index + 1] == " " * detail_column + "fix: " + check["fix"]
    counts = {s: sum(c["status"] == s for c in checks.values()) for s in ("pass", "warn", "fail")}
    assert lines[-1].startswith(
        f"{len(checks)} checks: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail"
    )


# ------------------------------------------------------------- controlled failures (CLI)


def test_missing_home_fails_with_fetch_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    code, checks = doctor_json("--home", str(missing))
    assert code == 1
    dist = checks["distribution"]
    assert dist["status"] == "fail"
    assert str(missing) in dist["detail"]
    assert "esdash fetch elasticsearch" in dist["fix"]
    assert "scripting" not in checks

    proc = run_doctor("--home", str(missing))
    assert proc.returncode == 1
    assert re.search(r"^FAIL\s+distribution\s", proc.stdout, re.MULTILINE)
    assert "fix: esdash fetch elasticsearch" in proc.stdout
    assert "not ready" in proc.stdout.splitlines()[-1]


def test_directory_that_is_not_a_distribution_fails(tmp_path: Path) -> None:
    code, checks = doctor_json("--home", str(tmp_path))
    assert code == 1
    assert checks["distribution"]["status"] == "fail"
    assert "not an Elasticsearch distribution" in checks["distribution"]["detail"]
    assert "bin/elasticsearch" in checks["distribution"]["detail"]


def test_unknown_user_fails(tmp_path: Path) -> None:
    code, checks = doctor_json("--home", str(tmp_path), "--user", "esdash-no-such-user")
    assert code == 1
    assert checks["es-user"]["status"] == "fail"
    assert "esdash-no-such-user" in checks["es-user"]["detail"]
    assert "useradd" in checks["es-user"]["fix"]


def test_esdash_user_variable_names_the_user(tmp_path: Path) -> None:
    env = clean_env(ESDASH_USER="esdash-env-user")
    _, checks = doctor_json("--home", str(tmp_path), env=env)
    assert checks["es-user"]["status"] == "fail"
    assert "esdash-env-user" in checks["es-user"]["detail"]


@root_only
def test_root_as_es_user_fails(tmp_path: Path) -> None:
    code, checks = doctor_json("--home", str(tmp_path), "--user", "root")
    assert code == 1
    assert checks["es-user"]["status"] == "fail"
    assert "refuses to run as root" in checks["es-user"]["detail"]


@root_only
def test_default_user_as_root_is_esdash(tmp_path: Path) -> None:
    _, checks = doctor_json("--home", str(tmp_path), env=clean_env(ESDASH_USER=None))
    assert checks["es-user"]["detail"].startswith(("esdash ", "no user 'esdash'"))


@root_only
@pytest.mark.es
def test_without_root_the_nodes_run_as_the_caller() -> None:
    require("es")
    user = es_user()
    env = clean_env(ESDASH_USER=None, HOME=pwd.getpwnam(user).pw_dir)
    _, checks = doctor_json("--home", str(es_home()), env=env, user=user)
    assert checks["es-user"]["status"] == "pass"
    assert checks["es-user"]["data"]["user"] == user
    assert "nodes run as you" in checks["es-user"]["detail"]

    code, checks = doctor_json("--home", str(es_home()), "--user", "nobody", env=env, user=user)
    assert code == 1
    assert checks["es-user"]["status"] == "fail"
    assert "cannot switch" in checks["es-user"]["detail"]


@root_only
@pytest.mark.es
def test_distribution_unreadable_by_the_es_user_fails(shared_tmp: Path) -> None:
    require("es")
    home = fake_layout(shared_tmp / "elasticsearch-8.19.21", "8.19.21")
    options = home / "config" / "jvm.options"
    options.chmod(0o660)  # as the integ-test-zip ships it; owned by root here
    _, checks = doctor_json("--home", str(home), "--user", es_user())
    user_check = checks["es-user"]
    assert user_check["status"] == "fail"
    assert str(options) in user_check["data"]["unreadable"]
    assert f"chmod -R a+rX {home}" in user_check["fix"]

    options.chmod(0o644)
    _, checks = doctor_json("--home", str(home), "--user", es_user())
    assert checks["es-user"]["status"] == "pass", checks["es-user"]

    shared_tmp.chmod(0o700)  # a parent directory the user cannot enter
    _, checks = doctor_json("--home", str(home), "--user", es_user())
    assert checks["es-user"]["status"] == "fail"


# -------------------------------------------------------------------------------- java


@pytest.mark.es
def test_old_java_on_path_fails(tmp_path: Path) -> None:
    require("es")
    home = es_home()
    assert not (home / "jdk").exists(), "this test needs a distribution without a bundled JDK"
    fake = fake_java(tmp_path / "jdk8", 'java version "1.8.0_292"')
    env = clean_env(PATH=f"{fake / 'bin'}:{os.environ['PATH']}")
    code, checks = doctor_json("--home", str(home), "--user", es_user(), env=env)
    assert code == 1
    check = checks["java"]
    assert check["status"] == "fail"
    assert check["data"]["source"] == "PATH"
    assert check["data"]["major"] == 8
    assert "1.8.0_292" in check["detail"] and ">= 17" in check["detail"]
    assert "openjdk-17-jre-headless" in check["fix"] and "ES_JAVA_HOME" in check["fix"]


def test_es_java_home_without_java_fails(tmp_path: Path) -> None:
    env = clean_env(ES_JAVA_HOME=str(tmp_path))
    code, checks = doctor_json("--home", str(tmp_path / "none"), env=env)
    assert code == 1
    assert checks["java"]["status"] == "fail"
    assert f"ES_JAVA_HOME={tmp_path}" in checks["java"]["detail"]


def inspect(home: Path):
    """The backend plugin's view of ``home``, as ``esdash doctor`` gets it."""
    from esdash.plugin.manager import get_plugins

    return get_plugins().backend("elasticsearch").inspect(home)


def test_java_requirement_follows_the_elasticsearch_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jdk11 = fake_java(tmp_path / "jdk11", 'openjdk version "11.0.20" 2023-07-18')
    es7 = fake_layout(tmp_path / "es7", "7.17.25")
    es8 = fake_layout(tmp_path / "es8", "8.19.21")
    monkeypatch.setenv("ES_JAVA_HOME", str(jdk11))

    def check_java(home: Path) -> HostCheck:
        version = inspect(home).version
        need = min_java_major(version)
        return java.java_check(home, JAVA_HOME_VARIABLE, need, f"Elasticsearch {version}")

    assert check_java(es7).status == "pass"
    check8 = check_java(es8)
    assert check8.status == "fail"
    assert check8.data["major"] == 11 and check8.data["required_major"] == 17
    assert check8.data["source"] == "ES_JAVA_HOME"


def test_find_java_order(tmp_path: Path) -> None:
    """Bundled JDK, then ES_JAVA_HOME, then JAVA_HOME, then PATH: the order nodes get."""
    es_jdk = fake_java(tmp_path / "es-jdk", 'openjdk version "21.0.1" 2023-10-17')
    jdk = fake_java(tmp_path / "jdk", 'openjdk version "17.0.9" 2023-10-17')
    path_jdk = fake_java(tmp_path / "path-jdk", 'openjdk version "17.0.2" 2022-01-18')
    home = fake_layout(tmp_path / "es", "8.19.21")
    path = str(path_jdk / "bin")

    assert java.find_java(home, JAVA_HOME_VARIABLE, {"PATH": path}).source == "PATH"
    assert (
        java.find_java(home, JAVA_HOME_VARIABLE, {"PATH": path, "JAVA_HOME": str(jdk)}).source
        == "JAVA_HOME"
    )
    full = {"PATH": path, "JAVA_HOME": str(jdk), "ES_JAVA_HOME": str(es_jdk)}
    assert java.find_java(home, JAVA_HOME_VARIABLE, full).java_home == es_jdk
    fake_java(home / "jdk", 'openjdk version "21.0.5" 2024-10-15')
    assert java.find_java(home, JAVA_HOME_VARIABLE, full).source == "bundled JDK"
    with pytest.raises(EsdashError, match="no Java found"):
        java.find_java(None, JAVA_HOME_VARIABLE, {"PATH": str(tmp_path / "empty")})


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.21" 2026-10-20\nOpenJDK Runtime Environment', 17),
        ('java version "1.8.0_292"\nJava(TM) SE Runtime Environment', 8),
        ('openjdk version "21-ea" 2023-09-19', 21),
        ('openjdk version "11.0.20" 2023-07-18 LTS', 11),
    ],
)
def test_parse_java_version(text: str, major: int) -> None:
    assert java.parse_java_version(text).major == major


def test_parse_java_version_rejects_garbage() -> None:
    with pytest.raises(EsdashError):
        java.parse_java_version("Error: could not create the Java Virtual Machine")


# --------------------------------------------------------------------------------- mpi


HYDRA = "HYDRA build details:\n    Version:                                 5.0.2\n"


@pytest.mark.parametrize(
    ("text", "implementation"),
    [
        (HYDRA, "MPICH"),
        ("MPICH Version:      5.0.2\nMPICH Release date: ...", "MPICH"),
        ("mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/", "Open MPI"),
        ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4", "Open MPI"),
        ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619", "Intel MPI"),
        ("something else entirely", None),
    ],
)
def test_mpi_implementation(text: str, implementation: str | None) -> None:
    assert doctor.mpi_implementation(text) == implementation


@pytest.mark.mpi
def test_mpiexec_of_another_implementation_warns(tmp_path: Path) -> None:
    require("mpi")
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'mpiexec (OpenRTE) 4.1.4'\n")
    fake.chmod(0o755)
    check = doctor.check_mpi(mpiexec=str(fake))
    assert check.data["library_implementation"] == "MPICH", "needs the mpich wheel"
    assert check.status == "warn"
    assert "different implementations" in check.detail
    assert check.fix


def test_mpi4py_that_does_not_load_fails(tmp_path: Path) -> None:
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    check = doctor.check_mpi(python=str(python))
    assert check.status == "fail"
    assert "mpi4py" in check.detail and "pip install mpi4py" in check.fix


# ------------------------------------------------------------------------------- slurm


def test_slurm_missing_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_slurm()
    assert check.status == "warn"
    assert "sbatch, srun, squeue not found" in check.detail


@pytest.mark.skipif(
    not all(shutil.which(c) for c in doctor.SLURM_COMMANDS), reason="Slurm client not installed"
)
def test_inside_an_allocation_is_reported(tmp_path: Path) -> None:
    env = clean_env(SLURM_JOB_ID="4242", SLURM_JOB_NODELIST="n[1-2]", SLURM_NTASKS="4")
    _, checks = doctor_json("--home", str(tmp_path), env=env)
    assert checks["slurm"]["status"] == "pass"
    assert "inside allocation 4242 (nodes n[1-2], 4 tasks)" in checks["slurm"]["detail"]


# ------------------------------------------------------------------ fuse and the limits


def test_fuse_device_modes(tmp_path: Path) -> None:
    assert gocryptfs.check_fuse("nobody", Path("/dev/null")).status == "pass"  # crw-rw-rw-
    assert gocryptfs.check_fuse("root", Path("/dev/null")).status == "pass"
    regular = tmp_path / "fuse"
    regular.write_text("")
    assert "not a character device" in gocryptfs.check_fuse("root", regular).detail
    missing = gocryptfs.check_fuse("nobody", tmp_path / "absent")
    assert missing.status == "warn" and "does not exist" in missing.detail


@root_only
def test_fuse_device_closed_to_others_warns(tmp_path: Path) -> None:
    """A character device with Debian's default mode for /dev/fuse (0600 root)."""
    fuse = tmp_path / "fuse"
    os.mknod(fuse, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    check = gocryptfs.check_fuse("nobody", fuse)
    assert check.status == "warn"
    assert f"chmod 0666 {fuse}" in check.fix


@pytest.mark.parametrize(("value", "status"), [("65530", "warn"), ("262144", "pass")])
def test_max_map_count(tmp_path: Path, value: str, status: str) -> None:
    proc_file = tmp_path / "max_map_count"
    proc_file.write_text(value + "\n")
    check = doctor.check_max_map_count(proc_file)
    assert check.status == status
    if status == "warn":
        assert "non-loopback" in check.detail and "exits with 78" in check.detail
        assert "sysctl -w vm.max_map_count=262144" in check.fix
        assert "node.store.allow_mmap: false" in check.fix


def test_open_files_follows_the_hard_limit() -> None:
    """Lower this process's hard limit in a child and check the verdict there."""
    code = (
        "import resource, json\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1000, 4096))\n"
        "from esdash.host import doctor\n"
        "print(json.dumps(doctor.check_open_files().as_dict()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    check = json.loads(proc.stdout)
    assert check["status"] == "warn"
    assert check["data"] == {"soft": 1000, "hard": 4096, "required": 65535}
    assert "65535" in check["fix"]


# ------------------------------------------------------------------------ the machinery


def test_check_demands_a_fix_for_warn_and_fail() -> None:
    with pytest.raises(ValueError, match="needs a fix"):
        HostCheck("x", "warn", "something is off")
    with pytest.raises(ValueError, match="status"):
        HostCheck("x", "maybe", "?", "fix")  # type: ignore[arg-type]


def test_a_crashing_check_becomes_a_failure() -> None:
    def broken() -> HostCheck:
        raise RuntimeError("boom")

    check = doctor._guarded(HostProbe("broken", broken))
    assert check.status == "fail"
    assert "RuntimeError: boom" in check.detail


def test_format_table_wraps_under_the_detail_column() -> None:
    checks = [
        HostCheck("java", "pass", "fine"),
        HostCheck("vm.max_map_count", "warn", "word " * 40, "do " * 30),
    ]
    text = format_table(checks, width=70)
    lines = text.splitlines()
    assert all(len(line) <= 70 for line in lines)
    column = lines[0].index("DETAIL")
    assert all(line[:column].strip() == "" for line in lines[3:-2]), text
    assert lines[-1] == "2 checks: 1 pass, 1 warn, 0 fail; ready (warnings only)"


def test_session_supplies_home_and_user(tmp_path: Path) -> None:
    """`--session` takes cluster.home and cluster.run_as from the session file."""
    session = tmp_path / "s.toml"
    session.write_text(
        'name = "s"\n[cluster]\nhome = "no-such-dist"\nrun_as = "no-such-user-xyz"\n'
        '[track]\nname = "mri"\n'
    )
    result = run_doctor("--json", "--session", str(session))
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert result.returncode == 1
    assert str(tmp_path / "no-such-dist") in checks["distribution"]["detail"]
    assert "no-such-user-xyz" in checks["es-user"]["detail"]


def test_session_fails_where_the_run_would_refuse_it(tmp_path: Path) -> None:
    """A session whose key file is missing is not ready: `doctor --session` says what `run`
    would refuse, with the same line as `session check`; a valid session passes that row."""
    key = tmp_path / "abe.key"
    session = tmp_path / "abe.toml"
    session.write_text(
        f'name = "abe"\n[encryption]\nmode = "abe"\nkey_file = "{key}"\n[track]\nname = "mri"\n'
    )
    result = run_doctor("--json", "--session", str(session))
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert result.returncode == 1
    assert checks["session"]["status"] == "fail"
    assert f"encryption.key_file: key file {key} does not exist" in checks["session"]["detail"]
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)
    result = run_doctor("--json", "--session", str(session))
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["session"]["status"] == "pass", checks["session"]
