"""The secure-by-default building block: PKI, credentials, file realm, and real nodes with TLS.

Requests go to ``/_cluster/health``, not ``/``: the integ-test-zip lacks the rest-root module,
so ``GET /`` (and the client's ``info()``) answers 405 there.

The unit tests need nothing but ``cryptography``.  The tests marked ``es`` start real
Elasticsearch nodes (the distribution in esdash's cache, run as the unprivileged user
``esdash`` through ``runuser``, so they need root); two nodes in total for the module, to spare
the shared CPUs: node-0 serves every HTTP check, node-1 joins it over TLS transport last.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import http.server
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from esdash_plugins.backends.elasticsearch import security as es_security
from esdash_plugins.backends.elasticsearch.security import (
    client_kwargs,
    disabled_settings,
    pbkdf2_hash,
    security_settings,
    write_file_realm_user,
)
from support.prereqs import unavailable

from esdash import paths
from esdash.cluster import pki as cluster_pki
from esdash.cluster.http import Connection, RequestFailed, Target
from esdash.cluster.pki import (
    ClusterPki,
    NodeTls,
    base_url,
    basic_auth_header,
    create_cluster_pki,
    create_credentials,
    load_cluster_pki,
    node_security,
    read_credentials,
    ssl_context,
)
from esdash.plugin.secure_files import SecurityFilesError
from esdash.plugin.security import Credentials

#: Credentials for tests that only install TLS files (the password is never used).
NO_CREDENTIALS = Credentials("esdash", "unused", None)


def install_node_tls(
    pki: ClusterPki, index: int, config: Path, *, owner: str | int | None = None
) -> Path:
    """Node ``index``'s TLS files where the Elasticsearch settings expect them."""
    tls = node_security(pki, index, NO_CREDENTIALS)
    return tls.install_tls(config / es_security.NODE_CERTS_DIR, owner).directory


def install_node_security(
    config: Path,
    pki: ClusterPki,
    index: int,
    creds: Credentials,
    *,
    owner: str | int | None = None,
) -> None:
    es_security.install_node_security(config, node_security(pki, index, creds), owner=owner)


