#!/usr/bin/env python3
"""What does encrypting an MRI document cost the client?  Python encoder vs native fast path.

Both encode the same generated MRI corpus, from its NDJSON lines, in batches of ``--batch``
documents with cold caches (a fresh codec per round, as every ingest rank starts): the
Python path parses each line (``json.loads``, as the corpus reader does) and calls
``AbeCodec.encode_lines``; the native path hands the raw lines to ``encode_raw_lines``
(``esdash_abe_native``).  The outputs are compared byte for byte.  Prints CPU µs per
document of each, per round and as medians, and the ratio; then the native path's cost by
field kind (text, numbers, dates), each measured alone on documents cut to those fields.

    .venv/bin/python bench/abe_encoder.py [--documents 50000] [--rounds 3] [--batch 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import throwaway_key
from esdash_plugins.encryption.abe import keys as keylib
from esdash_plugins.encryption.abe.codec import AbeCodec, plan_fields
from esdash_plugins.encryption.abe.native_lines import native_module
from esdash_plugins.tracks.mri import MriTrack, generate


def per_doc(seconds: float, documents: int) -> float:
    return seconds / documents * 1e6


def python_round(codec: AbeCodec, lines: list[bytes], batch: int) -> tuple[float, list[bytes]]:
    out: list[bytes] = []
    started = time.process_time()
    for start in range(0, len(lines), batch):
        out += codec.encode_lines([json.loads(line) for line in lines[start : start + batch]])
    return time.process_time() - started, out


def native_round(codec: AbeCodec, lines: list[bytes], batch: int) -> tuple[float, list[Any]]:
    out: list[Any] = []
    started = time.process_time()
    for start in range(0, len(lines), batch):
        out += codec.encode_raw_lines(lines[start : start + batch])
    return time.process_time() - started, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if native_module() is None:
        sys.exit("esdash_abe_native is not built: run scripts/provision (needs cargo)")

    track = MriTrack()
    fields = plan_fields(track.field_specs({}), track.index_body({}))
    docs = list(generate(args.documents, args.seed))
    lines = [json.dumps(doc).encode() for doc in docs]
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "abe.key"
        throwaway_key(path)
        key = keylib.KeySource("key_file", str(path))
        print(f"# {args.documents} MRI documents, batches of {args.batch}, cold caches per round")
        python_us, native_us = [], []
        for round_ in range(args.rounds):
            slow, fast = AbeCodec(fields, key, native=False), AbeCodec(fields, key)
            seconds, expected = python_round(slow, lines, args.batch)
            python_us.append(per_doc(seconds, args.documents))
            seconds, got = native_round(fast, lines, args.batch)
            native_us.append(per_doc(seconds, args.documents))
            if got != expected:
                sys.exit("the native encoder's output differs from the Python encoder's")
            print(
                f"round {round_ + 1}: Python {python_us[-1]:.1f} µs/doc, "
                f"native {native_us[-1]:.1f} µs/doc (identical output)"
            )
        python, native = statistics.median(python_us), statistics.median(native_us)
        print(f"median: Python {python:.1f} µs/doc, native {native:.1f} µs/doc")
        print(f"ratio Python/native: {python / native:.1f}x")
        by_kind(fields, key, docs, args)
    return 0


def by_kind(fields: list[dict[str, Any]], key: keylib.KeySource, docs: list, args) -> None:
    """The native path on documents cut to the fields of one kind (strings, numbers, dates)."""
    kinds = {
        "strings (AES-SIV)": lambda f: f["kind"] == "string",
        "numbers (OPE)": lambda f: f["kind"] == "ope" and f["grid"]["kind"] == "number",
        "dates (OPE)": lambda f: f["kind"] == "ope" and f["grid"]["kind"] != "number",
    }
    for label, wanted in kinds.items():
        names = {f["path"] for f in fields if wanted(f)}
        lines = [json.dumps({k: v for k, v in d.items() if k in names}).encode() for d in docs]
        seconds, _ = native_round(AbeCodec(fields, key), lines, args.batch)
        print(f"native, {label} only: {per_doc(seconds, args.documents):.1f} µs/doc")


if __name__ == "__main__":
    sys.exit(main())
