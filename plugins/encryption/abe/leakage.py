"""The leakage report of the ABE mode: what an honest-but-curious cluster operator learns.

For every field of the schema the report encrypts a sample's values exactly as ingest does
(the ciphertexts are deterministic, so they are the ones the cluster stores), runs the
classic inference attacks of :mod:`esdash_plugins.encryption.abe.attacks` on them with an
auxiliary sample, and measures against the plaintext how many records each attack recovers,
exactly and within 1 % of the field's domain.  The attacker's auxiliary data is a second
sample of the track's own generator (another seed) where the track has one, else uniform:
the worst case for the defender and the best one, which the label says.

Length is measured as a leak of its own: AES-SIV is not padded, so a stored token is as
long as its plaintext plus a constant, and the operator sees that length.  The lengths are
taken from the stored JSON text of the real ciphertexts (never from a formula), the length
attacks run beside the others, and every field gets the majority guess as its baseline
(every record guessed as the most frequent value): an attack's "0 %" on a field whose
majority guess already gets half the records is no safety.

The report holds counts, shares, field names and sizes, never a value of the sample: the
verdicts are written from numbers only (a test plants marker strings and looks for them).
:func:`analyse` works on any documents; :func:`report_for` samples a run's corpus and is
what the ``esdash_leakage`` hook returns.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from esdash.plugin_api import (
    TOO_DEEP,
    BadInput,
    Corpus,
    JsonMapping,
    JsonObject,
    JsonValue,
    Session,
    Track,
)

from . import attacks
from .codec import AbeCodec, EncodeError, FieldPlan
from .names import segments
from .values import StringCipher

VERSION = 1
#: Documents sampled by :func:`report_for` unless told otherwise.
DOCUMENTS = 20_000
#: Seed of the uniform auxiliary samples (fixed: the report is reproducible).
UNIFORM_SEED = 16
THREAT_MODEL = (
    "The adversary is an honest-but-curious operator of the cluster: it sees every stored "
    "document, the index mapping and every query and response, but not the key, which "
    "never leaves the client. It is passive (it answers queries correctly and injects no "
    "documents or queries) and has an auxiliary sample of similar data, here the one named "
    "under 'auxiliary'. From the ciphertexts alone it learns equality of values "
    "(deterministic AES-SIV, field names included); the length of every AES-SIV value, "
    "because nothing is padded: a token is the plaintext's UTF-8 bytes plus 16, in base64, "
    "so plaintexts of different lengths have tokens of different lengths (the schema's "
    "field names are keyed-PRF tokens of one length and reveal none); and, for numbers and "
    "dates, their order (order-preserving encryption; the stored number is visible, its "
    "length with it). The attacks below measure how much of the plaintext that gives away "
    "on this sample, each beside the majority guess (every record guessed as the field's "
    "most frequent value), which needs no ciphertext at all. Out of scope: active attacks "
    "(chosen documents or queries), the access pattern and result sizes of queries over "
    "time, the number of documents and of values in an array, side channels of the client "
    "and nodes, compromise of the client or the key, and attacks that combine several "
    "fields of a document."
)
#: Added to the threat model under ``key_mode = "single"`` (the audit's cross-primitive note).
SINGLE_KEY = (
    " Key mode single: the key itself is every numeric field's OPE key (and the input of the "
    "string and name keys), so in two fields whose domains have one size, values at the same "
    "place of the domain (equal numbers, where the domains are equal) have equal ciphertexts: "
    "a cross-field equality these attacks do not measure, which per-field keys close."
)
REFERENCES = [
    "Naveed, Kamara, Wright: Inference Attacks on Property-Preserving Encrypted Databases. "
    "CCS 2015.",
    "Boldyreva, Chenette, O'Neill: Order-Preserving Encryption Revisited: Improved Security "
    "Analysis and Alternative Solutions. CRYPTO 2011.",
]
SIV = "deterministic (AES-SIV)"
#: What the cluster learns of a field, by scheme (length: AES-SIV tokens are not padded).
LEARNS_SIV = "equality, length"
LEARNS_OPE = "equality, order, approximate value"
#: Names of the attacks in verdicts.
SPOKEN = {
    "frequency": "frequency analysis",
    "sorting": "sorting",
    "cumulative": "the cumulative attack",
    "window": "the window bound (no auxiliary data)",
    "length": "length classes",
    "length+frequency": "frequency analysis within length classes",
}
#: The name of the baseline (``baseline`` of a field, shaped like an attack).
MAJORITY = "majority guess"


# ---------------------------------------------------------------------------- sampling


def read_documents(corpus: Corpus, limit: int) -> list[JsonObject]:
    """The first ``limit`` documents of ``corpus`` (bulk action lines skipped).

    A line that is no JSON object is a BadInput naming the file and the line (a cached
    sample a crash or a full disk damaged); a UTF-8 BOM before the first line is skipped.
    """
    documents: list[JsonObject] = []
    with open(corpus.path, "rb") as lines:
        action = corpus.includes_action_and_meta_data
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if action:  # every document follows its action line
                action = False
                continue
            if number == 1:
                line = line.removeprefix(_BOM)
            documents.append(_document(Path(corpus.path), number, line))
            action = corpus.includes_action_and_meta_data
            if len(documents) >= limit:
                break
    return documents


_BOM = b"\xef\xbb\xbf"


def _document(path: Path, number: int, line: bytes) -> JsonObject:
    """One corpus line as a document, or a BadInput naming ``path`` and the line."""
    try:
        value = json.loads(line)
    except RecursionError:
        problem = TOO_DEEP
    except ValueError as exc:
        problem = f"not valid JSON ({exc})"
    else:
        if isinstance(value, dict):
            return value
        problem = f"not a JSON object but {type(value).__name__}"
    raise BadInput(
        f"corpus {path}, line {number}: {problem}; delete the file so that it is generated "
        f"again, or fix the line"
    )


def _is_point(value: JsonValue) -> bool:
    """A geo point written as an array (``[lon, lat]``) or object (``{"lat", "lon"}``)."""
    if isinstance(value, Mapping):
        return True
    return isinstance(value, list) and all(isinstance(v, int | float) for v in value)


def _leaves(value: JsonValue, out: list[Any], points: bool = False) -> None:
    """A field's values in ``value``: the scalar itself, or every element of an array.

    With ``points`` (geo fields) an array of numbers or an object is one value, the point.
    """
    if value is None:
        return
    if points and _is_point(value):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out, points)
    elif isinstance(value, str | int | float):  # bool is an int
        out.append(value)


def _walk(node: JsonValue, parts: Sequence[str], out: list[Any], points: bool) -> None:
    """The values at the dotted path ``parts`` below ``node`` (objects, arrays, dotted keys)."""
    if not parts:
        _leaves(node, out, points)
    elif isinstance(node, list):
        for item in node:
            _walk(item, parts, out, points)
    elif isinstance(node, Mapping):
        for cut in range(1, len(parts) + 1):  # {"a": {"b": 1}} and {"a.b": 1} alike
            key = ".".join(parts[:cut])
            if key in node:
                _walk(node[key], parts[cut:], out, points)


def column(documents: Sequence[JsonMapping], path: str, points: bool = False) -> list[Any]:
    """Every value of the field ``path`` in ``documents`` (nulls and missing skipped).

    ``points``: the field holds geo points, each one value however it is written.
    """
    out: list[Any] = []
    if points:
        parts = path.split(".")
        for doc in documents:
            _walk(doc, parts, out, True)
        return out
    if "." not in path:  # the common case, kept tight: one lookup per document
        append, scalars = out.append, (str, int, float, bool)
        for doc in documents:
            value = doc.get(path)
            if value.__class__ in scalars:
                append(value)
            elif value is not None:
                _leaves(value, out)
        return out
    parts = path.split(".")
    for doc in documents:
        _walk(doc, parts, out, False)
    return out


# --------------------------------------------------------------------------- plaintexts


def _indices(plan: FieldPlan, values: Iterable[Any]) -> tuple[np.ndarray, int]:
    """Grid indices of an OPE field's values, and how many were off the grid (skipped)."""
    cache: dict[Any, int | None] = {}
    out: list[int] = []
    skipped = 0
    for value in values:
        if value.__class__ is bool:  # True == 1: keep it out of the cache
            skipped += 1
            continue
        index = cache.get(value, -1)
        if index == -1:
            try:
                index = plan.index(value)
            except EncodeError:
                index = None
            cache[value] = index
        if index is None:
            skipped += 1
        else:
            out.append(index)
    return np.array(out, dtype=np.int64), skipped


