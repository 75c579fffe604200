"""Loading the plugins imports no search client, numerics or certificate code (issue 17).

Every command that loads the plugin manager (``esdash plugins``, ``session check``,
``doctor``, the launcher) registers every built-in backend, encryption mode, interconnect
and track.  Registration used to import elasticsearch-py, opensearch-py (with urllib3),
numpy and HdrHistogram, and ``cryptography``, which kept ``esdash session check`` over a
second before its first line.  The backends now import their control clients when one is
asked for; this test holds them to it in a fresh interpreter, and checks that the typed
contract still works: asking a backend for its control client does load the client.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

#: Modules registration must not import (jinja2 is still imported by the Rally track's
#: request templates, so it is not listed).
HEAVY = (
    "textual",
    "matplotlib",
    "numpy",
    "hdrh",
    "elasticsearch",
    "elastic_transport",
    "opensearchpy",
    "urllib3",
    "cryptography.x509",
    "esdash.rundir.hdr",
)

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, json, sys

    heavy = json.loads(sys.argv[1])
    import esdash.cli
    from esdash.plugin.control import ControlClient
    from esdash.plugin.manager import get_plugins

    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = esdash.cli.main(["plugins", "--json"])
    assert code == 0, code
    listed = json.loads(out.getvalue())
    plugins = get_plugins()
    report = {
        "listed": sorted(p["name"] for p in listed["plugins"]),
        "broken": [b["name"] for b in listed["broken"]],
        "after_listing": sorted(m for m in heavy if m in sys.modules),
    }
    clients = {}
    for name in ("elasticsearch", "opensearch"):
        client = plugins.backend(name).control_client(["127.0.0.1:9"], None, timeout=1.0)
        clients[name] = isinstance(client, ControlClient)
    report["clients"] = clients
    report["after_clients"] = sorted(m for m in heavy if m in sys.modules)
    print(json.dumps(report))
    """
)


def test_listing_plugins_imports_no_heavy_module_until_a_client_is_asked_for() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["broken"] == []
    assert {"elasticsearch", "opensearch", "track-rally", "encryption-abe"} <= set(report["listed"])
    assert report["after_listing"] == [], report
    # the contract is intact: a control client is still there, loaded when asked for
    assert report["clients"] == {"elasticsearch": True, "opensearch": True}
    assert {"elasticsearch", "opensearchpy"} <= set(report["after_clients"])
