"""What a backend gets to secure a node, whatever its engine.

esdash gives every cluster (unless a session turns security off) its own certificate
authority, one certificate per node and one superuser with a random password
(:mod:`esdash.cluster.pki`).  How an engine is told about them differs: Elasticsearch reads
x-pack settings and a file realm, OpenSearch its security plugin's files.  The backend gets a
:class:`NodeSecurity` in :attr:`esdash.plugin.api.NodeRequest.security` and installs it the
way its engine wants; :meth:`NodeSecurity.install_tls` copies the PEM files into the node's
config directory, which every engine needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from esdash.plugin.secure_files import (
    SecurityFilesError,
    make_private_dir,
    owner_ids,
    read_pki_file,
    write_private,
)


@dataclass(frozen=True)
class Credentials:
    """The cluster's superuser and the CA certificate clients verify the nodes against."""

    username: str
    password: str = field(repr=False)
    ca_certs: Path | None
    path: Path | None = None

    def required_ca(self) -> Path:
        """The CA certificate clients verify the nodes against, or a one-line
        :class:`SecurityFilesError` naming the credentials file and the fix: a client never
        falls back to the system's (or its library's) CAs.

        esdash always writes ``ca_certs`` into ``credentials.json``; only a hand-made or
        damaged file lacks it.
        """
        if self.ca_certs is None:
            where = self.path or "the cluster's credentials"
            raise SecurityFilesError(
                f"{where}: no ca_certs, so the cluster's certificate cannot be verified "
                f"(esdash never falls back to the system's CAs); set ca_certs to the run's CA "
                f"certificate or start the cluster again with esdash, which writes it"
            )
        return self.ca_certs


@dataclass(frozen=True)
class TlsFiles:
    """Where :meth:`NodeSecurity.install_tls` put a node's PEM files (absolute paths)."""

    directory: Path
    key: Path
    cert: Path
    ca: Path


@dataclass(frozen=True)
class NodeSecurity:
    """One node's TLS files (PEM, in the run's PKI directory) and the cluster's credentials."""

    ca_cert: Path
    node_key: Path
    node_cert: Path
    credentials: Credentials

    def install_tls(self, directory: Path, owner: str | int | None = None) -> TlsFiles:
        """Copy the node's key and certificate and the CA certificate into ``directory``.

        They get fixed names: ``node.key`` (0600), ``node.crt`` and ``ca.crt`` (0644), in a
        0700 directory.  The key must be readable by the user the node runs as: pass that
        user (name or uid) as ``owner`` when esdash runs as root, and the files and the
        directory are chowned to it and its primary group.
        """
        ids = owner_ids(owner)
        make_private_dir(directory, ids)
        files = TlsFiles(
            directory, directory / "node.key", directory / "node.crt", directory / "ca.crt"
        )
        write_private(files.key, read_pki_file(self.node_key), 0o600, ids)
        write_private(files.cert, read_pki_file(self.node_cert), 0o644, ids)
        write_private(files.ca, read_pki_file(self.ca_cert), 0o644, ids)
        return files
