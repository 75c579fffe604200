"""Progress of long phases: a line as a phase begins, then a sign of life every 1.5 s.

Issue 17, item 6: ``cluster up`` was silent for two minutes, ``run`` for 30 s, ``report`` for
27 s.  Every phase that can take longer than :data:`TICK` seconds now runs inside
:meth:`Progress.phase`, which says what begins *before* the first blocking call, and a
ticker thread keeps saying that the phase is alive while the call blocks:

* on a terminal (the stream is a TTY) a rich display: spinner, the phase, a bar when the
  total is known, the elapsed time; the lines a phase notes (one per node, say) appear
  above it, and a finished phase leaves one line with its duration;
* otherwise (batch logs, pipes) plain lines: ``esdash: starting 3 node(s) ...`` as the
  phase begins, ``esdash: starting 3 node(s): 1 of 3 running (4 s)`` whenever nothing was
  printed for :data:`TICK` seconds, and ``...: done in 12.3 s`` at the end of a phase that
  lasted that long.  No control characters, so logs read well with ``less`` and ``grep``.

A phase may also *poll* (a function the ticker calls every ``every`` seconds, in its
thread): the cluster start reads the nodes' status files with it and notes each node's
change.  Code deep inside a phase reports its headway with :func:`advance` without being
handed the phase (the report's figures).  The clock is injectable so tests drive the
ticker with a fake one and assert what was printed, never how long anything took.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from esdash.errors import EsdashError

if TYPE_CHECKING:
    import rich.progress

#: Seconds of silence after which a running phase says it is still alive: under issue 17's
#: 2 s goal for the longest silence, with room for a ticker thread that wakes late on a
#: loaded node.
TICK = 1.5

#: Seconds a phase of quick checks stays silent: a refusal within them is its one line.
CHECKS_GRACE = 0.5

#: Seconds between two calls of a phase's ``poll`` function.
POLL_EVERY = 0.5

#: ``ESDASH_PROGRESS=plain`` forces plain lines on a terminal (screen readers, recordings).
PLAIN_VARIABLE = "ESDASH_PROGRESS"


class Clock(Protocol):
    """Time as the ticker sees it: monotonic seconds, and a wait a stop request ends."""

    def now(self) -> float: ...

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait ``seconds`` or until ``stop`` is set; True when it was set."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``Event.wait``."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(seconds)


def _seconds(value: float) -> str:
    """``4 s``, and ``2 min 05 s`` past two minutes (a tick line's running time)."""
    if value >= 120:
        minutes, rest = divmod(int(value), 60)
        return f"{minutes} min {rest:02d} s"
    return f"{value:.0f} s"


class Phase:
    """One long phase: what it does, how far it is, and the ticker that keeps it audible."""

    def __init__(
        self,
        progress: Progress,
        what: str,
        total: int | None,
        poll: Callable[[Phase], None] | None,
        every: float,
        announce_after: float = 0.0,
    ) -> None:
        self.progress = progress
        self.what = what
        self.announce_after = announce_after
        self.announced = False
        self.total = total
        self.done = 0
        self.detail = ""
        self.poll = poll
        self.every = every
        self.started = progress.clock.now()
        self.ended: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: rich.progress.TaskID | None = None

    # -- what code inside the phase calls

    def update(self, detail: str | None = None, done: int | None = None) -> None:
        """Say how far the phase is (shown by the next tick, or at once on a terminal)."""
        if detail is not None:
            self.detail = detail
        if done is not None:
            self.done = done
        self.progress._refresh(self)

    def advance(self, detail: str | None = None, by: int = 1) -> None:
        """One more item of the phase done (a figure drawn, a node up)."""
        self.update(detail, self.done + by)

    def note(self, text: str) -> None:
        """A line about this phase worth keeping (a node's change of state)."""
        self.progress.line(text)

    @property
    def elapsed(self) -> float:
        end = self.ended if self.ended is not None else self.progress.clock.now()
        return end - self.started

    def status(self) -> str:
        """``1 of 3 running`` or the detail, for the tick line and the terminal display."""
        count = f"{self.done} of {self.total}" if self.total else ""
        return " ".join(part for part in (count, self.detail) if part)

    # -- as a ``with`` block (:attr:`Progress.phase`)

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """End the phase; a block that raised makes it a failed one (see :meth:`Progress.end`)."""
        self.progress.end(self, failed=kind is not None)

    # -- the ticker

    def _run_ticker(self) -> None:
        """Wake when the silence reaches the tick (and every ``every`` s to poll)."""
        progress = self.progress
        while not progress.clock.wait(self._next_wake(), self._stop):
            self._poll_once()
            try:
                progress._tick(self)
            except (OSError, ValueError):  # the stream is closed (a pipe's reader left)
                return

    def _next_wake(self) -> float:
        progress = self.progress
        if not self.announced:
            return max(self.started + self.announce_after - progress.clock.now(), 0.0)
        due = progress.last_output + progress.tick - progress.clock.now()
        if due <= 0:
            due = progress.tick
        return min(due, self.every) if self.poll else due

    def _poll_once(self) -> None:
        """One poll; a file read half-written or being replaced waits for the next one."""
        if self.poll is None:
            return
        with contextlib.suppress(OSError, ValueError, LookupError, EsdashError):
            self.poll(self)

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run_ticker, name=f"esdash-progress: {self.what}", daemon=True
        )
        self._thread.start()

    def _finish(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._poll_once()  # the last change (the node that became ready) is not lost
        self.ended = self.progress.clock.now()


class Progress:
    """Where phases print (a stream), how (terminal or plain lines) and by which clock."""

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        tty: bool | None = None,
        clock: Clock | None = None,
        tick: float = TICK,
        prefix: str = "esdash: ",
    ) -> None:
        self.out = out if out is not None else sys.stderr
        self.tty = _is_terminal(self.out) if tty is None else tty
        self.clock: Clock = clock or MonotonicClock()
        self.tick = tick
        self.prefix = prefix
        self.phases: list[Phase] = []
        self.last_output = self.clock.now()
        self._lock = threading.RLock()
        self._display: rich.progress.Progress | None = None

    # -- lines

    def line(self, text: str) -> None:
        """Print one line (above the terminal display, if one is shown)."""
        text = text.removeprefix(self.prefix)
        with self._lock:
            if self._display is not None:
                self._display.console.print(text, markup=False, highlight=False)
            else:
                self.out.write(f"{self.prefix}{text}\n")
                self.out.flush()
            self.last_output = self.clock.now()

    def touch(self) -> None:
        """Something else printed just now (the run's live lines): no tick needed yet."""
        with self._lock:
            self.last_output = self.clock.now()

    # -- phases

    def begin(
        self,
        what: str,
        total: int | None = None,
        poll: Callable[[Phase], None] | None = None,
        every: float = POLL_EVERY,
        announce_after: float = 0.0,
    ) -> Phase:
        """Say that ``what`` begins, keep saying it runs, and how long it took once it ends
        (:meth:`end`, or the end of its ``with`` block: see :attr:`phase`).

        The first line is printed at once, so before the phase's first blocking call.
        ``announce_after`` (seconds) delays it for phases that are mostly quick checks: one
        that ends sooner prints nothing, so a refusal stays the one line of its error.
        """
        what = what.removeprefix(self.prefix)
        phase = Phase(self, what, total, poll, every, announce_after)
        with self._lock:
            self.phases.append(phase)
            _ACTIVE.append(phase)
            if announce_after <= 0:
                self._announce(phase)
        phase._start()
        return phase

    #: ``with progress.phase(what, ...) as phase:`` -- :meth:`begin` as a ``with`` block: a
    #: :class:`Phase` is its own context manager, which ends it (failed if the block raises).
    phase = begin

    def _announce(self, phase: Phase) -> None:
        """The phase's first sign: its line, or its row in the terminal display."""
        phase.announced = True
        if self.tty:
            self._show(phase)
        else:
            self.line(f"{phase.what} ...")

    def end(self, phase: Phase, failed: bool = False) -> None:
        """End ``phase``: stop its ticker and say how long it took if that was noticeable.

        A ``failed`` phase says nothing more: the error that ended it is the next line.
        """
        phase._finish()
        with self._lock:
            if phase in self.phases:
                self.phases.remove(phase)
            if phase in _ACTIVE:
                _ACTIVE.remove(phase)
            if self._display is not None and phase._task is not None:
                self._display.remove_task(phase._task)
                if not failed:
                    self.line(_done_line(phase))
            elif phase.announced and phase.elapsed >= self.tick and not failed:
                self.line(_done_line(phase))
            if self._display is not None and not self.phases:
                self._display.stop()
                self._display = None

    def switch(self, what: str) -> None:
        """End the current phase (if any) and begin ``what``: a ``say`` for step-by-step work."""
        if self.phases:
            self.end(self.phases[-1])
        self.begin(what)

    def close(self, failed: bool = False) -> None:
        """End every phase still open (innermost first); ``failed``: see :meth:`end`."""
        while self.phases:
            self.end(self.phases[-1], failed)

    # -- ticker and terminal

    def _tick(self, phase: Phase) -> None:
        """Called by the ticker: on plain lines, a sign of life after :attr:`tick` s silence."""
        with self._lock:
            if phase not in self.phases:
                return  # ended meanwhile
            if not phase.announced:
                self._announce(phase)
                return
            if self._display is not None:
                self._refresh(phase)
                return
            if self.phases[-1] is not phase:
                return  # an inner phase speaks for now
            if self.clock.now() - self.last_output >= self.tick:
                status = phase.status()
                said = f"{status}; " if status else ""
                self.line(f"{phase.what}: {said}{_seconds(phase.elapsed)} so far")

    def _show(self, phase: Phase) -> None:
        if self._display is None:
            self._display = _rich_display(self.out)
            self._display.start()
        phase._task = self._display.add_task(phase.what, total=phase.total)

    def _refresh(self, phase: Phase) -> None:
        with self._lock:
            if self._display is None or phase._task is None:
                return
            status = phase.status()
            description = f"{phase.what}: {status}" if phase.detail else phase.what
            self._display.update(phase._task, description=description, completed=phase.done)


