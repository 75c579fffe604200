"""The one number formatter of every viewer: dashboard, headless summary, reports, compare.

Latencies are given in seconds (the unit of the stream and the live model); ``results.json``
keeps milliseconds, so its readers convert with :func:`from_ms` first.  Output is short,
fixed-width-friendly ASCII, ``-`` for unknown.  :func:`table` aligns text tables with rich
(plain ASCII, no colour codes) for logs, summaries and ``esdash doctor``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from rich.box import Box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from esdash.stats import error_rate

NA = "-"

#: A table box with nothing but a dashed rule under the header, ASCII only.
_HEADER_RULE = Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)


def from_ms(milliseconds: float | None) -> float | None:
    """Seconds from milliseconds (``results.json`` stores latency statistics in ms)."""
    return None if milliseconds is None else milliseconds / 1000.0


#: A kind of number's formats by size: ``(bound, format spec)`` pairs, smallest bound first
#: (:func:`_by_size` reads them).  A table per kind keeps every viewer's cells short and
#: their precision decided in one place.
_Ladder = tuple[tuple[float, str], ...]

#: Milliseconds: about three significant digits, then whole seconds.
_MS: _Ladder = ((1, ".3f"), (10, ".2f"), (1000, ".1f"), (100_000, ",.0f"))
#: Events per second: one decimal below 1,000, whole numbers to a million.
_RATE: _Ladder = ((1000, ".1f"), (1_000_000, ",.0f"))
#: Exact counts with separators below a billion.
_COUNT: _Ladder = ((1_000_000_000, ","),)


def _by_size(value: float, ladder: _Ladder, unit: float, beyond: str) -> str:
    """``value`` in the first format of ``ladder`` whose bound it stays below; at or above
    them all, ``value / unit`` in the format ``beyond`` (which carries the unit's suffix)."""
    for bound, spec in ladder:
        if value < bound:
            return format(value, spec)
    return beyond.format(value / unit)


def ms(seconds: float | None) -> str:
    """Seconds shown as milliseconds with about three significant digits."""
    if seconds is None:
        return NA
    return _by_size(seconds * 1000.0, _MS, 1000, "{:,.0f}s")


def rate(value: float | None) -> str:
    """Events per second: one decimal below 1,000, whole numbers to a million, then ``M``."""
    return NA if value is None else _by_size(value, _RATE, 1e6, "{:,.1f}M")


def count(value: int | None) -> str:
    """Exact counts with separators below a billion (``12,345,678``), then ``G``."""
    return NA if value is None else _by_size(value, _COUNT, 1e9, "{:.1f}G")


def factor(value: float | None) -> str:
    return NA if value is None else f"{value:.2f}"


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    if seconds is None:
        return NA
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def percent(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def change(value: float | None) -> str:
    """A relative change as ``+12.3%`` (``-`` when unknown)."""
    if value is None:
        return NA
    return f"{value * 100:+.1f}%"


def errors(failed: int, requests: int) -> str:
    """``0``, or the failed count with its share of the requests (``12 (0.40%)``)."""
    rate = error_rate(failed, requests)
    if not failed or rate is None:
        return "0"
    return f"{failed:,} ({rate * 100:.2f}%)"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """Rows aligned under ``headers`` (the first ``left`` columns left-aligned), as lines."""
    grid = Table(
        box=_HEADER_RULE,
        pad_edge=False,
        show_edge=False,
        padding=(0, 1, 0, 0),
        header_style="",
    )
    for index, header in enumerate(headers):
        justify: JustifyMethod = "left" if index < left else "right"
        grid.add_column(Text(header), justify=justify, no_wrap=True)
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))  # text, never markup: "[x]" stays "[x]"
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=10_000, color_system=None, force_terminal=False, highlight=False
    )
    console.print(grid)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]


def short_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def counted(number: int | float | None, noun: str, plural: str | None = None) -> str:
    """``1 node``, ``3 nodes``, ``1 worker/node``: a number with its noun in the right
    number (``plural`` where adding an "s" to the first word is not it)."""
    if number == 1:
        return f"1 {noun}"
    if plural is None:
        first, _, rest = noun.partition("/")
        plural = f"{first}s/{rest}" if rest else f"{noun}s"
    return f"{NA if number is None else f'{number:g}'} {plural}"
