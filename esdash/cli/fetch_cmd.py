"""``esdash fetch BACKEND``: put a distribution into the cache and print its home."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from typing import TYPE_CHECKING

from esdash import paths
from esdash.cli._command import Subcommands, add_command

if TYPE_CHECKING:
    from esdash.plugin.fetching import ArtifactNotFound


def register(subparsers: Subcommands) -> None:
    description = f"""
    Download the backend's distribution (with Maven) into the esdash cache
    ({paths.cache_dir()}) and print its home directory. Does nothing when it is already there.
    """
    summary = "download a search-engine distribution into the cache"
    parser = add_command(subparsers, "fetch", run, summary, description)
    parser.add_argument(
        "backend", help="the backend whose engine to fetch, e.g. elasticsearch (esdash plugins)"
    )
    parser.add_argument(
        "--version", default=None, help="distribution version (default: the backend's own)"
    )
    parser.add_argument(
        "--allow-missing-checksums",
        action="store_true",
        help="install a file whose repository publishes no checksum, unverified, with a "
        "warning naming it (a checksum that does not match is refused all the same)",
    )


def run(args: argparse.Namespace) -> int:
    """Fetch, with a line per step and a sign of life every 2 s on standard error.

    Each message of the backend (``downloading ...``, ``unpacking ...``) begins a progress
    phase; the home alone goes to standard output.  A version the repository does not
    have is one line naming the backend, the version and the versions there are (exit 2).
    """
    from esdash.errors import BadInput
    from esdash.host.fetch import fetch
    from esdash.plugin.fetching import ArtifactNotFound, missing_checksums_allowed
    from esdash.progress import for_stderr

    lines = for_stderr()
    unverified = getattr(args, "allow_missing_checksums", False)
    allowed = missing_checksums_allowed() if unverified else nullcontext()
    try:
        with allowed:
            home = fetch(args.backend, args.version, say=lines.switch)
    except ArtifactNotFound as exc:
        lines.close(failed=True)
        if exc.version != args.version:
            raise  # a part the backend needs, not the version asked for: Maven's own words
        raise BadInput(no_such_version(args.backend, exc)) from None
    except BaseException:
        lines.close(failed=True)
        raise
    lines.close()
    print(home)
    return 0


def no_such_version(backend: str, exc: ArtifactNotFound) -> str:
    """``no such version: elasticsearch 99.0.0 (available: 8.19.21, ...)``."""
    available = exc.available
    if not available:
        return f"no such version: {backend} {exc.version} in {exc.repository}"
    from esdash.plugin.fetching import shown_versions

    return (
        f"no such version: {backend} {exc.version} "
        f"(available: {shown_versions(available, exc.version)}); pass one with --version"
    )
