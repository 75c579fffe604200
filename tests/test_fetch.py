"""``esdash fetch BACKEND``: Maven download, unpacking with modes, idempotency, errors."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from esdash_plugins.backends.elasticsearch.distribution import DEFAULT_VERSION, fetch
from support.prereqs import find_tool, unavailable

from esdash import paths
from esdash.plugin.fetching import make_world_readable, unzip_keeping_modes


def esdash_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, so PATH and ESDASH_CACHE apply as for a user."""
    return subprocess.run(
        [sys.executable, "-m", "esdash", *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


def env_without_mvn(tmp_path: Path, **extra: str) -> dict[str, str]:
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir(exist_ok=True)
    return {**os.environ, "PATH": str(empty_bin), **extra}


def test_missing_mvn_explains_the_tarball_route(tmp_path):
    cache = tmp_path / "cache"
    proc = esdash_cli(
        "fetch", "elasticsearch", env=env_without_mvn(tmp_path, ESDASH_CACHE=str(cache))
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "mvn" in proc.stderr
    assert "tarball" in proc.stderr and "cluster.home" in proc.stderr
    assert f"elasticsearch-{DEFAULT_VERSION}" in proc.stderr
    assert proc.stdout == ""
    assert not any(cache.glob("elasticsearch-*"))


def test_bad_version_is_bad_input(tmp_path):
    proc = esdash_cli("fetch", "elasticsearch", "--version", "8.x; rm -rf /", env=dict(os.environ))
    assert proc.returncode == 2
    assert "--version" in proc.stderr and "Traceback" not in proc.stderr


def test_cached_distribution_is_returned_without_maven(tmp_path):
    """Idempotent and offline: the provisioned cache answers even with no mvn on PATH."""
    home = paths.cache_dir() / f"elasticsearch-{DEFAULT_VERSION}"
    if not (home / "bin" / "elasticsearch").is_file():
        unavailable(f"{home} is not there (scripts/provision runs esdash fetch elasticsearch)")
    proc = esdash_cli("fetch", "elasticsearch", env=env_without_mvn(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(home)
    assert proc.stderr == ""  # nothing downloaded or unpacked


def test_real_maven_fetch_into_empty_cache(tmp_path):
    """The whole path: mvn dependency:copy, unzip keeping modes, a+rX, atomic rename."""
    if find_tool("mvn") is None:
        unavailable("mvn is not installed (scripts/provision installs maven)")
    cache = tmp_path / "cache"
    messages: list[str] = []
    try:
        home = fetch(DEFAULT_VERSION, cache, messages.append)
        assert home == cache / f"elasticsearch-{DEFAULT_VERSION}"
        assert any("Maven" in m for m in messages)
        assert os.access(home / "bin" / "elasticsearch", os.X_OK)
        assert (home / "bin" / "elasticsearch").stat().st_mode & 0o005 == 0o005
        assert (home / "config" / "jvm.options").stat().st_mode & stat.S_IROTH
        assert (home / "config" / "jvm.options.d").stat().st_mode & 0o005 == 0o005
        assert [p.name for p in cache.iterdir()] == [home.name]  # no temp dirs left
        messages.clear()
        assert fetch(DEFAULT_VERSION, cache, messages.append) == home
        assert messages == []
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_unzip_keeps_exec_bits_and_world_readable_fixes_0660(tmp_path):
    archive = tmp_path / "dist.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, mode in [("d-1/bin/tool", 0o755), ("d-1/config/app.yml", 0o660)]:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, "x")
    unzip_keeping_modes(archive, tmp_path / "out")
    tool = tmp_path / "out" / "d-1" / "bin" / "tool"
    config = tmp_path / "out" / "d-1" / "config" / "app.yml"
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
    assert stat.S_IMODE(config.stat().st_mode) == 0o660
    make_world_readable(tmp_path / "out")
    assert stat.S_IMODE(config.stat().st_mode) == 0o664
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755


def test_unknown_backend_names_the_ones_there_are():
    proc = esdash_cli("fetch", "lucene", env=dict(os.environ))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "lucene" in proc.stderr and "elasticsearch" in proc.stderr


def test_fetch_help_lists_the_command():
    proc = esdash_cli("fetch", "--help", env=dict(os.environ))
    assert proc.returncode == 0
    assert "elasticsearch" in proc.stdout and "--version" in proc.stdout


@pytest.mark.parametrize("version", ["8.19.21", "9.1.0", "8.19.0-SNAPSHOT"])
def test_version_pattern_accepts_real_versions(tmp_path, version):
    """A valid version reaches the Maven step (here: fails there because mvn is absent)."""
    proc = esdash_cli(
        "fetch",
        "elasticsearch",
        "--version",
        version,
        env=env_without_mvn(tmp_path, ESDASH_CACHE=str(tmp_path / "c")),
    )
    assert proc.returncode == 1 and f"Elasticsearch {version}" in proc.stderr