def _texts(plan: FieldPlan, values: Iterable[Any]) -> tuple[list[str], int]:
    """The strings a deterministic field encrypts, and how many values were refused."""
    out: list[str] = []
    skipped = 0
    for value in values:
        try:
            out.append(plan.text(value))
        except EncodeError:
            skipped += 1
    return out, skipped


@dataclass
class Column:
    """One field as the attacks see it and as recovery is measured.

    ``ciphertexts`` are what the cluster stores (OPE integers; AES-SIV tokens numbered in
    their sort order, which keeps equality and order); ``truth`` and ``auxiliary`` are
    plaintexts as grid indices (OPE) or codes (deterministic).  ``lengths`` is each
    record's stored value measured as the cluster holds it (:func:`stored_length`);
    ``aux_lengths`` the length each auxiliary value's ciphertext has (deterministic fields;
    empty for OPE, whose lengths need the key).
    """

    plan: FieldPlan
    ciphertexts: np.ndarray
    truth: np.ndarray
    auxiliary: np.ndarray
    skipped: int
    lengths: np.ndarray
    aux_lengths: np.ndarray

    @property
    def domain(self) -> int | None:
        return self.plan.ope_grid.top + 1 if self.plan.kind == "ope" else None


def stored_length(stored: int | str) -> int:
    """Characters of a stored value as the cluster holds it: its JSON text in ``_source``.

    Measured on the real ciphertext, never computed from the plaintext: a token with its
    quotes (URL-safe base64 needs no escaping), a number with its digits.
    """
    return len(json.dumps(stored))


