"""Campaign files: points are complete, valid sessions; every error names its file and key.

The encryption axis uses ``sealed``, a mode registered only for these tests (with a path and
an int option), so the tests do not depend on which real modes are installed.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import string
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esdash.campaign.spec import CampaignError, load_campaign, parse_campaign
from esdash.plugin.manager import Registered, get_plugins
from esdash.plugin_api import Option
from esdash.session import parse_session, tomllib


class Sealed:
    """Stands for an encryption mode: only its option declarations matter here."""

    name = "sealed"
    options = (
        Option("password_file", "path", "secret"),
        Option("level", "int", "cost", 1, (), 1, 10),
    )


def _plugins():
    real = get_plugins()
    registries = {kind: dict(registry) for kind, registry in real.registries.items()}
    registries["encryption"]["sealed"] = Registered("encryption", "sealed", Sealed(), "tests")
    return dataclasses.replace(real, registries=registries)


PLUGINS = _plugins()

BASE = {
    "name": "base",
    "cluster": {"nodes": 1, "heap": "256m", "run_as": "esdash"},
    "encryption": {"mode": "sealed", "password_file": "pass.txt"},
    "track": {"name": "mri", "documents": 500},
    "benchmark": {"workers_per_node": 1, "duration": "1s", "queries": "steps.json"},
}
STEPS = '[{"name": "all", "search_queries": [{"body": {"query": {"match_all": {}}}}]}]'

CAMPAIGN = {
    "name": "study",
    "session": "sessions/base.toml",
    "repetitions": 2,
    "set": {"benchmark": {"warmup": "0s"}},
    "axes": {
        "cluster": {"nodes": [1, 3]},
        "benchmark": {"workers_per_node": [1, 2]},
        "encryption": {"mode": ["none", "sealed"]},
    },
    "per_value": {"encryption.mode": {"sealed": {"encryption": {"level": 3}}}},
    "slurm": {"time": "02:00:00"},
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A base session (with relative paths) under sessions/, the campaign beside it."""
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "base.toml").write_text(tomli_w.dumps(BASE))
    (tmp_path / "sessions" / "steps.json").write_text(STEPS)
    return tmp_path


def write(directory: Path, data: dict, name: str = "study.toml") -> Path:
    path = directory / name
    path.write_text(tomli_w.dumps(data))
    return path


def test_points_are_the_cross_product_of_valid_sessions(files: Path) -> None:
    campaign = load_campaign(write(files, CAMPAIGN))
    points = campaign.points(files / "dir", PLUGINS)
    assert len(points) == 2 * 2 * 2 * 2
    assert len({p.id for p in points}) == len(points)
    for point in points:
        # paths are absolute: the session means the same from any directory
        session = parse_session(point.session, files / "elsewhere.toml", PLUGINS)
        assert session.benchmark.warmup == 0.0
        assert session.cluster.nodes == point.values["cluster.nodes"]
        assert session.benchmark.queries == files / "sessions" / "steps.json"
    ids = {p.id for p in points}
    assert "nodes=3__workers_per_node=2__mode=sealed__r2" in ids


def test_a_changed_mode_does_not_inherit_the_base_modes_options(files: Path) -> None:
    points = load_campaign(write(files, CAMPAIGN)).points(files / "dir", PLUGINS)
    plain = next(p for p in points if p.values["encryption.mode"] == "none")
    crypt = next(p for p in points if p.values["encryption.mode"] == "sealed")
    assert plain.session["encryption"] == {"mode": "none"}
    # the base's relative password file resolves against the base session's directory
    assert crypt.session["encryption"] == {
        "mode": "sealed",
        "password_file": str(files / "sessions" / "pass.txt"),
        "level": 3,
    }


