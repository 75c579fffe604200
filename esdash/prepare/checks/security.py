"""Checks of what keeps the session's data and secrets its owner's: the encryption mode's
options, security left off only where nobody else listens, secrets not written in the file.

:func:`secret_warnings` refuses nothing: ``esdash session check`` prints what is legal
but almost certainly not meant.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.session import Session


class EncryptionOptions(PreflightCheck):
    """What the ``[encryption]`` mode refuses beyond its option declarations.

    The mode's :meth:`~esdash.plugin_api.EncryptionMode.check_options` checks exactly one
    password or key source, private files and commands that exist, for the account the
    nodes run as: at the session stage, so that ``session check`` already names a missing key
    file, not the mode when a run first needs it, after the cluster started.
    """

    name = "encryption-options"
    description = "the encryption mode accepts its options for the node account"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        try:
            owner = context.owner or resolve_owner(session.cluster.run_as)
            mode = context.plugins.encryption(session.encryption.name)
            mode.check_options(session.encryption.options, owner)
        except BadInput as exc:
            yield Finding("", f"{session.path}: {exc}")


#: The interconnect whose traffic never leaves the host.
LOOPBACK = "loopback"


def on_loopback(session: Session) -> bool:
    """Whether the nodes talk over this host's loopback interface only: the ``loopback``
    interconnect on its own interface (an explicit ``cluster.interface`` other than ``lo``
    binds an address other hosts can reach)."""
    cluster = session.cluster
    return cluster.interconnect == LOOPBACK and cluster.interface in (None, "lo")


class SecurityOff(PreflightCheck):
    """``security = false`` only where nobody else can listen: on loopback, or when the
    session says the network is trusted (``cluster.insecure_ok = true``).

    Without security the nodes speak plain HTTP without authentication, on HTTP and
    transport: on a real interconnect every host that reaches the addresses can read and
    change the indexed documents, and every host on the path can read the traffic.
    """

    name = "security-off"
    description = "security = false only on loopback, or with insecure_ok = true"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        cluster = session.cluster
        if cluster.security or cluster.insecure_ok or on_loopback(session):
            return
        where = f"interconnect {cluster.interconnect!r}"
        if cluster.interface is not None:
            where += f" (interface {cluster.interface!r})"
        yield Finding(
            "",
            f"{session.path}: cluster.security: false on {where} sends documents and queries "
            f"unencrypted and lets every host that reaches the nodes read and change them; "
            f"set security = true, or insecure_ok = true in [cluster] if that network is "
            f"trusted",
        )


#: Programs that print their own arguments: a secret ``*_command`` would print is then
#: written in the session file itself.
_PRINTERS = ("echo", "printf")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def _printing_program(command: str, depth: int = 0) -> str | None:
    """``echo`` or ``printf`` when ``command`` runs one of them first (also behind ``env`` or
    ``sh -c``), else None.  Words are split as the encryption modes split them (no shell)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # the mode's own check names an unsplittable command
    while words and Path(words[0]).name == "env":
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]):
            words = words[1:]
    if not words:
        return None
    program = Path(words[0]).name
    if program in _PRINTERS:
        return program
    if program in _SHELLS and "-c" in words[1:-1] and depth == 0:
        script = words[words.index("-c") + 1]
        return _printing_program(re.split(r"[;&|\n]", script, maxsplit=1)[0], depth + 1)
    return None


def secret_warnings(session: Session) -> list[str]:
    """What ``esdash session check`` warns about without refusing the session.

    A ``password_command`` or ``passphrase_command`` (any ``*_command`` of the encryption
    mode) that is ``echo ...`` or ``printf ...`` holds the secret in the session file,
    which esdash copies into every run directory and report: legal, but almost certainly
    not meant.
    """
    lines = []
    for key, value in sorted(session.encryption.options.items()):
        if not key.endswith("_command") or not isinstance(value, str):
            continue
        program = _printing_program(value)
        if program is None:
            continue
        file_key = f"{key.removesuffix('_command')}_file"
        named = f" (encryption.{file_key})" if file_key in session.encryption.options else ""
        lines.append(
            f"{session.path}: encryption.{key}: {program!r} prints the secret from the session "
            f"file itself, and esdash copies that file into every run directory and report; "
            f"keep the secret in a file only you can read{named} or in a command that "
            f"fetches it (a secret store)"
        )
    return lines
