"""The run order of a campaign: clusters and indices are reused where the axes allow.

Pure functions of the points: no cluster, no plugins.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w

from esdash.campaign.plan import (
    EACH,
    FIRST,
    REUSE,
    cluster_key,
    matches,
    parse_filters,
    plan,
    render_plan,
)
from esdash.campaign.spec import Point, load_campaign
from esdash.errors import BadInput


def point(
    nodes: int = 1,
    workers: int = 1,
    mode: str = "none",
    docs: int = 500,
    rep: int = 1,
    interconnect: str = "loopback",
) -> Point:
    session = {
        "name": f"c-{nodes}n-{mode}",
        "cluster": {
            "nodes": nodes,
            "interconnect": interconnect,
            "data_dir": f"/d/{nodes}n-{mode}",
        },
        "encryption": {"mode": mode},
        "track": {"name": "mri", "documents": docs},
        "benchmark": {"workers_per_node": workers},
    }
    values = {
        "cluster.nodes": nodes,
        "benchmark.workers_per_node": workers,
        "encryption.mode": mode,
        "track.documents": docs,
        "cluster.interconnect": interconnect,
    }
    label = f"n{nodes} w{workers} {mode} d{docs} {interconnect} #{rep}"
    return Point(label.replace(" ", "_"), label, values, rep, session, f"{nodes}n-{mode}")


def order(groups) -> list[list[tuple[str, str]]]:
    return [[(p.point.label, p.ingest) for p in g.points] for g in groups]


def test_workers_per_node_share_a_cluster_and_an_index() -> None:
    groups = plan([point(workers=1), point(workers=2), point(workers=4)])
    assert len(groups) == 1
    assert [p.ingest for p in groups[0].points] == [FIRST, REUSE, REUSE]
    assert [p.point.values["benchmark.workers_per_node"] for p in groups[0].points] == [1, 2, 4]


def test_size_and_mode_need_their_own_cluster_smallest_first() -> None:
    points = [
        point(nodes=n, mode=m, workers=w) for m in ("none", "abe") for n in (3, 1) for w in (1, 2)
    ]
    groups = plan(points)
    assert [(g.nodes, g.root_label) for g in groups] == [
        (1, "1n-none"),
        (1, "1n-abe"),
        (3, "3n-none"),
        (3, "3n-abe"),
    ]
    for group in groups:
        assert [p.ingest for p in group.points] == [FIRST, REUSE]
        assert len({cluster_key(p.point) for p in group.points}) == 1


def test_another_interconnect_is_another_cluster_on_the_same_data_root() -> None:
    groups = plan([point(interconnect="ethernet"), point(interconnect="opa")])
    assert len(groups) == 2
    assert {g.root_label for g in groups} == {"1n-none"}
    assert [g.label for g in groups] == ["1n-none over ethernet", "1n-none over opa"]


def test_points_on_one_index_run_together_in_a_cluster() -> None:
    points = [point(docs=d, workers=w) for w in (1, 2) for d in (500, 1000)]
    (group,) = plan(points)
    assert order([group])[0] == [
        ("n1 w1 none d500 loopback #1", FIRST),
        ("n1 w2 none d500 loopback #1", REUSE),
        ("n1 w1 none d1000 loopback #1", FIRST),
        ("n1 w2 none d1000 loopback #1", REUSE),
    ]


def test_repetitions_are_interleaved() -> None:
    points = [point(workers=w, rep=r) for w in (1, 2) for r in (1, 2, 3)]
    (group,) = plan(points)
    assert [
        (p.point.values["benchmark.workers_per_node"], p.point.repetition) for p in group.points
    ] == [(1, 1), (2, 1), (1, 2), (2, 2), (1, 3), (2, 3)]


def test_ingest_each_reingests_everywhere() -> None:
    (group,) = plan([point(workers=1), point(workers=2)], ingest="each")
    assert [p.ingest for p in group.points] == [EACH, EACH]


def test_plan_text_marks_completed_points() -> None:
    groups = plan([point(workers=1), point(workers=2)])
    lines = render_plan(groups, {groups[0].points[0].point.id: "completed"})
    assert lines == [
        "cluster 1: 1n-none over loopback",
        "  n1 w1 none d500 loopback #1: skip (completed)",
        "  n1 w2 none d500 loopback #1: reuse index",
    ]


def test_only_filters(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(tomli_w.dumps({"name": "b", "track": {"name": "mri"}}))
    (tmp_path / "c.toml").write_text(
        tomli_w.dumps(
            {
                "name": "c",
                "session": "base.toml",
                "axes": {"cluster": {"nodes": [1, 3]}, "encryption": {"mode": ["none", "abe"]}},
            }
        )
    )
    campaign = load_campaign(tmp_path / "c.toml")
    assert parse_filters(["nodes=3", "encryption.mode=abe", "r=1"], campaign) == [
        ("cluster.nodes", "3"),
        ("encryption.mode", "abe"),
        ("repetition", "1"),
    ]
    assert matches(point(nodes=3, mode="abe"), parse_filters(["nodes=3", "mode=abe"], campaign))
    assert not matches(point(nodes=1), parse_filters(["nodes=3"], campaign))
    # any session key works too, axis or not
    assert matches(point(workers=2), parse_filters(["benchmark.workers_per_node=2"], campaign))
    with pytest.raises(BadInput, match="the axis cluster.nodes has the values 1, 3"):
        parse_filters(["nodes=7"], campaign)
    with pytest.raises(BadInput, match=r"no axis 'size' \(axes: nodes, mode\)"):
        parse_filters(["size=7"], campaign)
    with pytest.raises(BadInput, match="expected KEY=VALUE"):
        parse_filters(["nodes"], campaign)