ES_USER = os.environ.get("ESDASH_TEST_ES_USER", "esdash")
JAVA_HOME = os.environ.get("ES_JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
#: Variables that would change how the ES launcher starts the JVM.
_JAVA_NOISE = ("JAVA_HOME", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JAVA_OPTS", "ES_JAVA_OPTS")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture
def pki(tmp_path: Path) -> ClusterPki:
    return create_cluster_pki(
        tmp_path / "pki",
        "unit",
        [["127.0.0.1", "localhost"], ["10.77.0.12", "node2", "fe80::1"]],
        node_names=["alpha", "beta"],
    )


# --------------------------------------------------------------------------- PKI


def test_pki_files_and_modes(pki: ClusterPki) -> None:
    assert _mode(pki.directory) == 0o700
    assert _mode(pki.ca_cert) == 0o644
    assert [n.name for n in pki.nodes] == ["alpha", "beta"]
    for node in pki.nodes:
        assert _mode(node.key) == 0o600
        assert _mode(node.cert) == 0o644
    # the CA key is never written: only certificates, node keys and the manifest exist
    assert sorted(p.name for p in pki.directory.iterdir()) == [
        "ca.crt",
        "node-0.crt",
        "node-0.key",
        "node-1.crt",
        "node-1.key",
        "pki.json",
    ]


def test_node_certs_chain_to_the_ca(pki: ClusterPki) -> None:
    ca = _load_cert(pki.ca_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    ca.verify_directly_issued_by(ca)  # self-signed
    for node in pki.nodes:
        cert = _load_cert(node.cert)
        cert.verify_directly_issued_by(ca)
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        key = serialization.load_pem_private_key(node.key.read_bytes(), password=None)
        assert key.public_key() == cert.public_key()
        assert cert.not_valid_after_utc == ca.not_valid_after_utc == pki.not_after
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert cluster_pki.DEFAULT_VALIDITY < lifetime <= cluster_pki.DEFAULT_VALIDITY * 2


def test_node_certs_carry_their_addresses(pki: ClusterPki) -> None:
    import ipaddress

    def sans(index: int) -> tuple[set[str], set[str]]:
        ext = _load_cert(pki.nodes[index].cert).extensions
        names = ext.get_extension_for_class(x509.SubjectAlternativeName).value
        ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
        return ips, set(names.get_values_for_type(x509.DNSName))

    assert sans(0) == ({"127.0.0.1"}, {"localhost"})
    assert sans(1) == ({"10.77.0.12", str(ipaddress.ip_address("fe80::1"))}, {"node2"})


def test_pki_manifest_round_trip(pki: ClusterPki) -> None:
    assert load_cluster_pki(pki.directory) == pki


def test_pki_refuses_to_replace_an_existing_one(pki: ClusterPki) -> None:
    with pytest.raises(SecurityFilesError, match="already holds a cluster PKI"):
        create_cluster_pki(pki.directory, "again", [["127.0.0.1"]])


def test_missing_pki_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SecurityFilesError, match="create_cluster_pki"):
        load_cluster_pki(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("addresses", "names", "message"),
    [
        ([], None, "at least one node"),
        (["127.0.0.1"], None, "give a list"),  # a bare string per node is a mistake
        ([[]], None, "give a list"),
        ([["not a host!"]], None, "neither an IP address nor a DNS host name"),
        ([["127.0.0.1"]], ["a", "b"], "one name per node"),
    ],
)
def test_pki_rejects_bad_input(
    tmp_path: Path, addresses: list, names: list | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        create_cluster_pki(tmp_path / "pki", "bad", addresses, node_names=names)


def test_install_node_tls_layout_matches_the_settings(pki: ClusterPki, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    certs = install_node_tls(pki, 1, config)
    assert _mode(certs) == 0o700
    settings = security_settings()
    key = config / settings["xpack.security.transport.ssl.key"]
    cert = config / settings["xpack.security.http.ssl.certificate"]
    (ca,) = settings["xpack.security.transport.ssl.certificate_authorities"]
    assert key.read_bytes() == pki.nodes[1].key.read_bytes()
    assert cert.read_bytes() == pki.nodes[1].cert.read_bytes()
    assert (config / ca).read_bytes() == pki.ca_cert.read_bytes()
    assert _mode(key) == 0o600 and _mode(cert) == 0o644
    with pytest.raises(IndexError, match="nodes 0..1"):
        install_node_tls(pki, 2, config)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_install_node_files_for_another_user(pki: ClusterPki, tmp_path: Path) -> None:
    try:
        user = pwd.getpwnam(ES_USER)
    except KeyError:
        unavailable(f"no user {ES_USER}: run scripts/provision")
    config = tmp_path / "config"
    config.mkdir()
    creds = create_credentials(tmp_path, ca_certs=pki.ca_cert)
    install_node_security(config, pki, 0, creds, owner=ES_USER)
    for name in ("certs", "certs/node.key", "certs/node.crt", "certs/ca.crt", "users"):
        info = (config / name).stat()
        assert (info.st_uid, info.st_gid) == (user.pw_uid, user.pw_gid), name
    options = config / es_security.SECURITY_JVM_OPTIONS_FILE
    assert options.read_text().split() == list(es_security.SECURITY_JVM_OPTIONS)
    with pytest.raises(SecurityFilesError, match="no such user"):
        install_node_tls(pki, 0, config, owner="no-such-user-esdash")


# --------------------------------------------------------------------------- credentials


def test_credentials_round_trip_with_mode_0600(tmp_path: Path, pki: ClusterPki) -> None:
    created = create_credentials(tmp_path, ca_certs=pki.ca_cert)
    path = tmp_path / cluster_pki.CREDENTIALS_FILE
    assert created.path == path
    assert _mode(path) == 0o600
    assert len(created.password) >= 43
    assert created.password not in repr(created)
    document = json.loads(path.read_text())
    assert document["schema"] == "esdash.credentials/1"
    assert document["ca_certs"] == str(pki.ca_cert.resolve())
    assert read_credentials(tmp_path) == created
    (tmp_path / "other").mkdir()
    assert create_credentials(tmp_path / "other", ca_certs=None).password != created.password
    with pytest.raises(SecurityFilesError, match="does not exist"):
        create_credentials(tmp_path / "missing", ca_certs=None)


def test_credentials_are_never_replaced(tmp_path: Path) -> None:
    create_credentials(tmp_path, ca_certs=None)
    with pytest.raises(SecurityFilesError, match="already exists"):
        create_credentials(tmp_path, ca_certs=None)


def test_credentials_with_open_permissions_are_refused(tmp_path: Path) -> None:
    create_credentials(tmp_path, ca_certs=None)
    path = tmp_path / cluster_pki.CREDENTIALS_FILE
    for mode in (0o640, 0o604, 0o620):
        os.chmod(path, mode)
        with pytest.raises(SecurityFilesError, match=f"mode {mode:04o}.*chmod 600"):
            read_credentials(tmp_path)
    os.chmod(path, 0o400)  # stricter than 0600 is fine
    assert read_credentials(tmp_path).username == cluster_pki.DEFAULT_USERNAME


def test_missing_credentials_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SecurityFilesError, match="no credentials at .*security off"):
        read_credentials(tmp_path)


def test_credentials_behind_a_symlink_are_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    create_credentials(tmp_path / "real", ca_certs=None)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / cluster_pki.CREDENTIALS_FILE).symlink_to(
        tmp_path / "real" / cluster_pki.CREDENTIALS_FILE
    )
    with pytest.raises(SecurityFilesError, match="cannot open"):
        read_credentials(tmp_path / "run")


def test_malformed_credentials_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / cluster_pki.CREDENTIALS_FILE
    path.write_text('{"schema": "esdash.credentials/1", "username": "x"}')
    os.chmod(path, 0o600)
    with pytest.raises(SecurityFilesError, match="not a valid credentials file"):
        read_credentials(tmp_path)


def test_credentials_without_a_ca_are_refused_not_trusted_to_the_system_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28, L7: a hand-made credentials.json without ``ca_certs`` is refused in one line
    by ``ssl_context`` and by the hot path, never verified against the system's CAs (here
    ``SSL_CERT_FILE`` names a foreign CA that a fallback would have trusted)."""
    foreign = create_cluster_pki(tmp_path / "foreign", "foreign", [["127.0.0.1"]])
    monkeypatch.setenv("SSL_CERT_FILE", str(foreign.ca_cert))
    path = tmp_path / cluster_pki.CREDENTIALS_FILE
    document = {"schema": "esdash.credentials/1", "username": "u", "password": "p" * 43}
    path.write_text(json.dumps(document))
    os.chmod(path, 0o600)
    creds = read_credentials(tmp_path)
    assert creds.ca_certs is None and creds.path == path
    expected = (
        f"{path}: no ca_certs, so the cluster's certificate cannot be verified (esdash never "
        f"falls back to the system's CAs); set ca_certs to the run's CA certificate or start the "
        f"cluster again with esdash, which writes it"
    )
    with pytest.raises(SecurityFilesError) as refused:
        ssl_context(creds)
    assert str(refused.value) == expected
    with pytest.raises(SecurityFilesError) as refused:
        Connection(Target("node-0", "127.0.0.1:9200", True), creds)
    assert str(refused.value) == expected
    with pytest.raises(SecurityFilesError, match=r"^node-0 \(127.0.0.1:9200\) speaks TLS but no"):
        Connection(Target("node-0", "127.0.0.1:9200", True), None)
    # plain HTTP (security off) needs no CA; with one, only that CA is trusted
    assert Connection(Target("node-0", "127.0.0.1:9200", False), None).target.secure is False
    own = create_cluster_pki(tmp_path / "own", "own", [["127.0.0.1"]])
    trusted = ssl_context(Credentials("u", "p", own.ca_cert, path))
    subjects = [dict(x[0] for x in c["subject"]) for c in trusted.get_ca_certs()]
    assert subjects == [{"organizationName": "esdash", "commonName": "esdash CA for own"}]
    # the hot path against a real TLS server: the run's node certificate passes, a
    # certificate of another CA (the one SSL_CERT_FILE names) does not
    creds = Credentials("u", "p", own.ca_cert, path)
    with _tls_server(own.node(0)) as port:
        connection = Connection(Target("node-0", f"127.0.0.1:{port}", True), creds)
        assert connection.request("GET", "/")[0] == 200
        connection.close()
    with _tls_server(foreign.node(0)) as port:
        connection = Connection(Target("node-0", f"127.0.0.1:{port}", True), creds)
        with pytest.raises(RequestFailed, match="CERTIFICATE_VERIFY_FAILED"):
            connection.request("GET", "/")


@contextlib.contextmanager
def _tls_server(node: NodeTls) -> Iterator[int]:
    """An HTTPS server on loopback answering 200 with ``node``'s certificate; its port."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(node.cert), str(node.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_credentials_of_another_user_are_refused(tmp_path: Path) -> None:
    try:
        user = pwd.getpwnam(ES_USER)
    except KeyError:
        unavailable(f"no user {ES_USER}: run scripts/provision")
    create_credentials(tmp_path, ca_certs=None)
    os.chown(tmp_path / cluster_pki.CREDENTIALS_FILE, user.pw_uid, user.pw_gid)
    with pytest.raises(SecurityFilesError, match="belongs to user"):
        read_credentials(tmp_path)


def test_bad_user_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must start with a letter"):
        create_credentials(tmp_path, ca_certs=None, username="bad:name")


# --------------------------------------------------------------------------- file realm


def test_pbkdf2_hash_matches_elasticsearch_users() -> None:
    """A hash written by ES 8.19.21's own ``elasticsearch-users useradd alice -p ...``
    (with ``password_hashing.algorithm: pbkdf2``); recomputing it with its salt must agree."""
    es_hash = (
        "{PBKDF2}10000$m37ZCZEBE/CKGoou5eifOfujif73h/FEJkCN1qwZ+dw="
        "$E6hK2qmQrAp6QAmuAfaK63EdZVkYh3xwtx3Yju1Qmi4="
    )
    salt = base64.b64decode(es_hash.split("$")[1])
    assert pbkdf2_hash("correct-horse-battery", salt=salt) == es_hash
    assert pbkdf2_hash("x") != pbkdf2_hash("x")  # random salt


def test_file_realm_files(tmp_path: Path) -> None:
    creds = Credentials("esdash", "s3cret-Pa55", None)
    write_file_realm_user(tmp_path, creds)
    name, hashed = (tmp_path / "users").read_text().rstrip("\n").split(":", 1)
    assert name == "esdash" and hashed.startswith("{PBKDF2}10000$")
    assert (tmp_path / "users_roles").read_text() == "superuser:esdash\n"
    assert _mode(tmp_path / "users") == _mode(tmp_path / "users_roles") == 0o600


# --------------------------------------------------------------------------- settings, clients


def test_settings() -> None:
    on = security_settings()
    assert on["xpack.security.enabled"] is True
    assert on["xpack.security.transport.ssl.enabled"] is True
    assert on["xpack.security.http.ssl.enabled"] is True
    assert on["xpack.security.transport.ssl.verification_mode"] == "certificate"
    assert disabled_settings() == {"xpack.security.enabled": False}


def test_client_helpers(tmp_path: Path) -> None:
    creds = Credentials("u", "p", tmp_path / "ca.crt")
    assert client_kwargs(creds) == {
        "basic_auth": ("u", "p"),
        "verify_certs": True,
        "ca_certs": str(tmp_path / "ca.crt"),
    }
    assert client_kwargs(None) == {}
    assert basic_auth_header(creds) == {"Authorization": "Basic dTpw"}
    assert base_url("10.0.0.1", 9250, secure=True) == "https://10.0.0.1:9250"
    assert base_url("fe80::1", 9250, secure=False) == "http://[fe80::1]:9250"


# --------------------------------------------------------------------------- real nodes


def _es_home() -> Path | None:
    explicit = os.environ.get("ESDASH_TEST_ES_HOME")
    return Path(explicit) if explicit else paths.default_distribution("elasticsearch")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "starts Elasticsearch as another user through runuser, which needs root"
    if _es_home() is None:
        return "no Elasticsearch distribution in esdash's cache"
    try:
        pwd.getpwnam(ES_USER)
    except KeyError:
        return f"no unprivileged user {ES_USER!r} to run Elasticsearch as"
    if not Path(JAVA_HOME, "bin", "java").exists():
        return f"no Java at {JAVA_HOME}"
    return None


def _free_port() -> int:
    """A free loopback port from the kernel's ephemeral range (never 9200/9300, which
    another Elasticsearch on the machine may own)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Node:
    name: str
    directory: Path
    http_port: int
    transport_port: int
    process: subprocess.Popen | None = None
    server_pid: int | None = None
    log: Path | None = None

    @property
    def config(self) -> Path:
        return self.directory / "config"


def _prepare_node(
    node: Node,
    home: Path,
    settings: dict[str, object],
    pki: ClusterPki | None,
    index: int,
    creds: Credentials | None,
) -> None:
    """A node's own writable config copy, owned by the ES user (infra.md §1)."""
    shutil.copytree(home / "config", node.config)
    (node.directory / "tmp").mkdir()
    if pki is not None and creds is not None:
        install_node_security(node.config, pki, index, creds)
        settings = {**settings, **security_settings()}
    else:
        settings = {**settings, **disabled_settings()}
    settings = {
        "cluster.name": "esdash-security-test",
        "node.name": node.name,
        "path.data": str(node.directory / "data"),
        "path.logs": str(node.directory / "logs"),
        "network.host": "127.0.0.1",
        "http.port": node.http_port,
        "transport.port": node.transport_port,
        **settings,
    }
    # JSON values are valid YAML flow scalars and sequences
    yml = "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
    (node.config / "elasticsearch.yml").write_text(yml)
    (node.config / "jvm.options.d" / "heap.options").write_text("-Xms256m\n-Xmx256m\n")
    subprocess.run(["chown", "-R", f"{ES_USER}:", str(node.directory)], check=True)
    os.chmod(node.directory, 0o700)


def _start(node: Node, home: Path) -> None:
    """Run ``bin/elasticsearch`` in the foreground as the ES user, in its own session so a
    hung node can be killed with everything it spawned (and only that)."""
    node.log = node.directory / "stdout.log"
    env = {k: v for k, v in os.environ.items() if k not in _JAVA_NOISE}
    with open(node.log, "wb") as log:
        node.process = subprocess.Popen(
            [
                "runuser",
                "-u",
                ES_USER,
                "--",
                "env",
                f"ES_JAVA_HOME={JAVA_HOME}",
                f"ES_PATH_CONF={node.config}",
                f"ES_TMPDIR={node.directory / 'tmp'}",
                str(home / "bin" / "elasticsearch"),
                "-p",
                str(node.directory / "es.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _log_tail(node: Node, lines: int = 30) -> str:
    if node.log is None or not node.log.exists():
        return "(no log)"
    return "\n".join(node.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_ready(node: Node, creds: Credentials | None, timeout: float = 120) -> float:
    """Seconds from now until the node answers ``_cluster/health`` over HTTP(S)."""
    start = time.monotonic()
    url = base_url("127.0.0.1", node.http_port, secure=creds is not None) + "/_cluster/health"
    headers = basic_auth_header(creds) if creds else {}
    context = ssl_context(creds) if creds else None
    while time.monotonic() - start < timeout:
        assert node.process is not None
        if node.process.poll() is not None:
            pytest.fail(f"{node.name} exited with {node.process.returncode}:\n{_log_tail(node)}")
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, context=context, timeout=2) as response:
                if response.status == 200:
                    elapsed = time.monotonic() - start
                    # read it now: ES deletes its pid file as soon as shutdown starts
                    node.server_pid = int((node.directory / "es.pid").read_text())
                    return elapsed
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    pytest.fail(f"{node.name} did not answer within {timeout} s:\n{_log_tail(node)}")


def _stop(node: Node) -> None:
    """SIGTERM the server JVM by its PID and wait for the launcher to exit with it.

    Signalling ``runuser`` instead would make it SIGKILL the node after 2 seconds, cutting a
    graceful shutdown short.  Only if the node hangs is its own session SIGKILLed.
    """
    process = node.process
    if process is None or process.poll() is not None:
        return
    if node.server_pid is not None:
        os.kill(node.server_pid, signal.SIGTERM)
    else:  # it never answered; the launcher forwards the signal
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # the JVM runs below runuser: make sure nothing of this node outlived it
    deadline = time.monotonic() + 10
    while _processes_mentioning(node.directory) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_mentioning(node.directory), "an Elasticsearch process was left behind"


def _processes_mentioning(directory: Path) -> list[int]:
    needle = str(directory).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@dataclass
class SecureCluster:
    home: Path
    run_dir: Path
    pki: ClusterPki
    creds: Credentials
    nodes: list[Node]
    startup_seconds: float
    yml_before: str


@pytest.fixture(scope="module")
def secure_cluster() -> Iterator[SecureCluster]:
    """node-0 with security on, bootstrapped as a one-node cluster; node-1 is prepared with
    the same PKI and credentials but only started by the transport test."""
    reason = _skip_reason()
    if reason:
        unavailable(reason)  # a skip outside CI, a failure under CI
    home = _es_home()
    assert home is not None
    root = Path(tempfile.mkdtemp(prefix="esdash-security-"))
    os.chmod(root, 0o711)  # the ES user must traverse to its node dir, nothing more
    nodes = [Node(f"node-{i}", root / f"node-{i}", _free_port(), _free_port()) for i in range(2)]
    for node in nodes:
        node.directory.mkdir()
    try:
        run_dir = root / "run"
        run_dir.mkdir(mode=0o700)
        pki = create_cluster_pki(
            run_dir / "pki", "esdash-security-test", [["127.0.0.1", "localhost"]] * 2
        )
        creds = create_credentials(run_dir, ca_certs=pki.ca_cert)
        seeds = [f"127.0.0.1:{node.transport_port}" for node in nodes]
        for index, node in enumerate(nodes):
            settings: dict[str, object] = {"discovery.seed_hosts": seeds}
            if index == 0:
                settings["cluster.initial_master_nodes"] = ["node-0"]
            install_creds = read_credentials(run_dir)  # as another rank would
            _prepare_node(
                node, home, settings, load_cluster_pki(run_dir / "pki"), index, install_creds
            )
        yml_before = (nodes[0].config / "elasticsearch.yml").read_text()
        _start(nodes[0], home)
        startup = _wait_ready(nodes[0], creds)
        yield SecureCluster(home, run_dir, pki, creds, nodes, startup, yml_before)
    finally:
        try:
            for node in reversed(nodes):
                _stop(node)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _request(
    cluster: SecureCluster,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    url = base_url("127.0.0.1", cluster.nodes[0].http_port, secure=True) + path
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(
            request, context=context or ssl_context(cluster.creds), timeout=10
        ) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.es
def test_https_with_credentials_works(secure_cluster: SecureCluster) -> None:
    from elasticsearch import Elasticsearch

    creds = read_credentials(secure_cluster.run_dir)
    url = base_url("127.0.0.1", secure_cluster.nodes[0].http_port, secure=True)
    with Elasticsearch(url, **client_kwargs(creds)) as es:
        who = es.security.authenticate()
        assert who["username"] == creds.username
        assert "superuser" in who["roles"]
        assert who["authentication_realm"] == {"name": es_security.FILE_REALM_NAME, "type": "file"}
        es.index(index="secret", document={"patient": "x"}, refresh=True)
        assert es.count(index="secret")["count"] == 1

    status, _, body = _request(secure_cluster, "/_cluster/health", headers=basic_auth_header(creds))
    assert status == 200 and json.loads(body)["cluster_name"] == "esdash-security-test"

    # the certificate names "localhost" too, so full hostname verification passes by name
    connection = http.client.HTTPSConnection(
        "localhost", secure_cluster.nodes[0].http_port, context=ssl_context(creds), timeout=10
    )
    try:
        connection.request("GET", "/_cluster/health", headers=basic_auth_header(creds))
        assert connection.getresponse().status == 200
    finally:
        connection.close()


@pytest.mark.es
def test_anonymous_and_wrong_password_get_401(secure_cluster: SecureCluster) -> None:
    from elasticsearch import AuthenticationException, Elasticsearch

    status, headers, _ = _request(secure_cluster, "/_cluster/health")
    assert status == 401
    assert headers.get("WWW-Authenticate", "").startswith("Basic")

    wrong = Credentials(
        secure_cluster.creds.username, "wrong-password", secure_cluster.creds.ca_certs
    )
    status, _, _ = _request(secure_cluster, "/_cluster/health", headers=basic_auth_header(wrong))
    assert status == 401
    url = base_url("127.0.0.1", secure_cluster.nodes[0].http_port, secure=True)
    with Elasticsearch(url, **client_kwargs(wrong)) as es, pytest.raises(AuthenticationException):
        es.cluster.health()

    # the reserved `elastic` user has no password anybody knows
    elastic = Credentials("elastic", "changeme", secure_cluster.creds.ca_certs)
    status, _, _ = _request(secure_cluster, "/_cluster/health", headers=basic_auth_header(elastic))
    assert status == 401


@pytest.mark.es
def test_plain_http_and_untrusted_tls_fail(secure_cluster: SecureCluster) -> None:
    port = secure_cluster.nodes[0].http_port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        with pytest.raises((http.client.HTTPException, OSError)):
            connection.request(
                "GET", "/_cluster/health", headers=basic_auth_header(secure_cluster.creds)
            )
            connection.getresponse()
    finally:
        connection.close()

    # the system trust store does not know the cluster's CA
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _request(secure_cluster, "/_cluster/health", context=ssl.create_default_context())

    # a name the certificate does not list fails hostname verification
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"),
    ):
        ssl_context(secure_cluster.creds).wrap_socket(raw, server_hostname="evil.example")


@pytest.mark.es
def test_config_was_not_rewritten_by_auto_configuration(secure_cluster: SecureCluster) -> None:
    config = secure_cluster.nodes[0].config
    assert (config / "elasticsearch.yml").read_text() == secure_cluster.yml_before
    assert sorted(p.name for p in (config / "certs").iterdir()) == [
        "ca.crt",
        "node.crt",
        "node.key",
    ]
    log = secure_cluster.nodes[0].log
    assert log is not None
    assert "Failed to sync built-in roles" not in log.read_text(errors="replace")


def _transport_handshake(port: int, ca: Path, cert_and_key: tuple[Path, Path] | None) -> str:
    """'accepted' if the node keeps a mutual-TLS connection open, else 'rejected'."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(ca))
    context.check_hostname = False  # what the nodes do (verification_mode: certificate)
    if cert_and_key is not None:
        context.load_cert_chain(str(cert_and_key[0]), str(cert_and_key[1]))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with context.wrap_socket(raw) as tls:
                # TLS 1.3 reports a refused client certificate only on the first read
                tls.settimeout(1.5)
                if tls.recv(1) == b"":
                    return "rejected"
        except TimeoutError:
            return "accepted"  # the node is waiting for a transport handshake from us
        except (ssl.SSLError, ConnectionError):
            return "rejected"
    return "rejected"


@pytest.mark.es
def test_transport_requires_a_certificate_of_the_cluster_ca(
    secure_cluster: SecureCluster, tmp_path: Path
) -> None:
    port = secure_cluster.nodes[0].transport_port
    pki = secure_cluster.pki
    # the node's own certificate verifies against the CA (else the handshake raises)
    assert _transport_handshake(port, pki.ca_cert, (pki.nodes[1].cert, pki.nodes[1].key)) == (
        "accepted"
    )
    assert _transport_handshake(port, pki.ca_cert, None) == "rejected"
    foreign = create_cluster_pki(tmp_path / "foreign", "impostor", [["127.0.0.1"]])
    assert (
        _transport_handshake(port, pki.ca_cert, (foreign.nodes[0].cert, foreign.nodes[0].key))
        == "rejected"
    )


@pytest.mark.es
def test_second_node_joins_over_tls_transport(secure_cluster: SecureCluster) -> None:
    """Runs last: node-1 starts with the same PKI and joins node-0 through the seed host."""
    from elasticsearch import Elasticsearch

    node = secure_cluster.nodes[1]
    _start(node, secure_cluster.home)
    _wait_ready(node, secure_cluster.creds)
    url = base_url("127.0.0.1", secure_cluster.nodes[0].http_port, secure=True)
    with Elasticsearch(url, **client_kwargs(secure_cluster.creds)) as es:
        health = es.cluster.health(wait_for_nodes="2", timeout="60s")
        assert health["number_of_nodes"] == 2
        names = {n["name"] for n in es.cat.nodes(format="json", h="name")}
        assert names == {"node-0", "node-1"}
