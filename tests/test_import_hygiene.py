"""Headless esdash never imports the TUI stack.

Ranks on compute nodes run ``esdash`` without a terminal; they must not pay for importing
Textual and plotting.  A fresh interpreter imports the command line, builds its parser, runs
``python -m esdash plugins --json``, loads every plugin, and imports every module of
``esdash`` except ``esdash.tui`` and every built-in plugin module; then none of the TUI
packages may be in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

FORBIDDEN = ("textual", "textual_plotext", "plotext")

SCRIPT = textwrap.dedent(
    """
    import contextlib, importlib, io, json, pkgutil, runpy, sys

    FORBIDDEN = set(sys.argv[1:])
    SKIP = {"esdash.tui", "esdash.__main__"}  # __main__ runs below, as `python -m esdash`

    import esdash.cli
    esdash.cli.build_parser()

    # `python -m esdash plugins --json`: the command line, and every plugin loaded.
    sys.argv = ["esdash", "plugins", "--json"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_module("esdash", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            assert exc.code == 0, f"python -m esdash plugins --json exited with {exc.code}"

    imported = []

    def walk(package):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name in SKIP:
                continue
            module = importlib.import_module(info.name)
            imported.append(info.name)
            if info.ispkg:
                walk(module)

    import esdash_plugins
    walk(esdash)
    walk(esdash_plugins)

    leaked = sorted(
        name for name in sys.modules
        if name.split(".")[0] in FORBIDDEN or name == "esdash.tui" or name.startswith("esdash.tui.")
    )
    print(json.dumps({"imported": imported, "leaked": leaked}))
    """
)


def test_headless_imports_leave_the_tui_stack_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ESDASH_DISABLE_PLUGINS")}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *FORBIDDEN],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # The walk really covered the core, the command line and the built-in plugins.
    for module in (
        "esdash.plugin.manager",
        "esdash.plugin_api",
        "esdash.cli.plugins_cmd",
        "esdash_plugins.backends.elasticsearch",
        "esdash_plugins.interconnects.network",
        "esdash_plugins.encryption.none",
        "esdash_plugins.tracks.mri",
    ):
        assert module in report["imported"], module
    assert not any(name.startswith("esdash.tui") for name in report["imported"])
    assert report["leaked"] == [], (
        f"headless code imported {report['leaked']}; keep TUI imports inside esdash.tui "
        "or inside the functions of `esdash tui`/`esdash watch`"
    )
