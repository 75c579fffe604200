"""A private ``cluster.data_dir`` stays private (finding H2, issue 28 item 2).

esdash used to ``chmod 0755`` an existing data root, so the plaintext indices of mode
``none`` became readable by every user.  Now an existing data root keeps its mode: when the
node account cannot pass through it, the start is refused in one line with the fix, before
any process or account exists; a data root esdash makes itself is 0711 (pass, never list).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.cli import esdash, write_session

from esdash.cluster.dataroot import prepare_data_root
from esdash.cluster.users import account_for
from esdash.plugin.manager import get_plugins

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the node account exists as root")


def test_a_private_data_dir_is_refused_not_widened(shared_tmp: Path) -> None:
    home = shared_tmp / "private-data"
    home.mkdir(mode=0o755)
    data = home / "mine"
    data.mkdir(mode=0o700)
    (data / "notes.txt").write_text("patient list\n")
    (data / "notes.txt").chmod(0o600)
    session = write_session(home, "privdata", 1, user="per-cluster")
    session.write_text(
        session.read_text().replace('data_dir = "data-privdata"', f'data_dir = "{data}"')
    )
    result = esdash("cluster", "up", str(session), env_runs=home / "runs", check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert f"cannot enter {data} (mode 0o700); esdash does not widen it" in line
    assert "chmod o+x" in line and "Traceback" not in result.stderr
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert sorted(p.name for p in data.iterdir()) == ["notes.txt"]
    account = account_for(data).name  # refused before the cluster's account was made
    assert not [line for line in Path("/etc/passwd").read_text().splitlines() if account in line]


def test_preparing_an_existing_data_root_keeps_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir(mode=0o750)
    root.chmod(0o750)
    prepare_data_root(root, "esdash-x", 1, False, get_plugins().encryption("none"))
    assert stat.S_IMODE(root.stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "esdash-data.json").stat().st_mode) == 0o600
    made = tmp_path / "new" / "data"
    prepare_data_root(made, "esdash-x", 1, False, get_plugins().encryption("none"))
    assert stat.S_IMODE(made.stat().st_mode) == 0o711
    assert stat.S_IMODE(made.parent.stat().st_mode) == 0o711
