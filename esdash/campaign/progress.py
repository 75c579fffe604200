"""Reading ``campaign.json`` (``esdash.campaign/1``): a campaign's progress, for viewers.

``esdash sweep`` rewrites ``<campaign dir>/campaign.json`` atomically after every change
(:meth:`esdash.campaign.state.CampaignDir.write_summary`; the fields are documented in
``docs/campaign.md``).  This module is the other side: the dashboard, and anything else that
follows a campaign, reads it here into frozen objects.  It imports nothing but the standard
library and esdash's errors, so it costs a headless process nothing, and it never raises
anything but :class:`CampaignFileError`, whose message names the file.

Readers are tolerant the way the format promises: fields they do not know are ignored, and
fields a writer left out get their empty value.  What is refused is a file that is not a
campaign summary at all (not JSON, not an object, another schema) or a known field of the
wrong type: guessing there would show a wrong picture of a study.

:class:`ProgressFollower` re-reads the file only when it changed (poll-based, like every
esdash viewer: inotify does not fire on network file systems).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esdash.errors import BadInput

SCHEMA = "esdash.campaign/1"
SUMMARY_FILE = "campaign.json"
#: Point statuses, in the order a viewer lists their counts.
STATUSES = ("completed", "failed", "running", "pending", "interrupted", "stale")
#: Point statuses after which nothing more happens to the point in this sweep.
ENDED = ("completed", "failed", "interrupted")


class CampaignFileError(BadInput):
    """A file that should be a ``campaign.json`` is not one; the message names the file."""


# ---------------------------------------------------------------------- reading fields
class _Fields:
    """Typed access to one JSON object; a wrong type is an error naming the file and field."""

    def __init__(self, path: Path, data: Mapping[str, Any], where: str = "") -> None:
        self.path = path
        self.data = data
        self.where = where

    def _fail(self, key: str, expected: str, value: Any = None) -> CampaignFileError:
        found = json.dumps(self.data[key] if value is None else value, default=str)
        if len(found) > 40:
            found = found[:37] + "..."
        return CampaignFileError(
            f"{self.path}: {self.where}{key}: expected {expected}, found {found}; the file "
            f"is rewritten by `esdash sweep`: run it again, or restore the file"
        )

    def text(self, key: str, default: str = "") -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)  # a Slurm job id may be written as a number
        raise self._fail(key, "a string")

    def path_or_none(self, key: str) -> Path | None:
        value = self.optional_text(key)
        return Path(value) if value else None

    def integer(self, key: str, default: int = 0) -> int:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(key, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        return None if self.data.get(key) is None else self.integer(key)

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self._fail(key, "a number (Unix time)")
        return float(value)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return value

    def objects(self, key: str) -> list[_Fields]:
        """A list of objects, each as :class:`_Fields` naming its index in errors."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._fail(key, "a list")
        found = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise self._fail(f"{key}[{index}]", "an object", item)
            found.append(_Fields(self.path, item, f"{self.where}{key}[{index}]."))
        return found


# ---------------------------------------------------------------------- the objects
@dataclass(frozen=True)
class Counts:
    """How many points have each status, and how many there are."""

    total: int = 0
    completed: int = 0
    failed: int = 0
    running: int = 0
    pending: int = 0
    interrupted: int = 0
    stale: int = 0

    def of(self, status: str) -> int:
        return int(getattr(self, status, 0)) if status in STATUSES else 0

    @property
    def ended(self) -> int:
        """Points this sweep is done with (completed, failed, interrupted)."""
        return self.completed + self.failed + self.interrupted

    @property
    def fraction(self) -> float:
        """The completed share of all points (0 for an empty campaign)."""
        return self.completed / self.total if self.total else 0.0


@dataclass(frozen=True)
class CampaignPoint:
    """One point: one session, one ``esdash run`` per attempt."""

    id: str
    label: str
    status: str
    values: dict[str, Any] = field(default_factory=dict)
    repetition: int = 1
    nodes: int | None = None
    cluster: int | None = None
    ingest: str | None = None
    run: Path | None = None
    cluster_run: Path | None = None
    attempts: int = 0
    reason: str | None = None
    started: float | None = None
    ended: float | None = None
    session: Path | None = None

    def duration(self, now: float) -> float | None:
        """Seconds of its latest attempt: to its end, or until ``now`` while it runs."""
        if self.started is None:
            return None
        if self.ended is not None:
            return max(0.0, self.ended - self.started)
        return max(0.0, now - self.started) if self.status == "running" else None


@dataclass(frozen=True)
class CurrentPoint:
    """A point a sweep process is running now, and the run directory to follow it in."""

    point: str
    label: str
    run: Path | None = None
    cluster_run: Path | None = None
    attempt: int | None = None
    started: float | None = None


