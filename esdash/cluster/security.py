"""Secure by default: a per-cluster PKI, TLS on transport and HTTP, and one file-realm user.

The clusters esdash starts hold sensitive data on machines shared with other users, so every
cluster gets, unless a session explicitly turns security off for a comparison run:

* its **own certificate authority** and one certificate per node (:func:`create_cluster_pki`).
  The CA's private key lives only in memory while the node certificates are signed and is
  never written anywhere, so no further certificate chaining to it can ever be issued: holding
  a certificate of this CA *is* being a node of this cluster;
* **TLS on transport** (mutual: every node presents its certificate and verifies the peer's
  against the CA) and **TLS on HTTP** (clients verify the node against the CA and its name);
* **authentication** with one file-realm superuser whose random password sits in the run
  directory in ``credentials.json``, mode 0600 (:func:`create_credentials`); anonymous
  requests get 401.

Everything here works on the integ-test-zip (its x-pack-security module) and needs no licence
beyond the self-generated basic one (TLS and the file realm are basic features).  Every
setting in :func:`security_settings` was verified against Elasticsearch 8.19.21 by
``tests/cluster/test_security.py``; Elasticsearch refuses to start on an unknown setting, so
add nothing here without such a test.

How the launcher uses this module, in order:

1. Rank 0, once the node addresses are known (after the allgather)::

       pki = create_cluster_pki(run_dir / "pki", cluster_name, addresses_by_rank)
       credentials = create_credentials(run_dir, ca_certs=pki.ca_cert)

2. For each node (on its rank, or by the orchestrator), after copying the config template
   into the node's own writable config dir::

       pki = load_cluster_pki(run_dir / "pki")  # on ranks other than 0
       install_node_security(config_dir, pki, rank, read_credentials(run_dir), owner=run_as)
       yml.update(security_settings())          # or disabled_settings() when security is off

   ``owner`` is only needed when the orchestrator is root and the node runs as another user.

3. Clients: ``Elasticsearch(base_url(host, port, secure=True), **client_kwargs(credentials))``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import json
import os
import pwd
import re
import secrets
import ssl
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from esdash.errors import ClusterError
from esdash.rundir import layout

#: Lifetime of the CA and node certificates.  Long enough for the longest batch job on common
#: HPC systems (a few days) plus a kept-alive cluster; short enough that a leaked node key
#: is worthless soon.  Certificates start one hour in the past to tolerate clock skew.
DEFAULT_VALIDITY = dt.timedelta(days=14)
CLOCK_SKEW = dt.timedelta(hours=1)

#: Inside a node's config dir.  The names are the same on every node, so
#: :func:`security_settings` is too; Elasticsearch resolves relative paths in SSL settings
#: against the config dir, and only reads files inside it.
NODE_CERTS_DIR = "certs"
NODE_KEY = f"{NODE_CERTS_DIR}/node.key"
NODE_CERT = f"{NODE_CERTS_DIR}/node.crt"
NODE_CA_CERT = f"{NODE_CERTS_DIR}/ca.crt"

#: The manifest in the PKI directory that :func:`create_cluster_pki` fills, and the
#: credentials file in the run directory (their names: :mod:`esdash.rundir.layout`).
PKI_MANIFEST = layout.PKI_MANIFEST
PKI_SCHEMA = "esdash.pki/1"
CREDENTIALS_FILE = layout.CREDENTIALS
CREDENTIALS_SCHEMA = "esdash.credentials/1"

DEFAULT_USERNAME = "esdash"
FILE_REALM_NAME = "esdash_file"

#: Elasticsearch's own PBKDF2 parameters (Hasher.PBKDF2: PBKDF2WithHmacSHA512, 32-byte salt,
#: 256-bit key, 10000 rounds); cross-checked against a hash from ``elasticsearch-users``.
#: More rounds would buy nothing: the password is 256 random bits, not a guessable phrase.
PBKDF2_ROUNDS = 10_000

_USERNAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.@-]{0,63}")
_DNS_NAME_RE = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


class SecurityFilesError(ClusterError):
    """Credentials or certificates are missing, malformed or readable by other users."""


# --------------------------------------------------------------------------- the PKI


@dataclass(frozen=True)
class NodeTls:
    """One node's certificate and key (PEM files in the PKI directory)."""

    index: int
    name: str
    key: Path
    cert: Path
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class ClusterPki:
    """A cluster's CA certificate and its nodes' certificates, as files in ``directory``."""

    directory: Path
    cluster_name: str
    ca_cert: Path
    nodes: tuple[NodeTls, ...]
    not_after: dt.datetime

    def node(self, index: int) -> NodeTls:
        if not 0 <= index < len(self.nodes):
            raise IndexError(
                f"the PKI in {self.directory} has certificates for nodes 0..{len(self.nodes) - 1}"
                f", not for node {index}"
            )
        return self.nodes[index]


