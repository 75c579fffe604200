"""Fixtures of the track tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def readable_tmp(shared_tmp: Path) -> Path:
    """A fresh directory every account can read, for a track whose own code runs.

    As root esdash runs a track's ``track.py`` as ``nobody``, which cannot enter pytest's
    ``tmp_path`` (it lies under a 0700 directory); this one lies in ``shared_tmp`` (0755).
    """
    path = Path(tempfile.mkdtemp(dir=shared_tmp, prefix="track-"))
    path.chmod(0o755)
    return path
