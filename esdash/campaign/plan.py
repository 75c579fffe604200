"""The order a campaign's points run in: reuse clusters and ingested indices.

Starting a cluster costs tens of seconds and ingesting a corpus minutes to hours, while a
point with another workers-per-node count only needs another bench step against the same
cluster and index.  So points are grouped:

* **cluster group**: points whose ``[cluster]`` and ``[encryption]`` tables are equal share
  one cluster, started once (``esdash run --cluster RUN`` for each point).  A different size,
  interconnect, heap or encryption setup needs its own cluster.
* **index**: inside a group, points with the same ``[track]`` table query the same index.
  They run one after the other, so the first one ingests (unless the data root already holds
  the complete index from an earlier run) and the rest reuse it.  With ``ingest = "each"``
  every point re-ingests (to measure ingest per workers-per-node).
* **repetitions** of a group's points are interleaved (all points once, then all again),
  so slow drift of the machine spreads over the points instead of biasing one of them.

Groups run smallest cluster first.  Each data root (cluster size and encryption setup, see
:func:`esdash.campaign.spec._root_label`) only ever holds clusters of one size, so no group
needs ``--fresh`` to switch sizes.

Everything here is a pure function of the points, so the order is unit-tested without a
cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from esdash.campaign.spec import Campaign, Point
from esdash.errors import BadInput
from esdash.prepare.timelimit import JobTime, job_time
from esdash.prepare.walltime import WallTime
from esdash.rundir.keys import digest, value_key

#: Ingest actions of a planned point.
FIRST = "first"  # first point on its index in this cluster: ingests unless the index is complete
REUSE = "reuse"  # the index is already there
EACH = "each"  # re-ingests (campaign ingest = "each")


def cluster_key(point: Point) -> str:
    """Equal for points that can share one running cluster."""
    return digest(
        {"cluster": point.get("cluster", {}), "encryption": point.get("encryption", {})}, 12
    )


def index_key(point: Point) -> str:
    """Equal for points that query the same index content (same track and options)."""
    return digest(point.get("track", {}), 12)


@dataclass(frozen=True)
class PlannedPoint:
    """A point in its cluster's run order, with what its run does about the index: ingest it
    (:data:`FIRST`, :data:`EACH`) or use the one already there (:data:`REUSE`)."""

    point: Point
    ingest: str


@dataclass(frozen=True)
class ClusterGroup:
    """The points that share one running cluster (:func:`cluster_key`), in run order: the
    sweep starts it once and runs every point against it (``esdash run POINT --cluster RUN``).
    """

    key: str
    points: tuple[PlannedPoint, ...]

    @property
    def nodes(self) -> int:
        """The cluster's size: every point's, since their ``[cluster]`` tables are equal."""
        return self.points[0].point.nodes

    @property
    def root_label(self) -> str:
        """The data root the cluster uses: every point's (same size and encryption setup)."""
        return self.points[0].point.root_label

    @property
    def label(self) -> str:
        interconnect = self.points[0].point.get("cluster.interconnect", "loopback")
        return f"{self.root_label} over {interconnect}"


def plan(points: Sequence[Point], ingest: str = "once") -> list[ClusterGroup]:
    """The points in run order, grouped by the cluster they share (see the module docstring)."""
    groups: dict[str, list[tuple[int, Point]]] = {}
    for position, point in enumerate(points):
        groups.setdefault(cluster_key(point), []).append((position, point))
    ordered = sorted(groups.items(), key=lambda item: (item[1][0][1].nodes, item[1][0][0]))
    result = []
    for key, members in ordered:
        first_index: dict[str, int] = {}
        for position, point in members:
            first_index.setdefault(index_key(point), position)
        members = sorted(
            members,
            key=lambda item: (first_index[index_key(item[1])], item[1].repetition, item[0]),
        )
        seen: set[str] = set()
        planned = []
        for _position, point in members:
            action = REUSE if index_key(point) in seen else FIRST
            if ingest == "each":
                action = EACH
            seen.add(index_key(point))
            planned.append(PlannedPoint(point, action))
        result.append(ClusterGroup(key, tuple(planned)))
    return result


# ----------------------------------------------------------------------------- --only


def parse_filters(specs: Iterable[str], campaign: Campaign) -> list[tuple[str, str]]:
    """``--only nodes=3`` (an axis by short name or key path, or any session key path)."""
    filters = []
    for spec in specs:
        key, sep, value = spec.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise BadInput(f"--only {spec!r}: expected KEY=VALUE, e.g. --only nodes=3")
        if key in ("repetition", "r"):
            filters.append(("repetition", value))
            continue
        axis = campaign.axis(key)
        if axis is not None:
            known = [value_key(v) for v in axis.values]
            if value not in known:
                raise BadInput(
                    f"--only {spec!r}: the axis {axis.dotted} has the values {', '.join(known)}"
                )
            filters.append((axis.dotted, value))
        elif "." in key:
            filters.append((key, value))
        else:
            names = ", ".join(a.short for a in campaign.axes) or "none"
            raise BadInput(f"--only {spec!r}: no axis {key!r} (axes: {names})")
    return filters


