"""``esdash fetch BACKEND``: put a distribution into the cache and print its home."""

from __future__ import annotations

import argparse

from esdash import paths


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fetch",
        help="download a search-engine distribution into the cache",
        description=(
            "Download the backend's distribution (with Maven) into the esdash cache "
            f"({paths.cache_dir()}) and print its home directory. "
            "Does nothing when it is already there."
        ),
    )
    parser.add_argument(
        "backend", help="the backend whose engine to fetch, e.g. elasticsearch (esdash plugins)"
    )
    parser.add_argument(
        "--version", default=None, help="distribution version (default: the backend's own)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from esdash.host.fetch import fetch

    print(fetch(args.backend, args.version))
    return 0
