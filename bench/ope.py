"""What order-preserving encryption costs: pyope 0.2.2 against esdash.ope, side by side.

    .venv/bin/python bench/ope.py [--values 300] [--pyope-values 150] [--docs 3000]
                                  [--pyope-docs 40] [--seed 7]

Part 1, per value with cold caches, on the ranges of the research notes (§2): the same
uniformly random plaintexts through pyope, then through each esdash backend twice:

* ``no memo``: memo_depth=0, lru_size=0, so every value walks the tree from the root;
* ``cold``: a fresh cipher with the default caches, which start empty; the values are
  distinct, so the LRU never hits and only the node memo fills up during the run.

Each encryption is timed on its own; the table shows the median (and the mean).

Part 2, per document of the generated MRI corpus (``esdash_plugins.tracks.mri.generate``),
all numeric fields (floats mapped exactly with Decimal, x -> round((x - lo) / step); integers
as they are; dates as YYYYMMDD in [0, 30,000,000]), one key per field, out ranges
[0, 2**48 - 1].  pyope is timed on the first ``--pyope-docs`` documents (its cost per document
does not depend on history); esdash starts with empty caches and runs the whole corpus, once
calling ``encrypt`` per value (document by document) and once as ingest does, with one
``encrypt_many`` per field and bulk request of 500 documents.

Targets (issue 5): native at least 100x pyope per value cold, at least 500x per MRI document
with caches.  Run on an otherwise idle machine; the figures are single-core.
"""

from __future__ import annotations

import argparse
import hmac
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from esdash_plugins.tracks import mri
from pyope.ope import OPE, ValueRange

from esdash.ope import OpeCipher, available_backends

OUT_48 = (0, 2**48 - 1)
#: (label, in range, out range): the research notes' table (§2), pyope's defaults first.
RANGES = (
    ("default 2^15 -> 2^31", (0, 2**15 - 1), (0, 2**31 - 1)),
    ("[0,100] -> 2^48", (0, 100), OUT_48),
    ("date 3e7 -> 2^48", (0, 30_000_000), OUT_48),
    ("date-time 3e13 -> 2^63", (0, 30_000_000 * 10**6), (0, 2**63 - 1)),
    ("int32 -> 2^48", (0, 2**31 - 1), OUT_48),
)
DATE_DOMAIN = (0, 30_000_000)
BULK = 500
TARGET_VALUE = 100.0
TARGET_DOC = 500.0


def _key(name: str) -> bytes:
    """A per-field key, as the ABE mode derives them (the bench needs no real secret)."""
    return hmac.digest(
        b"esdash bench/ope.py master key", b"esdash/abe/v1/ope/" + name.encode(), "sha256"
    )


def _time_each(encrypt: Callable[[int], Any], values: list[int]) -> list[float]:
    perf = time.perf_counter
    times = []
    for value in values:
        start = perf()
        encrypt(value)
        times.append(perf() - start)
    return times


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.2f}"


# ---------------------------------------------------------------------------- per value


def per_value(args: argparse.Namespace, backends: list[str]) -> float | None:
    """Print part 1; return the smallest native cold speed-up over the ranges."""
    key = _key("per-value")
    rng = random.Random(args.seed)
    columns = [("pyope", None)]
    for backend in backends:
        columns += [(backend, "no memo"), (backend, "cold")]
    print("Per value, cold caches: median us per encryption (mean), speed-up vs pyope")
    print(f"{'range':24}" + "".join(f"{b + (' ' + v if v else ''):>24}" for b, v in columns))
    worst_native: float | None = None
    for label, in_range, out_range in RANGES:
        values = [rng.randint(*in_range) for _ in range(args.values)]
        oracle = OPE(key, ValueRange(*in_range), ValueRange(*out_range))
        baseline = _time_each(oracle.encrypt, values[: args.pyope_values])
        base = statistics.median(baseline)
        cells = [f"{_us(base)} ({statistics.fmean(baseline) * 1e6:7.1f})"]
        for backend, variant in columns[1:]:
            if variant == "no memo":
                cipher = OpeCipher(
                    key, in_range, out_range, backend=backend, memo_depth=0, lru_size=0
                )
            else:
                cipher = OpeCipher(key, in_range, out_range, backend=backend)
            times = _time_each(cipher.encrypt, values)
            median = statistics.median(times)
            ratio = base / median
            cells.append(f"{_us(median)} ({ratio:7.0f}x)")
            if backend == "native" and variant == "cold":
                worst_native = ratio if worst_native is None else min(worst_native, ratio)
            # Same ciphertexts as pyope, or the timing means nothing.
            check = values[: min(20, args.pyope_values)]
            assert [cipher.encrypt(v) for v in check] == [oracle.encrypt(v) for v in check]
        print(f"{label:24}" + "".join(f"{cell:>24}" for cell in cells))
    return worst_native


# ------------------------------------------------------------------------- per document


@dataclass(frozen=True)
class Field:
    """A numeric MRI field and its exact integer mapping."""

    name: str
    in_range: tuple[int, int]
    lo: Decimal
    step: Decimal
    kind: str  # "float", "integer" or "date"

    def plaintext(self, value: Any) -> int:
        if self.kind == "date":
            day = date.fromisoformat(value)
            return day.year * 10_000 + day.month * 100 + day.day
        if self.kind == "integer":
            return int(value)
        # Exact decimal arithmetic: floor((x - lo) / step) in binary floating point maps
        # 11-32 % of exact grid values one step too low (research notes, §4.5).
        index = (Decimal(str(value)) - self.lo) / self.step
        return int(index.to_integral_value(rounding=ROUND_HALF_EVEN))


