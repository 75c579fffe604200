"""``esdash plugins`` with built-ins only, and with real third-party packages installed.

The packages in ``tests/plugin_packages/`` are real distributions (dist-info and entry
points), installed by ``scripts/provision`` into ``.venv/test-plugins``.  They become visible
only when that directory is on ``PYTHONPATH``, so every test here runs esdash in a subprocess
and chooses its ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import esdash

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "tests" / "plugin_packages"
TEST_PLUGINS = ROOT / ".venv" / "test-plugins"
PROVISION_HINT = (
    "run scripts/provision: it installs every tests/plugin_packages/*/ with "
    "`pip install --no-deps --upgrade --target .venv/test-plugins <package>`"
)

BUILTIN_PLUGINS = [
    {
        "name": "elasticsearch",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"backend": ["elasticsearch"]},
    },
    {
        "name": "opensearch",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"backend": ["opensearch"], "check": ["opensearch-launch"]},
    },
    {
        "name": "encryption-none",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"encryption": ["none"]},
    },
    {
        "name": "interconnects",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"interconnect": ["ethernet", "infiniband", "loopback", "opa"]},
    },
    {
        "name": "track-mri",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"track": ["mri"]},
    },
    {
        "name": "track-nyc-taxis",
        "distribution": "esdash",
        "version": esdash.__version__,
        "registered": {"track": ["nyc_taxis"]},
    },
]


def project(package: str) -> dict[str, Any]:
    """The ``[project]`` table of a test plugin package."""
    with open(PACKAGES / package / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]


@pytest.fixture(scope="module")
def test_plugins() -> Path:
    """``.venv/test-plugins``, holding the current build of every test plugin package.

    A missing or stale installation is a provisioning bug, so it fails rather than skips.
    """
    if not TEST_PLUGINS.is_dir():
        pytest.fail(f"{TEST_PLUGINS} does not exist; {PROVISION_HINT}", pytrace=False)
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        meta = project(pyproject.parent.name)
        dist_name = re.sub(r"[-_.]+", "_", meta["name"]).lower()
        dist_info = TEST_PLUGINS / f"{dist_name}-{meta['version']}.dist-info"
        if not dist_info.is_dir():
            pytest.fail(
                f"{meta['name']} {meta['version']} is not installed in {TEST_PLUGINS} "
                f"(no {dist_info.name}); {PROVISION_HINT}",
                pytrace=False,
            )
        for source in pyproject.parent.glob("*.py"):
            installed = TEST_PLUGINS / source.name
            if not installed.is_file() or installed.read_bytes() != source.read_bytes():
                pytest.fail(
                    f"{installed} is missing or differs from {source}; {PROVISION_HINT}",
                    pytrace=False,
                )
    return TEST_PLUGINS


def run(
    args: list[str],
    cwd: Path,
    pythonpath: Path | None = None,
    disable: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` with this interpreter, a chosen ``PYTHONPATH`` and plugin blocks."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ESDASH_DISABLE_PLUGINS")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    if disable is not None:
        env["ESDASH_DISABLE_PLUGINS"] = disable
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def plugins_json(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    result = run(["-m", "esdash", "plugins", "--json"], tmp_path, **kwargs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def entry(data: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    found = [e for e in data[section] if e["name"] == name]
    assert len(found) == 1, f"{section} has no single entry {name!r}: {data}"
    return found[0]


def test_builtins_listed_with_distribution_version_and_items(tmp_path):
    data = plugins_json(tmp_path)
    assert data["broken"] == []
    listed = {e["name"]: e for e in data["plugins"]}
    for expected in BUILTIN_PLUGINS:
        assert listed.get(expected["name"]) == expected
    # The test packages are invisible without PYTHONPATH.
    assert "example" not in listed


def test_third_party_plugins_load_and_the_broken_one_is_shown(tmp_path, test_plugins):
    data = plugins_json(tmp_path, pythonpath=test_plugins)
    example = project("esdash-example-plugin")
    assert entry(data, "plugins", "example") == {
        "name": "example",
        "distribution": example["name"],
        "version": example["version"],
        "registered": {"interconnect": ["roce"], "track": ["weblogs"]},
    }
    bad = entry(data, "broken", "broken")
    assert (bad["distribution"], bad["version"]) == (
        "esdash-broken-plugin",
        project("esdash-broken-plugin")["version"],
    )
    assert bad["error"].startswith(
        "RuntimeError: esdash-broken-plugin fails on import on purpose ("
    )
    assert "esdash_broken_plugin.py:" in bad["error"]
    assert [b["name"] for b in data["broken"]] == ["broken"]
    listed = {e["name"]: e for e in data["plugins"]}
    for expected in BUILTIN_PLUGINS:
        assert listed.get(expected["name"]) == expected


def test_text_listing_shows_origin_items_and_broken_plugins(tmp_path, test_plugins):
    result = run(["-m", "esdash", "plugins"], tmp_path, pythonpath=test_plugins)
    assert result.returncode == 0, result.stderr
    version = project("esdash-example-plugin")["version"]
    assert f"example  (esdash-example-plugin {version})" in result.stdout
    assert "    track: weblogs" in result.stdout
    assert "    interconnect: roce" in result.stdout
    broken_section = result.stdout.split("Broken plugins (not loaded):", 1)[1]
    assert "  broken (esdash-broken-plugin): RuntimeError: esdash-broken-plugin fails" in (
        broken_section
    )


def test_disabled_entry_point_is_not_even_imported(tmp_path, test_plugins):
    data = plugins_json(tmp_path, pythonpath=test_plugins, disable="broken")
    assert data["broken"] == []
    assert entry(data, "plugins", "example")["registered"]["track"] == ["weblogs"]


def test_disabling_third_party_and_builtin_plugins(tmp_path, test_plugins):
    data = plugins_json(tmp_path, pythonpath=test_plugins, disable="example,track-mri")
    names = {e["name"] for e in data["plugins"]}
    assert "example" not in names and "track-mri" not in names
    assert {"elasticsearch", "interconnects", "encryption-none"} <= names
    assert [b["name"] for b in data["broken"]] == ["broken"]


def test_example_plugin_own_test_suite_passes(test_plugins):
    """The example's tests run as its author runs them: ``pytest`` in the package directory."""
    package = PACKAGES / "esdash-example-plugin"
    result = run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], package, test_plugins)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b\d+ passed\b", result.stdout), result.stdout