def create_cluster_pki(
    directory: Path,
    cluster_name: str,
    node_addresses: Sequence[Sequence[str]],
    *,
    node_names: Sequence[str] | None = None,
    validity: dt.timedelta = DEFAULT_VALIDITY,
) -> ClusterPki:
    """Create a CA and one certificate per node in ``directory`` (created with mode 0700).

    ``node_addresses[i]`` lists every IP address and host name node ``i`` can be reached at;
    they all go into its certificate's subject alternative names.  ``node_names`` default to
    ``node-<i>`` and become the certificates' common names.

    The keys are EC P-256 (instant to generate, unlike RSA, and accepted by Elasticsearch on
    Java 17), unencrypted PKCS#8 PEM with mode 0600: a passphrase would have to sit next to
    the key in the node's keystore, which protects nothing.  One key and certificate per node
    serve both transport and HTTP, so the certificate carries both the serverAuth and clientAuth
    key usages (on transport every node is both client and server).

    Host names are verified only by HTTP clients, not between nodes: see
    :func:`security_settings` for why transport uses ``verification_mode: certificate``.

    Writes ``ca.crt``, ``node-<i>.crt``/``.key`` and ``pki.json`` (for
    :func:`load_cluster_pki` on other ranks).  Refuses to overwrite an existing PKI, because
    replacing the certificates under a running cluster would lock its nodes out of each other.
    Raises :class:`ValueError` for an empty node list or an address that is neither an IP nor
    a valid DNS name.
    """
    directory = Path(directory)
    if not node_addresses:
        raise ValueError("create_cluster_pki needs at least one node")
    if not cluster_name:
        raise ValueError("create_cluster_pki needs a cluster name")
    names = [f"node-{i}" for i in range(len(node_addresses))]
    names = names if node_names is None else list(node_names)
    if len(names) != len(node_addresses):
        raise ValueError(
            f"{len(names)} node names for {len(node_addresses)} nodes; give one name per node"
        )
    sans = [_subject_alt_names(i, addresses) for i, addresses in enumerate(node_addresses)]
    if validity <= dt.timedelta(0):
        raise ValueError(f"validity must be positive, not {validity}")

    manifest_path = directory / PKI_MANIFEST
    if manifest_path.exists():
        raise SecurityFilesError(
            f"{directory} already holds a cluster PKI ({PKI_MANIFEST}); every cluster gets its "
            f"own CA, so start it from a new run directory or delete {directory} first"
        )
    _make_private_dir(directory)

    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    not_before, not_after = now - CLOCK_SKEW, now + validity

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "esdash"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"esdash CA for {cluster_name}"[:64]),
        ]
    )
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage("key_cert_sign", "crl_sign"), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.crt"
    _write_file(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)

    nodes = []
    for index, (name, general_names) in enumerate(zip(names, sans, strict=True)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "esdash"),
                        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, cluster_name[:64]),
                        x509.NameAttribute(NameOID.COMMON_NAME, name[:64]),
                    ]
                )
            )
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage("digital_signature"), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName(general_names), critical=False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key_path = directory / f"node-{index}.key"
        cert_path = directory / f"node-{index}.crt"
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_file(key_path, key_pem, 0o600)
        _write_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        nodes.append(
            NodeTls(index, name, key_path, cert_path, tuple(str(a) for a in node_addresses[index]))
        )
    del ca_key  # never serialised: no certificate can be added to this cluster later

    manifest = {
        "schema": PKI_SCHEMA,
        "cluster_name": cluster_name,
        "ca_cert": ca_path.name,
        "not_after": not_after.isoformat(),
        "nodes": [
            {
                "name": n.name,
                "cert": n.cert.name,
                "key": n.key.name,
                "addresses": list(n.addresses),
            }
            for n in nodes
        ],
    }
    _write_file(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode(), 0o644)
    return ClusterPki(directory, cluster_name, ca_path, tuple(nodes), not_after)


