"""Number formatting for the dashboard: short, fixed-width-friendly, ``-`` for unknown."""

from __future__ import annotations

from pathlib import Path

NA = "-"


def ms(seconds: float | None) -> str:
    """Seconds shown as milliseconds with about three significant digits."""
    if seconds is None:
        return NA
    value = seconds * 1000.0
    if value < 1:
        return f"{value:.3f}"
    if value < 10:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:.1f}"
    if value < 100_000:
        return f"{value:,.0f}"
    return f"{value / 1000:,.0f}s"


def rate(value: float | None) -> str:
    if value is None:
        return NA
    if value < 100:
        return f"{value:.1f}"
    if value < 100_000:
        return f"{value:,.0f}"
    if value < 10_000_000:
        return f"{value / 1000:,.0f}k"
    return f"{value / 1e6:,.1f}M"


def count(value: int | None) -> str:
    if value is None:
        return NA
    if value < 1_000_000:
        return f"{value:,}"
    if value < 1_000_000_000:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1e9:.1f}G"


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


def short_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