def mri_fields() -> list[Field]:
    fields = []
    for name, (lo, hi, step) in mri.FLOAT_FIELDS.items():
        dlo, dstep = Decimal(str(lo)), Decimal(str(step))
        top = int(((Decimal(str(hi)) - dlo) / dstep).to_integral_value(rounding=ROUND_HALF_EVEN))
        fields.append(Field(name, (0, top), dlo, dstep, "float"))
    for name, (lo, hi) in mri.INTEGER_FIELDS.items():
        fields.append(Field(name, (lo, hi), Decimal(lo), Decimal(1), "integer"))
    for name in mri.DATE_FIELDS:
        fields.append(Field(name, DATE_DOMAIN, Decimal(0), Decimal(1), "date"))
    return fields


def mri_rows(docs: int, seed: int, fields: list[Field]) -> list[list[int]]:
    rows = []
    for doc in mri.generate(docs, seed):
        row = [field.plaintext(doc[field.name]) for field in fields]
        for field, value in zip(fields, row, strict=True):
            if not field.in_range[0] <= value <= field.in_range[1]:
                raise SystemExit(f"{field.name}: {value} outside {field.in_range}")
        rows.append(row)
    return rows


def _per_doc_single(ciphers: list[Any], rows: list[list[int]]) -> float:
    """Seconds per document, one encrypt() per value, document by document."""
    encrypts = [cipher.encrypt for cipher in ciphers]
    start = time.perf_counter()
    for row in rows:
        for encrypt, value in zip(encrypts, row, strict=True):
            encrypt(value)
    return (time.perf_counter() - start) / len(rows)


def _per_doc_bulk(ciphers: list[OpeCipher], rows: list[list[int]]) -> float:
    """Seconds per document, one encrypt_many() per field and bulk request."""
    start = time.perf_counter()
    for at in range(0, len(rows), BULK):
        columns = list(zip(*rows[at : at + BULK], strict=True))
        for cipher, column in zip(ciphers, columns, strict=True):
            cipher.encrypt_many(column)
    return (time.perf_counter() - start) / len(rows)


def per_document(args: argparse.Namespace, backends: list[str]) -> float | None:
    """Print part 2; return the native speed-up (the better of single and bulk)."""
    fields = mri_fields()
    rows = mri_rows(args.docs, args.seed, fields)
    distinct = sum(len({row[i] for row in rows}) for i in range(len(fields)))
    print(
        f"\nPer MRI document: {len(fields)} numeric fields, {len(rows)} documents "
        f"(seed {args.seed}), {distinct} distinct (field, value) pairs, out ranges [0, 2^48-1]"
    )
    oracles = [OPE(_key(f.name), ValueRange(*f.in_range), ValueRange(*OUT_48)) for f in fields]
    sample = rows[: args.pyope_docs]
    base = _per_doc_single(oracles, sample)
    print(f"  {'pyope 0.2.2, no caches':44} {base * 1e3:10.3f} ms/doc  (first {len(sample)} docs)")
    best_native: float | None = None
    for backend in backends:

        def fresh(backend: str = backend) -> list[OpeCipher]:
            return [OpeCipher(_key(f.name), f.in_range, OUT_48, backend=backend) for f in fields]

        ciphers = fresh()
        same_docs = _per_doc_single(ciphers, sample)
        print(
            f"  {backend + ', caches from empty, same docs':44} {same_docs * 1e3:10.3f} ms/doc"
            f"  {base / same_docs:8.0f}x"
        )
        ciphers = fresh()
        single = _per_doc_single(ciphers, rows)
        hits = sum(c.cache_info().hits for c in ciphers)
        misses = sum(c.cache_info().misses for c in ciphers)
        print(
            f"  {backend + ', caches from empty, encrypt() per value':44} {single * 1e3:10.3f} "
            f"ms/doc  {base / single:8.0f}x   (LRU hit rate {hits / (hits + misses):.1%})"
        )
        ciphers = fresh()
        bulk = _per_doc_bulk(ciphers, rows)
        print(
            f"  {backend + f', caches from empty, encrypt_many per {BULK}':44} {bulk * 1e3:10.3f} "
            f"ms/doc  {base / bulk:8.0f}x"
        )
        for cipher, column, oracle in zip(ciphers, zip(*sample, strict=True), oracles, strict=True):
            assert cipher.encrypt_many(column) == [oracle.encrypt(v) for v in column]
        if backend == "native":
            best_native = base / min(single, bulk)
    return best_native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=300, help="plaintexts per range")
    parser.add_argument("--pyope-values", type=int, default=150, help="of those, for pyope")
    parser.add_argument("--docs", type=int, default=3000, help="MRI documents")
    parser.add_argument("--pyope-docs", type=int, default=40, help="of those, for pyope")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.pyope_values = min(args.pyope_values, args.values)
    args.pyope_docs = min(args.pyope_docs, args.docs)

    backends = [b for b in ("native", "python") if b in available_backends()]
    python = sys.version.split()[0]
    print(f"esdash.ope backends here: {', '.join(available_backends())}; Python {python}\n")
    worst_value = per_value(args, backends)
    native_doc = per_document(args, backends)
    print()
    if worst_value is None or native_doc is None:
        print("native backend not built: no target can be checked (scripts/provision builds it)")
        raise SystemExit(1)
    verdicts = [
        ("native per value, cold caches (worst range)", worst_value, TARGET_VALUE),
        ("native per MRI document, with caches", native_doc, TARGET_DOC),
    ]
    for label, ratio, target in verdicts:
        status = "met" if ratio >= target else "MISSED"
        print(f"target {label}: {ratio:,.0f}x vs >= {target:,.0f}x: {status}")


if __name__ == "__main__":
    main()
