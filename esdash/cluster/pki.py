"""Secure by default: a per-cluster PKI and one superuser, whatever the engine.

The clusters esdash starts hold sensitive data on machines shared with other users, so every
cluster gets, unless a session explicitly turns security off for a comparison run:

* its **own certificate authority** and one certificate per node (:func:`create_cluster_pki`).
  The CA's private key lives only in memory while the node certificates are signed and is
  never written anywhere, so no further certificate chaining to it can ever be issued: holding
  a certificate of this CA *is* being a node of this cluster;
* **one superuser** whose random password sits in the run directory in ``credentials.json``,
  mode 0600 (:func:`create_credentials`); anonymous requests get 401.

How an engine uses them (TLS on transport and HTTP, its user database) is the backend's
business: it receives a :class:`esdash.plugin.security.NodeSecurity` per node.  In order:

1. Rank 0, once the node addresses are known (after the allgather)::

       pki = create_cluster_pki(run_dir / "pki", cluster_name, addresses_by_rank)
       credentials = create_credentials(run_dir, ca_certs=pki.ca_cert)

2. Each rank: ``node_security(load_cluster_pki(run_dir / "pki"), rank,
   read_credentials(run_dir))`` goes to the backend in the node request.

3. Clients: the backend's control client, or :func:`ssl_context` and
   :func:`basic_auth_header` for the load generator's own HTTP loop.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import re
import secrets
import ssl
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from esdash.plugin.host import user_name
from esdash.plugin.secure_files import SecurityFilesError, make_private_dir, write_private
from esdash.plugin.security import Credentials, NodeSecurity
from esdash.rundir import layout

#: Lifetime of the CA and node certificates.  Long enough for the longest batch job on common
#: HPC systems (a few days) plus a kept-alive cluster; short enough that a leaked node key
#: is worthless soon.  Certificates start one hour in the past to tolerate clock skew.
DEFAULT_VALIDITY = dt.timedelta(days=14)
CLOCK_SKEW = dt.timedelta(hours=1)

#: The manifest in the PKI directory that :func:`create_cluster_pki` fills, and the
#: credentials file in the run directory (their names: :mod:`esdash.rundir.layout`).
PKI_MANIFEST = layout.PKI_MANIFEST
PKI_SCHEMA = "esdash.pki/1"
CREDENTIALS_FILE = layout.CREDENTIALS
CREDENTIALS_SCHEMA = "esdash.credentials/1"

DEFAULT_USERNAME = "esdash"

_USERNAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.@-]{0,63}")
_DNS_NAME_RE = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


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

    The keys are EC P-256 (instant to generate, unlike RSA, and accepted by every JVM engine
    on Java 17), unencrypted PKCS#8 PEM with mode 0600: a passphrase would have to sit next to
    the key in the node's keystore, which protects nothing.  One key and certificate per node
    serve both transport and HTTP, so the certificate carries both the serverAuth and clientAuth
    key usages (on transport every node is both client and server).

    Whether host names are verified between nodes is the backend's choice (Elasticsearch
    verifies only that a peer's certificate chains to this CA; see its security module).

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
    make_private_dir(directory)

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
    write_private(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)

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
        write_private(key_path, key_pem, 0o600)
        write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
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
    write_private(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode(), 0o644)
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


def node_security(pki: ClusterPki, index: int, credentials: Credentials) -> NodeSecurity:
    """What the backend installs for node ``index``: its TLS files and the credentials."""
    node = pki.node(index)
    return NodeSecurity(
        ca_cert=pki.ca_cert, node_key=node.key, node_cert=node.cert, credentials=credentials
    )


# --------------------------------------------------------------------------- credentials


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
        write_private(path, (json.dumps(document, indent=2) + "\n").encode(), 0o600, exclusive=True)
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
            owner = _owner_label(info.st_uid)
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


# --------------------------------------------------------------------------- clients


def base_url(host: str, port: int, *, secure: bool) -> str:
    """``https://host:port`` (or ``http://`` with security off), brackets around IPv6."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'https' if secure else 'http'}://{host}:{port}"


def ssl_context(credentials: Credentials) -> ssl.SSLContext:
    """An SSL context for urllib/http.client that trusts only the cluster's CA.

    Credentials without a CA are refused (:func:`require_ca`): the system's trust store
    never signed an esdash cluster, and trusting it would let any certificate a public CA
    issued for the host name stand in for the cluster.
    """
    return ssl.create_default_context(cafile=str(require_ca(credentials)))


def require_ca(credentials: Credentials) -> Path:
    """The CA certificate clients verify the nodes against (:meth:`Credentials.required_ca`)."""
    return credentials.required_ca()


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


def _owner_label(uid: int) -> str:
    name = user_name(uid)
    return f"uid {uid}" if name == str(uid) else f"user {name!r}"
