"""The private Slurm cluster runs tasks and MPI programs on its three emulated nodes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

PROGRAM = Path(__file__).with_name("mpi_allgather.py")


def test_nodes_idle(slurm_cluster):
    assert slurm_cluster.node_states() == {"lo1": "idle", "lo2": "idle", "lo3": "idle"}


def test_srun_on_three_nodes(slurm_cluster):
    proc = slurm_cluster.srun("-N3", "--ntasks-per-node=1", "printenv", "SLURMD_NODENAME")
    assert sorted(proc.stdout.split()) == ["lo1", "lo2", "lo3"]


def test_srun_as_unprivileged_user(slurm_cluster, es_user):
    """Jobs run as the submitter; Elasticsearch ranks will be submitted as this user."""
    proc = slurm_cluster.srun("-N3", "id", "-un", user=es_user)
    assert proc.stdout.split() == [es_user] * 3


@pytest.mark.mpi
def test_mpi_across_nodes(slurm_cluster):
    proc = slurm_cluster.srun(
        "-N3", "--ntasks-per-node=1", "--mpi=pmi2", sys.executable, str(PROGRAM), timeout=180
    )
    result = json.loads(proc.stdout)
    assert result["size"] == 3
    assert [g["rank"] for g in result["gathered"]] == [0, 1, 2]
    assert sorted(g["node"] for g in result["gathered"]) == ["lo1", "lo2", "lo3"]
    assert result["all_agree"]
