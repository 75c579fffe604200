"""Slurm from a login node: write a batch script into the run directory and submit it.

The job runs ``esdash cluster up --foreground`` on the run directory that already exists, so
``esdash cluster status RUN`` can show the job's state (pending, running) before any node is
up, and the dashboard can follow the run through the shared file system.

Launching sits below the session: what a job asks for arrives as a :class:`JobRequest`
(:func:`esdash.prepare.slurm_job.job_request` makes one of a session), so this module knows
the values it writes and nothing of the session file or the plugins that validated it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput, EsdashError
from esdash.rundir.layout import JOB_SCRIPT, RunDir

#: A value sbatch reads back unchanged from an #SBATCH line: it splits such a line at white
#: space, drops quotes, reads a backslash as an escape and ``#`` as the start of a comment, and
#: a shell would see ``$``, backticks or ``;`` in it if the line were ever pasted into one.
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:=@%+/\[\]|&*?()~-]+")
#: A directory named in ``--output`` and ``--chdir``: no ``%`` either, which ``--output``
#: expands (``%j`` is the job id).
_DIRECTIVE_PATH = re.compile(r"[A-Za-z0-9_.,:=@+/~-]+")
#: Words sbatch reads anywhere in an #SBATCH line (any case) as the start of the next
#: component of a heterogeneous job.
_SEPARATORS = ("hetjob", "packjob")


@dataclass(frozen=True)
class JobRequest:
    """What a batch job asks Slurm for: the session's values that go on #SBATCH lines."""

    #: The session's name: the job is ``esdash-<name>``.
    name: str
    #: The session file, named when a value cannot be written.
    source: Path
    hosts: int
    tasks_per_host: int
    #: ``slurm.time`` as the session resolved it (the option's default when it sets none).
    time: str
    #: The session's own ``[slurm] time``; None when its table sets none.
    own_time: str | None
    partition: str | None
    account: str | None
    extra: tuple[str, ...]


def _unreadable(value: str, pattern: re.Pattern[str]) -> str | None:
    """Why sbatch would not read ``value`` back as written, or None."""
    if not pattern.fullmatch(value):
        return "it holds characters sbatch or a shell reads specially"
    lowered = value.lower()
    word = next((w for w in _SEPARATORS if w in lowered), None)
    return f"sbatch reads {word!r} as the start of a heterogeneous job" if word else None


def _directive(job: JobRequest, key: str, option: str, value: str) -> str:
    """``#SBATCH option=value``; a :class:`BadInput` naming ``key`` if sbatch would read it
    otherwise (the session checks refuse such values first; this keeps a programmatic
    session to the same rule)."""
    why = _unreadable(value, _DIRECTIVE_VALUE)
    if why:
        raise BadInput(
            f"{job.source}: {key}: {value!r} cannot be written on an #SBATCH line: {why}; "
            f"run `esdash session check {job.source}` for the accepted form"
        )
    return f"#SBATCH {option}={value}" if option else f"#SBATCH {value}"


def _run_directory(run: RunDir) -> str:
    """The run directory for ``--output`` and ``--chdir``, if sbatch reads it back as is."""
    path = str(run.path)
    why = _unreadable(path, _DIRECTIVE_PATH)
    if why:
        raise BadInput(
            f"run directory {path!r} cannot be written on an #SBATCH line: {why}; set "
            f"ESDASH_RUNS to a directory whose path has only letters, digits and _ . , : = @ + ~ -"
        )
    return path


def _command_line(command: list[str]) -> str:
    """``exec`` and the command, every word quoted for the shell; one line in the script."""
    for word in command:
        if not word.isprintable():
            raise BadInput(
                f"the job's command cannot hold {word!r}: a control character or line "
                f"separator would break its line in {JOB_SCRIPT}; rename that file or directory"
            )
    return f"exec {shlex.join(command)}"


def batch_script(
    job: JobRequest, run: RunDir, command: list[str], default_time: str | None = None
) -> str:
    """The sbatch script: the resources ``job`` asks for, the command, output into the run dir.

    sbatch takes its options from the #SBATCH lines before the first command line and
    cannot unquote them as a shell would, so every value there must read back as written
    (:func:`_directive`); the command line is quoted with :func:`shlex.join`.

    ``--time`` is the session's own ``slurm.time`` when it sets one, else ``default_time``
    (the run's estimated wall time with its margin, :func:`esdash.prepare.timelimit.job_time`),
    else the option's default.
    """
    directory = _run_directory(run)
    time = job.time if default_time is None or job.own_time else default_time
    lines = [
        "#!/bin/bash",
        _directive(job, "name", "--job-name", f"esdash-{job.name}"),
        f"#SBATCH --nodes={job.hosts}",
        f"#SBATCH --ntasks-per-node={job.tasks_per_host}",
        _directive(job, "slurm.time", "--time", time),
        f"#SBATCH --output={directory}/{run.slurm_output_pattern.name}",
        f"#SBATCH --chdir={directory}",
    ]
    if job.partition:
        lines.append(_directive(job, "slurm.partition", "--partition", job.partition))
    if job.account:
        lines.append(_directive(job, "slurm.account", "--account", job.account))
    for index, option in enumerate(job.extra):
        if not option.startswith("-"):
            raise BadInput(f"{job.source}: slurm.extra[{index}]: {option!r} is not an option")
        lines.append(_directive(job, f"slurm.extra[{index}]", "", option))
    lines += [
        "",
        "# Written by `esdash submit`; the job's state and output stay in this directory.",
        "set -euo pipefail",
        _command_line(command),
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
