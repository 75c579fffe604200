"""Helpers for the dashboard tests: the canned run directories, a clock, waiting, screen text.

``tests/fixtures/runs/`` holds two short real runs (``trim.py`` there says how they were
made): ``dev-…`` with one bench rank and ``dev2-…`` with two.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN_A = "dev-20261121-032918"
RUN_B = "dev2-20261121-033750"


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "stream.jsonl").read_text().splitlines()]


def write_records(path: Path, items: list[dict[str, Any]], mode: str = "a") -> None:
    with path.open(mode) as handle:
        for record in items:
            handle.write(json.dumps(record) + "\n")


class Clock:
    """A settable wall clock for the dashboard (``clock=`` of the app and screens)."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app run until ``condition()`` holds (or fail after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.05)


def screen_text(app: Any) -> str:
    """What the terminal shows, as plain text (the screenshot without colours)."""
    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def pilot_test(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run an ``async def`` test with ``asyncio.run`` (no async plugin needed)."""
    import asyncio
    import functools

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(function(*args, **kwargs))

    return run
