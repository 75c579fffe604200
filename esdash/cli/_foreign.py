"""``--allow-foreign``: act, as root, on a run directory that another user controls.

As root, ``cluster status``/``down``, ``report``, ``watch`` and ``run --cluster`` refuse a run
(or runs) directory that another user owns or can rewrite, since its ``run.json`` names the
processes root signals and the job it cancels (:func:`esdash.boundary.require_trusted_path`).
This flag is the explicit way past that, for a directory you have checked.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from esdash.boundary import FOREIGN_FLAG, require_trusted_path


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FOREIGN_FLAG,
        dest="allow_foreign",
        action="store_true",
        help="as root, act on a run directory another user owns or can rewrite (refused "
        "otherwise: it names the processes root would signal)",
    )


def require_trusted(path: Path, what: str, args: argparse.Namespace) -> None:
    """Refuse ``path`` as root unless it is root's alone or the flag was given."""
    if getattr(args, "allow_foreign", False) or not path.exists():
        return  # a missing path is the command's own error to report
    require_trusted_path(path, what, FOREIGN_FLAG)
