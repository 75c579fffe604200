"""Reusing indices across jobs: same size reuses, another size is refused, --fresh deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from esdash.cluster.dataroot import prepare_data_root
from esdash.errors import BadInput


def test_reuse_refuse_and_fresh(tmp_path: Path) -> None:
    root = tmp_path / "data"
    assert prepare_data_root(root, "esdash-x", 3, fresh=False) == "new"
    (root / "0").mkdir()
    (root / "0" / "index-file").write_text("shard")
    assert prepare_data_root(root, "esdash-x", 3, fresh=False) == "reused"
    with pytest.raises(BadInput, match="holds the data of a 3-node cluster") as info:
        prepare_data_root(root, "esdash-x", 5, fresh=False)
    assert "--fresh" in str(info.value)
    assert (root / "0" / "index-file").exists()  # nothing deleted by a refusal
    with pytest.raises(BadInput, match="holds the data of cluster 'esdash-x'"):
        prepare_data_root(root, "esdash-y", 3, fresh=False)
    assert prepare_data_root(root, "esdash-x", 5, fresh=True).startswith("fresh")
    assert not (root / "0").exists()
    assert prepare_data_root(root, "esdash-x", 5, fresh=False) == "reused"
