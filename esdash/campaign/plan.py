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

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from esdash.campaign.spec import Campaign, Point, digest, value_key
from esdash.errors import BadInput

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
    point: Point
    ingest: str


@dataclass(frozen=True)
class ClusterGroup:
    key: str
    nodes: int
    root_label: str
    points: tuple[PlannedPoint, ...]

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
        result.append(
            ClusterGroup(key, members[0][1].nodes, members[0][1].root_label, tuple(planned))
        )
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
