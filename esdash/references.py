"""References: the figures a session expects per query, with tolerances (as ReFrame has them).

This module reads and checks the session's ``[references]`` table (it sits on the session's
floor, so a session is checked when it is read); :mod:`esdash.view.references` judges
results against it.  The table::

    [references.age_weight]
    throughput = [300, -0.10, 0.20]   # req/s: 300, worse below -10 %, better above +20 %
    p50 = [8.0, -0.50, 0.25]          # ms: worse above +25 %, better below -50 %
    error_rate = [0.0, 0.0, 0.01]     # fraction of requests; bounds are absolute here

Each figure is ``[value, lower, upper]`` (or a table ``{value, lower, upper}``): the
tolerances are fractions of the value (``lower`` <= 0 <= ``upper``), except for
``error_rate``, whose reference is usually 0 and whose bounds are absolute fractions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from esdash.errors import BadInput

#: Figures a reference may name, and whether a higher value is better.
FIGURES = {"throughput": True, "p50": False, "p90": False, "p99": False, "error_rate": False}
UNITS = {"throughput": "/s", "p50": " ms", "p90": " ms", "p99": " ms", "error_rate": ""}


@dataclass(frozen=True)
class Reference:
    """One figure of one query: the value and the tolerated deviations."""

    query: str
    figure: str
    value: float
    lower: float
    upper: float

    @property
    def absolute(self) -> bool:
        return self.figure == "error_rate"

    def bounds(self) -> tuple[float, float]:
        """The lowest and highest value inside the tolerances."""
        if self.absolute:
            return self.value + self.lower, self.value + self.upper
        return self.value * (1 + self.lower), self.value * (1 + self.upper)

    @property
    def higher_is_better(self) -> bool:
        return FIGURES[self.figure]

    def show(self, value: float) -> str:
        if self.figure == "error_rate":
            return f"{value * 100:.3g} %"
        return f"{value:.4g}{UNITS[self.figure]}"

    def deviation(self, actual: float) -> str:
        """How far ``actual`` is from the reference, as the tolerances are written."""
        if self.absolute:
            return f"{(actual - self.value) * 100:+.3g} points"
        if self.value == 0:
            return "n/a"
        return f"{(actual / self.value - 1) * 100:+.1f} %"


def _bad(path: str, why: str) -> BadInput:
    return BadInput(
        f"{path}: {why}; write [value, lower, upper], e.g. throughput = [300, -0.10, 0.20]"
    )


def parse_references(
    table: Mapping[str, object], where: str = "references"
) -> tuple[Reference, ...]:
    """The session's ``[references]`` table as references; :class:`BadInput` names the key."""
    found: list[Reference] = []
    for query, figures in table.items():
        if not isinstance(figures, Mapping):
            raise _bad(f"{where}.{query}", "expected a table of figures")
        for figure, spec in figures.items():
            path = f"{where}.{query}.{figure}"
            if figure not in FIGURES:
                raise BadInput(f"{path}: unknown figure; references name {', '.join(FIGURES)}")
            if isinstance(spec, Mapping):
                spec = [spec.get("value"), spec.get("lower", 0.0), spec.get("upper", 0.0)]
            if not isinstance(spec, list) or len(spec) != 3:
                raise _bad(path, "expected three numbers")
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in spec):
                raise _bad(path, "expected three numbers")
            value, lower, upper = (float(x) for x in spec)
            if not lower <= 0 <= upper:
                raise _bad(path, f"lower must be <= 0 <= upper, found {lower:g} and {upper:g}")
            if value < 0:
                raise _bad(path, f"a reference value is not negative, found {value:g}")
            found.append(Reference(str(query), figure, value, lower, upper))
    return tuple(found)
