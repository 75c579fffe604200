"""Checking a campaign without running it: every point through ``session check``'s checks.

``esdash sweep --dry-run`` and ``esdash session check CAMPAIGN`` both come here, so a point
either command passes is not refused later by the run that starts it: each point's session
goes through :func:`esdash.prepare.checks.findings` at the ``session`` stage, the very
function ``esdash session check SESSION`` calls (a check added to that registry is run here
without any change).

Nothing here writes a byte: not the campaign directory (a dry run of a campaign with completed
points must leave them completed, see ``docs/campaign.md``), not a cache, not a run directory.
The points' sessions are checked as data, never written to ``points/<id>/session.toml`` first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from esdash.campaign.plan import ClusterGroup, plan
from esdash.campaign.spec import Campaign, CampaignError, Point, load_campaign
from esdash.campaign.state import default_directory
from esdash.session import parse_session

#: Points named in one finding's line before the rest are only counted.
SHOWN_POINTS = 3
#: A finding that starts with a session key (``encryption.key_file: ...``).
_KEY = re.compile(r"^([a-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*): ")


def point_findings(
    campaign: Campaign, points: Iterable[Point], trust_track_code: bool = False
) -> dict[str, list[str]]:
    """Point id -> the session-stage findings of its session; an empty list passes.

    Findings that name a session key name the file that sets it, the campaign file or the
    base session (:func:`_attributed`).  ``trust_track_code``: ``--trust-track-code``.
    """
    from esdash.plugin.manager import get_plugins
    from esdash.prepare import checks

    plugins = get_plugins()
    found: dict[str, list[str]] = {}
    for point in points:
        session = parse_session(
            point.session, campaign.base_path, plugins, trust_track_code=trust_track_code
        )
        lines = checks.findings(session, "session", plugins=plugins)
        found[point.id] = [_attributed(line, campaign, point) for line in lines]
    return found


def _attributed(line: str, campaign: Campaign, point: Point) -> str:
    """A finding that names a session key, prefixed with the file that set the key.

    The point's session is checked under the base session's name, but a key the campaign
    sets (``per_value`` password files, axes) is fixed in the campaign file: the line names
    that one, as :meth:`Campaign.points` does for the session's own validation.
    """
    rest = line.removeprefix(f"{campaign.base_path}: ")
    match = _KEY.match(rest)
    if match is None:
        return line
    file = campaign.path if campaign.sets(point, match.group(1)) else campaign.base_path
    return f"{file}: {rest}"


def _shown(labels: Sequence[str]) -> str:
    """``a, b, c, +4 more``: long campaigns keep one line per finding."""
    more = len(labels) - SHOWN_POINTS
    return ", ".join(labels[:SHOWN_POINTS]) + (f", +{more} more" if more > 0 else "")


def failure_lines(points: Sequence[Point], findings: Mapping[str, list[str]]) -> list[str]:
    """One line per distinct finding, naming the points it would stop.

    Points that share a key file share its finding: the file is named once, with the
    points (``(2 points: nodes=1 mode=abe, nodes=3 mode=abe)``), rather than once per point.
    """
    by_line: dict[str, list[str]] = {}
    for point in points:
        for line in findings.get(point.id, ()):
            by_line.setdefault(line, []).append(point.label or point.id)
    return [
        f"{line} ({'point' if len(labels) == 1 else f'{len(labels)} points'}: {_shown(labels)})"
        for line, labels in by_line.items()
    ]


def failing(points: Sequence[Point], findings: Mapping[str, list[str]]) -> list[Point]:
    """The points with at least one finding, in the order given."""
    return [point for point in points if findings.get(point.id)]


@dataclass(frozen=True)
class CampaignCheck:
    """What ``esdash session check CAMPAIGN`` found: the lines to print and whether it passed."""

    ok: str | None
    errors: list[str]


def check_campaign_file(path: Path, trust_track_code: bool = False) -> CampaignCheck:
    """Validate a campaign file as a campaign: its keys, every point's session, their checks.

    The points are built for the campaign's default directory (that only names their data
    roots; nothing is created there).
    """
    try:
        campaign = load_campaign(path)
        points = campaign.points(default_directory(campaign))
    except CampaignError as exc:
        return CampaignCheck(None, list(exc.lines))
    findings = point_findings(campaign, points, trust_track_code)
    errors = failure_lines(points, findings)
    if errors:
        bad = len(failing(points, findings))
        errors.append(f"{path}: {bad} of {len(points)} point(s) would fail their pre-flight checks")
        return CampaignCheck(None, errors)
    return CampaignCheck(_summary(path, campaign, points, plan(points, campaign.ingest)), [])


def _summary(
    path: Path, campaign: Campaign, points: Sequence[Point], groups: Sequence[ClusterGroup]
) -> str:
    axes = ", ".join(f"{axis.short} ({len(axis.values)})" for axis in campaign.axes) or "none"
    return (
        f"ok  {path}: campaign {campaign.name}: {len(points)} point(s) on {len(groups)} "
        f"cluster(s), axes {axes}, {campaign.repetitions} repetition(s), base session "
        f"{campaign.base_path}; every point passes the session checks"
    )
