"""Slurm from a login node: write a batch script into the run directory and submit it.

The job runs ``esdash cluster up --foreground`` on the run directory that already exists, so
``esdash cluster status RUN`` can show the job's state (pending, running) before any node is
up, and the dashboard can follow the run through the shared file system.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping

from esdash.errors import BadInput, EsdashError
from esdash.rundir.layout import JOB_SCRIPT, RunDir
from esdash.session import Session

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


def _unreadable(value: str, pattern: re.Pattern[str]) -> str | None:
    """Why sbatch would not read ``value`` back as written, or None."""
    if not pattern.fullmatch(value):
        return "it holds characters sbatch or a shell reads specially"
    lowered = value.lower()
    word = next((w for w in _SEPARATORS if w in lowered), None)
    return f"sbatch reads {word!r} as the start of a heterogeneous job" if word else None


def _directive(session: Session, key: str, option: str, value: str) -> str:
    """``#SBATCH option=value``; a :class:`BadInput` naming ``key`` if sbatch would read it
    otherwise (the session checks refuse such values first; this keeps a programmatic
    :class:`Session` to the same rule)."""
    why = _unreadable(value, _DIRECTIVE_VALUE)
    if why:
        raise BadInput(
            f"{session.path}: {key}: {value!r} cannot be written on an #SBATCH line: {why}; "
            f"run `esdash session check {session.path}` for the accepted form"
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


def session_time(session: Session) -> str | None:
    """The session's own ``[slurm] time``, or None when its table sets none (then
    ``session.slurm.time`` is the option's default, which nobody chose for this run)."""
    table = session.source.get("slurm")
    value = table.get("time") if isinstance(table, Mapping) else None
    return None if value is None else str(value)


def batch_script(
    session: Session, run: RunDir, command: list[str], default_time: str | None = None
) -> str:
    """The sbatch script: resources from the session, the command, output into the run dir.

    sbatch takes its options from the #SBATCH lines before the first command line and
    cannot unquote them as a shell would, so every value there must read back as written
    (:func:`_directive`); the command line is quoted with :func:`shlex.join`.

    ``--time`` is the session's ``slurm.time`` when it sets one, else ``default_time`` (the
    run's estimated wall time with its margin, :func:`esdash.prepare.timelimit.job_time`),
    else the option's default.
    """
    cluster, slurm = session.cluster, session.slurm
    hosts = -(-cluster.nodes // cluster.nodes_per_host)
    directory = _run_directory(run)
    time = slurm.time if default_time is None or session_time(session) else default_time
    lines = [
        "#!/bin/bash",
        _directive(session, "name", "--job-name", f"esdash-{session.name}"),
        f"#SBATCH --nodes={hosts}",
        f"#SBATCH --ntasks-per-node={cluster.nodes_per_host}",
        _directive(session, "slurm.time", "--time", time),
        f"#SBATCH --output={directory}/{run.slurm_output_pattern.name}",
        f"#SBATCH --chdir={directory}",
    ]
    if slurm.partition:
        lines.append(_directive(session, "slurm.partition", "--partition", slurm.partition))
    if slurm.account:
        lines.append(_directive(session, "slurm.account", "--account", slurm.account))
    for index, option in enumerate(slurm.extra):
        if not option.startswith("-"):
            raise BadInput(f"{session.path}: slurm.extra[{index}]: {option!r} is not an option")
        lines.append(_directive(session, f"slurm.extra[{index}]", "", option))
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