def _ope_column(plan: FieldPlan, values: list[Any], aux: list[Any] | None) -> Column:
    truth, skipped = _indices(plan, values)
    distinct = np.unique(truth)
    table = dict(zip(distinct.tolist(), plan.ope.encrypt_many(distinct.tolist()), strict=True))
    ciphertexts = np.array([table[i] for i in truth.tolist()], dtype=np.int64)
    sizes = {index: stored_length(stored) for index, stored in table.items()}
    lengths = np.array([sizes[i] for i in truth.tolist()], dtype=np.int64)
    if aux is None:
        rng = np.random.default_rng(UNIFORM_SEED)
        auxiliary = rng.integers(0, plan.ope_grid.top + 1, size=max(len(truth), 1))
    else:
        auxiliary = _indices(plan, aux)[0]
    none = np.empty(0, dtype=np.int64)
    return Column(plan, ciphertexts, truth, auxiliary.astype(np.int64), skipped, lengths, none)


def _siv_column(plan: FieldPlan, values: list[Any], aux: list[Any] | None) -> Column:
    texts, skipped = _texts(plan, values)
    aux_texts = _texts(plan, aux)[0] if aux is not None else []
    ordered = sorted({*texts, *aux_texts})
    codes = {text: code for code, text in enumerate(ordered)}
    truth = np.array([codes[t] for t in texts], dtype=np.int64)
    tokens = {text: plan.siv.encrypt(text) for text in set(texts)}
    order = {token: rank for rank, token in enumerate(sorted(tokens.values()))}
    ciphertexts = np.array([order[tokens[t]] for t in texts], dtype=np.int64)
    sizes = {text: stored_length(token) for text, token in tokens.items()}
    lengths = np.array([sizes[t] for t in texts], dtype=np.int64)
    if aux is None:  # uniform over the values seen: one of each
        auxiliary = np.unique(truth)
    else:
        auxiliary = np.array([codes[t] for t in aux_texts], dtype=np.int64)
    # The attacker's view of its auxiliary values: their ciphertexts' lengths under a key
    # of its own (AES-SIV lengths do not depend on the key; the field's key is not used).
    own = StringCipher(os.urandom(64), plan.path)
    aux_sizes = {
        code: stored_length(own.encrypt(ordered[code])) for code in set(auxiliary.tolist())
    }
    aux_lengths = np.array([aux_sizes[c] for c in auxiliary.tolist()], dtype=np.int64)
    return Column(plan, ciphertexts, truth, auxiliary, skipped, lengths, aux_lengths)


