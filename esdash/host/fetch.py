"""``esdash fetch BACKEND``: the backend's distribution, in esdash's cache.

The backend knows where its engine comes from and how to unpack it
(:meth:`~esdash.plugin.api.Backend.fetch`); this module picks the version and the cache
(:func:`esdash.paths.cache_dir`, readable by the node user).  Fetching is idempotent: a
distribution that is already unpacked is returned at once, without a download.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from esdash.errors import BadInput
from esdash.paths import cache_dir
from esdash.plugin.manager import PluginSet, get_plugins


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fetch(
    backend_name: str,
    version: str | None = None,
    cache: Path | None = None,
    say: Callable[[str], None] = _say,
    plugins: PluginSet | None = None,
) -> Path:
    """The home of the backend's distribution ``version`` (default: the backend's own)."""
    backend = (plugins or get_plugins()).backend(backend_name)
    version = version or backend.default_version
    if version is None:
        raise BadInput(f"backend {backend_name} has no default version; pass --version")
    return backend.fetch(version, cache if cache is not None else cache_dir(), say)
