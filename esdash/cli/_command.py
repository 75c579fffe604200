"""How a sub-command joins ``esdash``: its parser, its lines in ``--help``, its function.

Every ``<name>_cmd`` module added a parser with a one-line help and a description and set
``func`` to what runs it; :func:`add_command` does the three at once, so that a module's
``register`` holds only its own arguments.  argparse re-flows a description, so a module
may write its description as a paragraph (a triple-quoted string) rather than as joined
string pieces: the ``--help`` it prints is the same.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TypeAlias

#: What :func:`esdash.cli.build_parser` passes to each module's ``register``.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: A sub-command's body: the parsed arguments in, the exit code out.
Runner: TypeAlias = Callable[[argparse.Namespace], int]


def add_command(
    subparsers: Subcommands,
    name: str,
    run: Runner,
    summary: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """The parser of sub-command ``name``, listed with ``summary``, running ``run``."""
    parser = subparsers.add_parser(name, help=summary, description=description)
    parser.set_defaults(func=run)
    return parser


#: Sphinx roles (``:mod:`esdash.report```) and double backticks, as a docstring writes them.
_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def doc_body(doc: str | None) -> str | None:
    """A module docstring past its first paragraph: the description of a command whose
    module says in that first line what it is and then, for its users, what it does.

    Its markup is for the source's readers: in ``--help`` a literal is one backtick pair, as
    the README writes commands, and a reference to a module is its plain name."""
    if not doc:
        return None
    body = doc.split("\n\n", 1)[1]
    return _LITERAL.sub(r"`\1`", _ROLE.sub(r"\1", body))


def add_session(parser: argparse.ArgumentParser) -> None:
    """The session file, the first argument of every command that runs or checks one."""
    parser.add_argument("session", metavar="SESSION", help="session file")


def add_seconds(parser: argparse.ArgumentParser, flag: str, default: float, what: str) -> None:
    """An option in seconds (``--timeout``, ``--grace``); ``--help`` shows its default."""
    parser.add_argument(flag, type=float, default=default, help=f"{what} (default %(default)s)")
