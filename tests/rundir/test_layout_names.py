"""Only :mod:`esdash.rundir` spells the file names of a run or campaign directory.

Every name comes from ``esdash.rundir.layout.NAMES``; every string literal of the project's
code outside ``esdash/rundir/`` (plain strings, bytes and the constant parts of f-strings, in
``esdash/``, ``plugins/`` and ``bench/``) is searched for them.  A name with a dot or a dash
(``results.json``, ``slurm-%j.out``) fails wherever it stands as a word; a bare directory or
file word (``nodes``, ``stop``) fails as a path component next to a slash (``f"{run}/stop"``),
since as a plain word it is also a JSON key or an action name; the generic words ``config``,
``logs``, ``tmp`` and ``data`` are other programs' directories too and are not searched.
Docstrings are prose for people and are not searched.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from esdash.rundir.layout import NAMES

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("esdash", "plugins", "bench")
OWNER = ROOT / "esdash" / "rundir"
#: Directory words other programs use for their own files too (a distribution's config/
#: and logs/, /tmp, Rally's data/): not searched alone, only inside the layout's own paths.
GENERIC = {"config", "logs", "tmp", "data"}


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    found = []
    for name in NAMES:
        if name in GENERIC:
            continue
        word = re.escape(name)
        if "." in name or "-" in name:
            found.append((name, re.compile(rf"(?<![\w.%-]){word}(?!\.\w)(?![\w%-])")))
        else:
            found.append((name, re.compile(rf"(?:/{word}(?![\w.-])|(?<![\w.-]){word}/)")))
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip:
            if isinstance(node.value, str):
                found.append((node.lineno, node.value))
            elif isinstance(node.value, bytes):
                found.append((node.lineno, node.value.decode("latin-1")))
    return found


def _sources() -> list[Path]:
    files = []
    for top in SEARCHED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if OWNER in path.parents or "build" in path.parts:
                continue
            files.append(path)
    return files


def test_no_module_outside_rundir_spells_a_run_directory_file_name():
    patterns = _patterns()
    offenders = []
    for path in _sources():
        for line, text in _literals(path):
            for name, pattern in patterns:
                if pattern.search(text):
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {name!r} in {text!r}")
    assert offenders == [], "use esdash.rundir.layout instead:\n" + "\n".join(offenders)


def test_the_search_finds_what_it_must():
    """The patterns catch a spelled name in the forms code uses, and leave plain words."""
    patterns = _patterns()

    def caught(text: str) -> bool:
        return any(pattern.search(text) for _name, pattern in patterns)

    assert caught("results.json")
    assert caught("/tmp/run/stream.jsonl")
    assert caught("{path}/stop")  # the constant part of f"{path}/stop"
    assert caught("nodes/")
    assert caught("slurm-%j.out")
    assert not caught("stop")  # an action name
    assert not caught("nodes")  # a JSON key
    assert not caught("results.json.bak")  # another file
    assert len(_sources()) > 50


def test_every_name_is_spelled_once_in_the_layout():
    assert len(NAMES) == len(set(NAMES))
    layout = (OWNER / "layout.py").read_text()
    for name in set(NAMES):
        assert layout.count(f'"{name}"') == 1, name