def _done_line(phase: Phase) -> str:
    status = f" ({phase.status()})" if phase.status() else ""
    return f"{phase.what}: done in {phase.elapsed:.1f} s{status}"


def _is_terminal(out: TextIO) -> bool:
    if os.environ.get(PLAIN_VARIABLE, "").lower() == "plain":
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def _rich_display(out: TextIO) -> rich.progress.Progress:
    """Spinner, phase, bar (a pulse while the total is unknown), count, elapsed time."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=out, highlight=False),
        transient=True,
        refresh_per_second=4,
    )


#: Phases open in this process, innermost last (what :func:`advance` reports to).
_ACTIVE: list[Phase] = []


def current() -> Phase | None:
    """The innermost open phase of this process, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def advance(detail: str | None = None, by: int = 1) -> None:
    """Report one more item done to the innermost open phase (nothing when none is open).

    For code several calls deep inside a phase that is not handed it (a figure drawn inside
    ``write_report``): the phase's owner opened it, this only moves it on.
    """
    phase = current()
    if phase is not None:
        phase.advance(detail, by)


def for_stderr() -> Progress:
    """The CLI's progress: on standard error, so standard output keeps only the results."""
    return Progress(sys.stderr)


class _Nowhere:
    """A stream that keeps nothing (for :class:`Silent`)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class Silent(Progress):
    """No output at all: for callers that print their own progress, and for library use."""

    def __init__(self) -> None:
        super().__init__(_Nowhere(), tty=False)  # type: ignore[arg-type]
