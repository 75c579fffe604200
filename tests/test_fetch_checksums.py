"""Issue 28, L6: every Maven download is checked against the checksum its repository publishes.

``esdash fetch`` downloads with Maven's ``dependency:copy`` (and the OpenSearch assembly with
``dependency:copy-dependencies``); both run with ``-C`` (strict checksums).  The real Maven
runs here against a ``file://`` repository made in the test (no network; the distributions
in the cache are not downloaded again): a small artifact whose ``.sha1`` does not match, one
without any checksum, and a good one.  Maven's own plugin comes from the real local
repository (filled by ``scripts/provision``), linked read-only into the test repository.
Without ``-C`` Maven 3.8 copies the mismatching artifact and exits 0.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from support.prereqs import find_tool, unavailable

from esdash.plugin.fetching import (
    MAVEN_OPTIONS,
    ChecksumMismatch,
    maven_command,
    maven_copy,
    maven_failure,
    missing_checksums_allowed,
)

GROUP = "org.example.esdash"
BY_HAND = "Unpack a tarball instead."

#: What Maven 3.8.7 printed for an artifact whose .sha1 did not match (first lines).
MISMATCH = (
    "\x1b[0m\x1b[0m[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-"
    "plugin:2.8:copy (default-cli) on project standalone-pom: Unable to resolve artifact. Could "
    "not transfer artifact org.example:bad:zip:1.0 from/to test-repo (file:///tmp/r): Checksum "
    "validation failed, expected 0000000000000000000000000000000000000000 but is "
    "a670e7fcff1b38d50f24dcb2dcb2a57e685ebcbf\n[ERROR]   org.example:bad:zip:1.0\n"
    "[ERROR] \n[ERROR] from the specified remote repositories:\n"
)


def test_every_maven_run_has_strict_checksums() -> None:
    assert "-C" in MAVEN_OPTIONS
    assert maven_command("/usr/bin/mvn", ["dependency:copy"]) == [
        "/usr/bin/mvn",
        "-B",
        "-q",
        "-C",
        "-Dstyle.color=never",
        "dependency:copy",
    ]


def test_a_checksum_failure_is_one_line_naming_artifact_repository_and_digests() -> None:
    error = maven_failure("org.example:bad:1.0:zip", MISMATCH, 1, BY_HAND)
    assert isinstance(error, ChecksumMismatch)
    assert str(error) == (
        "checksum mismatch: org.example:bad:zip:1.0 from test-repo (file:///tmp/r) has SHA-1 "
        "a670e7fcff1b38d50f24dcb2dcb2a57e685ebcbf, the repository publishes "
        "0000000000000000000000000000000000000000: the download was corrupted or altered on "
        "its way; nothing was installed. Retry, and if it persists check the repository or "
        "mirror (~/.m2/settings.xml). Unpack a tarball instead."
    )


def _publish(remote: Path, name: str, data: bytes, sha1: str | None) -> None:
    folder = remote / GROUP.replace(".", "/") / name / "1.0"
    folder.mkdir(parents=True)
    (folder / f"{name}-1.0.zip").write_bytes(data)
    if sha1 is not None:
        (folder / f"{name}-1.0.zip.sha1").write_text(sha1)


@pytest.fixture
def maven_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``file://`` repository every download goes to (a mirror of ``*``) and an empty local
    repository; its artifacts ``good``, ``bad`` (wrong .sha1) and ``bare`` (no checksum)."""
    if find_tool("mvn") is None:
        unavailable("mvn is not installed (scripts/provision installs maven)")
    local = Path.home() / ".m2" / "repository"
    if not (local / "org" / "apache" / "maven" / "plugins" / "maven-dependency-plugin").is_dir():
        unavailable(f"{local} has no maven-dependency-plugin (scripts/provision fetches one)")
    remote = tmp_path / "remote"
    (remote / "org").mkdir(parents=True)
    for entry in local.iterdir():
        if entry.name != "org":
            (remote / entry.name).symlink_to(entry)
    for entry in (local / "org").iterdir():
        if entry.name != "example":
            (remote / "org" / entry.name).symlink_to(entry)
    good = b"PK\x05\x06" + b"\0" * 18  # an empty zip
    _publish(remote, "good", good, hashlib.sha1(good).hexdigest())
    _publish(remote, "bad", b"tampered", hashlib.sha1(b"original").hexdigest())
    _publish(remote, "bare", b"unsigned", None)
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        f"<settings><localRepository>{tmp_path / 'local'}</localRepository><mirrors><mirror>"
        f"<id>test-repo</id><mirrorOf>*</mirrorOf><url>{remote.as_uri()}</url></mirror>"
        "</mirrors></settings>"
    )
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={home}")
    return remote


def test_real_maven_refuses_a_mismatch_and_a_missing_checksum_and_copies_a_good_file(
    tmp_path: Path, maven_repository: Path
) -> None:
    mvn = find_tool("mvn")
    assert mvn is not None
    url = maven_repository.as_uri()
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ChecksumMismatch) as refused:
        maven_copy(mvn, f"{GROUP}:bad:1.0:zip", out, "bad-1.0.zip", BY_HAND)
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message
    assert message == (
        f"checksum mismatch: {GROUP}:bad:zip:1.0 from test-repo ({url}) has SHA-1 "
        f"{hashlib.sha1(b'tampered').hexdigest()}, the repository publishes "
        f"{hashlib.sha1(b'original').hexdigest()}: the download was corrupted or altered on "
        f"its way; nothing was installed. Retry, and if it persists check the repository or "
        f"mirror (~/.m2/settings.xml). {BY_HAND}"
    )
    with pytest.raises(ChecksumMismatch) as missing:
        maven_copy(mvn, f"{GROUP}:bare:1.0:zip", out, "bare-1.0.zip", BY_HAND)
    assert str(missing.value) == (
        f"checksum missing: {GROUP}:bare:zip:1.0 from test-repo ({url}) has no published "
        f"checksum (.sha1 or .md5), so the download cannot be verified; nothing was "
        f"installed. Use a repository that publishes checksums (~/.m2/settings.xml), or accept "
        f"it unverified with `esdash fetch --allow-missing-checksums`. {BY_HAND}"
    )
    assert os.listdir(out) == []
    copied = maven_copy(mvn, f"{GROUP}:good:1.0:zip", out, "good-1.0.zip", BY_HAND)
    assert copied == out / "good-1.0.zip" and copied.read_bytes().startswith(b"PK")
    assert os.listdir(out) == ["good-1.0.zip"]


def test_allowing_missing_checksums_installs_a_bare_file_but_never_a_mismatch(
    tmp_path: Path, maven_repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``esdash fetch --allow-missing-checksums``: for a repository (or mirror) that serves an
    artifact without its checksum file -- this machine's registry serves Elasticsearch 9.x
    integ-test-zips so -- the file is installed with a warning naming it; a file whose
    checksum does not match is refused all the same."""
    mvn = find_tool("mvn")
    assert mvn is not None
    out = tmp_path / "out"
    out.mkdir()
    with missing_checksums_allowed():
        with pytest.raises(ChecksumMismatch, match="^checksum mismatch: "):
            maven_copy(mvn, f"{GROUP}:bad:1.0:zip", out, "bad-1.0.zip", BY_HAND)
        assert os.listdir(out) == []
        copied = maven_copy(mvn, f"{GROUP}:bare:1.0:zip", out, "bare-1.0.zip", BY_HAND)
    assert copied.read_bytes() == b"unsigned"
    warning = capsys.readouterr().err
    assert "installed without checksum verification" in warning and "bare-1.0.zip" in warning