def build_column(plan: FieldPlan, values: list[Any], aux: list[Any] | None) -> Column:
    """Encrypt one field's values as the cluster stores them; plaintexts for measuring."""
    if plan.kind == "ope":
        return _ope_column(plan, values, aux)
    return _siv_column(plan, values, aux)


# ------------------------------------------------------------------------------ attacks


def _attack(
    name: str, applicable: bool, shares: tuple[float, float | None] | None, note: str
) -> JsonObject:
    exact, within = shares if shares is not None else (None, None)
    return {
        "name": name,
        "applicable": applicable,
        "exact": exact,
        "within_1pct": within,
        "note": note,
    }


def _measured(
    name: str, col: Column, guesses: np.ndarray, tolerance: float | None, note: str
) -> JsonObject:
    exact, within = attacks.recovery(guesses, col.truth, tolerance)
    return _attack(name, True, (exact, within if tolerance is not None else None), note)


def _frequency(col: Column, tolerance: float | None) -> JsonObject:
    guesses = attacks.frequency_attack(col.ciphertexts, col.auxiliary)
    note = (
        f"ranks the {_values(len(np.unique(col.ciphertexts)), 'ciphertext')} by frequency "
        f"against the {_values(len(np.unique(col.auxiliary)), 'value')} of the auxiliary sample"
    )
    return _measured("frequency", col, guesses, tolerance, note)


def _sorting_domain(col: Column, uniform: bool) -> tuple[tuple[int, int] | None, str]:
    """The domain the sorting attack runs on, with its note, or None and why not.

    First the declared grid; else, with a real auxiliary sample, the range that sample
    spans (an attacker who has seen ages 6 to 100 takes that as the domain, and a column
    with 95 distinct ages over it is dense).
    """
    distinct = len(np.unique(col.ciphertexts))
    declared = (0, col.plan.ope_grid.top)
    problem = attacks.dense_problem(distinct, declared)
    if problem is None:
        return declared, f"dense over the declared domain of {declared[1] + 1:,} values"
    if uniform or len(col.auxiliary) == 0:
        return None, problem
    span = (int(col.auxiliary.min()), int(col.auxiliary.max()))
    size = span[1] - span[0] + 1
    if attacks.dense_problem(distinct, span) is None:
        return span, (
            f"dense over the {_values(size)} the auxiliary sample spans (the declared domain "
            f"has {declared[1] + 1:,})"
        )
    return None, f"{problem}; nor dense over the {_values(size)} the auxiliary sample spans"


def _sorting(col: Column, tolerance: float, uniform: bool) -> JsonObject:
    domain, note = _sorting_domain(col, uniform)
    if domain is None:
        return _attack("sorting", False, None, note)
    guesses = attacks.sorting_attack(col.ciphertexts, domain)
    return _measured("sorting", col, guesses, tolerance, note)


def _cumulative(col: Column, tolerance: float) -> JsonObject:
    guesses = attacks.cumulative_attack(col.ciphertexts, col.auxiliary)
    note = (
        "each ciphertext's empirical CDF and frequency matched to the auxiliary "
        "distribution's (monotone nearest-CDF matching, the paper's assignment without a "
        "solver)"
    )
    return _measured("cumulative", col, guesses, tolerance, note)


def _window(col: Column, tolerance: float) -> JsonObject:
    plaintexts = col.domain or 1
    low, high = col.plan.out_range
    guesses = attacks.window_attack(col.ciphertexts, plaintexts, (low, high))
    window, leaked, bits = attacks.window_bound(plaintexts)
    inside = attacks.recovery(guesses, col.truth, window / 2)[1]
    note = (
        f"guess floor(c*M/N) with M = {plaintexts:,} plaintexts and N = 2^"
        f"{math.log2(high - low + 1):.0f} ciphertexts, no auxiliary data; theory: a window "
        f"of about sqrt(M) = {window:,} values holds the plaintext, {leaked:.1f} of "
        f"{bits:.1f} bits leak; measured: {_pct(inside)} of records within +/-"
        f"{window // 2:,} of the guess"
    )
    return _measured("window", col, guesses, tolerance, note)