def test_data_roots_and_session_names_per_cluster_size_and_mode(files: Path) -> None:
    points = load_campaign(write(files, CAMPAIGN)).points(files / "dir", PLUGINS)
    roots = {}
    for point in points:
        roots.setdefault(point.session["cluster"]["data_dir"], set()).add(
            (point.nodes, point.session["encryption"]["mode"], point.session["name"])
        )
    assert len(roots) == 4  # 2 sizes x 2 modes; workers and repetitions share
    assert all(len(v) == 1 for v in roots.values())
    assert str(files / "dir" / "data" / "1n-none") in roots


def test_campaign_relative_paths_resolve_against_the_campaign_file(files: Path) -> None:
    data = copy.deepcopy(CAMPAIGN)
    data["set"]["benchmark"]["queries"] = "mine.json"
    (files / "mine.json").write_text(STEPS)
    points = load_campaign(write(files, data)).points(files / "dir", PLUGINS)
    assert {p.session["benchmark"]["queries"] for p in points} == {str(files / "mine.json")}


def test_tables_as_axis_values_replace_the_table(files: Path) -> None:
    data = copy.deepcopy(CAMPAIGN)
    data["axes"] = {"encryption": [{"mode": "none"}, {"mode": "sealed", "level": 7}]}
    del data["per_value"]
    points = load_campaign(write(files, data)).points(files / "dir", PLUGINS)
    assert [p.session["encryption"].get("level") for p in points[::2]] == [None, 7]
    assert points[0].id.startswith("encryption=none-")


def test_toml_writer_round_trips_sessions(files: Path) -> None:
    for point in load_campaign(write(files, CAMPAIGN)).points(files / "dir", PLUGINS):
        assert tomllib.loads(tomli_w.dumps(point.session)) == point.session


# ------------------------------------------------------------------- broken files

BROKEN = [
    ({"sesion": "x"}, 'study.toml: sesion: unknown key (did you mean "session"?)'),
    ({"repetitions": 0}, "study.toml: repetitions: expected an integer between 1 and 1000"),
    ({"ingest": "twice"}, "study.toml: ingest: expected one of 'once', 'each'"),
    ({"name": "a b"}, "study.toml: name: expected letters"),
    ({"session": "nope.toml"}, "nope.toml: no such file"),
    ({"axes": {"cluster": {"nodes": 3}}}, "study.toml: axes.cluster.nodes: expected an array"),
    ({"axes": {"cluster": {"nodes": []}}}, "axes.cluster.nodes: expected at least one value"),
    ({"axes": {"cluster": {"nodes": [1, 1]}}}, "axes.cluster.nodes: values repeat: 1"),
    (
        {"axes": {"clustr": {"nodes": [1]}}},
        "axes.clustr.nodes: 'clustr.nodes' is not a session key (did you mean \"cluster\"?)",
    ),
    (
        {"axes": {"cluster": {"node": [1]}}},
        "axes.cluster.node: 'cluster.node': [cluster] has no key 'node' (did you mean \"nodes\"?)",
    ),
    ({"axes": {"name": ["a", "b"]}}, "axes.name: the campaign names every point's session"),
    ({"set": {"cluster": {"nodes": 2}}}, "set.cluster.nodes: is also the axis cluster.nodes"),
    (
        {"per_value": {"cluster.nodez": {"1": {}}}},
        "per_value.cluster.nodez: no axis 'cluster.nodez' (did you mean \"cluster.nodes\"?)",
    ),
    (
        {"per_value": {"encryption.mode": {"abe": {}}}},
        "per_value.encryption.mode.\"abe\": 'abe' is not a value of the axis",
    ),
    ({"slurm": {"time": 5}}, "study.toml: slurm.time: expected a string"),
    (
        {"axes": {"benchmark": {"workers_per_node": [1, 0]}}},
        "study.toml: benchmark.workers_per_node: expected an integer between 1 and 1024, "
        "found 0 (integer) (point nodes=1 workers_per_node=0",
    ),
    (
        {"set": {"track": {"documnets": 5}}},
        'study.toml: track.documnets: unknown key (did you mean "documents"?)',
    ),
]