def load_cluster_pki(directory: Path) -> ClusterPki:
    """The PKI that :func:`create_cluster_pki` wrote to ``directory`` (e.g. on another rank)."""
    directory = Path(directory)
    manifest_path = directory / PKI_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("schema") != PKI_SCHEMA:
            raise ValueError(f"schema is {manifest.get('schema')!r}, expected {PKI_SCHEMA!r}")
        nodes = tuple(
            NodeTls(
                i,
                node["name"],
                directory / node["key"],
                directory / node["cert"],
                tuple(node["addresses"]),
            )
            for i, node in enumerate(manifest["nodes"])
        )
        pki = ClusterPki(
            directory,
            manifest["cluster_name"],
            directory / manifest["ca_cert"],
            nodes,
            dt.datetime.fromisoformat(manifest["not_after"]),
        )
    except FileNotFoundError:
        raise SecurityFilesError(
            f"no cluster PKI in {directory} ({PKI_MANIFEST} is missing); rank 0 creates it with "
            f"create_cluster_pki before the node configs are rendered"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SecurityFilesError(f"{manifest_path} is not a valid PKI manifest: {exc}") from None
    return pki


def install_node_tls(
    pki: ClusterPki, index: int, config_dir: Path, *, owner: str | int | None = None
) -> Path:
    """Copy node ``index``'s key and certificate and the CA certificate into ``config_dir``.

    They land in ``<config_dir>/certs/`` under the fixed names :func:`security_settings`
    refers to: ``node.key`` (0600), ``node.crt`` and ``ca.crt`` (0644), in a 0700 directory.
    The key must be readable by the user the node runs as: when the orchestrator runs as
    root and the node as an unprivileged user, pass that user (name or uid) as ``owner`` and
    the files and directory are chowned to it and its primary group.  Returns the certs dir.
    """
    node = pki.node(index)
    ids = _owner_ids(owner)
    certs = Path(config_dir) / NODE_CERTS_DIR
    _make_private_dir(certs, ids)
    _write_file(Path(config_dir) / NODE_KEY, _read(node.key), 0o600, ids)
    _write_file(Path(config_dir) / NODE_CERT, _read(node.cert), 0o644, ids)
    _write_file(Path(config_dir) / NODE_CA_CERT, _read(pki.ca_cert), 0o644, ids)
    return certs


# --------------------------------------------------------------------------- credentials


@dataclass(frozen=True)
class Credentials:
    """The cluster's superuser and the CA certificate clients verify the nodes against."""

    username: str
    password: str = field(repr=False)
    ca_certs: Path | None
    path: Path | None = None


def credentials_path(run_dir: Path) -> Path:
    return Path(run_dir) / CREDENTIALS_FILE


def create_credentials(
    run_dir: Path, *, ca_certs: Path | None, username: str = DEFAULT_USERNAME
) -> Credentials:
    """Generate a random password and write ``<run_dir>/credentials.json`` with mode 0600.

    The password is 256 random bits (``secrets.token_urlsafe(32)``, 43 characters of
    ``[A-Za-z0-9_-]``, so it is safe in headers, shells and the ``users`` file).  The file
    is created exclusively (never following a symlink, never replacing an existing file: a
    second cluster in the same run directory would otherwise lock the first one's clients
    out) and is readable only by its owner.  ``ca_certs`` is stored as an absolute path.

    Format (schema ``esdash.credentials/1``)::

        {"schema": "esdash.credentials/1", "username": "esdash", "password": "...",
         "ca_certs": "/abs/run/pki/ca.crt"}

    Readers ignore keys they do not know, so endpoints can be added later.
    """
    if not _USERNAME_RE.fullmatch(username):
        raise ValueError(
            f"user name {username!r} must start with a letter and contain only letters, digits"
            f" and _ . @ - (at most 64 characters)"
        )
    path = credentials_path(run_dir)
    ca = Path(ca_certs).resolve() if ca_certs is not None else None
    credentials = Credentials(username, secrets.token_urlsafe(32), ca, path)
    document = {
        "schema": CREDENTIALS_SCHEMA,
        "username": credentials.username,
        "password": credentials.password,
        "ca_certs": str(ca) if ca is not None else None,
    }
    try:
        _write_file(path, (json.dumps(document, indent=2) + "\n").encode(), 0o600, exclusive=True)
    except FileNotFoundError:
        raise SecurityFilesError(
            f"cannot write {path}: the run directory {Path(run_dir)} does not exist"
        ) from None
    except FileExistsError:
        raise SecurityFilesError(
            f"{path} already exists; every cluster gets its own credentials, so start it from "
            f"a new run directory (or delete the file if no cluster uses it any more)"
        ) from None
    return credentials


def read_credentials(run_dir: Path) -> Credentials:
    """Read ``<run_dir>/credentials.json``, refusing it if other users could read it.

    Like ssh with a private key, a file that group or others can read or write, or that
    belongs to somebody other than the caller or root, is an error rather than a warning: the
    password is the only thing between other users of the machine and the data.
    """
    path = credentials_path(run_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise SecurityFilesError(
            f"no credentials at {path}: the cluster of this run was started with security "
            f"off, or not by esdash; start it with security on (the default)"
        ) from None
    except OSError as exc:
        raise SecurityFilesError(f"cannot open {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid not in (os.geteuid(), 0):
            owner = _user_name(info.st_uid)
            raise SecurityFilesError(
                f"{path} belongs to {owner}, not to you: refusing to use credentials another "
                f"user controls"
            )
        if info.st_mode & 0o077:
            raise SecurityFilesError(
                f"{path} has mode {stat.S_IMODE(info.st_mode):04o}, so other users can read "
                f"the cluster password; run `chmod 600 {path}` (and consider the password "
                f"leaked if others did read it)"
            )
        raw = handle.read()
    try:
        document = json.loads(raw)
        if document.get("schema") != CREDENTIALS_SCHEMA:
            raise ValueError(
                f"schema is {document.get('schema')!r}, expected {CREDENTIALS_SCHEMA!r}"
            )
        username, password = document["username"], document["password"]
        if not isinstance(username, str) or not isinstance(password, str) or not password:
            raise ValueError("username and password must be non-empty strings")
        ca = document.get("ca_certs")
    except (ValueError, KeyError, AttributeError) as exc:
        raise SecurityFilesError(f"{path} is not a valid credentials file: {exc}") from None
    return Credentials(username, password, Path(ca) if ca else None, path)


# --------------------------------------------------------------------------- the file realm


def pbkdf2_hash(password: str, *, rounds: int = PBKDF2_ROUNDS, salt: bytes | None = None) -> str:
    """A password hash in Elasticsearch's ``{PBKDF2}`` format, as ``elasticsearch-users`` writes.

    ``{PBKDF2}<rounds>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512(password, salt), 32 bytes>``.
    Elasticsearch picks the verifier from the hash's prefix, whatever
    ``xpack.security.authc.password_hashing.algorithm`` says, so no setting is needed.
    Computing it here instead of running ``bin/elasticsearch-users`` (a JVM start, ~1.3 s of
    wall time and ~2 s of CPU per node) takes milliseconds and needs no Java.
    """
    salt = secrets.token_bytes(32) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, rounds, 32)
    encoded_salt = base64.b64encode(salt).decode()
    encoded_digest = base64.b64encode(digest).decode()
    return f"{{PBKDF2}}{rounds}${encoded_salt}${encoded_digest}"


def write_file_realm_user(
    config_dir: Path,
    credentials: Credentials,
    *,
    role: str = "superuser",
    owner: str | int | None = None,
) -> None:
    """Make ``credentials.username`` a file-realm user with ``role`` in a node's config dir.

    Replaces the ``users`` and ``users_roles`` files (empty in the distribution) with one
    user each, mode 0600 and owned by ``owner`` (see :func:`install_node_tls`).  Every node
    needs them: the file realm is local to a node.
    """
    ids = _owner_ids(owner)
    config_dir = Path(config_dir)
    line = f"{credentials.username}:{pbkdf2_hash(credentials.password)}\n"
    _write_file(config_dir / "users", line.encode(), 0o600, ids)
    _write_file(config_dir / "users_roles", f"{role}:{credentials.username}\n".encode(), 0o600, ids)


# --------------------------------------------------------------------------- one call per node


#: JVM options for nodes with security on.  With security on, 8.18+ syncs the built-in roles
#: into the ``.security`` index, whose mapping needs the ``pattern_capture`` token filter of
#: the analysis-common module; the integ-test-zip lacks that module, so every cluster state
#: change logs "Failed to sync built-in roles ... Unknown filter type [pattern_capture]".
#: Elasticsearch's own tests turn the sync off with this property; esdash needs neither the
#: ``.security`` index nor queryable built-in roles (its user lives in the file realm).
SECURITY_JVM_OPTIONS = ("-Des.queryable_built_in_roles_enabled=false",)
SECURITY_JVM_OPTIONS_FILE = "jvm.options.d/esdash-security.options"


def install_node_security(
    config_dir: Path,
    pki: ClusterPki,
    index: int,
    credentials: Credentials,
    *,
    owner: str | int | None = None,
) -> None:
    """Everything a node's config dir needs for security on, except the yml settings.

    :func:`install_node_tls`, :func:`write_file_realm_user` and the JVM options file
    ``jvm.options.d/esdash-security.options`` (see :data:`SECURITY_JVM_OPTIONS`).  Call it
    after copying the distribution's config template into ``config_dir``, and merge
    :func:`security_settings` into the node's elasticsearch.yml.
    """
    install_node_tls(pki, index, config_dir, owner=owner)
    write_file_realm_user(config_dir, credentials, owner=owner)
    ids = _owner_ids(owner)
    options = Path(config_dir) / SECURITY_JVM_OPTIONS_FILE
    options.parent.mkdir(parents=True, exist_ok=True)
    _write_file(options, ("\n".join(SECURITY_JVM_OPTIONS) + "\n").encode(), 0o644, ids)


# --------------------------------------------------------------------------- settings


def security_settings() -> dict[str, object]:
    """The elasticsearch.yml entries that turn security on (flat dotted keys).

    Paths are relative to the node's config dir, where :func:`install_node_tls` put the files.

    Transport uses ``verification_mode: certificate``: every node must present a certificate
    that chains to the cluster's CA (client authentication is required on transport by
    default), but the peer's address is not matched against its certificate.  Host names are
    not worth verifying between nodes because the CA is private to this cluster and its key
    was discarded after signing, so a valid certificate already proves "one of our nodes";
    full verification would only stop one of our nodes from impersonating another, at the
    price of handshake failures whenever a node is reached at an address its certificate
    does not list (publish vs bind host, several interconnects, names Slurm knows but DNS
    does not).  HTTP clients do verify host names (see :func:`client_kwargs`): the address a
    client uses comes from the topology, which lists it in the certificate.

    HTTP does not ask clients for certificates (the default ``client_authentication: none``),
    so it needs no CA setting; clients authenticate with the file-realm password.  Setting
    ``xpack.security.enabled`` explicitly also stops Elasticsearch's own security
    auto-configuration, which would otherwise rewrite elasticsearch.yml on first start.
    """
    return {
        "xpack.security.enabled": True,
        "xpack.security.transport.ssl.enabled": True,
        "xpack.security.transport.ssl.verification_mode": "certificate",
        "xpack.security.transport.ssl.key": NODE_KEY,
        "xpack.security.transport.ssl.certificate": NODE_CERT,
        "xpack.security.transport.ssl.certificate_authorities": [NODE_CA_CERT],
        "xpack.security.http.ssl.enabled": True,
        "xpack.security.http.ssl.key": NODE_KEY,
        "xpack.security.http.ssl.certificate": NODE_CERT,
        f"xpack.security.authc.realms.file.{FILE_REALM_NAME}.order": 0,
    }


def disabled_settings() -> dict[str, object]:
    """The elasticsearch.yml entry for a session that turns security off (comparison runs).

    It must be written explicitly: without it, x-pack-security auto-configures TLS and
    rewrites elasticsearch.yml on first start.
    """
    return {"xpack.security.enabled": False}


# --------------------------------------------------------------------------- clients


def base_url(host: str, port: int, *, secure: bool) -> str:
    """``https://host:port`` (or ``http://`` with security off), brackets around IPv6."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'https' if secure else 'http'}://{host}:{port}"


def client_kwargs(credentials: Credentials | None) -> dict[str, object]:
    """Keyword arguments for ``elasticsearch.Elasticsearch(hosts, **kwargs)``.

    With credentials: basic auth, and the node certificate verified against the cluster CA
    including its host name (the client's default).  ``None`` (security off) gives ``{}``.
    """
    if credentials is None:
        return {}
    kwargs: dict[str, object] = {
        "basic_auth": (credentials.username, credentials.password),
        "verify_certs": True,
    }
    if credentials.ca_certs is not None:
        kwargs["ca_certs"] = str(credentials.ca_certs)
    return kwargs


def ssl_context(credentials: Credentials) -> ssl.SSLContext:
    """An SSL context for urllib/http.client that trusts only the cluster's CA."""
    if credentials.ca_certs is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=str(credentials.ca_certs))


def basic_auth_header(credentials: Credentials) -> dict[str, str]:
    """The ``Authorization`` header for plain HTTP libraries."""
    token = base64.b64encode(f"{credentials.username}:{credentials.password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# --------------------------------------------------------------------------- helpers


def _subject_alt_names(index: int, addresses: Sequence[str]) -> list[x509.GeneralName]:
    if isinstance(addresses, str) or not addresses:
        raise ValueError(
            f"node {index}: give a list of its IP addresses and host names, not {addresses!r}"
        )
    names: list[x509.GeneralName] = []
    for address in addresses:
        try:
            general: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(address))
        except ValueError:
            if not isinstance(address, str) or not _DNS_NAME_RE.fullmatch(address):
                raise ValueError(
                    f"node {index}: {address!r} is neither an IP address nor a DNS host name"
                ) from None
            general = x509.DNSName(address)
        if general not in names:
            names.append(general)
    return names


def _key_usage(*allowed: str) -> x509.KeyUsage:
    """A KeyUsage extension with only the named usages set."""
    flags = (
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
        "encipher_only",
        "decipher_only",
    )
    return x509.KeyUsage(**{flag: flag in allowed for flag in flags})


def _owner_ids(owner: str | int | None) -> tuple[int, int] | None:
    """(uid, gid of the user's primary group) for ``owner``, or None to keep the caller's."""
    if owner is None:
        return None
    try:
        entry = pwd.getpwuid(owner) if isinstance(owner, int) else pwd.getpwnam(owner)
    except KeyError:
        raise SecurityFilesError(f"no such user {owner!r} to give the node's files to") from None
    return entry.pw_uid, entry.pw_gid


def _user_name(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name!r}"
    except KeyError:
        return f"uid {uid}"


def _make_private_dir(path: Path, ids: tuple[int, int] | None = None) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink() or not path.is_dir():
        raise SecurityFilesError(f"{path} must be a directory, not a symlink or a file")
    if ids is not None:
        os.chown(path, *ids)
    os.chmod(path, 0o700)


def _write_file(
    path: Path,
    data: bytes,
    mode: int,
    ids: tuple[int, int] | None = None,
    *,
    exclusive: bool = False,
) -> None:
    """Write ``data`` with ``mode`` from the first byte on (no window with umask defaults).

    Never follows a symlink at ``path``: in a shared directory somebody could have planted one
    pointing at a file of theirs.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, mode)
    try:
        if ids is not None:
            os.fchown(fd, *ids)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        os.close(fd)


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise SecurityFilesError(
            f"{path} is missing from the cluster PKI; recreate it with create_cluster_pki"
        ) from None


__all__ = [
    "CREDENTIALS_FILE",
    "DEFAULT_VALIDITY",
    "ClusterPki",
    "Credentials",
    "NodeTls",
    "SecurityFilesError",
    "base_url",
    "basic_auth_header",
    "client_kwargs",
    "create_cluster_pki",
    "create_credentials",
    "credentials_path",
    "disabled_settings",
    "SECURITY_JVM_OPTIONS",
    "install_node_security",
    "install_node_tls",
    "load_cluster_pki",
    "pbkdf2_hash",
    "read_credentials",
    "security_settings",
    "write_file_realm_user",
]
