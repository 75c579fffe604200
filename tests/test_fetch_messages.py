"""Issue 17, item 6: ``esdash fetch --version 99.0.0`` says "no such version", in one line.

Maven answers a missing version with 15 lines of advice and colour codes; esdash reads the
404 out of them and names the versions the repository has (its ``maven-metadata.xml``).
The end-to-end test runs the real Maven against a ``file://`` repository made in the test,
so it needs no network and always sees the same versions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.prereqs import find_tool, unavailable

from esdash.plugin.fetching import (
    ArtifactNotFound,
    FetchError,
    available_versions,
    maven_failure,
    shown_versions,
)

GROUP = "org.elasticsearch.distribution.integ-test-zip"
ARTIFACT = f"{GROUP}:elasticsearch:99.0.0:zip"
VERSIONS = ("8.18.0", "8.19.21", "8.19.4", "9.0.0-rc1", "9.0.0", "7.17.29")

#: What Maven 3.8 printed for the missing version (first lines; the rest is advice).
FIRST_ATTEMPT = (
    "\x1b[0m\x1b[0m[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-"
    "plugin:2.8:copy (default-cli) on project standalone-pom: Unable to find artifact. Could "
    f"not find artifact {GROUP}:elasticsearch:zip:99.0.0 in central ({{url}})\n"
    "[ERROR] \n[ERROR] Try downloading the file manually from the project website.\n"
)
#: ... and when the 404 was cached in the local repository by an earlier attempt.
CACHED = (
    "\x1b[0m\x1b[0m[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-"
    "plugin:2.8:copy (default-cli) on project standalone-pom: Unable to find artifact. "
    f"{GROUP}:elasticsearch:zip:99.0.0 was not found in {{url}} during a previous attempt. "
    "This failure was cached in the local repository and resolution is not reattempted "
    "until the update interval of central has elapsed or updates are forced\n[ERROR] \n"
)


def make_repository(root: Path, versions: tuple[str, ...] = VERSIONS) -> Path:
    """A Maven repository directory whose only file is the artifact's version list."""
    folder = root / GROUP.replace(".", "/") / "elasticsearch"
    folder.mkdir(parents=True)
    listed = "".join(f"<version>{v}</version>" for v in versions)
    (folder / "maven-metadata.xml").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?><metadata><groupId>{GROUP}</groupId>'
        f"<artifactId>elasticsearch</artifactId><versioning><versions>{listed}</versions>"
        "</versioning></metadata>"
    )
    return root


def test_both_wordings_of_a_404_become_no_such_version(tmp_path):
    url = make_repository(tmp_path / "repo").as_uri()
    for output in (FIRST_ATTEMPT, CACHED):
        error = maven_failure(ARTIFACT, output.format(url=url), 1, "by hand")
        assert isinstance(error, ArtifactNotFound)
        assert (error.version, error.repository) == ("99.0.0", url)
        assert error.available == ["9.0.0", "9.0.0-rc1", "8.19.21", "8.19.4", "8.18.0", "7.17.29"]
        assert str(error) == (
            f"no such version: {GROUP}:elasticsearch 99.0.0 in central ({url}) "
            "(available: 9.0.0, 9.0.0-rc1, 8.19.21, 8.19.4, 8.18.0 and 1 more)"
        )


def test_the_versions_shown_are_the_newest_of_the_wanted_major_line():
    available = ["9.0.0", "8.19.21", "8.19.4", "8.18.0", "7.17.29"]
    assert shown_versions(available, "8.3.0", most=2) == "8.19.21, 8.19.4 and 3 more"
    assert shown_versions(available, "7.1.0") == "7.17.29 and 4 more"
    assert shown_versions(available, "99.0.0", most=5) == "9.0.0, 8.19.21, 8.19.4, 8.18.0, 7.17.29"


def test_an_unreadable_version_list_leaves_the_list_out(tmp_path):
    assert available_versions((tmp_path / "nothing").as_uri(), GROUP, "elasticsearch") == []
    assert available_versions("central", GROUP, "elasticsearch") == []
    error = maven_failure(ARTIFACT, FIRST_ATTEMPT.format(url=(tmp_path / "x").as_uri()), 1, "")
    assert isinstance(error, ArtifactNotFound) and "available" not in str(error)


def test_other_maven_failures_are_one_line_without_colour_codes():
    output = (
        "\x1b[0m\x1b[0m[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-"
        "plugin:2.8:copy (default-cli) on project standalone-pom: Could not transfer artifact "
        "x:y:zip:1 from/to central (https://repo.example/maven2): Connection refused\n"
        "[ERROR] \n[ERROR] -> [Help 1]\n"
    )
    error = maven_failure("x:y:1:zip", output, 1, "Unpack a tarball instead.")
    assert type(error) is FetchError
    assert str(error) == (
        "Maven could not download x:y:1:zip (exit code 1): Could not transfer artifact "
        "x:y:zip:1 from/to central (https://repo.example/maven2): Connection refused. "
        "Unpack a tarball instead."
    )


def _maven_home_with_file_repository(tmp_path: Path) -> dict[str, str]:
    """MAVEN_OPTS and a settings file that send every download to a ``file://`` repository.

    Maven needs its dependency plugin, which only the real local repository has (filled by
    ``scripts/provision``); the test repository links to it read-only, so nothing of the
    user's repository is written, and adds the Elasticsearch version list.
    """
    local = Path.home() / ".m2" / "repository"
    if not (local / "org" / "apache" / "maven" / "plugins" / "maven-dependency-plugin").is_dir():
        unavailable(f"{local} has no maven-dependency-plugin (scripts/provision fetches one)")
    remote = tmp_path / "remote"
    (remote / "org").mkdir(parents=True)
    for entry in local.iterdir():
        if entry.name != "org":
            (remote / entry.name).symlink_to(entry)
    for entry in (local / "org").iterdir():
        if entry.name != "elasticsearch":
            (remote / "org" / entry.name).symlink_to(entry)
    make_repository(remote)
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        f"<settings><localRepository>{tmp_path / 'local'}</localRepository><mirrors><mirror>"
        f"<id>test-repo</id><mirrorOf>*</mirrorOf><url>{remote.as_uri()}</url></mirror>"
        "</mirrors></settings>"
    )
    return {"MAVEN_OPTS": f"-Duser.home={home}"}


def test_fetch_of_a_missing_version_says_so_in_one_line(tmp_path):
    if find_tool("mvn") is None:
        unavailable("mvn is not installed (scripts/provision installs maven)")
    env = {
        **os.environ,
        **_maven_home_with_file_repository(tmp_path),
        "ESDASH_CACHE": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "esdash", "fetch", "elasticsearch", "--version", "99.0.0"],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert errors == [
        "esdash: error: no such version: elasticsearch 99.0.0 (available: 9.0.0, 9.0.0-rc1, "
        "8.19.21, 8.19.4, 8.18.0 and 1 more); pass one with --version"
    ]
    assert "\x1b" not in proc.stderr and "[ERROR]" not in proc.stderr
    assert proc.stderr.splitlines()[0] == "esdash: downloading Elasticsearch 99.0.0 with Maven ..."
    assert not any((tmp_path / "cache").glob("elasticsearch-*"))
