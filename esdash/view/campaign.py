"""Reading ``campaign.json`` (``esdash.campaign/1``): a campaign's progress, for viewers.

``esdash sweep`` rewrites ``<campaign dir>/campaign.json`` atomically after every change
(:meth:`esdash.campaign.state.CampaignDir.write_summary`; the fields are documented in
``docs/campaign.md``).  This module is the other side: the dashboard, and anything else that
follows a campaign, reads it here into frozen objects.  It imports the run directory's
contract and the process identities of :mod:`esdash.launch.process` (is a runner alive?),
nothing that writes or starts anything, so it costs a headless process nothing, and it never
raises anything but :class:`CampaignFileError`, whose message names the file.

Readers are tolerant the way the format promises: fields they do not know are ignored, and
fields a writer left out get their empty value.  What is refused is a file that is not a
campaign summary at all (not JSON, not an object, another schema) or a known field of the
wrong type: guessing there would show a wrong picture of a study.

:class:`ProgressFollower` re-reads the file only when it changed (poll-based, like every
esdash viewer: inotify does not fire on network file systems).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from esdash.errors import BadInput
from esdash.launch import process
from esdash.rundir import files
from esdash.rundir.layout import CAMPAIGN_SUMMARY as CAMPAIGN_SUMMARY  # names viewers show
from esdash.rundir.layout import CAMPAIGNS as CAMPAIGNS
from esdash.rundir.layout import CampaignFiles
from esdash.rundir.records import CAMPAIGN_SCHEMA, ProcessRecord, Runner
from esdash.rundir.records import CampaignPoint as CampaignPoint  # what a reading holds
from esdash.rundir.records import CampaignSummary as CampaignSummary
from esdash.rundir.records import Counts as Counts

#: Point statuses, in the order a viewer lists their counts.
STATUSES = ("completed", "failed", "running", "pending", "interrupted", "stale")
#: Point statuses after which nothing more happens to the point in this sweep.
ENDED = ("completed", "failed", "interrupted")


class CampaignFileError(BadInput):
    """A file that should be a ``campaign.json`` is not one; the message names the file."""


class _Schema(msgspec.Struct):
    """Just the schema of a JSON object (to say "another file" before "a wrong field")."""

    schema: str | None = None


def read_progress(path: str | Path) -> CampaignSummary:
    """Read a ``campaign.json`` (or the one in a campaign directory)."""
    path = Path(path)
    if path.is_dir():
        path = CampaignFiles.summary_in(path)
    try:
        schema = files.read(path, _Schema).schema
        if schema is not None and schema != CAMPAIGN_SCHEMA:
            if not schema.startswith("esdash.campaign/"):
                raise CampaignFileError(
                    f"{path}: not a {CAMPAIGN_SUMMARY} (schema {schema!r}, expected "
                    f"{CAMPAIGN_SCHEMA!r}); open the campaign directory `esdash sweep` "
                    f"printed, or the campaign file"
                )
            raise CampaignFileError(
                f"{path}: schema {schema!r} is not one this esdash reads "
                f"({CAMPAIGN_SCHEMA!r}); update esdash to the version that ran the sweep"
            )
        summary = files.read(path, CampaignSummary)
    except files.RunFileError as exc:
        hint = (
            "a campaign directory has it once `esdash sweep` ran (a --dry-run writes nothing)"
            if not path.exists()
            else "the file is rewritten by `esdash sweep`: run it again, or restore the file"
        )
        raise CampaignFileError(f"{exc}; {hint}") from None
    if summary.dir is None:
        summary.dir = str(path.parent)
    return summary


# ---------------------------------------------------------------------- following
@dataclass(frozen=True)
class CampaignReading:
    """What a viewer shows of one campaign now.

    ``progress`` is the last file that read well, kept while a later write is unreadable
    (``error`` says why), so a viewer never goes blank; ``state`` is the campaign's state as
    :func:`shown_state` sees it, or ``unreadable`` when nothing could be read yet.
    """

    path: Path
    progress: CampaignSummary | None = None
    error: str | None = None
    state: str = "pending"


class ProgressFollower:
    """Re-reads one ``campaign.json`` whenever it changed; cheap to poll often.

    The sweep replaces the file atomically, so a change shows in its inode, size or mtime
    (all three are compared: two writes within the file system's mtime granularity may
    keep it).  Not thread-safe: one poller.
    """

    def __init__(self, path: str | Path, alive: Callable[[Runner], bool] | None = None) -> None:
        path = Path(path)
        self.path = CampaignFiles.summary_in(path) if path.is_dir() else path
        self.alive = alive or _alive
        self.latest = CampaignReading(self.path)
        self._seen: tuple[int, int, int] | None = None
        self._read_once = False

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def poll(self) -> CampaignSummary | None:
        """The progress if the file changed since the last poll, else None.

        Raises :class:`CampaignFileError` when the (changed, or missing) file is not a
        campaign.json; the next change is read again.
        """
        stamp = self._stamp()
        if self._read_once and stamp == self._seen:
            return None
        self._seen, self._read_once = stamp, True
        return read_progress(self.path)  # a missing file raises, saying what is missing

    def reading(self) -> CampaignReading | None:
        """The new :class:`CampaignReading` if anything shown changed, else None."""
        progress, error = self.latest.progress, self.latest.error
        try:
            fresh = self.poll()
        except CampaignFileError as exc:
            error = str(exc)
        else:
            if fresh is not None:
                progress, error = fresh, None
        if progress is not None:
            state = shown_state(progress, alive=self.alive)
        else:
            state = "unreadable" if error else "pending"
        reading = CampaignReading(self.path, progress, error, state)
        if reading == self.latest:
            return None
        self.latest = reading
        return reading


# ---------------------------------------------------------------------- finding campaigns
def campaign_files(runs_root: Path) -> list[Path]:
    """The ``campaign.json`` of every campaign directory under ``<runs>/campaigns``."""
    try:
        return CampaignFiles.summaries_under(runs_root)
    except OSError:
        return []


def summary_of(value: str | Path, runs_root: Path) -> Path | None:
    """The ``campaign.json`` that ``value`` means, or None if it is no campaign.

    ``value`` may be a campaign directory, its ``campaign.json`` (read or not: a broken file
    is still meant as one), a campaign file (``[axes]``; its default directory
    ``<runs>/campaigns/<name>``, which may not exist yet), or the name of a campaign
    directory under ``<runs>/campaigns`` (a run of that name in ``<runs>`` wins).
    """
    path = Path(value).expanduser()
    if path.is_dir() and CampaignFiles.summary_in(path).is_file():
        return CampaignFiles.summary_in(path).resolve()
    if path.name == CAMPAIGN_SUMMARY and path.is_file():
        return path.resolve()
    if path.suffix == ".toml" and path.is_file():
        name = _campaign_name(path)
        if name is not None:
            return CampaignFiles.default(runs_root, name).summary_file.resolve()
    if not path.is_absolute() and len(path.parts) == 1 and not (runs_root / path).is_dir():
        named = CampaignFiles.default(runs_root, path.name).summary_file
        if named.is_file():
            return named
    return None


def _campaign_name(path: Path) -> str | None:
    """The name of a campaign file (None if ``path`` is a session or not TOML at all)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return None
    name = data.get("name")
    return name if "axes" in data and isinstance(name, str) and name else None


# ---------------------------------------------------------------------- liveness
def _alive(runner: Runner) -> bool:
    """Whether the runner's sweep process still runs (it runs on this host)."""
    identity = ProcessRecord(pid=runner.pid or 0, host=runner.host, create_time=runner.create_time)
    return process.alive(identity)


def shown_state(
    progress: CampaignSummary,
    host: str | None = None,
    alive: Callable[[Runner], bool] = _alive,
) -> str:
    """The campaign's state, except ``died`` when it says ``running`` but no sweep is left.

    A sweep killed with SIGKILL (or its node lost) cannot rewrite the file; its runners still
    say ``running``.  On the host a runner ran on, its pid tells; a runner on another host
    is taken at its word.
    """
    if progress.state != "running":
        return progress.state
    host = socket.gethostname() if host is None else host
    running = [r for r in progress.runners if r.state == "running"]
    if running and all(r.host == host and r.pid and not alive(r) for r in running):
        return "died"
    return progress.state
