"""The ABE codec: field plans from the track's schema, documents, the mapping, responses.

Every field of the track's schema gets a :class:`FieldPlan`:

- numbers and dates: an order-preserving cipher over a grid
  (:mod:`esdash_plugins.encryption.abe.values`) into an output range sized from the grid
  (:func:`out_range_for`), mapped as ``integer`` (ranges of up to 31 bits) or ``long``;
- text, keywords and booleans: deterministic AES-SIV, mapped as ``keyword``;
- geo points: the whole point (an array, object or string) as one AES-SIV token of its
  canonical JSON, mapped as ``keyword``: documents round-trip and ``exists`` works, geo
  queries are refused (they need the coordinates).

The plans are resolved once by the orchestrator (:func:`plan_fields`) and travel in
``bench.json`` as plain data (:meth:`AbeCodec.spec`), so a bench rank rebuilds the codec
without loading the track, and derives its keys once per process.

Ingest is batched: :meth:`AbeCodec.encode_documents` walks a bulk request's documents once,
takes every value it has seen before from per-field caches, and encrypts the new numeric
values of each field with one ``encrypt_many`` call (deduplicated and sorted, which the OPE
core turns into shared tree walks).  Query rewriting lives in
:mod:`esdash_plugins.encryption.abe.query`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from esdash.plugin_api import BadInput, ClientCodec, FieldSpec, JsonMapping, JsonObject, JsonValue

from . import keys as keylib
from .names import NameCipher
from .native_lines import line_encoder
from .opecore import OpeContext, ope_cipher
from .values import (
    DayGrid,
    Grid,
    NumberGrid,
    OffGrid,
    Scalar,
    SecondGrid,
    StringCipher,
    foreign,
)

SCHEME = "esdash-abe/2"
#: Version of the stored format (names, value encodings, output ranges), written into the
#: index's ``_meta.esdash`` so an index of another version is re-ingested, never misread.
#: 1: AES-SIV names, OPE output range 2^48 (2^53 for domains beyond 2^32).  2: PRF names
#: for the schema's fields, OPE output range from the field's domain (:func:`out_range_for`).
FORMAT = 2
#: Fewest bits of an OPE output range: a 31-bit range still maps to an ``integer`` field.
OUT_MIN_BITS = 31
#: Bits an OPE output range has beyond its input domain.
OUT_EXTRA_BITS = 16
#: Most bits of an OPE output range: at or below 2^53 - 1 every JSON consumer keeps full
#: precision (Elasticsearch returns min/max aggregations as doubles) and all pyope 0.2.x
#: releases agree.  Only the date-time grid (45 bits) reaches it.
OUT_MAX_BITS = 53
#: The largest OPE ciphertext an ``integer`` field holds.
INTEGER_MAX = 2**31 - 1


def out_range_for(top: int) -> tuple[int, int]:
    """The OPE output range of a domain ``[0, top]``: b = max(31, input bits + 16) bits.

    pyope's ciphertexts spread over whatever range they get; 16 bits beyond the domain keep
    its gaps wide while the stored numbers stay short (an MRI age needs 23 bits, not 48),
    and a range of at most 31 bits is indexed as ``integer`` instead of ``long``.  Capped at
    :data:`OUT_MAX_BITS`.
    """
    bits = max(1, top.bit_length())
    if bits > OUT_MAX_BITS:
        raise BadInput(f"an OPE domain of {bits} bits exceeds the {OUT_MAX_BITS}-bit limit")
    width = min(OUT_MAX_BITS, max(OUT_MIN_BITS, bits + OUT_EXTRA_BITS))
    return (0, 2**width - 1)


STRING_TYPES = {
    "keyword",
    "constant_keyword",
    "wildcard",
    "text",
    "match_only_text",
    "text+keyword",
}
#: String types whose queries are analysed (full-text): only exact forms survive encryption.
TEXT_TYPES = {"text", "match_only_text", "text+keyword"}
INTEGER_TYPES = {"integer", "long", "short", "byte", "unsigned_long"}
FLOAT_TYPES = {"float", "double", "half_float", "scaled_float"}
DATE_TYPES = {"date", "date_nanos"}
BOOLEAN_TYPES = {"boolean"}
#: Types whose whole value (an array or object too) is one deterministic token.
GEO_TYPES = {"geo_point"}
#: Elasticsearch date formats and the grid that represents them exactly.
DATE_FORMATS = {
    "yyyy-MM-dd": ("day", ""),
    "strict_date": ("day", ""),
    "date": ("day", ""),
    "yyyy-MM-dd HH:mm:ss": ("second", "space"),
    "yyyy-MM-dd'T'HH:mm:ss": ("second", "t"),
    None: ("second", "iso"),
    "strict_date_optional_time": ("second", "iso"),
    "date_optional_time": ("second", "iso"),
    "strict_date_optional_time||epoch_millis": ("second", "iso"),
}
#: Cached values per field before a cache starts over (bounded memory on long runs).
CACHE_LIMIT = 65536
#: Cached JSON members per top-level field for the line encoder (bounded memory: the
#: high-cardinality fields of a corpus churn through it, the others stay).
PIECE_LIMIT = 16384
#: Value types whose pieces the line encoder looks up directly (hashable, never a bool).
_SCALARS: set[type[Scalar]] = {str, int, float}
#: The probe document's string and date (:meth:`AbeCodec.layout`).
PROBE = "esdash-layout-probe"
PROBE_DAY = 20000101
#: One compact encoder for all documents (``json.dumps`` with options builds one per call).
_DUMPS = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


class EncodeError(BadInput):
    """A document value the codec cannot encrypt faithfully (names the field and why)."""


@dataclass
class FieldPlan:
    """How one field is encrypted.  ``grid`` is set for OPE fields (``kind == "ope"``)."""

    path: str
    type: str
    kind: str  # "ope" | "string" | "boolean" | "geo"
    grid: Grid | None = None
    grid_spec: JsonObject = field(default_factory=dict)
    name: str = ""
    cipher: OpeContext | None = None
    strings: StringCipher | None = None
    out_range: tuple[int, int] = (0, 2**OUT_MAX_BITS - 1)
    #: plaintext value -> OPE ciphertext (OPE fields)
    enc: dict[Scalar, int] = field(default_factory=dict, repr=False)
    #: stored value -> plaintext value
    dec: dict[Scalar, Scalar] = field(default_factory=dict, repr=False)

    def __hash__(self) -> int:
        return id(self)

    @property
    def analysed(self) -> bool:
        return self.type in TEXT_TYPES

    def to_dict(self) -> JsonObject:
        return {"path": self.path, "type": self.type, "kind": self.kind, "grid": self.grid_spec}

    @property
    def ope_grid(self) -> Grid:
        """The grid of an OPE field."""
        if self.grid is None:
            raise TypeError(f"field {self.path} is not encrypted with OPE")
        return self.grid

    @property
    def ope(self) -> OpeContext:
        """The OPE context of an OPE field."""
        if self.cipher is None:
            raise TypeError(f"field {self.path} is not encrypted with OPE")
        return self.cipher

    @property
    def siv(self) -> StringCipher:
        """The AES-SIV cipher of a string or boolean field."""
        if self.strings is None:
            raise TypeError(f"field {self.path} is not encrypted with AES-SIV")
        return self.strings

    # ---------------------------------------------------------------- single values

    def index(self, value: JsonValue) -> int:
        try:
            return self.ope_grid.index(value)
        except OffGrid as exc:
            raise EncodeError(f"field {self.path}: {exc}") from None

    def encrypt_index(self, index: int) -> int:
        return self.ope.encrypt(index)

    def decrypt_index(self, ciphertext: int) -> int:
        return self.ope.decrypt(ciphertext)

    def encrypt_value(self, value: JsonValue) -> int | str:
        """One value as stored in the cluster (no batching: queries and tests)."""
        if self.kind == "ope":
            return self.ope.encrypt(self.index(value))
        return self.siv.encrypt(self.text(value))

    def text(self, value: JsonValue) -> str:
        """The string a string field stores for ``value`` (what Elasticsearch would index)."""
        if self.kind == "geo":
            return self._geo_text(value)
        if isinstance(value, str):
            if self.kind == "boolean" and value not in ("true", "false"):
                raise EncodeError(f"field {self.path}: {value!r} is not a boolean")
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if self.kind == "boolean":
            raise EncodeError(f"field {self.path}: {value!r} is not a boolean")
        if isinstance(value, int | float):
            return json.dumps(value)
        raise EncodeError(f"field {self.path}: cannot encrypt a JSON {type(value).__name__}")

    def _geo_text(self, value: JsonValue) -> str:
        """The canonical JSON of a geo point (``[lon, lat]``, ``{"lat", "lon"}``, ``"lat,lon"``
        or geohash text): equal points in one notation are one token."""
        valid = (
            isinstance(value, str)
            or (
                isinstance(value, list)
                and len(value) in (2, 3)
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            )
            or (isinstance(value, dict) and {"lat", "lon"} <= set(value))
        )
        if not valid:
            raise EncodeError(f"field {self.path}: {str(value)[:60]!r} is not a geo point")
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    def decrypt_value(self, stored: Scalar | None) -> JsonValue:
        """The plaintext of a stored value (cached both ways)."""
        found = self.dec.get(stored) if stored is not None else None
        if found is not None:
            return found
        if self.kind == "ope":
            if isinstance(stored, bool) or not isinstance(stored, int | float):
                raise ValueError(f"field {self.path}: {stored!r} is not an OPE ciphertext")
            found = self.ope_grid.value(self.ope.decrypt(int(stored)))
        elif isinstance(stored, str):
            text = self.siv.decrypt(stored)
            if self.kind == "geo":  # a list or object: not cached (callers may change it)
                point: JsonValue = json.loads(text)
                return point
            found = text == "true" if self.kind == "boolean" else text
        else:  # a string field stores tokens: nothing else is this codec's
            what = f"field {self.path}: the stored value {str(stored)[:40]!r}"
            raise foreign(what, TypeError(f"a {type(stored).__name__}, not a token"))
        if len(self.dec) >= CACHE_LIMIT:
            self.dec.clear()
        self.dec[stored] = found
        return found


#: What :meth:`AbeCodec._entry` keeps per key of an object: (encrypted key, plan, whether
#: OPE, value cache, JSON member prefix ``"<encrypted key>":``, piece cache).
_Entry = tuple[
    str,
    FieldPlan | None,
    bool,
    "dict[Scalar, int] | dict[str, str]",
    str,
    "dict[Scalar, str]",
]
#: The JSON members of one document's line, in key order (None until encrypted).
_Pieces = list["str | None"]
#: A new OPE value of an ingest line, encrypted with its field's batch: (pieces, position,
#: value, grid index).
_PieceSlot = tuple[_Pieces, int, Scalar, int]
#: A field of an ingest line that takes the dictionary path: (pieces, position, JSON member
#: prefix, encoded holder object, encrypted key).
_Deferred = tuple[_Pieces, int, str, JsonObject, str]
#: A new OPE value of a document, encrypted with its field's batch: (container, where,
#: value, grid index), the container an object and ``where`` its key, or an array and an
#: index (a pairing the types cannot express).
_Slot = tuple[Any, Any, Scalar, int]


def _grid_for(spec: FieldSpec, date_format: str | None) -> tuple[Grid, JsonObject]:
    kind = spec.type
    if kind in DATE_TYPES:
        if date_format not in DATE_FORMATS:
            raise BadInput(
                f"field {spec.path}: date format {date_format!r} cannot be encrypted "
                f"order-preservingly; use one of {', '.join(str(f) for f in DATE_FORMATS if f)}"
            )
        grid_kind, pattern = DATE_FORMATS[date_format]
        if grid_kind == "day":
            return DayGrid(), {"kind": "day"}
        return SecondGrid(pattern), {"kind": "second", "pattern": pattern}
    integral = kind in INTEGER_TYPES
    step = spec.step if spec.step is not None else (1 if integral else None)
    missing = [n for n, v in (("minimum", spec.minimum), ("maximum", spec.maximum)) if v is None]
    if step is None:
        missing.append("step")
    if missing:
        raise BadInput(
            f"field {spec.path} ({kind}): the track's schema gives no {', '.join(missing)}; "
            "ABE needs the value range and step of every numeric field to choose its "
            "order-preserving domain (FieldSpec(path, type, minimum, maximum, step))"
        )
    try:
        grid = NumberGrid(spec.minimum, spec.maximum, step, integral)
    except (ValueError, OffGrid) as exc:
        raise BadInput(f"field {spec.path}: {exc}") from None
    return grid, {
        "kind": "number",
        "minimum": grid.spec[0],
        "maximum": grid.spec[1],
        "step": grid.spec[2],
        "integral": integral,
    }


def _mapping_formats(properties: JsonMapping, prefix: str = "") -> JsonObject:
    found: JsonObject = {}
    for name, prop in (properties or {}).items():
        if not isinstance(prop, Mapping):
            continue
        path = f"{prefix}{name}"
        if "properties" in prop:
            found.update(_mapping_formats(prop["properties"], path + "."))
        elif prop.get("type") in DATE_TYPES:
            found[path] = prop.get("format")
    return found


def plan_fields(
    specs: tuple[FieldSpec, ...] | list[FieldSpec], index_body: JsonMapping | None = None
) -> list[JsonObject]:
    """Resolve the track's schema into plain field plans; refuse what ABE cannot encrypt.

    Date grids follow the mapping's ``format`` (``yyyy-MM-dd`` is a day grid, date-times a
    second grid).  Every problem is reported together.
    """
    formats = _mapping_formats(((index_body or {}).get("mappings") or {}).get("properties", {}))
    plans, problems = [], []
    if not specs:
        raise BadInput(
            "encryption mode abe: the track declares no field schema; ABE needs every field's "
            "type (and numeric ranges) to encrypt documents and rewrite queries"
        )
    for spec in specs:
        try:
            if spec.type in STRING_TYPES:
                plans.append({"path": spec.path, "type": spec.type, "kind": "string", "grid": {}})
            elif spec.type in BOOLEAN_TYPES:
                plans.append({"path": spec.path, "type": spec.type, "kind": "boolean", "grid": {}})
            elif spec.type in GEO_TYPES:
                plans.append({"path": spec.path, "type": spec.type, "kind": "geo", "grid": {}})
            elif spec.type in INTEGER_TYPES | FLOAT_TYPES | DATE_TYPES:
                _, grid = _grid_for(spec, formats.get(spec.path))
                plans.append({"path": spec.path, "type": spec.type, "kind": "ope", "grid": grid})
            else:
                raise BadInput(
                    f"field {spec.path}: type {spec.type} cannot be encrypted by ABE "
                    "(text, keyword, boolean, geo_point, numbers and dates can)"
                )
        except BadInput as exc:
            problems.append(str(exc))
    if problems:
        raise BadInput("encryption mode abe:\n  " + "\n  ".join(problems))
    return plans


def _probe_value(plan: FieldPlan) -> JsonValue:
    """The plaintext of ``plan``'s field in the layout's probe document (on its grid)."""
    if plan.kind == "string":
        return PROBE
    if plan.kind == "boolean":
        return True
    if plan.kind == "geo":
        return [13.4, 52.5]
    grid = plan.ope_grid
    if isinstance(grid, DayGrid):
        return grid.value(PROBE_DAY)
    if isinstance(grid, SecondGrid):
        return grid.value(PROBE_DAY * 1_000_000)
    return grid.value(grid.top // 2)


def _grid_from(data: JsonMapping) -> Grid:
    kind = data["kind"]
    if kind == "day":
        return DayGrid()
    if kind == "second":
        return SecondGrid(data.get("pattern", "iso"))
    return NumberGrid(data["minimum"], data["maximum"], data["step"], bool(data["integral"]))


class AbeCodec(ClientCodec):
    """AES-SIV names and strings, OPE numbers and dates; see the module docstring."""

    label = "ABE"

    def __init__(
        self,
        fields: list[JsonObject],
        source: keylib.KeySource,
        *,
        key_mode: str = "per-field",
        ope_backend: str = "auto",
        text_match: str = "words",
        decode_responses: bool = True,
        fingerprint: str | None = None,
        master: keylib.MasterKey | None = None,
        native: bool = True,
    ) -> None:
        if key_mode not in ("per-field", "single"):
            raise BadInput(f"encryption.key_mode {key_mode!r}: expected per-field or single")
        self.fields_spec = [dict(f) for f in fields]
        self.source = source
        self.key_mode = key_mode
        self.ope_backend = ope_backend
        self.text_match = text_match
        self.decode_responses = decode_responses
        #: Whether encrypted numbers are cached per field.  Not with pyope: that backend
        #: stands for the paper's cost, every number through pyope's recursion.
        self.cache_numbers = ope_backend != "pyope"
        master = master or keylib.load_master_key(source)
        self.fingerprint = master.fingerprint()
        if fingerprint is not None and fingerprint != self.fingerprint:
            raise BadInput(
                f"the key from {source.describe()} differs from the one the run was planned "
                "with (the passphrase or key file changed between the orchestrator and this "
                "rank); use one key for the whole run"
            )
        self.names = NameCipher(
            master.name_key(), master.name_prf_key(), [f["path"] for f in self.fields_spec]
        )
        self.plans: dict[str, FieldPlan] = {}
        shared: dict[tuple[tuple[int, int], tuple[int, int]], OpeContext] = {}
        for data in self.fields_spec:
            plan = FieldPlan(data["path"], data["type"], data["kind"], grid_spec=data["grid"])
            plan.name = self.names.path(plan.path)
            if plan.kind == "ope":
                grid = plan.grid = _grid_from(plan.grid_spec)
                in_range = (0, grid.top)
                plan.out_range = out_range_for(grid.top)
                key = master.ope_key(plan.path, key_mode)
                if key_mode == "single":
                    # The paper's setup: one pyope key for every field; equal ranges share
                    # one context (and its caches).
                    context = (in_range, plan.out_range)
                    if context not in shared:
                        shared[context] = ope_cipher(key, in_range, plan.out_range, ope_backend)
                    plan.cipher = shared[context]
                else:
                    plan.cipher = ope_cipher(key, in_range, plan.out_range, ope_backend)
            else:
                plan.strings = StringCipher(master.string_key(plan.path), plan.path)
            self.plans[plan.path] = plan
        #: The native fast path (:mod:`esdash_plugins.encryption.abe.native_lines`), where it
        #: is built and the OPE backend allows it; ``native=False`` keeps everything in Python
        #: (the tests' oracle, and the benchmark's comparison).
        self._native = (
            line_encoder(list(self.plans.values()), master, key_mode, ope_backend)
            if native
            else None
        )
        del master
        #: :meth:`layout`, computed on first use (the orchestrator's; ranks never need it).
        self._layout_id: str | None = None
        #: Encrypted full path -> plan (aggregations and sort name fields by encrypted path).
        self.by_name = {plan.name: plan for plan in self.plans.values()}
        #: plaintext parent prefix -> document key -> entry (see :meth:`_entry`).
        self._entries: dict[str, dict[str, _Entry]] = {}
        #: top-level key order -> the piece caches in that order (see :meth:`encode_lines`).
        self._layouts: dict[tuple[str, ...], list[dict[Scalar, str]]] = {}
        #: (plaintext parent prefix, encrypted key) -> (document key, plan or None).
        self._rkeys: dict[tuple[str, str], tuple[str, FieldPlan | None]] = {}
        for path in self.plans:
            self._entry("", path)

    # ------------------------------------------------------------------------ spec

    def spec(self) -> JsonObject:
        return {
            "scheme": SCHEME,
            "fields": self.fields_spec,
            "key": self.source.to_dict(),
            "key_mode": self.key_mode,
            "ope_backend": self.ope_backend,
            "text_match": self.text_match,
            "decode_responses": self.decode_responses,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_spec(cls, spec: JsonMapping, *, native: bool = True) -> AbeCodec:
        if spec.get("scheme") != SCHEME:
            raise BadInput(f"bench plan: unknown ABE scheme {spec.get('scheme')!r}")
        return cls(
            list(spec["fields"]),
            keylib.KeySource.from_dict(spec["key"]),
            key_mode=spec["key_mode"],
            ope_backend=spec["ope_backend"],
            text_match=spec["text_match"],
            decode_responses=bool(spec["decode_responses"]),
            fingerprint=spec["fingerprint"],
            native=native,
        )

    def layout(self) -> str:
        """Identifies the ciphertexts this codec writes; an index is reused only under it.

        The inputs (key fingerprint, key mode, field plans and grids) are not enough: a
        change of *how* they are used (associated data, subkey derivation, OPE core, text
        encoding) keeps them and changes every ciphertext.  An index written before such a
        change was reused, its strings failed to decrypt (``InvalidTag``) and its terms
        matched nothing.  So the digest also covers a known answer: a probe document with a
        value in every field, encrypted by the ingest path itself (:meth:`encode_raw_lines`,
        else :meth:`encode_lines`; both write the same bytes).
        """
        if self._layout_id is None:
            doc = self._probe_document()
            # Through the path that ingests: the native one where it takes the document.
            line = self.encode_raw_lines([json.dumps(doc).encode()])[0]
            probe = (line or self.encode_lines([doc])[0]).decode()
            text = json.dumps(
                [self.fingerprint, self.key_mode, self.fields_spec, probe], sort_keys=True
            )
            self._layout_id = hashlib.sha256(text.encode()).hexdigest()[:16]
        return self._layout_id

    def _probe_document(self) -> JsonObject:
        """A fixed value in every field of the schema (nested objects for dotted paths)."""
        doc: JsonObject = {}
        for plan in self.plans.values():
            *parents, last = plan.path.split(".")
            target = doc
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = _probe_value(plan)
        return doc

    def close(self) -> None:
        if self._native is not None:
            self._native.clear()
        for plan in self.plans.values():
            plan.enc.clear()
            plan.dec.clear()
            if plan.strings is not None:
                plan.strings.clear()
            clear = getattr(plan.cipher, "clear", None)
            if clear is not None:
                clear()

    # ---------------------------------------------------------------------- names

    def _entry(self, prefix: str, key: str) -> _Entry:
        """``(encrypted key, plan, is OPE, value cache, JSON prefix, piece cache)`` of ``key``
        in the object at ``prefix``.

        One tuple per key, so the ingest loops do one lookup per field.  The value cache maps
        plaintext to stored values (:meth:`encode_documents`); the piece cache maps plaintext
        to the whole JSON member ``"<name>":<ciphertext>`` (:meth:`encode_lines`).
        """
        table = self._entries.setdefault(prefix, {})
        found = table.get(key)
        if found is None:
            path = f"{prefix}.{key}" if prefix else key
            plan = self.plans.get(path)
            name = self.names.key(key, prefix)
            member = f'"{name}":'
            if plan is None:  # caches that stay empty: such keys take the slow paths
                found = (name, None, False, {}, member, {})
            elif plan.kind == "ope":
                found = (name, plan, True, plan.enc, member, {})
            else:
                strings = plan.siv._enc if plan.kind == "string" else {}
                found = (name, plan, False, strings, member, {})
            table[key] = found
            self._rkeys[(prefix, name)] = (key, plan)
        return found

    def _plain_key(self, prefix: str, token: str) -> tuple[str, FieldPlan | None]:
        found = self._rkeys.get((prefix, token))
        if found is None:
            key = self.names.decrypt_key(token, prefix)
            path = f"{prefix}.{key}" if prefix else key
            found = (key, self.plans.get(path))
            self._rkeys[(prefix, token)] = found
        return found

    # ------------------------------------------------------------------ documents

    def encode_document(self, doc: JsonObject) -> JsonObject:
        return self.encode_documents([doc])[0]

    def encode_raw_lines(self, lines: list[bytes]) -> list[bytes | None]:
        """The fast path: per raw corpus line its encrypted line, or ``None`` for Python.

        The native encoder takes documents whose keys are the schema's top-level fields
        with values of their declared kind, and writes exactly what :meth:`encode_lines`
        writes for them; every other line, and every line without the native module,
        comes back ``None`` for the caller to parse, check and pass to :meth:`encode_lines`.
        """
        if self._native is None:
            return [None] * len(lines)
        return self._native.encode(lines)

    def encode_lines(self, docs: list[JsonObject]) -> list[bytes]:
        """The bulk lines of a batch, written directly as JSON text (the ingest hot path).

        Each top-level field becomes one piece ``"<encrypted name>":<ciphertext>``, and a
        per-field cache maps a plaintext value to its whole piece: a value seen before
        costs one dictionary lookup, no dictionary building and no JSON encoding.  New
        numbers are encrypted per field with one ``encrypt_many`` after the walk; nested
        objects, lists and nulls go through :meth:`encode_documents`' path.  The result is
        the JSON of :meth:`encode_documents` (the tests check this).
        """
        entries = self._entries[""]
        pending: dict[FieldPlan, list[_PieceSlot]] = {}  # OPE misses
        deferred: list[_Deferred] = []  # slow fields
        slow_pending: dict[FieldPlan, list[_Slot]] = {}
        all_pieces: list[_Pieces] = []
        layouts, get, scalars = self._layouts, dict[Scalar, str].get, _SCALARS
        for doc in docs:
            # Documents of a corpus share their key order: one list of piece caches per
            # order, and the lookups of all fields run in C (map).
            keys = tuple(doc)
            caches = layouts.get(keys) or self._layout(keys)
            values = list(doc.values())
            if set(map(type, values)) <= scalars:
                pieces = list(map(get, caches, values))
            else:  # lists, objects, nulls, booleans: those fields take the path below
                pieces = [
                    get(cache, value) if value.__class__ in scalars else None
                    for cache, value in zip(caches, values, strict=True)
                ]
            if None in pieces:
                for position in [i for i, piece in enumerate(pieces) if piece is None]:
                    self._miss(
                        keys[position],
                        values[position],
                        pieces,
                        position,
                        pending,
                        deferred,
                        slow_pending,
                    )
            all_pieces.append(pieces)
        for plan, slots in pending.items():
            indices = sorted({slot[3] for slot in slots})
            table = dict(zip(indices, plan.ope.encrypt_many(indices), strict=True))
            entry = entries[plan.path] if "." not in plan.path and self.cache_numbers else None
            prefix = f'"{plan.name}":'
            for pieces, position, value, index in slots:
                piece = f"{prefix}{table[index]}"
                pieces[position] = piece
                if entry is not None:
                    self._remember(entry, value, piece)
        self._fill(slow_pending)
        for pieces, position, prefix, holder, name in deferred:
            pieces[position] = prefix + _DUMPS(holder[name])
        filled = cast("list[list[str]]", all_pieces)  # every None was replaced above
        return [("{" + ",".join(pieces) + "}").encode() for pieces in filled]

    def _layout(self, keys: tuple[str, ...]) -> list[dict[Scalar, str]]:
        """The piece caches of the fields in the order ``keys`` (unknown keys: no cache)."""
        entries = [self._entries[""].get(k) or self._entry("", k) for k in keys]
        caches = [entry[5] if entry[5] is not None else {} for entry in entries]
        if len(self._layouts) > 64:  # documents with ever-changing keys: keep it bounded
            self._layouts.clear()
        self._layouts[keys] = caches
        return caches

    def _miss(
        self,
        key: str,
        value: Any,  # the hot path tells its kind by class identity, which mypy cannot follow
        pieces: _Pieces,
        position: int,
        pending: dict[FieldPlan, list[_PieceSlot]],
        deferred: list[_Deferred],
        slow_pending: dict[FieldPlan, list[_Slot]],
    ) -> None:
        """Put the piece of a value not in its field's cache at ``pieces[position]``.

        New numbers are left for one ``encrypt_many`` per field (``pending``); keyword
        arrays are written here; objects, nulls, booleans and unknown keys take the
        dictionary path (``deferred``).
        """
        entry = self._entries[""].get(key) or self._entry("", key)
        plan = entry[1]
        kind = value.__class__
        if kind is str and plan is not None and plan.kind == "string":  # the common miss
            token = plan.siv.encrypt_uncached(value)
            pieces[position] = self._remember(entry, value, f'{entry[4]}"{token}"')
            return
        if kind is list and plan is not None and plan.kind == "string":
            encrypt, text = plan.siv.encrypt, plan.text
            try:
                items = ",".join([f'"{encrypt(text(item))}"' for item in value])
            except EncodeError:
                items = None  # nulls inside: the dictionary path
            if items is not None:
                pieces[position] = f"{entry[4]}[{items}]"
                return
        if plan is None or kind is list or kind is dict or kind is bool or value is None:
            try:
                holder = self._encode_object({key: value}, "", slow_pending)
            except TypeError:
                raise EncodeError(f"field {key}: {value!r} is not a value") from None
            deferred.append((pieces, position, entry[4], holder, entry[0]))
        elif entry[2]:
            slots = pending.get(plan)
            if slots is None:
                slots = pending[plan] = []
            slots.append((pieces, position, value, plan.index(value)))
        else:
            token = plan.siv.encrypt_uncached(plan.text(value))
            pieces[position] = self._remember(entry, value, f'{entry[4]}"{token}"')

    @staticmethod
    def _remember(entry: _Entry, value: Scalar, piece: str) -> str:
        cache = entry[5]
        if len(cache) >= PIECE_LIMIT:
            cache.clear()
        cache[value] = piece
        return piece

    def encode_documents(self, docs: list[JsonObject]) -> list[JsonObject]:
        """Encrypt a batch: cached values at once, new OPE values per field in one call."""
        pending: dict[FieldPlan, list[_Slot]] = {}
        out = [self._encode_object(doc, "", pending) for doc in docs]
        self._fill(pending)
        return out

    def _fill(self, pending: dict[FieldPlan, list[_Slot]]) -> None:
        """Encrypt the new OPE values of each field at once and put them into place."""
        for plan, slots in pending.items():
            indices = sorted({slot[3] for slot in slots})
            table = dict(zip(indices, plan.ope.encrypt_many(indices), strict=True))
            cache = plan.enc if self.cache_numbers else {}
            if len(cache) + len(slots) > CACHE_LIMIT:
                cache.clear()
            for container, where, value, index in slots:
                container[where] = cache[value] = table[index]

    def _encode_object(
        self, obj: JsonMapping, prefix: str, pending: dict[FieldPlan, list[_Slot]]
    ) -> JsonObject:
        """One object; cached values inline, everything else through the slow paths."""
        result: JsonObject = {}
        entries = self._entries.get(prefix) or {}
        key = ""
        try:
            for key, value in obj.items():
                entry = entries.get(key) or self._entry(prefix, key)
                name, plan, is_ope, cache = entry[:4]
                if (
                    plan is not None
                    and value is not None
                    and value.__class__ is not list
                    and value.__class__ is not dict
                ):
                    found = cache.get(value)
                    if found is not None and value.__class__ is not bool:
                        result[name] = found
                    elif is_ope:
                        self._ope(plan, result, name, value, pending)
                    else:
                        result[name] = plan.siv.encrypt(plan.text(value))
                else:
                    self._slow(prefix, key, entry, value, result, pending)
        except TypeError:  # an object or array where a field holds a value
            path = f"{prefix}.{key}" if prefix else key
            raise EncodeError(f"field {path}: {obj[key]!r} is not a value") from None
        return result

    def _slow(
        self,
        prefix: str,
        key: str,
        entry: _Entry,
        value: Any,  # see _miss
        result: JsonObject,
        pending: dict[FieldPlan, list[_Slot]],
    ) -> None:
        """Objects, lists, nulls and keys outside the schema."""
        name, plan, is_ope = entry[:3]
        path = f"{prefix}.{key}" if prefix else key
        if plan is None:
            if isinstance(value, dict):
                result[name] = self._encode_object(value, path, pending)
                return
            raise EncodeError(
                f"field {path} is not in the track's schema; ABE encrypts only fields whose "
                "type (and range) the track declares"
            )
        if value is None:
            result[name] = None
        elif plan.kind == "geo":  # one point (an array or object) is one token
            result[name] = plan.siv.encrypt(plan.text(value))
        elif value.__class__ is dict:
            raise EncodeError(f"field {path}: {value!r} is not a value")
        elif is_ope:
            items: list[JsonValue] = [None] * len(value)
            for position, item in enumerate(value):
                self._ope(plan, items, position, item, pending)
            result[name] = items
        else:
            result[name] = [
                None if item is None else plan.siv.encrypt(plan.text(item)) for item in value
            ]

    @staticmethod
    def _ope(
        plan: FieldPlan,
        container: Any,  # an object or an array: see _Slot
        where: str | int,
        value: Any,  # see _miss
        pending: dict[FieldPlan, list[_Slot]],
    ) -> None:
        if value is None:
            container[where] = None
            return
        if value.__class__ is bool:
            raise EncodeError(f"field {plan.path}: {value!r} is a boolean, not a number")
        found = plan.enc.get(value)  # TypeError for an object: reported by the caller
        if found is not None:
            container[where] = found
            return
        container[where] = None
        slots = pending.get(plan)
        if slots is None:
            slots = pending[plan] = []
        slots.append((container, where, value, plan.index(value)))

    def decode_document(self, doc: JsonMapping, prefix: str = "") -> JsonObject:
        """The plaintext of a stored ``_source`` (names and values)."""
        result: JsonObject = {}
        for token, value in doc.items():
            key, plan = self._plain_key(prefix, token)
            if plan is None:
                path = f"{prefix}.{key}" if prefix else key
                result[key] = (
                    self.decode_document(value, path) if isinstance(value, dict) else value
                )
            elif value is None:
                result[key] = None
            elif type(value) is list and plan.kind != "geo":
                result[key] = [None if v is None else plan.decrypt_value(v) for v in value]
            else:
                result[key] = plan.decrypt_value(value)
        return result

    # -------------------------------------------------------------------- mapping

    def encode_index_body(self, body: JsonMapping) -> JsonObject:
        """Settings kept; mappings rebuilt from the schema (OPE ``integer`` or ``long``, AES
        ``keyword``; free text without doc values).

        Every field the plaintext mapping declares must be in the schema.  ``_meta.esdash``
        records the ciphertext layout (:meth:`layout`), so an index written with another key,
        mode, schema or ciphertext format is never reused for this one.
        """
        from .query import mapping_problems

        result = {k: v for k, v in body.items() if k != "mappings"}
        mappings = dict(body.get("mappings") or {})
        problems = mapping_problems(mappings, self.plans)
        if problems:
            raise BadInput("encryption mode abe: the mapping " + "; ".join(problems))
        properties: JsonObject = {}
        for plan in self.plans.values():
            parts = plan.path.split(".")
            target = properties
            for depth, part in enumerate(parts[:-1]):
                parent = ".".join(parts[:depth])
                name = self.names.segment(part, parent)
                target = target.setdefault(name, {"properties": {}})["properties"]
            last = self.names.segment(parts[-1], ".".join(parts[:-1]))
            if plan.kind == "ope":
                small = plan.out_range[1] <= INTEGER_MAX
                target[last] = {"type": "integer" if small else "long"}
            elif plan.type in ("text", "match_only_text") or plan.kind == "geo":
                # Only exists queries remain possible on encrypted free text, and plaintext
                # text fields cannot be sorted or aggregated either: no doc values, which
                # saves the cluster a column of long random strings per document.
                target[last] = {"type": "keyword", "doc_values": False}
            else:
                target[last] = {"type": "keyword"}
        encoded: JsonObject = {"dynamic": "strict", "properties": properties}
        if "_source" in mappings:
            encoded["_source"] = {"enabled": bool(mappings["_source"].get("enabled", True))}
        meta = dict(mappings.get("_meta") or {})
        meta["esdash"] = {
            "encryption": "abe",
            "scheme": SCHEME,
            "format": FORMAT,
            "layout": self.layout(),
        }
        encoded["_meta"] = meta
        result["mappings"] = encoded
        return result

    # -------------------------------------------------------------------- queries

    def encode_query(self, body: JsonMapping) -> JsonObject:
        from .query import Rewriter

        return Rewriter(self).search(body)

    def decode_response(self, body: JsonObject, request: JsonMapping | None = None) -> JsonObject:
        from .query import decode_search

        return decode_search(self, body, request or {})
