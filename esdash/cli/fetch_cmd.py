"""``esdash fetch elasticsearch``: put a distribution into the cache and print its home."""

from __future__ import annotations

import argparse

from esdash import paths


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fetch",
        help="download a search-engine distribution into the cache",
        description=(
            "Download a distribution with Maven into the esdash cache "
            f"({paths.cache_dir()}) and print its home directory. "
            "Does nothing when it is already there."
        ),
    )
    parser.add_argument("engine", choices=["elasticsearch"], help="what to fetch")
    parser.add_argument(
        "--version",
        default=paths.DEFAULT_ES_VERSION,
        help=f"distribution version (default {paths.DEFAULT_ES_VERSION})",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from esdash.fetch import fetch_elasticsearch

    print(fetch_elasticsearch(args.version))
    return 0
