"""``mpiexec`` from the venv (the MPICH wheel) runs an mpi4py allgather on this machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.prereqs import venv_bin
from support.procs import run_bounded

pytestmark = pytest.mark.mpi

PROGRAM = Path(__file__).with_name("mpi_allgather.py")


def test_mpiexec_allgather():
    proc = run_bounded(
        [str(venv_bin() / "mpiexec"), "-n", "2", sys.executable, str(PROGRAM)], timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["size"] == 2
    assert [g["rank"] for g in result["gathered"]] == [0, 1]
    assert result["all_agree"]
    assert "MPICH" in result["library"]