@pytest.mark.parametrize(("change", "expected"), BROKEN, ids=[str(c) for c, _ in BROKEN])
def test_broken_campaigns_name_the_file_and_the_key(files: Path, change: dict, expected: str):
    data = copy.deepcopy(CAMPAIGN)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "per_value":
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    with pytest.raises(CampaignError) as caught:
        load_campaign(write(files, data)).points(files / "dir", PLUGINS)
    assert expected in str(caught.value), str(caught.value)


def test_a_problem_of_the_base_names_the_base_session(files: Path) -> None:
    broken = copy.deepcopy(BASE)
    broken["cluster"]["hep"] = "1g"
    (files / "sessions" / "base.toml").write_text(tomli_w.dumps(broken))
    with pytest.raises(CampaignError) as caught:
        load_campaign(write(files, CAMPAIGN)).points(files / "dir", PLUGINS)
    lines = caught.value.lines
    assert len(lines) == 1  # the same problem in 16 points is reported once
    assert lines[0].startswith(f"{files / 'sessions' / 'base.toml'}: cluster.hep: unknown key")
    assert "+13 more" in lines[0]


def test_unreadable_files(tmp_path: Path) -> None:
    for content, expected in ((b"\xff\xfe", "not UTF-8"), (b"name = [", "invalid TOML")):
        path = tmp_path / "bad.toml"
        path.write_bytes(content)
        with pytest.raises(CampaignError, match=expected):
            load_campaign(path)
    with pytest.raises(CampaignError, match="no such file"):
        load_campaign(tmp_path / "missing.toml")


def test_deep_nesting_and_a_fifo_are_refused_naming_the_file(tmp_path: Path) -> None:
    from esdash.campaign.spec import is_campaign_file

    deep = tmp_path / "deep.toml"
    deep.write_text("axes = " + "[" * 5000 + "]" * 5000 + "\n")
    assert not is_campaign_file(deep)  # the session loader then says why
    with pytest.raises(CampaignError, match=f"\n  {deep}: nested too deeply"):
        load_campaign(deep)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # nobody writes to it: a blocking read would hang
    assert not is_campaign_file(fifo)
    with pytest.raises(CampaignError, match=f"\n  {fifo}: cannot read: not a regular file"):
        load_campaign(fifo)


# ---------------------------------------------------------------------- hypothesis


def _leaves(data: dict, prefix: tuple = ()) -> list[tuple]:
    found = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            found += _leaves(value, (*prefix, key))
        else:
            found.append((*prefix, key))
    return found


JUNK = st.one_of(
    st.integers(-5, 5000),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(string.ascii_letters + string.digits + " ._-/", max_size=12),
    st.lists(st.one_of(st.integers(-2, 4), st.text("ab", max_size=2)), max_size=3),
    st.dictionaries(st.sampled_from(["a", "mode", "nodes"]), st.integers(0, 3), max_size=2),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(leaf=st.sampled_from(_leaves(CAMPAIGN)), junk=JUNK)
def test_any_broken_value_is_a_clear_error(files: Path, leaf: tuple, junk: object) -> None:
    """Replace one value of a good campaign with junk: it still works, or every problem is
    a line naming the campaign or the base file, and one of them names the key changed."""
    data = copy.deepcopy(CAMPAIGN)
    node = data
    for key in leaf[:-1]:
        node = node[key]
    node[leaf[-1]] = junk
    path = write(files, data)
    try:
        load_campaign(path).points(files / "dir", PLUGINS)
    except CampaignError as exc:
        allowed = (str(path), str(files / "sessions" / "base.toml"))
        assert exc.lines
        for line in exc.lines:
            assert line.startswith(allowed), line
        assert leaf[-1] in "\n".join(exc.lines), exc.lines


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_is_a_campaign_or_a_clear_error(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "c.toml"
    path.write_text(text)
    try:
        parse_campaign(tomllib.loads(text), path, PLUGINS)
    except tomllib.TOMLDecodeError:
        with pytest.raises(CampaignError, match="invalid TOML"):
            load_campaign(path)
    except CampaignError as exc:
        assert all(line.startswith(str(path)) or ": " in line for line in exc.lines)
