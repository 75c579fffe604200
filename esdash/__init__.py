"""esdash: secure Elasticsearch clusters inside job allocations, measured honestly.

Plugins write ``@esdash.hookimpl`` on functions named after the hooks in
:mod:`esdash.hookspecs`.
"""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

#: Marker for hook implementations in built-in and third-party plugins.
hookimpl = pluggy.HookimplMarker("esdash")

__all__ = ["__version__", "hookimpl"]
