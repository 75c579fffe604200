"""The run directory: the one place a run's state lives, for every process and viewer.

It sits on the shared file system, so ranks on compute nodes, ``esdash cluster status`` on a
login node and the dashboard all see the same files without any network path between them.
Every JSON file is replaced atomically (write, then rename), so a poll-based reader never
sees half a record.

Layout (schema ``esdash.run/1``)::

    run.json                 what was started, by whom, where; the launcher's pid; Slurm job
    session.toml             the session as it was when the run started
    launcher.log             output of mpiexec/srun (and of every rank)
    topology.json            the plan rank 0 made: nodes, addresses, ports, roles
    credentials.json         user, password, CA path (mode 0600; absent without security)
    pki/                     the run's CA and node certificates
    nodes/<rank>/status.json the node's state: starting, running, stopped or failed
    nodes/<rank>/{config,logs,tmp}/ and stdout.log
    stop                     created by `esdash cluster down`: every rank stops its node
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esdash.errors import BadInput
from esdash.session import Session, parse_session, tomllib

SCHEMA = "esdash.run/1"
NODE_STATES = ("starting", "running", "stopped", "failed")


def write_json(path: Path, data: Any, mode: int = 0o644) -> None:
    """Replace ``path`` atomically with ``data`` as JSON."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2, default=str)
        handle.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    with path.open() as handle:
        return json.load(handle)


@dataclass(frozen=True)
class RunDir:
    path: Path

    @classmethod
    def create(cls, root: Path, session_name: str) -> RunDir:
        """A new run directory ``<root>/<session>-<UTC timestamp>`` (made unique)."""
        root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for attempt in range(100):
            suffix = f"-{attempt}" if attempt else ""
            path = root / f"{session_name}-{stamp}{suffix}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            path.chmod(0o755)
            (path / "nodes").mkdir(mode=0o755)
            return cls(path)
        raise BadInput(f"cannot create a new run directory under {root}")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory, or a :class:`BadInput` naming what is missing."""
        run = cls(Path(path).resolve())
        if not (run.path / "run.json").is_file():
            raise BadInput(
                f"{run.path} is not an esdash run directory (no run.json); pass the directory "
                f"that `esdash cluster up` or `esdash run` printed"
            )
        return run

    # ---------------------------------------------------------------- well-known files
    @property
    def run_file(self) -> Path:
        return self.path / "run.json"

    @property
    def session_file(self) -> Path:
        return self.path / "session.toml"

    @property
    def topology_file(self) -> Path:
        return self.path / "topology.json"

    @property
    def credentials_file(self) -> Path:
        return self.path / "credentials.json"

    @property
    def launcher_log(self) -> Path:
        return self.path / "launcher.log"

    @property
    def stop_file(self) -> Path:
        return self.path / "stop"

    @property
    def pki_dir(self) -> Path:
        return self.path / "pki"

    def node_dir(self, rank: int) -> Path:
        return self.path / "nodes" / str(rank)

    def node_status_file(self, rank: int) -> Path:
        return self.node_dir(rank) / "status.json"

    # ------------------------------------------------------------------------ state
    def read_run(self) -> dict[str, Any]:
        return read_json(self.run_file)

    def update_run(self, **changes: Any) -> dict[str, Any]:
        data = self.read_run() if self.run_file.exists() else {"schema": SCHEMA}
        data.update(changes)
        data["updated"] = time.time()
        write_json(self.run_file, data)
        return data

    def write_node_status(self, rank: int, **fields: Any) -> None:
        path = self.node_status_file(rank)
        previous = read_json(path) if path.exists() else {"rank": rank}
        previous.update(fields, updated=time.time(), host=socket.gethostname())
        write_json(path, previous)

    def node_statuses(self) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        for path in sorted((self.path / "nodes").glob("*/status.json")):
            try:
                found[int(path.parent.name)] = read_json(path)
            except (ValueError, OSError):
                continue  # being replaced right now, or not a rank directory
        return found

    def load_session(self) -> Session:
        """The session as copied into the run, with paths resolved as in the original file."""
        data = tomllib.loads(self.session_file.read_text())
        return parse_session(data, Path(self.read_run()["session_path"]))

    def stop_requested(self) -> bool:
        return self.stop_file.exists()


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
