"""The owner of a run, and the watch its ranks keep on it: nothing outlives its run.

A run's cluster and bench ranks are started by an orchestrator -- ``esdash run``, ``esdash
cluster up --foreground``, a sweep -- that stops them on every signal it can catch.  What it
cannot catch (SIGKILL, the OOM killer, a supervisor's SIGTERM-then-SIGKILL that cuts its
clean-up short, a lost login host) used to leave nodes and bench ranks running with nobody
to stop them.  So the orchestrator holds a lease the ranks can see die without its help:

* :func:`hold` writes ``owner.json`` in the run directory -- the owner's identity (pid, host,
  create time, command line), the grace, and a ``beat`` -- and renews it every
  :data:`RENEW_SECONDS` from a thread;
* every rank asks an :class:`OwnerWatch`, once a second, whether the owner is gone: on the
  owner's host by its identity (:func:`esdash.launch.process.find`: a dead pid is certain, a
  stopped one still lives), on other hosts of an allocation by the beat no longer advancing
  (the run directory is on the shared file system; their own clock measures the silence,
  so clock skew does not matter);
* once the owner has been gone for longer than its grace, the ranks stop their nodes and
  themselves through the one stop path and record why in ``run.json``.

A run without ``owner.json`` (``esdash cluster up`` returned: its cluster is meant to live
on) and a released lease (``esdash run --keep``) are watched by nobody.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from esdash.errors import EsdashError
from esdash.launch import process
from esdash.rundir.layout import RunDir
from esdash.rundir.records import OwnerLease

#: How often the owner renews its lease, and how often ranks look at it.
RENEW_SECONDS = 1.0
#: Default seconds a rank waits after its owner is gone before it stops everything:
#: enough for a busy shared file system to carry a renewal to the other hosts, and short
#: enough that a killed run is gone within 15 s even when a node needs its full 10 s to stop.
DEFAULT_GRACE = 3.0

_HELD: dict[str, Lease] = {}


class Lease:
    """The orchestrator's side: ``owner.json`` renewed from a daemon thread."""

    def __init__(self, run: RunDir, grace: float) -> None:
        self.run = run
        self.record = OwnerLease(owner=process.identify(os.getpid()), grace=grace)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="owner-lease", daemon=True)

    def start(self) -> None:
        self._write()  # before anything the ranks could watch is launched
        self._thread.start()

    def _write(self) -> None:
        self.record.renewed = time.time()
        self.run.write_owner_lease(self.record)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            self.record.beat += 1
            with contextlib.suppress(OSError, EsdashError):  # the next beat tries again
                self._write()

    def release(self) -> None:
        """Stop renewing and say so: the run lives on without an owner."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.record.released = True
        with contextlib.suppress(OSError, EsdashError):
            self._write()


def hold(run: RunDir, grace: float = DEFAULT_GRACE) -> Lease:
    """Own ``run`` from now on (once per run directory and process)."""
    key = str(run.path)
    if key not in _HELD:
        _HELD[key] = Lease(run, grace)
        _HELD[key].start()
    return _HELD[key]


def release(run: RunDir) -> None:
    """Let ``run`` live on without this process (its cluster was kept on purpose)."""
    lease = _HELD.pop(str(run.path), None)
    if lease is not None:
        lease.release()


def gone_reason(record: OwnerLease, since: float) -> str:
    """``the esdash run that owned this run is gone: pid 4242 on host1, since 12:00:03``."""
    owner = record.owner
    command = os.path.basename(owner.command[0]) if owner.command else "esdash"
    if "esdash" in " ".join(owner.command):
        command = (
            "esdash "
            + next(
                (part for part in owner.command if part in ("run", "cluster", "sweep", "tui")), ""
            ).strip()
        )
    when = time.strftime("%H:%M:%S", time.localtime(since))
    return (
        f"the {command.strip()} that owned this run is gone: pid {owner.pid} on "
        f"{owner.host or '?'}, since {when}"
    )


class OwnerWatch:
    """A rank's side: :meth:`gone` says why the owner is gone for good, else None.

    Cheap enough to call in any loop: it reads ``owner.json`` at most once per
    :data:`RENEW_SECONDS`.
    """

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self._checked = 0.0
        self._beat: int | None = None
        self._beat_seen = time.monotonic()
        self._dead_since: float | None = None  # monotonic, for the grace
        self._reason: str | None = None

    def gone(self) -> str | None:
        if self._reason is not None:
            return self._reason
        now = time.monotonic()
        if now - self._checked < RENEW_SECONDS:
            return None
        self._checked = now
        try:
            record = self.run.read_owner_lease()
        except (OSError, EsdashError):
            return None  # being replaced right now: the next look decides
        if record is None or record.released:
            self._dead_since = None
            return None
        if not self._dead(record, now):
            self._dead_since = None
            return None
        if self._dead_since is None:
            self._dead_since = now
        if now - self._dead_since >= record.grace:
            # "since" its last renewal: the same moment for every rank that watches it
            self._reason = gone_reason(record, record.renewed or time.time())
        return self._reason

    def dead_now(self) -> str | None:
        """Why the owner is gone, judged now and without the grace (for the record a rank
        writes as it ends: a stop the owner began but did not live to finish); None while
        it lives, when there is none, or when only a later look could tell."""
        if self._reason is not None:
            return self._reason
        try:
            record = self.run.read_owner_lease()
        except (OSError, EsdashError):
            return None
        if record is None or record.released or not self._dead(record, time.monotonic()):
            return None
        return gone_reason(record, record.renewed or time.time())

    def _dead(self, record: OwnerLease, now: float) -> bool:
        """Whether the owner is gone: by its identity here, by its silence elsewhere."""
        if process.here(record.owner):
            return not process.alive(record.owner)
        if record.beat != self._beat:
            self._beat, self._beat_seen = record.beat, now
            return False
        # Another host: silence longer than two renewals means it stopped renewing.
        return now - self._beat_seen > 2 * RENEW_SECONDS
