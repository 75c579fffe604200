"""The native fast path of ABE ingest: corpus lines in, encrypted JSON objects out.

:meth:`esdash_plugins.encryption.abe.codec.AbeCodec.encode_lines` defines the encrypted form of
a document.  Doing it in Python costs about 60 µs per MRI document (a dozen new strings through
AES-SIV, new numbers onto their grid, and the JSON pieces of seventy fields), several times the
plaintext ingest's whole client cost.  ``esdash_abe_native`` (Rust, built from ``native/abe``
by ``scripts/provision`` when cargo exists) writes the same bytes from the raw corpus line for
documents whose keys are the schema's flat fields, and returns ``None`` for every other line,
which Python then encodes or rejects with its own messages.  Without the module everything runs
in Python, with identical output (the tests compare both on the whole MRI corpus and on
generated documents).

The encoder gets the keys the codec derived (names stay encrypted by Python: it passes the
finished ``"<name>":`` prefix of each field), and keeps its own bounded caches.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from .values import DayGrid, NumberGrid, SecondGrid

if TYPE_CHECKING:
    from .codec import FieldPlan
    from .keys import MasterKey

#: OPE backends the fast path stands in for; ``python`` and ``pyope`` keep every number in
#: the backend the session asked for (``pyope`` reproduces the paper's cost).
NATIVE_BACKENDS = ("auto", "native")


class LineEncoder(Protocol):
    """``esdash_abe_native.LineEncoder``: encrypted lines of the documents it takes."""

    def encode(self, lines: list[bytes]) -> list[bytes | None]: ...
    def clear(self) -> None: ...


def native_module() -> ModuleType | None:
    """``esdash_abe_native``, or ``None`` when it is not built here."""
    try:
        import esdash_abe_native  # type: ignore[import-untyped]  # built from native/abe
    except ImportError:
        return None
    module: ModuleType = esdash_abe_native
    return module


def field_spec(plan: FieldPlan, master: MasterKey, key_mode: str) -> tuple[object, ...] | None:
    """The native encoder's description of one top-level field, or ``None`` (Python's).

    The keys come from the same :class:`~esdash_plugins.encryption.abe.keys.MasterKey`
    methods as the codec's own ciphers'.
    """
    if "." in plan.path:
        return None  # nested objects and dotted keys stay in Python
    member = f'"{plan.name}":'
    if plan.kind == "string":
        return (
            "text",
            plan.path,
            member,
            master.string_key(plan.path),
            plan.path.encode(),
        )
    if plan.kind != "ope":
        return None  # booleans: few, and their text rules live in FieldPlan.text
    key = master.ope_key(plan.path, key_mode)
    grid, out_top = plan.ope_grid, plan.out_range[1]
    if isinstance(grid, DayGrid | SecondGrid):  # date-times: plain UTC ``yyyy-MM-dd HH:mm:ss``
        return (grid.kind, plan.path, member, key, grid.top, out_top)
    if isinstance(grid, NumberGrid) and _fits(grid.low, grid.step, grid.top):
        return (
            "number",
            plan.path,
            member,
            key,
            grid.top,
            out_top,
            grid.places,
            grid.low,
            grid.step,
        )
    return None  # grids beyond 64 bits stay in Python


def _fits(*values: int) -> bool:
    return all(-(2**63) <= value < 2**64 for value in values)


def line_encoder(
    plans: list[FieldPlan], master: MasterKey, key_mode: str, ope_backend: str
) -> LineEncoder | None:
    """A native ``LineEncoder`` for ``plans``, or ``None`` where the fast path does not apply.

    Only the fields it can encode are handed over; a document with any other key takes
    the Python path as a whole.
    """
    module = native_module()
    if module is None or ope_backend not in NATIVE_BACKENDS:
        return None
    specs = [spec for plan in plans if (spec := field_spec(plan, master, key_mode)) is not None]
    return module.LineEncoder(specs) if specs else None
