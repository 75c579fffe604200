#!/usr/bin/env python3
"""Client CPU of building ``_bulk`` bodies: the checking read path against the verbatim one.

Issue 18 asks esdash's ingest docs/s to match Rally's with one bulk client.  On a 2-core
node the client's CPU competes with the engine, so the seconds spent turning corpus lines
into bulk bodies are part of the measured ingest.  This generates a corpus (200,000
documents by default, shaped like Rally's http_logs), then reads it whole with
:func:`esdash.bench.slices.read_slice` both ways -- ``checked=False`` (every line parsed and
checked) and ``checked=True`` (a corpus the run's whole-file check passed: lines copied
verbatim) -- alternating, several times, and prints the CPU seconds of each and their
ratio.  It also checks that both paths produced the same bytes.  No cluster is needed.

    .venv/bin/python bench/ingest_cpu.py
    .venv/bin/python bench/ingest_cpu.py --docs 1000000 --bulk-size 5000 --repeat 5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from esdash.bench.slices import read_slice
from esdash.plugin.corpus_slices import plan_slices
from esdash.plugin.values import Corpus


def generate(path: Path, docs: int, seed: int) -> None:
    """An http_logs-like NDJSON corpus of ``docs`` documents."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for k in range(docs):
            doc = {
                "@timestamp": 893964617 + k,
                "clientip": f"{rng.randrange(256)}.{rng.randrange(256)}.0.{rng.randrange(256)}",
                "request": f"GET /images/{rng.randrange(10_000)}.gif HTTP/1.0",
                "status": rng.choice((200, 200, 200, 304, 404)),
                "size": rng.randrange(100_000),
            }
            handle.write(json.dumps(doc, separators=(",", ":")) + "\n")


def read_all(corpus: Corpus, bulk_size: int, checked: bool) -> tuple[float, str, int]:
    """(CPU seconds, SHA-256 of all bodies, batches) of reading the corpus once."""
    (part,) = plan_slices(corpus, 1)
    digest = hashlib.sha256()
    batches = 0
    started = time.process_time()
    for batch in read_slice(corpus, part, bulk_size, "logs", checked=checked):
        digest.update(batch.body)
        batches += 1
    return time.process_time() - started, digest.hexdigest(), batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--bulk-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="esdash-ingest-cpu-") as scratch:
        path = Path(scratch) / "documents.json"
        generate(path, args.docs, args.seed)
        corpus = Corpus(path, args.docs)
        times: dict[bool, list[float]] = {False: [], True: []}
        digests: dict[bool, set[str]] = {False: set(), True: set()}
        for _ in range(args.repeat):
            for checked in (False, True):
                seconds, digest, batches = read_all(corpus, args.bulk_size, checked)
                times[checked].append(seconds)
                digests[checked].add(digest)
        if len(digests[False] | digests[True]) != 1:
            print("FAIL: the two read paths produced different bodies", file=sys.stderr)
            return 1
        slow, fast = statistics.median(times[False]), statistics.median(times[True])
        size = path.stat().st_size
        print(
            f"corpus: {args.docs} documents, {size / 1e6:.1f} MB, {batches} bulk bodies "
            f"of {args.bulk_size}; median of {args.repeat} reads each"
        )
        print(f"{'read path':<28}{'CPU s':>8}{'docs/CPU s':>14}")
        for name, seconds in (("checking (parse each line)", slow), ("verbatim (checked)", fast)):
            print(f"{name:<28}{seconds:>8.3f}{args.docs / max(seconds, 1e-9):>14,.0f}")
        print(f"ratio checking/verbatim: {slow / max(fast, 1e-9):.1f}x  (bodies identical)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
