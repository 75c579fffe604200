"""The three example packages of docs/plugins.md, installed through entry points, at work.

``tests/plugin_packages/`` holds a third-party backend (``plain-es``), a track (``weblogs``,
with an interconnect) and an encryption mode (``pseudonyms``), each written against
``esdash.plugin_api`` alone and installed by ``scripts/provision`` into
``.venv/test-plugins``.  Here esdash finds them the way it finds any installed package (that
directory on ``PYTHONPATH``): a cluster of the third-party backend comes up, the third-party
track runs on it with the third-party encryption mode, the backend's own pre-flight check
refuses what it cannot do, and the guide's code is the packages' code, verbatim.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from support.cli import esdash, java_pids_under, run_dir_from, write_session

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugins.md"
PACKAGES = ROOT / "tests" / "plugin_packages"
TEST_PLUGINS = ROOT / ".venv" / "test-plugins"
EXAMPLES = {
    "backend": PACKAGES / "esdash-example-backend" / "esdash_example_backend.py",
    "track": PACKAGES / "esdash-example-plugin" / "esdash_example_plugin.py",
    "encryption mode": PACKAGES / "esdash-example-encryption" / "esdash_example_encryption.py",
}


def installed_env() -> dict[str, str]:
    if not (TEST_PLUGINS / "esdash_example_backend.py").is_file():
        pytest.fail(f"{TEST_PLUGINS} lacks the examples: run scripts/provision", pytrace=False)
    return {**os.environ, "PYTHONPATH": str(TEST_PLUGINS)}


# ------------------------------------------------------------------------------ the guide


def guide_excerpts() -> list[tuple[str, str]]:
    """(path, code) of every code block the guide marks with ``<!-- from: PATH -->``."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.findall(r"<!-- from: (\S+) -->\n```(?:python|toml)\n(.*?)```", text, re.DOTALL)
    return [(path, code) for path, code in found]


def test_the_guide_shows_the_examples_code_verbatim() -> None:
    excerpts = guide_excerpts()
    shown = {path for path, _ in excerpts}
    for kind, path in EXAMPLES.items():
        assert str(path.relative_to(ROOT)) in shown, f"docs/plugins.md shows no {kind} code"
    for path, code in excerpts:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert code in source, f"docs/plugins.md: the block from {path} is not in that file"


def test_the_examples_import_only_the_plugin_api() -> None:
    for path in EXAMPLES.values():
        imported = re.findall(r"^\s*(?:from|import) (esdash\S*)", path.read_text(), re.M)
        assert set(imported) == {"esdash.plugin_api"}, (path, imported)


# ------------------------------------------------------------------------- at work


def test_the_backends_own_check_refuses_security(tmp_path: Path) -> None:
    session = write_session(tmp_path, "secure-plain", 1, extra_cluster='backend = "plain-es"')
    result = esdash("session", "check", str(session), env_runs=tmp_path, env=installed_env(),
                    check=False)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cluster.security: plain-es has no security; set it to false" in result.stderr


@pytest.mark.es
@pytest.mark.mpi
def test_third_party_backend_track_and_encryption_together(shared_tmp: Path, es_home: Path) -> None:
    """A plain-es cluster, the weblogs track, its ``method`` field pseudonymised."""
    env = installed_env()
    runs = shared_tmp / "runs"
    key = shared_tmp / "pseudonyms.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    cluster = f'backend = "plain-es"\nhome = "{es_home}"'
    session = write_session(shared_tmp, "plainup", 1, security=False, extra_cluster=cluster)
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    try:
        tables = (
            f'[encryption]\nmode = "pseudonyms"\nkey_file = "{key}"\nfields = ["method"]\n'
            '[benchmark]\nworkers_per_node = 1\nwarmup = "1s"\nduration = "2s"\n'
        )
        bench = write_session(
            shared_tmp,
            "plainbench",
            1,
            security=False,
            extra_cluster=cluster,
            track='name = "weblogs"\ndocuments = 2000',
            tables=tables,
        )
        result = esdash("run", str(bench), "--cluster", str(run), env_runs=runs, env=env)
        assert "encryption pseudonyms" in result.stdout
        results = json.loads(next(runs.glob("plainbench-*/results.json")).read_text())
        assert results["status"] == "ok" and results["ingest"]["docs_sent"] == 2000
        for step in results["steps"]:
            for name, query in step["queries"].items():
                assert query["requests"] > 0 and query["errors"] == {}, name
        # what the cluster holds: pseudonyms, as many per value as the plaintext had
        sys.path.insert(0, str(TEST_PLUGINS))
        try:
            import esdash_example_encryption
            import esdash_example_plugin
        finally:
            sys.path.remove(str(TEST_PLUGINS))
        docs = esdash_example_plugin.WeblogsTrack().documents({"documents": 2000})
        methods = Counter(doc["method"] for doc in docs)
        codec = esdash_example_encryption.PseudonymCodec(str(key), ("method",))
        endpoint = json.loads((run / "topology.json").read_text())["nodes"][0]
        base = f"http://{endpoint['address']}:{endpoint['http_port']}/weblogs"
        for method, expected in methods.items():
            body = json.dumps(codec.encode_query({"query": {"term": {"method": method}}}))
            request = urllib.request.Request(
                f"{base}/_count", body.encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.load(response)["count"] == expected, method
        with urllib.request.urlopen(f"{base}/_search?q=method:{next(iter(methods))}") as found:
            assert json.load(found)["hits"]["total"]["value"] == 0  # no plaintext stored
    finally:
        esdash("cluster", "down", str(run), env_runs=runs, env=env)
    assert java_pids_under(run) == []
