"""Help that helps: every command's ``--help`` says what it does and what each argument is.

A user reads ``esdash COMMAND --help`` before the README: every command has a description,
every positional argument a line, no default says "see below" without anything below, and
no docstring markup (double backticks, ``:mod:`` roles) reaches the terminal.  ``plan`` names
every reason kind a plan can print, from the list the plan builder uses.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from esdash.cli import build_parser
from esdash.cli._command import doc_body
from esdash.plugin.planning import REASON_KINDS

MARKUP = re.compile(r"``|:(?:mod|func|class|meth|attr|data|exc):`")


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command parser (``cluster up``, ``plan``...), not the groups above them."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for group in groups:
        for name, sub in group.choices.items():
            yield from commands(sub, (*path, name))
    if path and not groups:
        yield " ".join(path), parser


ALL = dict(commands(build_parser()))


def test_every_command_is_checked() -> None:
    assert {"run", "cluster up", "cluster status", "session check", "plan", "report"} <= set(ALL)


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_help_describes_the_command_and_every_argument(name: str) -> None:
    parser = ALL[name]
    assert parser.description, f"esdash {name} --help has no description"
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        label = "/".join(action.option_strings) or action.dest
        assert action.help, f"esdash {name}: {label} has no help"
        assert "see below" not in action.help, f"esdash {name}: {label}: {action.help}"
    text = parser.format_help()
    assert not MARKUP.search(text), f"esdash {name} --help shows markup: {MARKUP.search(text)}"


def test_plan_help_names_every_reason_kind() -> None:
    text = " ".join(ALL["plan"].format_help().split())
    missing = [kind for kind in REASON_KINDS if kind not in text]
    assert not missing, missing


def test_a_docstring_loses_its_markup_in_help() -> None:
    doc = (
        "title\n\nuse ``--option key=value``; the code is :mod:`esdash.report.x` and\n:func:`~a.b`"
    )
    assert doc_body(doc) == "use `--option key=value`; the code is esdash.report.x and\na.b"
    assert doc_body(None) is None