@dataclass(frozen=True)
class PlannedCluster:
    """One cluster of the plan (a size and encryption setup), in run order."""

    number: int
    label: str
    nodes: int | None = None
    root_label: str = ""
    points: int = 0


@dataclass(frozen=True)
class Runner:
    """One ``esdash sweep`` process (``runners/<host>-<pid>.json``)."""

    host: str
    pid: int | None
    state: str
    slurm_job: str | None = None
    started: float | None = None
    updated: float | None = None
    current: str | None = None  # the label of its current point
    cluster: str | None = None  # the label of its running cluster


@dataclass(frozen=True)
class Job:
    """A Slurm job ``esdash sweep --submit`` wrote (and submitted, if ``job`` is set)."""

    nodes: int | None
    points: int | None
    job: str | None = None
    script: Path | None = None


@dataclass(frozen=True)
class CampaignProgress:
    """Everything ``campaign.json`` says, as of its ``updated`` time."""

    path: Path
    name: str
    state: str
    description: str = ""
    directory: Path | None = None
    campaign_file: Path | None = None
    base_session: Path | None = None
    updated: float | None = None
    axes: dict[str, list[Any]] = field(default_factory=dict)
    short_names: dict[str, str] = field(default_factory=dict)
    repetitions: int = 1
    ingest: str = ""
    counts: Counts = field(default_factory=Counts)
    current: tuple[CurrentPoint, ...] = ()
    clusters: tuple[PlannedCluster, ...] = ()
    runners: tuple[Runner, ...] = ()
    jobs: tuple[Job, ...] = ()
    points: tuple[CampaignPoint, ...] = ()

    def point(self, point_id: str) -> CampaignPoint | None:
        return next((p for p in self.points if p.id == point_id), None)

    def cluster_counts(self, number: int) -> Counts:
        """The status counts of one cluster's points."""
        return count_points(p for p in self.points if p.cluster == number)


def count_points(points: Iterable[CampaignPoint]) -> Counts:
    """The counts of ``points`` (for a file without ``counts``, and per cluster)."""
    found = dict.fromkeys(STATUSES, 0)
    total = 0
    for point in points:
        total += 1
        if point.status in found:
            found[point.status] += 1
    return Counts(total=total, **found)


def _point(item: _Fields) -> CampaignPoint:
    point_id = item.text("id")
    return CampaignPoint(
        id=point_id,
        label=item.text("label") or point_id,
        status=item.text("status", "pending"),
        values=item.mapping("values"),
        repetition=item.integer("repetition", 1),
        nodes=item.optional_integer("nodes"),
        cluster=item.optional_integer("cluster"),
        ingest=item.optional_text("ingest"),
        run=item.path_or_none("run"),
        cluster_run=item.path_or_none("cluster_run"),
        attempts=item.integer("attempts"),
        reason=item.optional_text("reason"),
        started=item.number("started"),
        ended=item.number("ended"),
        session=item.path_or_none("session"),
    )


def _current(item: _Fields) -> CurrentPoint:
    return CurrentPoint(
        point=item.text("point"),
        label=item.text("label") or item.text("point"),
        run=item.path_or_none("run"),
        cluster_run=item.path_or_none("cluster_run"),
        attempt=item.optional_integer("attempt"),
        started=item.number("started"),
    )


def _runner(item: _Fields) -> Runner:
    current = item.data.get("current")
    cluster = item.data.get("cluster")
    return Runner(
        host=item.text("host", "?"),
        pid=item.optional_integer("pid"),
        state=item.text("state", "?"),
        slurm_job=item.optional_text("slurm_job"),
        started=item.number("started"),
        updated=item.number("updated"),
        current=str(current.get("label") or current.get("point"))
        if isinstance(current, dict)
        else None,
        cluster=str(cluster.get("label") or cluster.get("number"))
        if isinstance(cluster, dict)
        else None,
    )


def _counts(fields: _Fields, points: tuple[CampaignPoint, ...]) -> Counts:
    if fields.data.get("counts") is None:
        return count_points(points)
    counts = _Fields(fields.path, fields.mapping("counts"), "counts.")
    return Counts(
        total=counts.integer("total", len(points)),
        **{status: counts.integer(status) for status in STATUSES},
    )