def _length(col: Column) -> JsonObject:
    """Length classes: each record guessed from its stored token's length alone."""
    guesses = attacks.length_attack(col.lengths, col.auxiliary, col.aux_lengths)
    classes = len(np.unique(col.lengths))
    note = (
        f"groups the records by the length of their stored token ({_values(classes, 'length')}"
        f" among {_values(len(np.unique(col.truth)), 'distinct value')}) and guesses the most "
        "frequent auxiliary value of each length; the auxiliary values' lengths come from a "
        "key of the attacker's own (AES-SIV lengths do not depend on the key)"
    )
    return _measured("length", col, guesses, None, note)


def _length_frequency(col: Column) -> JsonObject:
    """Frequency analysis inside each length class (equality and length together)."""
    guesses = attacks.length_frequency_attack(
        col.ciphertexts, col.lengths, col.auxiliary, col.aux_lengths
    )
    note = (
        "ranks the ciphertexts of each length by frequency against the auxiliary values of "
        "that length"
    )
    return _measured("length+frequency", col, guesses, None, note)


def _ope_length(col: Column) -> JsonObject:
    """Not an attack of its own on OPE: the number, and so its length, is visible anyway."""
    classes = len(np.unique(col.lengths))
    note = (
        f"not an attack of its own: the stored number is visible ({_values(classes, 'length')}"
        " of its JSON text in the sample), and its length is a function of it that the "
        "attacks on the number already have"
    )
    return _attack("length", False, None, note)


def run_attacks(col: Column, uniform: bool) -> list[JsonObject]:
    """The attacks of the field's scheme, measured (OPE: frequency, sorting, cumulative,
    window, and length as not applicable; AES-SIV: frequency and the two length attacks)."""
    ope = ("frequency", "sorting", "cumulative", "window", "length")
    siv = ("frequency", "length", "length+frequency")
    if len(col.truth) == 0:
        wanted = ope if col.plan.kind == "ope" else siv
        return [_attack(n, False, None, "no values in the sample") for n in wanted]
    if col.plan.kind != "ope":
        return [_frequency(col, None), _length(col), _length_frequency(col)]
    tolerance = 0.01 * (col.plan.ope_grid.top + 1)
    return [
        _frequency(col, tolerance),
        _sorting(col, tolerance, uniform),
        _cumulative(col, tolerance),
        _window(col, tolerance),
        _ope_length(col),
    ]


def baseline(col: Column) -> JsonObject:
    """The majority guess, shaped like an attack: every record guessed as the field's most
    frequent value (exactly, and for OPE fields within 1 % of the domain)."""
    if len(col.truth) == 0:
        return _attack(MAJORITY, False, None, "no values in the sample")
    tolerance = 0.01 * (col.plan.ope_grid.top + 1) if col.plan.kind == "ope" else None
    distinct = len(np.unique(col.truth))
    note = (
        f"every record guessed as the most frequent of the field's "
        f"{_values(distinct, 'distinct value')}: what knowing the distribution alone gives, "
        "no ciphertext needed"
    )
    return _measured(MAJORITY, col, attacks.majority_guess(col.truth), tolerance, note)


# ----------------------------------------------------------------------------- verdicts


