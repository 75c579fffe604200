"""Where esdash keeps things on disk: the cache of distributions, and run directories.

The cache must be readable by the unprivileged user the search engine runs as.  Root's home is
private (mode 0700), so when esdash runs as root the default cache is ``/var/cache/esdash``;
otherwise it is ``$XDG_CACHE_HOME/esdash`` (``~/.cache/esdash``).  ``ESDASH_CACHE`` overrides
both, e.g. to put distributions on a shared file system that every compute node sees.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("ESDASH_CACHE"):
        return Path(os.environ["ESDASH_CACHE"]).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/esdash")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "esdash"


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name.rsplit("-", 1)[-1]))


def cached_distributions(engine: str) -> list[Path]:
    """Distributions unpacked in the cache, newest version first."""
    root = cache_dir()
    if not root.is_dir():
        return []
    found = [p for p in root.glob(f"{engine}-*") if p.is_dir() and (p / "bin").is_dir()]
    return sorted(found, key=_version_key, reverse=True)


def default_distribution(engine: str) -> Path | None:
    """The distribution a session without ``cluster.home`` uses: the newest one in the cache."""
    found = cached_distributions(engine)
    return found[0] if found else None


def runs_dir() -> Path:
    """Where run directories are created: ``ESDASH_RUNS`` or ``./runs``."""
    return Path(os.environ.get("ESDASH_RUNS") or "runs").resolve()
