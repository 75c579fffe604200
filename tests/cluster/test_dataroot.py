"""Reusing indices across jobs: same size and mode reuse, another is refused, --fresh deletes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esdash.cluster.dataroot import MARKER, prepare_data_root
from esdash.errors import BadInput
from esdash.plugin.manager import get_plugins


def mode(name: str):
    """The registered encryption mode (the real plugin object, as a run gets it)."""
    return get_plugins().encryption(name)


def marker(root: Path) -> dict:
    return json.loads((root / MARKER).read_text())


def test_reuse_refuse_and_fresh(tmp_path: Path) -> None:
    root = tmp_path / "data"
    none = mode("none")
    assert prepare_data_root(root, "esdash-x", 3, fresh=False, encryption=none) == "new"
    (root / "0").mkdir()
    (root / "0" / "index-file").write_text("shard")
    assert prepare_data_root(root, "esdash-x", 3, fresh=False, encryption=none) == "reused"
    with pytest.raises(BadInput, match="holds the data of a 3-node cluster") as info:
        prepare_data_root(root, "esdash-x", 5, fresh=False, encryption=none)
    assert "--fresh" in str(info.value)
    assert (root / "0" / "index-file").exists()  # nothing deleted by a refusal
    with pytest.raises(BadInput, match="holds the data of cluster 'esdash-x'"):
        prepare_data_root(root, "esdash-y", 3, fresh=False, encryption=none)
    assert prepare_data_root(root, "esdash-x", 5, fresh=True, encryption=none).startswith("fresh")
    assert not (root / "0").exists()
    assert prepare_data_root(root, "esdash-x", 5, fresh=False, encryption=none) == "reused"


@pytest.mark.parametrize(
    ("first", "then", "held"),
    [("gocryptfs", "none", "gocryptfs-cipher"), ("none", "gocryptfs", "plain")],
)
def test_another_encryption_mode_is_refused(
    tmp_path: Path, first: str, then: str, held: str
) -> None:
    root = tmp_path / "data"
    assert prepare_data_root(root, "esdash-x", 1, fresh=False, encryption=mode(first)) == "new"
    assert marker(root)["encryption"] == {"mode": first, "node_data": held}
    # what the first mode left in node 0's directory
    node = root / "0" / ("cipher" if first == "gocryptfs" else "indices")
    node.mkdir(parents=True)
    (node / "gocryptfs.conf" if first == "gocryptfs" else node / "segment").write_text("data")
    before = (root / MARKER).read_text()

    with pytest.raises(BadInput) as info:
        prepare_data_root(root, "esdash-x", 1, fresh=False, encryption=mode(then))
    message = str(info.value)
    assert message.startswith(
        f'{root} holds node data written with encryption.mode = "{first}" ({held} node '
        f'directories), and this session asks for encryption.mode = "{then}"'
    )
    assert "choose another cluster.data_dir" in message
    assert "--fresh to delete that data" in message
    assert f'set encryption.mode = "{first}"' in message
    assert (root / MARKER).read_text() == before  # a refusal changes nothing
    assert any(node.iterdir())

    # the same mode again reuses; --fresh deletes and records the new mode
    assert prepare_data_root(root, "esdash-x", 1, fresh=False, encryption=mode(first)) == "reused"
    fresh = prepare_data_root(root, "esdash-x", 1, fresh=True, encryption=mode(then))
    assert fresh == "fresh (deleted the data of 1 node(s))"
    assert not (root / "0").exists()
    assert marker(root)["encryption"]["mode"] == then


def test_abe_and_none_do_not_share_a_root_either(tmp_path: Path) -> None:
    root = tmp_path / "data"
    prepare_data_root(root, "esdash-x", 1, fresh=False, encryption=mode("abe"))
    assert marker(root)["encryption"] == {"mode": "abe", "node_data": "plain"}
    with pytest.raises(BadInput, match='written with encryption.mode = "abe"'):
        prepare_data_root(root, "esdash-x", 1, fresh=False, encryption=mode("none"))


def test_a_marker_without_the_mode_keeps_working_and_gets_it_recorded(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    old = {"cluster_name": "esdash-x", "nodes": 2, "updated": 1.0, "last": "new"}
    (root / MARKER).write_text(json.dumps(old))
    gocryptfs = mode("gocryptfs")
    assert prepare_data_root(root, "esdash-x", 2, fresh=False, encryption=gocryptfs) == "reused"
    assert marker(root)["encryption"] == {"mode": "gocryptfs", "node_data": "gocryptfs-cipher"}
    with pytest.raises(BadInput, match='encryption.mode = "gocryptfs"'):
        prepare_data_root(root, "esdash-x", 2, fresh=False, encryption=mode("none"))
