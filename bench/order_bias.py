#!/usr/bin/env python3
"""Does the order of the query steps change the answer?  Listed vs reverse, with and without
settling and the global warm-up.

    .venv/bin/python bench/order_bias.py [--nodes 3] [--documents 20000] \\
        [--sequence LRRLLR] [--warmup 5s] [--duration 10s] [--warmup-max 5m]

Runs the quickstart's MRI queries (the ones the distribution can run) in listed (L) and
reverse (R) order, in the sequence given (L, R, R, L, L, R: the ABBA pattern cancels a linear
drift of the machine), each time on a **fresh cluster with a fresh ingest**, in two modes
side by side (one run of each mode per sequence slot, so both see the same machine):

* ``settled``: ``after_ingest = "wait"`` and the global warm-up (``warmup_max``), esdash's
  defaults;
* ``raw``: ``after_ingest = "none"`` and no global warm-up (what esdash did before).

Prints per query and mode the median req/s in each order and the ratio listed / reverse.
Target: with settling and the warm-up, every ratio within 0.85-1.15 (the order explains
less than 15 %); the raw table shows what the order did before.  Run as root (nodes run as
``esdash``) on an otherwise idle machine; it takes about 12 x (start + ingest + warm-up +
steps).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import esdash, free_port_block

from esdash.plugin.manager import get_plugins

TARGET = (0.85, 1.15)


def step_file(path: Path, reverse: bool) -> None:
    """The MRI track's steps as a query file (the authors' format), listed or reversed."""
    track = get_plugins().track("mri")
    steps = [
        {
            "name": step.name,
            "search_queries": [{"name": q.name, "body": dict(q.body)} for q in step.queries],
        }
        for step in track.query_steps({})
        if not any("scripting" in q.requires for q in step.queries)  # ES's zip lacks painless
    ]
    if reverse:
        steps.reverse()
    path.write_text(json.dumps(steps, indent=1))


def session(directory: Path, name: str, args: argparse.Namespace, mode: str, order: str) -> Path:
    queries = directory / f"{name}.json"
    step_file(queries, order == "R")
    http, transport = free_port_block(args.nodes), free_port_block(args.nodes)
    settle = (
        f'after_ingest = "wait"\nwarmup_max = "{args.warmup_max}"\n'
        if mode == "settled"
        else 'after_ingest = "none"\nwarmup_max = "0s"\n'
    )
    path = directory / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n'
        f'[cluster]\nnodes = {args.nodes}\nheap = "512m"\nrun_as = "{args.user}"\n'
        f'http_port = {http}\ntransport_port = {transport}\ndata_dir = "data-{name}"\n'
        f'[track]\nname = "mri"\ndocuments = {args.documents}\n'
        f'[benchmark]\nworkers_per_node = 1\nwarmup = "{args.warmup}"\n'
        f'duration = "{args.duration}"\nqueries = "{queries.name}"\n{settle}'
    )
    return path


def run_once(directory: Path, env: dict[str, str], name: str, args, mode: str, order: str):
    out = esdash("run", str(session(directory, name, args, mode, order)), "--fresh", env=env)
    line = next(line for line in out.splitlines() if line.startswith("results: "))
    results = json.loads(Path(line.split(": ", 1)[1]).read_text())
    rates = {}
    for step in results["steps"]:
        for query, data in step["queries"].items():
            rates[query] = data["throughput"]["requests_per_s"]
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--documents", type=int, default=20000)
    parser.add_argument("--sequence", default="LRRLLR")
    parser.add_argument("--warmup", default="5s")
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--warmup-max", default="5m")
    parser.add_argument("--user", default="esdash")
    parser.add_argument("--modes", default="settled,raw")
    args = parser.parse_args()
    if set(args.sequence) - {"L", "R"} or not {"L", "R"} <= set(args.sequence):
        sys.exit("--sequence: a string of L and R with both, e.g. LRRLLR")
    modes = args.modes.split(",")
    found: dict[str, dict[str, dict[str, list[float]]]] = {
        mode: {"L": {}, "R": {}} for mode in modes
    }
    with tempfile.TemporaryDirectory(prefix="order-bias-") as tmp:
        directory = Path(tmp)
        os.chmod(directory, 0o755)  # the nodes' user reads the data root beneath it
        env = {**os.environ, "ESDASH_RUNS": str(directory / "runs")}
        for k, order in enumerate(args.sequence):
            for mode in modes:
                name = f"ob{k}{order}{mode[0]}"
                print(f"run {k + 1}/{len(args.sequence)}: {order} {mode}", flush=True)
                for query, rate in run_once(directory, env, name, args, mode, order).items():
                    if rate is not None:
                        found[mode][order].setdefault(query, []).append(rate)
    worst_settled = 0.0
    for mode in modes:
        print(f"\n{mode}: median req/s per order, ratio listed / reverse")
        print(f"  {'query':<22} {'listed':>9} {'reverse':>9} {'ratio':>7}")
        for query in found[mode]["L"]:
            listed = statistics.median(found[mode]["L"][query])
            reverse = statistics.median(found[mode]["R"].get(query) or [float("nan")])
            ratio = listed / reverse if reverse else float("nan")
            if mode == "settled":
                worst_settled = max(worst_settled, abs(ratio - 1))
            inside = TARGET[0] <= ratio <= TARGET[1]
            print(
                f"  {query:<22} {listed:>9.1f} {reverse:>9.1f} {ratio:>7.3f}"
                + ("" if inside else "  outside 0.85-1.15")
            )
    if "settled" in modes:
        print(f"\nsettled: largest |ratio - 1| = {worst_settled:.3f} (target <= 0.15)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
