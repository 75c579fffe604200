"""The session files a user can start, validated, as the dashboard's home screen lists them.

Choosing a session is the first thing decided before anything is launched: each file is
parsed with the plugins and, for the dashboard's validate and launch keys, passed through
the pre-flight checks of the session stage (:mod:`esdash.prepare.checks`), so the list
says which session would be refused and why.  Campaign files (``esdash sweep``) share the
directories and are left out.  Textual-free, so it is unit-tested like the rest of the core;
the functions touch the file system, so a viewer calls them from a worker thread.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.errors import EsdashError
from esdash.rundir import files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet


@dataclass(frozen=True)
class SessionEntry:
    """One session file as the list shows it: its key settings, or why it is invalid."""

    path: Path
    name: str
    description: str = ""
    nodes: int | None = None
    workers_per_node: int | None = None
    track: str | None = None
    encryption: str | None = None
    interconnect: str | None = None
    warmup: float | None = None
    duration: float | None = None
    slurm_time: str | None = None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None


def session_dirs(extra: Iterable[str | Path] = ()) -> list[Path]:
    """``./sessions``, ``ESDASH_SESSIONS`` (``:``-separated) and ``extra``, without repeats."""
    found: list[Path] = []
    candidates = [Path("sessions"), *(Path(p) for p in extra)]
    candidates += [Path(p) for p in os.environ.get("ESDASH_SESSIONS", "").split(":") if p]
    for candidate in candidates:
        path = candidate.expanduser().resolve()
        if path not in found:
            found.append(path)
    return found


def load_entry(path: Path, plugins: PluginSet | None = None, checked: bool = False) -> SessionEntry:
    """One session file, validated; an invalid one carries its error message.

    ``checked`` also runs the pre-flight checks of the session stage (the ones
    ``esdash session check`` runs): the dashboard's validate and launch keys.
    """
    from esdash.prepare import checks
    from esdash.session import load_session

    try:
        session = load_session(path, plugins)
        problems = checks.findings(session, "session", plugins=plugins) if checked else []
    except EsdashError as exc:
        return SessionEntry(path=path, name=path.stem, error=str(exc))
    if problems:
        return SessionEntry(path=path, name=session.name, error="\n".join(problems))
    return SessionEntry(
        path=path,
        name=session.name,
        description=session.description,
        nodes=session.cluster.nodes,
        workers_per_node=session.benchmark.workers_per_node,
        track=session.track.name,
        encryption=session.encryption.name,
        interconnect=session.cluster.interconnect,
        warmup=session.benchmark.warmup,
        duration=session.benchmark.duration,
        slurm_time=session.slurm.time,
    )


def is_campaign(path: Path) -> bool:
    """A campaign file (``esdash sweep``: it has ``[axes]``) lives among sessions too."""
    try:
        return "axes" in tomllib.loads(files.read_regular(path).decode())
    except (OSError, ValueError, RecursionError):
        return False  # shown as an invalid session, with the parser's message


def list_sessions(dirs: Iterable[Path], plugins: PluginSet | None = None) -> list[SessionEntry]:
    """The session files of ``dirs``, validated (campaign files are left out)."""
    entries: list[SessionEntry] = []
    for directory in dirs:
        try:
            found = sorted(directory.glob("*.toml"))
        except OSError:
            continue
        entries.extend(load_entry(path, plugins) for path in found if not is_campaign(path))
    return entries
