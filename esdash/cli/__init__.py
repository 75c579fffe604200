"""The ``esdash`` command line.

Each sub-command lives in its own module in this package (``<name>_cmd.py``; modules whose
name starts with ``_`` are shared helpers) and exposes ``register(subparsers)``, which adds
its parser with :func:`esdash.cli._command.add_command` (setting ``func`` to the function
that runs it) and then its own arguments.  Modules keep heavy imports inside their
functions so that ``esdash --help`` and the headless commands stay fast on compute nodes;
nothing here imports Textual.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import select
import sys
from collections.abc import Sequence

from esdash import __version__
from esdash.boundary import private_files
from esdash.errors import EXIT_ABORT, EXIT_FAILURE, EsdashError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="esdash",
        description="Secure search clusters in job allocations, benchmarked and shown live.",
    )
    parser.add_argument("--version", action="version", version=f"esdash {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code.  Output to a reader that went away ends quietly."""
    try:
        try:
            with private_files():  # run files, results, corpus copies: the owner's alone
                return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # another pipe (a child's stdin, a socket): a bug to see, not to hide
        _silence_stdout()
        return EXIT_FAILURE


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except EsdashError as exc:
        print(f"esdash: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        # Ctrl-C, or SIGTERM/SIGHUP where a command handles them (esdash.run.stop.Interrupted,
        # whose message names the signal and the phase)
        print(f"esdash: interrupted{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return EXIT_ABORT


def _stdout_closed() -> bool:
    """Whether whoever read our standard output has gone (``esdash doctor --json | head``).

    A pipe whose reader closed it polls as an error on the write end; a file, a terminal
    or a pipe still read does not.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a non-file (tests' capture)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's final flush of what is still
    buffered does not fail again (and print "Exception ignored ... BrokenPipeError").

    The usual ending of a command whose reader stopped reading (what Python's documentation
    of SIGPIPE recommends): quiet, no traceback.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
