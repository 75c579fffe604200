"""Slurm from a login node: write a batch script into the run directory and submit it.

The job runs ``esdash cluster up --foreground`` on the run directory that already exists, so
``esdash cluster status RUN`` can show the job's state (pending, running) before any node is
up, and the dashboard can follow the run through the shared file system.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

from esdash.errors import EsdashError
from esdash.rundir.layout import RunDir
from esdash.session import Session


def batch_script(session: Session, run: RunDir, command: list[str]) -> str:
    """The sbatch script: resources from the session, the command, output into the run dir."""
    cluster, slurm = session.cluster, session.slurm
    hosts = -(-cluster.nodes // cluster.nodes_per_host)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=esdash-{session.name}",
        f"#SBATCH --nodes={hosts}",
        f"#SBATCH --ntasks-per-node={cluster.nodes_per_host}",
        f"#SBATCH --time={slurm.time}",
        f"#SBATCH --output={run.slurm_output_pattern}",
        f"#SBATCH --chdir={run.path}",
    ]
    if slurm.partition:
        lines.append(f"#SBATCH --partition={slurm.partition}")
    if slurm.account:
        lines.append(f"#SBATCH --account={slurm.account}")
    lines += [f"#SBATCH {option}" for option in slurm.extra]
    lines += [
        "",
        "# Written by `esdash submit`; the job's state and output stay in this directory.",
        "set -euo pipefail",
        f"exec {shlex.join(command)}",
        "",
    ]
    return "\n".join(lines)


def _require(command: str) -> str:
    found = shutil.which(command)
    if found is None:
        raise EsdashError(
            f"{command} not found: submit from a Slurm login node (or load its module)"
        )
    return found


def submit(script_path: os.PathLike[str] | str) -> str:
    """Submit the batch script; return the job id."""
    result = subprocess.run(
        [_require("sbatch"), "--parsable", str(script_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise EsdashError(f"sbatch refused {script_path}: {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def job_state(job_id: str) -> str:
    """The job's Slurm state (PENDING, RUNNING, ...), or ``FINISHED`` once it left the queue."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return "UNKNOWN (squeue not found)"
    result = subprocess.run(
        [squeue, "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=60
    )
    state = result.stdout.strip()
    if result.returncode == 0 and state:
        return state
    return "FINISHED"


def cancel(job_id: str) -> None:
    scancel = shutil.which("scancel")
    if scancel:
        subprocess.run([scancel, job_id], capture_output=True, timeout=60)


def python_command(*args: str) -> list[str]:
    """``<this python> -m esdash <args>``: the job uses the same installation as the submitter."""
    return [sys.executable, "-m", "esdash", *args]
