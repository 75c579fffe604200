#!/usr/bin/env python3
"""Does the order of the query steps change the answer?  Listed vs reverse, with and without
settling and the global warm-up.

    .venv/bin/python bench/order_bias.py [--nodes 3] [--documents 20000] \\
        [--sequence LRRLLR] [--warmup 5s] [--duration 10s] [--warmup-max 5m]

Runs the quickstart's MRI queries (the ones the distribution can run) in listed (L) and
reverse (R) order, in the sequence given (L, R, R, L, L, R: the ABBA pattern cancels a linear
drift of the machine), each time on a **fresh cluster with a fresh ingest**, in two modes
side by side (one run of each mode per sequence slot, so both see the same machine):

* ``settled``: esdash's defaults for ``after_ingest`` (or ``--after-ingest``), the global
  warm-up (``warmup_max``) and the step order (``--order``, default esdash's: ``auto``, i.e.
  mirrored rounds: the steps as listed, then reversed, each query's figure the median of
  its two rounds);
* ``raw``: ``after_ingest = "none"``, no global warm-up, one round as listed (what esdash
  did before).

"Listed" and "reverse" are the order of the query file; within a run a mirrored session
runs that order and then its reverse.  Prints per query and mode the median req/s in each
order and the ratio listed / reverse, then the order's own effect fitted over every round
of every run (one position later multiplies a query's req/s by what factor, with its 95 %
interval, after taking out each query's cost and each fresh cluster's level) and the noise
of one query's number in one round that no order explains: a ratio of two runs per order
is within about twice that of 1 with no order effect at all.
It also prints each run's level (the geometric mean req/s of its queries) and a second
ratio, "within", of each query's req/s divided by its run's level: a fresh cluster's
overall speed varied by about 10 % from one cluster to the next here, moves every query of
the run alike, and is no order's doing, yet with two runs per order it alone can push the
plain ratio past 15 %.
Target: with settling and the warm-up, every ratio within 0.85-1.15 (the order explains
less than 15 %); the raw table shows what the order did before.  Run as root (nodes run as
``esdash``) on an otherwise idle machine; it takes about 12 x (start + ingest + warm-up +
steps).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import esdash, free_port_block

from esdash.plugin.manager import get_plugins
from esdash.stats.student import quantile

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
    if mode == "settled":  # esdash's defaults, unless --after-ingest or --order try others
        chosen = f'after_ingest = "{args.after_ingest}"\n' if args.after_ingest else ""
        chosen += f'order = "{args.order}"\n' if args.order else ""
        settle = f'{chosen}warmup_max = "{args.warmup_max}"\n'
    else:
        settle = 'after_ingest = "none"\nwarmup_max = "0s"\norder = "listed"\n'
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
    """One fresh run: each query's figure (its median over the rounds when there are
    several, as esdash reports it) and every measured step in the order it ran."""
    out = esdash("run", str(session(directory, name, args, mode, order)), "--fresh", env=env)
    line = next(line for line in out.splitlines() if line.startswith("results: "))
    results = json.loads(Path(line.split(": ", 1)[1]).read_text())
    ran = []
    for step in sorted(results["steps"], key=lambda s: (s["round"], s["position"])):
        if step["position"] < 0:
            continue  # not run
        for query, data in step["queries"].items():
            if data["throughput"]["requests_per_s"]:
                ran.append((query, data["throughput"]["requests_per_s"]))
    rounds = results.get("rounds") or {}
    if rounds.get("repetitions", 1) > 1:
        rates = {q["query"]: q["median"] for q in rounds["queries"] if q["median"]}
    else:
        rates = dict(ran)
    return rates, ran


def position_effect(runs: list[list[tuple[str, float]]]) -> tuple[float, float, float, float]:
    """What one position later in the order does to a query, separated from the noise.

    Least squares on ``ln(rate) = query + run + beta * position`` over every run (each run's
    queries in the order they ran): the query terms take out what a query costs, the run
    terms what one fresh cluster does to all its queries at once, so ``beta`` is the order's
    own effect.  Returns ``exp(beta)`` with its 95 % interval (Student's t) and the residual
    standard deviation: the noise of one query's number in one run that no order explains.
    """
    import numpy as np

    queries = sorted({query for run in runs for query, _ in run})
    rows, targets = [], []
    for r, run in enumerate(runs):
        for position, (query, rate) in enumerate(run):
            row = [0.0] * (len(queries) + len(runs))  # query terms, run terms (first dropped)
            row[queries.index(query)] = 1.0
            if r:
                row[len(queries) + r - 1] = 1.0
            row[-1] = float(position)
            rows.append(row)
            targets.append(math.log(rate))
    x, y = np.array(rows), np.array(targets)
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(y) - rank
    if dof < 1:
        return math.nan, math.nan, math.nan, math.nan
    residual = y - x @ coef
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.pinv(x.T @ x)
    beta, se = float(coef[-1]), math.sqrt(float(covariance[-1, -1]))
    half = quantile(0.975, dof) * se
    return math.exp(beta), math.exp(beta - half), math.exp(beta + half), math.sqrt(sigma2)


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
    parser.add_argument(
        "--after-ingest", default="", help="settled mode's after_ingest (default: esdash's)"
    )
    parser.add_argument("--order", default="", help="settled mode's order (default: esdash's)")
    args = parser.parse_args()
    if set(args.sequence) - {"L", "R"} or not {"L", "R"} <= set(args.sequence):
        sys.exit("--sequence: a string of L and R with both, e.g. LRRLLR")
    modes = args.modes.split(",")
    found: dict[str, dict[str, dict[str, list[float]]]] = {
        mode: {"L": {}, "R": {}} for mode in modes
    }
    sequences: dict[str, list[list[tuple[str, float]]]] = {mode: [] for mode in modes}
    # each query relative to its run's level: a fresh cluster's overall speed (which varied
    # by about 10 % between clusters here) is no order's doing: every run has the same
    # positions, only their queries change places
    relative: dict[str, dict[str, dict[str, list[float]]]] = {
        mode: {"L": {}, "R": {}} for mode in modes
    }
    levels: dict[str, list[tuple[str, float]]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="order-bias-") as tmp:
        directory = Path(tmp)
        os.chmod(directory, 0o755)  # the nodes' user reads the data root beneath it
        env = {**os.environ, "ESDASH_RUNS": str(directory / "runs")}
        for k, order in enumerate(args.sequence):
            for mode in modes:
                name = f"ob{k}{order}{mode[0]}"
                print(f"run {k + 1}/{len(args.sequence)}: {order} {mode}", flush=True)
                rates, ran = run_once(directory, env, name, args, mode, order)
                print("  " + ", ".join(f"{q} {r:.1f}" for q, r in rates.items() if r), flush=True)
                level = math.exp(statistics.mean(math.log(r) for r in rates.values() if r))
                levels[mode].append((order, level))
                for query, rate in rates.items():
                    if rate is not None:
                        found[mode][order].setdefault(query, []).append(rate)
                        relative[mode][order].setdefault(query, []).append(rate / level)
                sequences[mode].append(ran)
    worst = {"ratio": 0.0, "within": 0.0}
    for mode in modes:
        print(f"\n{mode}: each fresh cluster's level (geometric mean req/s of its queries)")
        print("  " + ", ".join(f"{o} {level:.1f}" for o, level in levels[mode]))
        print(
            f"{mode}: median req/s per order, ratio listed / reverse; 'within': the same ratio "
            "of each query's req/s divided by its run's level"
        )
        print(f"  {'query':<22} {'listed':>9} {'reverse':>9} {'ratio':>7} {'within':>7}")
        for query in found[mode]["L"]:
            listed = statistics.median(found[mode]["L"][query])
            reverse = statistics.median(found[mode]["R"].get(query) or [float("nan")])
            ratio = listed / reverse if reverse else float("nan")
            within = statistics.median(relative[mode]["L"][query]) / statistics.median(
                relative[mode]["R"].get(query) or [float("nan")]
            )
            if mode == "settled":
                worst["ratio"] = max(worst["ratio"], abs(ratio - 1))
                worst["within"] = max(worst["within"], abs(within - 1))
            inside = all(TARGET[0] <= r <= TARGET[1] for r in (ratio, within))
            print(
                f"  {query:<22} {listed:>9.1f} {reverse:>9.1f} {ratio:>7.3f} {within:>7.3f}"
                + ("" if inside else "  outside 0.85-1.15")
            )
    if "settled" in modes:
        print(
            f"\nsettled: largest |ratio - 1| = {worst['ratio']:.3f}, within runs "
            f"{worst['within']:.3f} (target <= 0.15)"
        )
    for mode in modes:
        step, low, high, noise = position_effect(sequences[mode])
        last = max(len(run) for run in sequences[mode]) - 1
        print(
            f"{mode}: one position later x{step:.3f} (95 % CI {low:.3f}-{high:.3f}), first to "
            f"last x{step**last:.3f}; a query's run-to-run noise no order explains: "
            f"{100 * noise:.1f} % (sd of ln req/s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
