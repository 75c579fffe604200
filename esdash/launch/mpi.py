"""Starting ranks: ``mpiexec`` on one machine, ``srun`` inside a Slurm allocation.

MPI itself comes from the site (module system) or the ``mpich`` wheel.  The launcher is
chosen by where esdash runs, and the ``srun`` MPI plugin by the MPI library mpi4py loaded:
MPICH speaks PMI-2 (``--mpi=pmi2``), Open MPI PMIx (``--mpi=pmix``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from esdash.errors import EsdashError


def in_allocation() -> bool:
    """True inside a Slurm job (batch script or salloc shell), where ranks start with srun."""
    return bool(os.environ.get("SLURM_JOB_ID")) and shutil.which("srun") is not None


def find_mpiexec() -> str | None:
    """The ``mpiexec`` that belongs to this interpreter's mpi4py.

    The one next to ``sys.executable`` comes first: the PyPI ``mpich`` wheel installs it
    there, and that wheel's libmpi is also the one mpi4py loads, even when the venv is not
    activated.  Otherwise ``PATH`` (a site module's MPI).
    """
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mpiexec")


def mpiexec() -> str:
    """:func:`find_mpiexec`, or an error saying how to get one."""
    found = find_mpiexec()
    if found is None:
        raise EsdashError(
            "no mpiexec found: install the mpich extra (`pip install esdash[mpich]`) or load "
            "the site's MPI module"
        )
    return found


def mpi_flavor() -> str:
    """``mpich`` or ``openmpi``: which library mpi4py loads (asked without initialising MPI)."""
    code = (
        "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
        "print(MPI.Get_library_version())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    text = result.stdout.lower()
    if "open mpi" in text:
        return "openmpi"
    return "mpich"


def srun_mpi_option() -> str:
    """``--mpi=...`` for srun; ``ESDASH_SRUN_MPI`` overrides the detection."""
    forced = os.environ.get("ESDASH_SRUN_MPI")
    if forced:
        return f"--mpi={forced}"
    return "--mpi=pmix" if mpi_flavor() == "openmpi" else "--mpi=pmi2"


def rank_command(
    module_args: list[str], ranks: int, ranks_per_host: int | None, hosts: int | None = None
) -> list[str]:
    """The command that runs ``python -m <module_args>`` as ``ranks`` MPI ranks.

    Inside an allocation ``ranks_per_host`` fixes the placement (one search node per rank);
    with ``None`` the ranks are dealt round-robin over ``hosts`` hosts (the benchmark's
    workers plus its coordinator).
    """
    python = [sys.executable, "-m", *module_args]
    if in_allocation():
        if ranks_per_host is not None:
            placement = [
                f"--nodes={-(-ranks // ranks_per_host)}",
                f"--ntasks-per-node={ranks_per_host}",
            ]
        else:
            # more tasks than the job's task slots: the workers share the nodes' CPUs
            placement = [f"--nodes={hosts or 1}", "--distribution=cyclic", "--overcommit"]
        return [
            "srun",
            srun_mpi_option(),
            *placement,
            f"--ntasks={ranks}",
            "--overlap",  # the benchmark step runs beside the cluster step
            "--kill-on-bad-exit=0",
            *python,
        ]
    # A rank that dies must not take the others with it (a lost node or rank is reported,
    # the rest finish): hydra's -disable-auto-cleanup; srun does so by default.
    keep_going = ["-disable-auto-cleanup"] if mpi_flavor() == "mpich" else []
    return [mpiexec(), *keep_going, "-n", str(ranks), *python]
