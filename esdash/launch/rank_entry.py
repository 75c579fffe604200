"""The command line every rank module answers: ``python -m esdash.<step>.rank RUN_DIR ...``.

:mod:`esdash.launch.mpi` starts the cluster step and the benchmark step alike, one rank
command each with the run directory first; the two rank modules must read it alike and
write under the same umask from their first file on, since a rank's files sit in a run
directory others may read.  This is that command line, written once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from esdash.boundary import private_files


def rank_main(usage: str, argv: list[str] | None, run: Callable[[Path, list[str]], int]) -> int:
    """Run ``run(run_dir, flags)`` with the process's own files private (umask 077).

    ``argv`` is the arguments after the module (``sys.argv[1:]`` when None); without a run
    directory the ``usage`` line goes to stderr and the exit code is 2, as for any command
    called wrongly.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    with private_files():  # everything this rank writes is its owner's alone
        return run(Path(args[0]), args[1:])