def _values(count: int, noun: str = "value") -> str:
    """``1 value``, ``1,342 values``."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _pct(share: float) -> str:
    """A share as a short percentage ("100 %", "0.4 %", "<0.1 %")."""
    if share >= 1.0:
        return "100 %"
    if share <= 0.0:
        return "0 %"
    if share < 0.001:
        return "<0.1 %"
    if share > 0.999:
        return ">99.9 %"
    text = f"{share * 100:.1f}".removesuffix(".0")
    return f"{text} %"


def _best(found: list[JsonObject], key: str) -> JsonObject | None:
    """The applicable attack with the highest ``key`` share; on a tie the window bound
    (it needs no auxiliary data, the stronger statement), then the higher exact share."""
    measured = [a for a in found if a["applicable"] and a[key] is not None]
    return max(
        measured, key=lambda a: (a[key], a["name"] == "window", a["exact"] or 0.0), default=None
    )


def _guess_clause(guess: JsonObject, ope: bool) -> str:
    """``; the majority guess alone gets 36.5 %`` (OPE: exactly, and within 1 %)."""
    if not guess["applicable"]:
        return ""
    if not ope:
        return f"; the majority guess alone gets {_pct(guess['exact'])}"
    return (
        f"; the majority guess alone gets {_pct(guess['exact'])} exactly, "
        f"{_pct(guess['within_1pct'])} within 1 %"
    )


def verdict(path: str, col: Column, found: list[JsonObject], guess: JsonObject) -> str:
    """One sentence from counts and shares only (never a value of the sample), ending with
    the majority guess (``guess``, :func:`baseline`) to read the attacks' shares against."""
    distinct = len(np.unique(col.truth))
    skipped = f" ({_values(col.skipped)} off the field's grid left out)" if col.skipped else ""
    if len(col.truth) == 0:
        return f"{path}: no values in the sample, nothing measured{skipped}"
    exact = _best(found, "exact")
    assert exact is not None  # every field with values runs frequency analysis
    baseline_text = _guess_clause(guess, col.domain is not None)
    sorting = next((a for a in found if a["name"] == "sorting" and a["applicable"]), None)
    if sorting is not None and sorting["exact"] >= exact["exact"]:
        return (
            f"{path}: dense domain of {_values(distinct)}, {_pct(sorting['exact'])} of "
            f"records recovered by sorting{baseline_text}{skipped}"
        )
    if col.domain is None:
        classes = len(np.unique(col.lengths))
        return (
            f"{path}: {distinct:,} distinct value{'' if distinct == 1 else 's'} in {classes:,} "
            f"length class{'' if classes == 1 else 'es'}, "
            f"{_pct(exact['exact'])} of records recovered by {SPOKEN[exact['name']]}"
            f"{baseline_text}{skipped}"
        )
    within = _best(found, "within_1pct")
    assert within is not None  # OPE fields with values measure both shares
    text = f"{path}: {distinct:,} distinct value{'' if distinct == 1 else 's'} in a domain of "
    text += f"{col.domain:,}, "
    close = f"{_pct(within['within_1pct'])} within 1 % of the domain"
    if not exact["exact"]:
        text += f"no record recovered exactly, {close} by {SPOKEN[within['name']]}"
    elif within is exact:
        text += (
            f"{_pct(exact['exact'])} of records recovered exactly and {close} by "
            f"{SPOKEN[exact['name']]}"
        )
    else:
        text += (
            f"{_pct(exact['exact'])} of records recovered exactly by {SPOKEN[exact['name']]}, "
            f"{close} by {SPOKEN[within['name']]}"
        )
    text += baseline_text
    numbered = {"day": "YYYYMMDD", "second": "YYYYMMDDhhmmss"}.get(col.plan.ope_grid.kind)
    if numbered is not None:
        text += f"; dates are numbered as {numbered}, so 1 % of the domain is 30 years"
    return text + skipped


# ------------------------------------------------------------------------------- report


def field_report(col: Column, uniform: bool) -> JsonObject:
    """One entry of the report's ``fields``."""
    plan = col.plan
    ope = plan.kind == "ope"
    found = run_attacks(col, uniform)
    guess = baseline(col)
    return {
        "field": plan.path,
        "type": plan.type,
        "scheme": "OPE" if ope else SIV,
        "learns": LEARNS_OPE if ope else LEARNS_SIV,
        "records": len(col.truth),
        "distinct": len(np.unique(col.ciphertexts)),
        "length_classes": len(np.unique(col.lengths)),
        "domain": col.domain,
        "attacks": found,
        "baseline": guess,
        "verdict": verdict(plan.path, col, found, guess),
    }


