"""Issue 28, L1 and the audit's last low point: what ``session check`` says about security.

``security = false`` gives a cluster without TLS and without authentication.  On the
loopback interface nobody but this host can reach it; on any other interconnect every host
that reaches the nodes can read and change the documents, so a session must say
``insecure_ok = true`` in ``[cluster]`` to get it.  The check is a pre-flight check of the
session stage: ``session check`` and every launch (``cluster up``, ``run``) refuse with the
same line, before anything starts.

A ``password_command`` / ``passphrase_command`` that is ``echo ...`` or ``printf ...``
holds the secret in the session file, which every run directory and report copies:
``session check`` warns (exit code 0), it does not refuse.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from esdash.prepare import checks
from esdash.prepare.checks.security import secret_warnings
from esdash.session import SessionError, load_session

CHECK = [sys.executable, "-m", "esdash", "session", "check"]
NODE_USER = os.environ.get("ESDASH_TEST_USER", "esdash")


def session(directory: Path, name: str, cluster: str = "", encryption: str = 'mode = "none"'):
    """A one-node session; ``cluster`` lines are added to ``[cluster]``."""
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "{NODE_USER}"\ndata_dir = "data"\n'
        f"{cluster}\n[encryption]\n{encryption}\n"
        f'[track]\nname = "mri"\ndocuments = 100\n'
    )
    return path


def refusal(path: Path, where: str) -> str:
    return (
        f"{path}: cluster.security: false on {where} sends documents and queries unencrypted "
        f"and lets every host that reaches the nodes read and change them; set security = "
        f"true, or insecure_ok = true in [cluster] if that network is trusted"
    )


def security_lines(path: Path, stage: str) -> list[str]:
    lines = checks.findings(load_session(path), stage)  # type: ignore[arg-type]
    return [line for line in lines if "cluster.security" in line]


@pytest.mark.parametrize(
    ("cluster", "where"),
    [
        ('interconnect = "ethernet"', "interconnect 'ethernet'"),
        ('interconnect = "infiniband"', "interconnect 'infiniband'"),
        ('interconnect = "opa"\ninterface = "ib0"', "interconnect 'opa' (interface 'ib0')"),
        # the loopback interconnect bound to another interface is no longer loopback
        (
            'interconnect = "loopback"\ninterface = "eth9"',
            "interconnect 'loopback' (interface 'eth9')",
        ),
    ],
)
def test_security_off_off_loopback_is_refused_at_every_stage(
    tmp_path: Path, cluster: str, where: str
) -> None:
    path = session(tmp_path, "plainnet", f"security = false\n{cluster}")
    expected = refusal(path, where)
    assert security_lines(path, "session") == [expected]
    assert security_lines(path, "launch") == [expected]


def test_insecure_ok_accepts_it_and_loopback_needs_nothing(tmp_path: Path) -> None:
    trusted = session(
        tmp_path, "trusted", 'security = false\ninterconnect = "ethernet"\ninsecure_ok = true'
    )
    assert load_session(trusted).cluster.insecure_ok is True
    assert security_lines(trusted, "launch") == []
    for name, cluster in (
        ("lo", "security = false"),
        ("lo2", 'security = false\ninterconnect = "loopback"\ninterface = "lo"'),
        ("secure", 'interconnect = "ethernet"'),  # security on (the default): nothing to say
    ):
        path = session(tmp_path, name, cluster)
        assert load_session(path).cluster.insecure_ok is False
        assert security_lines(path, "launch") == [], name


def test_insecure_ok_must_be_a_boolean(tmp_path: Path) -> None:
    path = session(
        tmp_path, "typo", 'security = false\ninterconnect = "ethernet"\ninsecure_ok = "yes"'
    )
    with pytest.raises(
        SessionError, match=r"typo.toml: cluster.insecure_ok: expected true or false, found .yes."
    ):
        load_session(path)


def test_session_check_and_cluster_up_refuse_in_one_line(tmp_path: Path) -> None:
    """The CLI: exit code 2, the line on stderr, no run directory and no data root."""
    path = session(tmp_path, "plaineth", 'security = false\ninterconnect = "ethernet"')
    line = refusal(path, "interconnect 'ethernet'")
    expected = f"esdash: error: {line}"
    result = subprocess.run([*CHECK, str(path)], capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr.splitlines() == [expected]
    runs = tmp_path / "runs"
    env = {**os.environ, "ESDASH_RUNS": str(runs), "ESDASH_CACHE": str(tmp_path / "cache")}
    up = subprocess.run(
        [sys.executable, "-m", "esdash", "cluster", "up", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert up.returncode == 2, up.stdout + up.stderr
    assert any(shown.endswith(line) for shown in up.stderr.splitlines()), up.stderr
    assert "Traceback" not in up.stderr
    assert not runs.exists() and not (tmp_path / "data").exists()


# ------------------------------------------------------------------ secrets in the session


@pytest.mark.parametrize(
    "command",
    [
        "echo s3cret",
        "printf '%s' s3cret",
        "/bin/echo s3cret",
        "env LANG=C echo s3cret",
        "sh -c 'echo s3cret'",
        "bash -c 'printf s3cret; true'",
    ],
)
def test_an_echoed_password_is_warned_about_not_refused(tmp_path: Path, command: str) -> None:
    table = f'mode = "gocryptfs"\npassword_command = {repr_toml(command)}'
    path = session(tmp_path, "echoed", encryption=table)
    program = "printf" if "printf" in command else "echo"
    warning = (
        f"esdash: warning: {path}: encryption.password_command: '{program}' prints the secret "
        f"from the session file itself, and esdash copies that file into every run directory "
        f"and report; keep the secret in a file only you can read (encryption.password_file) "
        f"or in a command that fetches it (a secret store)"
    )
    result = subprocess.run([*CHECK, str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ok  {path}: echoed:")
    assert result.stderr.splitlines() == [warning]


def test_an_echoed_abe_passphrase_is_warned_about(tmp_path: Path) -> None:
    path = session(tmp_path, "abeecho", encryption='mode = "abe"\npassphrase_command = "echo x"')
    assert secret_warnings(load_session(path)) == [
        f"{path}: encryption.passphrase_command: 'echo' prints the secret from the session "
        f"file itself, and esdash copies that file into every run directory and report; keep "
        f"the secret in a file only you can read (encryption.passphrase_file) or in a command "
        f"that fetches it (a secret store)"
    ]


@pytest.mark.parametrize(
    "command", ["cat /etc/hostname", "pass show esdash/gocryptfs", "sh -c 'cat /etc/hostname'"]
)
def test_a_command_that_fetches_the_secret_is_not_warned_about(
    tmp_path: Path, command: str
) -> None:
    table = f'mode = "gocryptfs"\npassword_command = {repr_toml(command)}'
    path = session(tmp_path, "fetched", encryption=table)
    assert secret_warnings(load_session(path)) == []


def repr_toml(text: str) -> str:
    """``text`` as a TOML literal string (single quotes inside become a basic string)."""
    if "'" in text:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"'{text}'"
