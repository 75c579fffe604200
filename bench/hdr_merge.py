"""What merging rank payloads costs: 64 encoded histograms into one, plus 4 percentiles.

    .venv/bin/python bench/hdr_merge.py [--ranks 64] [--requests 2000] [--rounds 7]

Rank 0 does this once per interval for the stream, the results do it per step and rank, and
viewers do it per record.  The payloads are ``--ranks`` encoded histograms of ``--requests``
log-normal latencies each (median 5 ms, sigma 1), as from a real query step.  Each path is
timed side by side, alternating, in one run (the machines are shared and noisy), and the
medians over ``--rounds`` are printed with their ratio:

* ``rundir.hdr``: ``hdr.merge`` of the encoded histograms + ``hdr.percentiles``;
* ``hdrhistogram objects``: ``HdrHistogram.decode_and_add`` into one histogram +
  ``get_percentile_to_value_dict`` (the package's own merge);
* ``numpy sum``: a plain ``numpy`` sum of the same counts, already decoded, + the same
  percentile search (the floor: what merging costs without decoding).

Every path's percentiles are checked to be the same values.  (When ``rundir.hdr`` replaced the
merges before it, the same run measured them against it: ``HdrHistogram`` objects with
``esdash.stats.summarize`` 1.60x and the live view's count lists 3.54x its time.)
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable

import numpy as np

from esdash.rundir import hdr

PERCENTILES = [50.0, 90.0, 99.0, 99.9]


def payloads(ranks: int, requests: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    encoded = []
    for _ in range(ranks):
        counts: dict[int, int] = {}
        for _ in range(requests):
            us = min(max(int(rng.lognormvariate(math.log(5000), 1.0)), 1), hdr.HIGHEST_US)
            index = hdr.index_of(us)
            counts[index] = counts.get(index, 0) + 1
        encoded.append(hdr.encode(counts))
    return encoded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000, help="per rank payload")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    encoded = payloads(args.ranks, args.requests)
    decoded = [hdr.decode(item) for item in encoded]
    width = max(len(c) for c in decoded)
    dense = np.stack([np.pad(c, (0, width - len(c))) for c in decoded])

    def with_hdr() -> dict[float, float]:
        return hdr.percentiles(hdr.merge(encoded), PERCENTILES)

    def with_objects() -> dict[float, float]:
        merged = hdr.new_histogram()
        for item in encoded:
            merged.decode_and_add(item)
        found = merged.get_percentile_to_value_dict(PERCENTILES)
        return {p: v * hdr.US for p, v in found.items()}

    def with_numpy_sum() -> dict[float, float]:
        return hdr.percentiles(dense.sum(axis=0), PERCENTILES)

    paths: dict[str, Callable[[], dict[float, float]]] = {
        "rundir.hdr": with_hdr,
        "hdrhistogram objects": with_objects,
        "numpy sum (decoded)": with_numpy_sum,
    }
    results = {name: path() for name, path in paths.items()}
    reference = results["rundir.hdr"]
    for name, found in results.items():
        assert found == reference, f"{name} gives other percentiles: {found} != {reference}"

    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, path in paths.items():
            started = time.perf_counter()
            path()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"merge of {args.ranks} payloads x {args.requests} requests + {len(PERCENTILES)} "
        f"percentiles, median of {args.rounds} rounds (same percentiles on every path):"
    )
    base = medians["rundir.hdr"]
    for name, value in medians.items():
        print(f"  {name:<22} {value * 1e3:8.2f} ms   {value / base:5.2f}x rundir.hdr")


if __name__ == "__main__":
    main()
