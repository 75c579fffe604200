"""Defaults the command line shows in ``--help``, without importing what they configure.

They are the launcher's own values (:data:`esdash.run.start.DEFAULT_TIMEOUT`,
:data:`esdash.run.stop.STOP_GRACE`); importing those modules to parse the arguments would
load the plugin manager, the session model and the launch helpers for ``esdash --help``
(issue 17).  ``tests/test_cli_lazy_imports.py`` keeps the copies equal to the originals.
"""

from __future__ import annotations

#: Seconds to wait for a healthy cluster.
DEFAULT_TIMEOUT = 300.0

#: Seconds ``cluster down`` waits before the launcher is killed.
STOP_GRACE = 12.0