def parse_progress(data: Any, path: Path) -> CampaignProgress:
    """The progress in ``data`` (``campaign.json`` already decoded); ``path`` names it in errors."""
    if not isinstance(data, dict):
        raise CampaignFileError(
            f"{path}: not a campaign.json (a JSON {type(data).__name__}, not an object); "
            f"open the campaign directory `esdash sweep` printed"
        )
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith("esdash.campaign/"):
        found = f"schema {schema!r}" if schema is not None else "no schema"
        raise CampaignFileError(
            f"{path}: not a campaign.json ({found}, expected {SCHEMA!r}); open the "
            f"campaign directory `esdash sweep` printed, or the campaign file"
        )
    if schema != SCHEMA:
        raise CampaignFileError(
            f"{path}: schema {schema!r} is not one this esdash reads ({SCHEMA!r}); update "
            f"esdash to the version that ran the sweep"
        )
    fields = _Fields(path, data)
    points = tuple(_point(item) for item in fields.objects("points"))
    return CampaignProgress(
        path=path,
        name=fields.text("name") or path.parent.name,
        state=fields.text("state", "pending"),
        description=fields.text("description"),
        directory=fields.path_or_none("dir") or path.parent,
        campaign_file=fields.path_or_none("file"),
        base_session=fields.path_or_none("base_session"),
        updated=fields.number("updated"),
        axes=fields.mapping("axes"),
        short_names=fields.mapping("short_names"),
        repetitions=fields.integer("repetitions", 1),
        ingest=fields.text("ingest"),
        counts=_counts(fields, points),
        current=tuple(_current(item) for item in fields.objects("current")),
        clusters=tuple(
            PlannedCluster(
                number=item.integer("number", index + 1),
                label=item.text("label"),
                nodes=item.optional_integer("nodes"),
                root_label=item.text("root_label"),
                points=item.integer("points"),
            )
            for index, item in enumerate(fields.objects("clusters"))
        ),
        runners=tuple(_runner(item) for item in fields.objects("runners")),
        jobs=tuple(
            Job(
                nodes=item.optional_integer("nodes"),
                points=item.optional_integer("points"),
                job=item.optional_text("job"),
                script=item.path_or_none("script"),
            )
            for item in fields.objects("jobs")
        ),
        points=points,
    )


def read_progress(path: str | Path) -> CampaignProgress:
    """Read a ``campaign.json`` (or the one in a campaign directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / SUMMARY_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CampaignFileError(
            f"{path}: no such file; a campaign directory has it once `esdash sweep` (or "
            f"`esdash sweep --dry-run`) ran"
        ) from None
    except OSError as exc:
        raise CampaignFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise CampaignFileError(f"{path}: not a campaign.json (not UTF-8 text)") from None
    except ValueError as exc:
        raise CampaignFileError(f"{path}: not a campaign.json (bad JSON: {exc})") from None
    return parse_progress(data, path)


# ---------------------------------------------------------------------- following
@dataclass(frozen=True)
class CampaignReading:
    """What a viewer shows of one campaign now.

    ``progress`` is the last file that read well, kept while a later write is unreadable
    (``error`` says why), so a viewer never goes blank; ``state`` is the campaign's state as
    :func:`shown_state` sees it, or ``unreadable`` when nothing could be read yet.
    """

    path: Path
    progress: CampaignProgress | None = None
    error: str | None = None
    state: str = "pending"


class ProgressFollower:
    """Re-reads one ``campaign.json`` whenever it changed; cheap to poll often.

    The sweep replaces the file atomically, so a change shows in its inode, size or mtime
    (all three are compared: two writes within the file system's mtime granularity may
    keep it).  Not thread-safe: one poller.
    """

    def __init__(self, path: str | Path, alive: Callable[[int], bool] | None = None) -> None:
        path = Path(path)
        self.path = path / SUMMARY_FILE if path.is_dir() else path
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

    def poll(self) -> CampaignProgress | None:
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
        return sorted((runs_root / "campaigns").glob(f"*/{SUMMARY_FILE}"))
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
    if path.is_dir() and (path / SUMMARY_FILE).is_file():
        return (path / SUMMARY_FILE).resolve()
    if path.name == SUMMARY_FILE and path.is_file():
        return path.resolve()
    if path.suffix == ".toml" and path.is_file():
        name = _campaign_name(path)
        if name is not None:
            return (runs_root / "campaigns" / name / SUMMARY_FILE).resolve()
    if not path.is_absolute() and len(path.parts) == 1 and not (runs_root / path).is_dir():
        named = runs_root / "campaigns" / path.name / SUMMARY_FILE
        if named.is_file():
            return named
    return None


def _campaign_name(path: Path) -> str | None:
    """The name of a campaign file (None if ``path`` is a session or not TOML at all)."""
    from esdash.session import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return None
    name = data.get("name")
    return name if "axes" in data and isinstance(name, str) and name else None


# ---------------------------------------------------------------------- liveness
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shown_state(
    progress: CampaignProgress,
    host: str | None = None,
    alive: Callable[[int], bool] = _alive,
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
    if running and all(r.host == host and r.pid and not alive(r.pid) for r in running):
        return "died"
    return progress.state
