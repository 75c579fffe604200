"""esdash: secure Elasticsearch clusters inside job allocations, measured honestly.

The package map is in ``docs/architecture.md``; plugins use :mod:`esdash.plugin_api` only.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