def names_report(codec: AbeCodec) -> JsonObject:
    """How the stored field names are protected, with their token lengths measured.

    The lengths are those of the real name tokens of every segment the schema declares
    (what the mapping and every document hold).
    """
    names = getattr(codec, "names", None)
    segment = getattr(names, "segment", None)
    lengths = (
        {len(segment(part, parent)) for path in codec.plans for parent, part in segments(path)}
        if segment is not None
        else set()
    )
    learns = "equality of field names (which documents share a field)"
    if len(lengths) == 1:
        learns += f"; not their length: every name is stored as a {min(lengths)}-character token"
    elif lengths:
        learns += f" and their length ({_values(len(lengths), 'token length')})"
    return {
        "scheme": str(getattr(names, "scheme", SIV)),
        "declared": len(codec.plans),
        "learns": learns,
        "length_classes": len(lengths) if lengths else None,
    }


def analyse(
    codec: AbeCodec,
    documents: Iterable[JsonMapping],
    auxiliary: Iterable[JsonMapping] | None,
    *,
    source: str,
    auxiliary_label: str,
) -> JsonObject:
    """The leakage report of ``codec``'s schema on ``documents`` (see the module docstring).

    ``auxiliary`` is the attacker's sample of similar documents, or None for a uniform one
    (OPE: uniform over each field's grid; deterministic: each distinct value of the sample
    once).  ``source`` and ``auxiliary_label`` describe both in the report.
    """
    sample = list(documents)
    aux = list(auxiliary) if auxiliary is not None else None
    fields = []
    for path, plan in codec.plans.items():
        points = plan.kind == "geo"
        values = column(sample, path, points)
        aux_values = column(aux, path, points) if aux is not None else None
        fields.append(field_report(build_column(plan, values, aux_values), aux is None))
    return {
        "version": VERSION,
        "threat_model": THREAT_MODEL + (SINGLE_KEY if codec.key_mode == "single" else ""),
        "references": list(REFERENCES),
        "documents": len(sample),
        "source": source,
        "auxiliary": auxiliary_label,
        "key_mode": codec.key_mode,
        "names": names_report(codec),
        "fields": fields,
    }


UNIFORM = (
    "uniform ({why}): OPE fields uniform over their declared grid, deterministic fields "
    "uniform over the distinct values of the sample"
)


def _seed(track: Track, options: JsonMapping) -> int | None:
    """The generator seed the session gives the track, if the track declares a ``seed``."""
    option = next((o for o in track.options if o.name == "seed"), None)
    seed = options.get("seed", option.default) if option is not None else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def auxiliary_sample(
    track: Track, options: JsonMapping, corpus: Corpus, documents: int, work_dir: Path
) -> tuple[list[JsonObject] | None, str]:
    """The attacker's auxiliary documents and their label; None (and why) for uniform.

    A second sample of the track's generator with another seed, written under
    ``work_dir``.  Only when the track's corpus really comes from that generator: a track
    that ingests a file of its own (``documents_file``) returns it for any seed, and that
    file as "auxiliary data" would be the plaintext itself.
    """
    seed = _seed(track, options)
    if seed is None:
        return None, UNIFORM.format(why="the track has no generator seed")
    other = seed + 1
    wanted = {**options, "seed": other}
    if any(o.name == "documents" for o in track.options):
        wanted["documents"] = max(documents, 1)
    found = track.corpus(wanted, work_dir)
    if found.path == corpus.path or (found.origin or {}).get("seed") != other:
        return None, UNIFORM.format(why="the track's corpus does not come from its generator")
    aux = read_documents(found, documents)
    return aux, f"a second sample of the track's generator (seed {other}), {len(aux):,} documents"


def report_for(
    session: Session,
    track: Track,
    corpus: Corpus,
    codec: AbeCodec,
    *,
    documents: int = DOCUMENTS,
    work_dir: Path,
) -> JsonObject:
    """The report on the first ``documents`` documents of ``corpus`` (:func:`analyse`).

    The auxiliary sample comes from :func:`auxiliary_sample`: the track's generator with
    another seed (under ``work_dir``, which the caller removes), else uniform.
    """
    sample = read_documents(corpus, documents)
    seed = (corpus.origin or {}).get("seed")
    where = f"corpus {track.name}" + (f" (seed {seed})" if seed is not None else "")
    source = f"{where}, first {len(sample):,} documents"
    options = dict(session.track.options)
    aux, label = auxiliary_sample(track, options, corpus, len(sample), work_dir)
    return analyse(codec, sample, aux, source=source, auxiliary_label=label)
