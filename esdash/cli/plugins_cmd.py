"""``esdash plugins``: what is loaded, what each plugin registered, and what is broken."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from esdash.cli._command import Subcommands, add_command

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet


def register(subparsers: Subcommands) -> None:
    summary = "list plugins, what they register, broken ones"
    parser = add_command(
        subparsers,
        "plugins",
        run,
        summary,
        "Every installed plugin (esdash's own and third-party packages' entry points), what "
        "each registered (backends, encryption modes, tracks, interconnects, checks, hooks), "
        "and the broken ones with their error. Exit code 0.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def as_dict(plugin_set: PluginSet) -> dict[str, Any]:
    return {
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "registered": {kind: sorted(names) for kind, names in info.registered.items()},
            }
            for info in sorted(plugin_set.plugins.values(), key=lambda i: i.name)
        ],
        "broken": [
            {
                "name": b.name,
                "distribution": b.distribution,
                "version": b.version,
                "error": b.error,
            }
            for b in plugin_set.broken
        ],
    }


def run(args: argparse.Namespace) -> int:
    from esdash.plugin.manager import KINDS, get_plugins

    plugin_set = get_plugins()
    data = as_dict(plugin_set)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    for entry in data["plugins"]:
        origin = f"{entry['distribution'] or '-'} {entry['version'] or ''}".strip()
        print(f"{entry['name']}  ({origin})")
        for kind in KINDS:
            names = entry["registered"].get(kind)
            if names:
                print(f"    {kind}: {', '.join(names)}")
    if data["broken"]:
        print()
        print("Broken plugins (not loaded):")
        for entry in data["broken"]:
            print(f"  {entry['name']} ({entry['distribution'] or '-'}): {entry['error']}")
    return 0
