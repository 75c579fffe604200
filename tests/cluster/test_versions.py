"""Other Elasticsearch lines: 7.17 and 9.x integ-test-zips fetched through `esdash fetch`.

Each comes up as a secure single node with `esdash cluster up` and answers the credentials
esdash generated.  9.x needs Java >= 21; this machine kind ships a Temurin JDK beside
Debian's 17, found under /usr/lib/jvm.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest
from support import prereqs
from support.cli import ESDASH, esdash, java_pids_under, run_dir_from, write_session

from esdash.plugin.java import java_version

pytestmark = [pytest.mark.es, pytest.mark.mpi]


def jdk_at_least(major: int) -> Path | None:
    for home in sorted(Path("/usr/lib/jvm").glob("*")):
        java = home / "bin" / "java"
        if java.exists() and not home.is_symlink():
            try:
                if java_version(java).major >= major:
                    return home
            except Exception:  # not a usable JDK: look at the next one
                continue
    return None


@pytest.mark.parametrize(("version", "min_java"), [("7.17.29", 11), ("9.2.0", 21)])
def test_other_versions_come_up_secure(version: str, min_java: int, shared_tmp: Path) -> None:
    java = jdk_at_least(min_java)
    if java is None:
        prereqs.unavailable(f"no JDK >= {min_java} under /usr/lib/jvm for Elasticsearch {version}")
    env = {**os.environ, "ESDASH_CACHE": str(shared_tmp / "cache"), "ES_JAVA_HOME": str(java)}
    (shared_tmp / "cache").mkdir(exist_ok=True)
    # This machine's Maven registry serves the 9.x integ-test-zips without their .sha1 (the
    # 7.x and 8.x ones with it): accepted unverified, as a user of such a mirror would.
    unverified = ["--allow-missing-checksums"] if version.startswith("9.") else []
    fetched = subprocess.run(
        [*ESDASH, "fetch", "elasticsearch", "--version", version, *unverified],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert fetched.returncode == 0, fetched.stderr
    home = Path(fetched.stdout.strip().splitlines()[-1])
    assert home.name == f"elasticsearch-{version}"
    name = "v" + re.sub(r"\D", "", version)
    session = write_session(shared_tmp, name, 1, extra_cluster=f'home = "{home}"')
    runs = shared_tmp / "runs"
    run = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    try:
        creds = json.loads((run / "credentials.json").read_text())
        node = json.loads((run / "topology.json").read_text())["nodes"][0]
        request = urllib.request.Request(
            f"https://{node['address']}:{node['http_port']}/_nodes/_local",
            headers={
                "Authorization": "Basic "
                + b64encode(f"{creds['username']}:{creds['password']}".encode()).decode()
            },
        )
        context = ssl.create_default_context(cafile=creds["ca_certs"])
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            nodes = json.loads(response.read())["nodes"]
        assert [n["version"] for n in nodes.values()] == [version]
    finally:
        esdash("cluster", "down", str(run), env_runs=runs, env=env)
    assert java_pids_under(run) == []
