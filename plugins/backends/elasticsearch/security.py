"""Elasticsearch's security: x-pack settings, the file realm and its password hashes.

esdash's core gives every node its TLS files and the cluster's superuser
(:class:`esdash.plugin_api.NodeSecurity`); this module tells Elasticsearch about them:

* **TLS on transport** (mutual: every node presents its certificate and verifies the peer's
  against the CA) and **TLS on HTTP** (clients verify the node against the CA and its name);
* **authentication** with one file-realm superuser; anonymous requests get 401.

Everything here works on the integ-test-zip (its x-pack-security module) and needs no licence
beyond the self-generated basic one (TLS and the file realm are basic features).  Every
setting in :func:`security_settings` was verified against Elasticsearch 8.19.21 by
``tests/cluster/test_security.py``; Elasticsearch refuses to start on an unknown setting, so
add nothing here without such a test.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path
from typing import TypedDict

from esdash.plugin_api import (
    NODE_CA_CERT,
    NODE_CERT,
    NODE_CERTS_DIR,
    NODE_KEY,
    Credentials,
    NodeSecurity,
    owner_ids,
    write_private,
)

FILE_REALM_NAME = "esdash_file"

#: Elasticsearch's own PBKDF2 parameters (Hasher.PBKDF2: PBKDF2WithHmacSHA512, 32-byte salt,
#: 256-bit key, 10000 rounds); cross-checked against a hash from ``elasticsearch-users``.
#: More rounds would buy nothing: the password is 256 random bits, not a guessable phrase.
PBKDF2_ROUNDS = 10_000


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
    user each, mode 0600 and owned by ``owner`` (see :meth:`NodeSecurity.install_tls`).  Every node
    needs them: the file realm is local to a node.
    """
    ids = owner_ids(owner)
    config_dir = Path(config_dir)
    line = f"{credentials.username}:{pbkdf2_hash(credentials.password)}\n"
    write_private(config_dir / "users", line.encode(), 0o600, ids)
    write_private(
        config_dir / "users_roles", f"{role}:{credentials.username}\n".encode(), 0o600, ids
    )


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
    config_dir: Path, security: NodeSecurity, *, owner: str | int | None = None
) -> None:
    """Everything a node's config dir needs for security on, except the yml settings.

    The TLS files (in ``certs/``, named as :func:`security_settings` expects), the file-realm
    user (:func:`write_file_realm_user`) and the JVM options file
    ``jvm.options.d/esdash-security.options`` (see :data:`SECURITY_JVM_OPTIONS`).  Call it
    after copying the distribution's config template into ``config_dir``, and merge
    :func:`security_settings` into the node's elasticsearch.yml.
    """
    security.install_tls(Path(config_dir) / NODE_CERTS_DIR, owner)
    write_file_realm_user(config_dir, security.credentials, owner=owner)
    ids = owner_ids(owner)
    options = Path(config_dir) / SECURITY_JVM_OPTIONS_FILE
    options.parent.mkdir(parents=True, exist_ok=True)
    write_private(options, ("\n".join(SECURITY_JVM_OPTIONS) + "\n").encode(), 0o644, ids)


# --------------------------------------------------------------------------- settings


def security_settings() -> dict[str, object]:
    """The elasticsearch.yml entries that turn security on (flat dotted keys).

    Paths are relative to the node's config dir, where :func:`install_node_security` put the
    files.

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


class ClientAuth(TypedDict, total=False):
    """What :func:`client_kwargs` passes to ``elasticsearch.Elasticsearch``, typed for it."""

    basic_auth: tuple[str, str]
    verify_certs: bool
    ca_certs: str


def client_kwargs(credentials: Credentials | None) -> ClientAuth:
    """Keyword arguments for ``elasticsearch.Elasticsearch(hosts, **kwargs)``.

    With credentials: basic auth, and the node certificate verified against the cluster CA
    including its host name (the client's default).  ``None`` (security off) gives ``{}``.
    """
    if credentials is None:
        return {}
    return {
        "basic_auth": (credentials.username, credentials.password),
        "verify_certs": True,
        "ca_certs": str(credentials.required_ca()),  # never the library's default CAs
    }
