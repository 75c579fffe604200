"""Every script of the lab (``bench/``) still finds what it imports, and still starts.

The lab's scripts measure esdash from the outside and import its internals (the recorder,
the accumulator, corpus slices, ABE internals) -- often inside a function, where a module
moved by a refactor shows only when that measurement is next run, days later.  So every
``esdash``/``esdash_plugins`` import of every script, at any depth, is resolved here: the
module imports and each imported name exists.  And every script with a command line
answers ``--help`` (it parses its arguments before it starts anything).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p for p in LAB.glob("*.py") if not p.name.startswith("_"))


def imports_of(script: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every esdash import in ``script``, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in ("esdash", "esdash_plugins"):
                found.append((node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            found += [
                (a.name, ())
                for a in node.names
                if a.name.split(".")[0] in ("esdash", "esdash_plugins")
            ]
    return found


def test_the_lab_has_its_scripts() -> None:
    assert len(SCRIPTS) >= 15, SCRIPTS  # a glob that finds nothing would pass everything


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_every_import_of_a_script_resolves(script: Path) -> None:
    missing = []
    for module, names in imports_of(script):
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{module}: {exc}")
            continue
        for name in names:
            if not hasattr(loaded, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{module}.{name}")
    assert missing == [], f"{script.name} imports what is gone: {missing}"


@pytest.mark.parametrize(
    "script",
    [p for p in SCRIPTS if "argparse" in p.read_text()],
    ids=lambda p: p.stem,
)
def test_every_script_with_a_command_line_answers_help(script: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
