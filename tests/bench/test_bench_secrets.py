"""Issue 28, M5: the bench scripts keep secrets out of command lines and verify certificates.

A command line is readable by every local user (``/proc/PID/cmdline``, ``ps``), so the
Rally side-by-side bench gives Rally its client options (with the superuser's password) in a
0600 JSON file, and its HTTPS client verifies the cluster's certificate against the run's CA.
The argv is built by a function the test calls, so no Rally runs here; the run's PKI and
credentials are the real ones esdash makes.  ``elasticsearch-users`` (the security start-up
bench) reads its password from stdin; that test runs the real tool.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path

import pytest
from support import prereqs

from esdash.cluster.pki import create_cluster_pki, create_credentials
from esdash.plugin.security import Credentials

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench scripts import their ``_common`` helper as a top-level module."""
    monkeypatch.syspath_prepend(str(BENCH))


def secure_cluster(tmp_path: Path):  # noqa: ANN201 - the bench's own dataclass
    import rally_side_by_side as sbs

    run = tmp_path / "run"
    run.mkdir()
    pki = create_cluster_pki(run / "pki", "sbs", [["127.0.0.1", "localhost"]])
    credentials = create_credentials(run, ca_certs=pki.ca_cert)
    return sbs.Cluster(run, "127.0.0.1:9250", True, credentials), pki.ca_cert


def test_rally_gets_its_password_in_a_private_file_and_verifies_the_certificate(
    tmp_path: Path, bench_modules: None
) -> None:
    import rally_side_by_side as sbs

    cluster, ca = secure_cluster(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = sbs.rally_command(Path("/venv/bin/esrally"), cluster, tmp_path, scratch, "r-1", 500)
    password = cluster.credentials.password
    assert not any(password in word for word in argv)
    assert not any("verify_certs" in word or "basic_auth" in word for word in argv)
    options = [word.split("=", 1)[1] for word in argv if word.startswith("--client-options=")]
    assert len(options) == 1 and options[0].endswith(".json")  # Rally reads *.json as a file
    path = Path(options[0])
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.geteuid()
    document = json.loads(path.read_text())
    assert list(document) == ["default"]  # the one cluster's options, as Rally expects them
    assert document["default"] == {
        "timeout": 60,
        "use_ssl": True,
        "verify_certs": True,
        "ca_certs": str(ca.resolve()),
        "basic_auth_user": cluster.credentials.username,
        "basic_auth_password": password,
    }
    assert "--target-hosts=127.0.0.1:9250" in argv
    # the next race writes the file again (a file left behind is replaced, never followed)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    again = sbs.rally_command(Path("/venv/bin/esrally"), cluster, tmp_path, scratch, "r-2", 500)
    assert argv[4] == again[4] and not path.is_symlink()
    assert not (tmp_path / "elsewhere").exists()


def test_credentials_without_a_ca_are_refused_not_trusted_to_the_system_store(
    tmp_path: Path, bench_modules: None
) -> None:
    import rally_side_by_side as sbs

    cluster, _ = secure_cluster(tmp_path)
    creds = cluster.credentials
    cluster.credentials = Credentials(creds.username, creds.password, None, creds.path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(SystemExit) as refused:
        sbs.rally_command(Path("/venv/bin/esrally"), cluster, tmp_path, scratch, "r-1", 500)
    assert str(refused.value).startswith(f"{creds.path}: no ca_certs;")
    assert list(scratch.iterdir()) == []


def test_without_security_rally_gets_no_client_options(tmp_path: Path, bench_modules: None) -> None:
    import rally_side_by_side as sbs

    cluster = sbs.Cluster(tmp_path, "127.0.0.1:9250", False, None)
    argv = sbs.rally_command(Path("/venv/bin/esrally"), cluster, tmp_path, tmp_path, "r-1", 500)
    assert not any(word.startswith("--client-options") for word in argv)


#: What turns certificate checks off, or puts a password into a Rally option string.
INSECURE = re.compile(
    r"verify_certs\W{0,3}(false|False)|CERT_NONE|check_hostname\s*=\s*False"
    r"|_create_unverified_context|basic_auth_password:'|disable_warnings"
)


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_no_bench_script_turns_certificate_checks_off(script: str) -> None:
    text = (BENCH / script).read_text()
    assert INSECURE.search(text) is None, INSECURE.search(text)


@pytest.mark.es
def test_elasticsearch_users_reads_the_password_from_stdin_not_argv(
    shared_tmp: Path, bench_modules: None, es_home: Path
) -> None:
    """The real tool, run as the node user as the bench runs it (about a second)."""
    import security_startup

    user = prereqs.es_user()
    password = "Bench-" + os.urandom(12).hex()
    root = Path(tempfile.mkdtemp(prefix="users-tool-", dir=shared_tmp))
    root.chmod(0o711)
    argv = security_startup.users_tool_argv(root / "users-tool", es_home, user)
    assert not any(password in word for word in argv) and "-p" not in argv
    security_startup.users_tool_seconds(root, es_home, user, password)
    users = (root / "users-tool" / "config" / "users").read_text()
    assert users.startswith("bench:$") and password not in users
    roles = (root / "users-tool" / "config" / "users_roles").read_text()
    assert "superuser:bench" in roles