def matches(point: Point, filters: Sequence[tuple[str, str]]) -> bool:
    for key, value in filters:
        if key == "repetition":
            if str(point.repetition) != value:
                return False
        elif value_key(point.get(key)) != value:
            return False
    return True


def render_plan(
    groups: Sequence[ClusterGroup],
    status: Mapping[str, str],
    refused: Collection[str] = (),
) -> list[str]:
    """The plan as lines (``esdash sweep --dry-run``): clusters, points, what each will do.

    A point whose run completed but whose session changed since says so (it runs again);
    a point in ``refused`` (ids) is marked as one its pre-flight checks would stop.
    """
    lines = []
    for number, group in enumerate(groups, 1):
        lines.append(f"cluster {number}: {group.label}")
        for planned in group.points:
            state = status.get(planned.point.id, "pending")
            action = {
                FIRST: "ingest (unless the index is complete)",
                REUSE: "reuse index",
                EACH: "re-ingest",
            }
            what = "skip (completed)" if state == "completed" else action[planned.ingest]
            if state == "stale":
                what += " (its session changed since it completed)"
            if planned.point.id in refused:
                what += " -- REFUSED by its pre-flight checks"
            lines.append(f"  {planned.point.label or planned.point.id}: {what}")
    return lines


# ----------------------------------------------------------------------- wall time


@dataclass(frozen=True)
class PointTime:
    """A point to run and its estimated wall time (its own ``esdash run --cluster``), or
    why there is none (its session or track does not load)."""

    planned: PlannedPoint
    wall: WallTime | None
    problem: str | None = None


@dataclass(frozen=True)
class ClusterTime:
    """A cluster group's points to run, and its cluster's start and stop, counted once;
    ``number`` is the cluster's place in the sweep (1 first), as the wall-time lines name it."""

    number: int
    group: ClusterGroup
    points: tuple[PointTime, ...]

    @property
    def cluster_seconds(self) -> float:
        """The cluster's start and stop, from the first point's estimate (0 without one)."""
        first = self.points[0].wall if self.points else None
        return first.cluster_seconds if first is not None else 0.0

    @property
    def seconds(self) -> float:
        return self.cluster_seconds + sum(p.wall.run_seconds for p in self.points if p.wall)


@dataclass(frozen=True)
class SizeTime:
    """The Slurm job of one cluster size (``esdash sweep --submit``): its clusters one after
    the other, the sum, and the ``--time`` it asks for."""

    nodes: int
    clusters: tuple[ClusterTime, ...]
    job_time: JobTime

    @property
    def seconds(self) -> float:
        return sum(cluster.seconds for cluster in self.clusters)

    @property
    def missing(self) -> list[PointTime]:
        """The points without an estimate: the sum leaves them out."""
        return [p for cluster in self.clusters for p in cluster.points if p.wall is None]


def wall_times(
    groups: Sequence[ClusterGroup],
    to_run: Collection[str],
    estimate: Callable[[PlannedPoint], WallTime],
    own_time: Callable[[int], str | None],
    problem: type[Exception] = BadInput,
) -> list[SizeTime]:
    """Per cluster size, the clusters and points (ids in ``to_run``) its job runs, in the
    sweep's order, with their estimates and the job's ``--time``.

    A sweep starts each group's cluster once and runs its points against it, so a point
    counts without the cluster's start and stop (:attr:`WallTime.run_seconds`) and the group
    adds them once.  ``estimate`` gives a point's wall time (a point that re-ingests or
    reuses the index says so in its planned action); ``problem`` is what it raises for a
    point it cannot estimate, recorded on the point.  ``own_time(nodes)`` is the
    ``[slurm] time`` the campaign or its base session sets for that size's job, if any.
    """
    sizes: dict[int, list[ClusterTime]] = {}
    for number, group in enumerate(groups, 1):
        points = []
        for planned in group.points:
            if planned.point.id not in to_run:
                continue
            try:
                points.append(PointTime(planned, estimate(planned)))
            except problem as exc:
                points.append(PointTime(planned, None, str(exc).splitlines()[0]))
        if points:
            sizes.setdefault(group.nodes, []).append(ClusterTime(number, group, tuple(points)))
    jobs = []
    for nodes, clusters in sorted(sizes.items()):
        total = sum(cluster.seconds for cluster in clusters)
        jobs.append(SizeTime(nodes, tuple(clusters), job_time(own_time(nodes), total)))
    return jobs
