"""What recording costs: ``Recorder.record()`` per call, ``drain()`` per interval, and rank 0's
merge per payload.

    .venv/bin/python bench/recorder_cost.py [--calls 300000] [--rounds 5]

Prints the median over rounds of:

* ``record()`` per call (two series, exact sums, per-node counters), next to an empty loop
  and to ``HdrHistogram.record_value`` twice (what recording straight into ``hdrh`` costs);
* ``record_error()`` per call;
* ``drain()`` of an interval holding ``--per-interval`` requests;
* decoding one payload into a ``Merged`` (rank 0, once per rank and interval) and merging an
  already decoded one (``Merged.merge``, what a second merge of the same data costs).

Latencies are log-normal (median 5 ms, sigma 1), as from a real query step.  Run on an
otherwise idle machine; the numbers are per core.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from esdash.bench.recorder import Recorder
from esdash.rundir.hdr import new_histogram
from esdash.stats.merge import Merged


def _median_of(rounds: int, run) -> float:
    return statistics.median(run() for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-interval", type=int, default=5_000)
    args = parser.parse_args()

    rng = random.Random(1)
    values = [rng.lognormvariate(math.log(0.005), 1.0) for _ in range(args.calls)]
    perf = time.perf_counter

    def empty_loop() -> float:
        start = perf()
        for _value in values:
            pass
        return (perf() - start) / len(values)

    def record() -> float:
        recorder = Recorder()
        call = recorder.record
        start = perf()
        for value in values:
            call("search", "node-0", value, value, 10, 1000)
        return (perf() - start) / len(values)

    def hdrh_direct() -> float:
        latency, service = new_histogram(), new_histogram()
        start = perf()
        for value in values:
            us = int(value * 1e6)
            latency.record_value(us)
            service.record_value(us)
        return (perf() - start) / len(values)

    def record_error() -> float:
        recorder = Recorder()
        call = recorder.record_error
        n = len(values) // 10
        start = perf()
        for _ in range(n):
            call("search", "node-0", "http_429", 429, "rejected", 0.001)
        return (perf() - start) / n

    interval = values[: args.per_interval]

    def filled() -> Recorder:
        recorder = Recorder(rank=0)
        for value in interval:
            recorder.record("search", "node-0", value, value, 10, 1000)
        return recorder

    def drain() -> float:
        recorder = filled()
        start = perf()
        recorder.drain()
        return perf() - start

    payload = filled().drain()

    def decode() -> float:
        start = perf()
        Merged().add(payload)
        return perf() - start

    decoded = Merged().add(payload)

    def merge() -> float:
        total = Merged().add(payload)
        start = perf()
        total.merge(decoded)
        return perf() - start

    loop = _median_of(args.rounds, empty_loop)
    cost = _median_of(args.rounds, record)
    direct = _median_of(args.rounds, hdrh_direct)
    print(f"record():             {cost * 1e6:6.2f} us/call  (empty loop {loop * 1e6:.2f} us)")
    ratio = cost / direct
    print(f"hdrh record_value x2: {direct * 1e6:6.2f} us/call  (ratio record/hdrh {ratio:.2f})")
    print(f"record_error():       {_median_of(args.rounds, record_error) * 1e6:6.2f} us/call")
    print(f"drain() of {args.per_interval} requests: {_median_of(args.rounds, drain) * 1e3:.2f} ms")
    print(f"decode one payload into Merged: {_median_of(args.rounds, decode) * 1e3:.2f} ms")
    print(f"Merged.merge of a decoded one:  {_median_of(args.rounds, merge) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
