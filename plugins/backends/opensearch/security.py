"""OpenSearch's security: the security plugin, configured from esdash's own PKI.

esdash gives every node its TLS files and the cluster's bench user
(:class:`esdash.plugin_api.NodeSecurity`, the same CA and per-node certificates the
Elasticsearch backend gets); this module tells the ``opensearch-security`` plugin about them:

* **TLS on transport and HTTP** from the node's PEM files (the keys are PKCS#8 already, which
  the plugin requires); no demo certificates anywhere;
* **one internal user**, the bench user, with a bcrypt hash made here with the ``bcrypt``
  package (the plugin's ``hash.sh`` starts a JVM for 3.5 s), mapped to ``all_access``; the
  distribution's demo users are dropped, and anonymous requests get 401;
* ``nodes_dn`` from the node certificate's own subject, with the common name wildcarded: the
  CA signs only this cluster's node certificates and its key is discarded after signing, so
  any certificate it issued with this subject is one of this cluster's nodes;
* ``admin_dn`` names a subject in the PKI's namespace that no certificate has, so no client
  holds admin rights over the security index; the index is created from the files written
  here at first start (``allow_default_init_securityindex``);
* the security index is **named after the cluster's CA** (:func:`config_index_name`): the
  plugin initialises its index from these files only when the index does not exist, and a
  run that reuses an earlier run's data root (esdash's index reuse) would otherwise keep the
  earlier run's user with its old password hash, locking the new run's client out.  The
  earlier run's (small) security index stays in the data root, unused.

Every setting here was verified on OpenSearch 3.4.0 (``tests/opensearch/``); OpenSearch
refuses to start on an unknown setting, so add nothing without such a test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import bcrypt

from esdash.plugin_api import (
    NODE_CA_CERT,
    NODE_CERT,
    NODE_CERTS_DIR,
    NODE_KEY,
    Credentials,
    JsonObject,
    NodeSecurity,
    owner_ids,
    write_private,
)

#: The security plugin's configuration directory inside a node's config dir.
SECURITY_CONFIG_DIR = "opensearch-security"

#: bcrypt cost of the bench user's hash (the plugin's own default).  Each node checks the
#: hash once per user and caches the result, so the cost is paid once, not per request.
BCRYPT_ROUNDS = 12


def bcrypt_hash(password: str, rounds: int = BCRYPT_ROUNDS) -> str:
    """A ``$2a$`` bcrypt hash of ``password``, the format of ``internal_users.yml``."""
    salt = bcrypt.gensalt(rounds=rounds, prefix=b"2a")
    return bcrypt.hashpw(password.encode(), salt).decode()


def _meta(kind: str) -> JsonObject:
    return {"type": kind, "config_version": 2}


def internal_users(credentials: Credentials) -> JsonObject:
    """``internal_users.yml``: the bench user only (the demo users are not carried over)."""
    return {
        "_meta": _meta("internalusers"),
        credentials.username: {
            "hash": bcrypt_hash(credentials.password),
            "reserved": True,
            "backend_roles": [],
            "description": "esdash's bench user (written by esdash for this run)",
        },
    }


def roles_mapping(credentials: Credentials) -> JsonObject:
    """``roles_mapping.yml``: the bench user is ``all_access``, nobody else is mapped."""
    return {
        "_meta": _meta("rolesmapping"),
        "all_access": {"reserved": True, "users": [credentials.username], "backend_roles": []},
    }


def auth_config() -> JsonObject:
    """``config.yml``: HTTP basic auth against the internal users; anonymous refused."""
    return {
        "_meta": _meta("config"),
        "config": {
            "dynamic": {
                "http": {"anonymous_auth_enabled": False},
                "authc": {
                    "basic_internal_auth_domain": {
                        "description": "the bench user, basic auth against internal_users.yml",
                        "http_enabled": True,
                        "transport_enabled": True,
                        "order": 0,
                        "http_authenticator": {"type": "basic", "challenge": True},
                        "authentication_backend": {"type": "intern"},
                    }
                },
            }
        },
    }


def node_dns(node_cert: Path) -> tuple[str, str]:
    """``(nodes_dn, admin_dn)`` from a node certificate's subject (RFC 2253, as Java reads it).

    ``nodes_dn`` is the subject with its common name wildcarded; ``admin_dn`` the same
    subject with a common name no node certificate has.
    """
    from cryptography import x509  # only when a node is configured, not at registration

    cert = x509.load_pem_x509_certificate(Path(node_cert).read_bytes())
    rdns = cert.subject.rfc4514_string().split(",")
    if not rdns or not rdns[0].startswith("CN="):
        raise ValueError(f"{node_cert}: the subject does not start with a common name")
    rest = ",".join(rdns[1:])
    return f"CN=*,{rest}", f"CN=esdash-no-admin-certificate,{rest}"


def config_index_name(ca_cert: Path) -> str:
    """The security index of the cluster whose CA certificate is ``ca_cert``.

    Every cluster start gets a new CA, so every start gets a new index, initialised from the
    files this module writes; every node of the cluster derives the same name.
    """
    digest = hashlib.sha256(Path(ca_cert).read_bytes()).hexdigest()[:16]
    return f".esdash_security_{digest}"


def security_settings(node_cert: Path, ca_cert: Path) -> dict[str, object]:
    """The opensearch.yml entries that turn security on (flat dotted keys).

    Transport does not verify host names (``enforce_hostname_verification: false``), for the
    reasons the Elasticsearch backend gives: a certificate of this private CA already proves
    "one of our nodes".  HTTP clients verify the node against the CA and its address.
    """
    nodes_dn, admin_dn = node_dns(node_cert)
    settings: dict[str, object] = {}
    for layer in ("transport", "http"):
        prefix = f"plugins.security.ssl.{layer}"
        settings[f"{prefix}.pemcert_filepath"] = NODE_CERT
        settings[f"{prefix}.pemkey_filepath"] = NODE_KEY
        settings[f"{prefix}.pemtrustedcas_filepath"] = NODE_CA_CERT
    settings.update(
        {
            "plugins.security.ssl.transport.enforce_hostname_verification": False,
            "plugins.security.ssl.http.enabled": True,
            "plugins.security.allow_default_init_securityindex": True,
            "plugins.security.config_index_name": config_index_name(ca_cert),
            "plugins.security.authcz.admin_dn": [admin_dn],
            "plugins.security.nodes_dn": [nodes_dn],
            "plugins.security.audit.type": "noop",
            "plugins.security.restapi.roles_enabled": ["all_access"],
        }
    )
    return settings


def disabled_settings(plugin_installed: bool) -> dict[str, object]:
    """The opensearch.yml entries for a session that turns security off.

    Only a distribution with the plugin knows its setting (OpenSearch refuses unknown ones);
    without the plugin there is no security to turn off.
    """
    return {"plugins.security.disabled": True} if plugin_installed else {}


def install_node_security(
    config_dir: Path, security: NodeSecurity, *, owner: str | int | None = None
) -> None:
    """The node's TLS files (``certs/``) and the plugin's user, role mapping and auth files.

    Call it after copying the distribution's config template into ``config_dir``.
    """
    config_dir = Path(config_dir)
    tls = security.install_tls(config_dir / NODE_CERTS_DIR, owner)
    for public in (tls.cert, tls.ca):
        public.chmod(0o600)  # the plugin warns about any certificate file others can read
    ids = owner_ids(owner)
    directory = config_dir / SECURITY_CONFIG_DIR
    files = {
        "internal_users.yml": internal_users(security.credentials),
        "roles_mapping.yml": roles_mapping(security.credentials),
        "config.yml": auth_config(),
    }
    for name, document in files.items():
        path = directory / name
        path.unlink(missing_ok=True)  # the template's copy, possibly owned by root
        # JSON is valid YAML, and the plugin reads these with a YAML parser.
        text = "# Written by esdash for this run.\n" + json.dumps(document, indent=2) + "\n"
        write_private(path, text.encode(), 0o600, ids)


def client_kwargs(credentials: Credentials | None) -> dict[str, Any]:
    """Keyword arguments for ``opensearchpy.OpenSearch(hosts, **kwargs)``.

    With credentials: HTTPS, basic auth, and the node certificate verified against the
    cluster CA including its host name.  ``None`` (security off) gives plain HTTP.
    """
    if credentials is None:
        return {"use_ssl": False}
    kwargs: dict[str, Any] = {
        "http_auth": (credentials.username, credentials.password),
        "use_ssl": True,
        "verify_certs": True,
        "ssl_show_warn": False,
    }
    kwargs["ca_certs"] = str(credentials.required_ca())  # never the library's default CAs
    return kwargs
