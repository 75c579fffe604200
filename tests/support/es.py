"""One Elasticsearch node for infrastructure tests, run as the unprivileged user.

This is deliberately small: it proves the distribution, Java and the user work together.
Clusters are esdash's own job (``esdash.cluster``); tests of that code use the real thing.

The node runs in the foreground (``bin/elasticsearch`` is a launcher that forks the server
JVM).  To stop it we SIGTERM the *server* JVM, whose pid ES writes to ``es.pid``: the launcher
then exits with it.  Signalling ``runuser`` instead would make it SIGKILL its child after
2 seconds, cutting a graceful shutdown short.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from support.net import HttpUnreachable, http_json
from support.procs import as_user, chown_tree, stop, wait_gone

#: Environment variables that make the ES launcher warn or behave differently.
#: ``ES_JAVA_OPTS`` is not among them: it carries the test session's JVM options
#: (conftest.py: TEST_JVM_OPTIONS) to this node as esdash passes it to its own.
_JAVA_NOISE = ("JAVA_HOME", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JAVA_OPTS")


class EsNodeError(RuntimeError):
    """The node failed to start or to answer; the message carries its log tail."""


@dataclass
class EsNode:
    """A single node in ``workdir`` (config copy, data, logs, tmp all inside it).

    ``settings`` are added to / override the generated ``elasticsearch.yml``; the defaults
    make a single-node cluster on ``host`` with security off.  ``netns`` runs the node (and
    the HTTP checks) inside that network namespace.
    """

    home: Path
    user: str
    java_home: Path
    workdir: Path
    http_port: int
    transport_port: int
    host: str = "127.0.0.1"
    heap: str = "512m"
    settings: Mapping[str, object] = field(default_factory=dict)
    netns: str | None = None
    proc: subprocess.Popen | None = None
    server_pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def yml(self) -> dict[str, object]:
        return {
            "cluster.name": f"esdt-{self.http_port}",
            "node.name": f"node-{self.http_port}",
            "path.data": str(self.workdir / "data"),
            "path.logs": str(self.workdir / "logs"),
            "network.host": self.host,
            "http.port": self.http_port,
            "transport.port": self.transport_port,
            "discovery.type": "single-node",
            # Without it ES probes 9300-9305 on the host, which may be a foreign ES.
            "discovery.seed_hosts": [f"{self.host}:{self.transport_port}"],
            "xpack.security.enabled": False,
            "cluster.routing.allocation.disk.threshold_enabled": False,
            **self.settings,
        }

    def prepare(self) -> None:
        """Give the node its own writable config copy and directories, owned by the user."""
        config = self.workdir / "config"
        if config.exists():
            shutil.rmtree(config)
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.home / "config", config)
        # YAML is a superset of JSON, so json.dumps renders every value safely.
        lines = [f"{key}: {json.dumps(value)}" for key, value in self.yml().items()]
        (config / "elasticsearch.yml").write_text("\n".join(lines) + "\n")
        (config / "jvm.options.d").mkdir(exist_ok=True)
        heap = f"-Xms{self.heap}\n-Xmx{self.heap}\n"
        (config / "jvm.options.d" / "heap.options").write_text(heap)
        for sub in ("data", "logs", "tmp"):
            (self.workdir / sub).mkdir(exist_ok=True)
        chown_tree(self.workdir, self.user)

    def command(self) -> list[str]:
        argv = [
            "env",
            f"ES_JAVA_HOME={self.java_home}",
            f"ES_PATH_CONF={self.workdir / 'config'}",
            f"ES_TMPDIR={self.workdir / 'tmp'}",
            # The launcher JVM leaves a final-flags*/gc.log dir in its java.io.tmpdir on every
            # start; point that into the node's own tmp instead of /tmp.
            f"CLI_JAVA_OPTS=-Djava.io.tmpdir={self.workdir / 'tmp'}",
            str(self.home / "bin" / "elasticsearch"),
            "-p",
            str(self.workdir / "es.pid"),
        ]
        argv = as_user(self.user, argv)  # raises if the user is root
        if self.netns:
            argv = ["nsenter", f"--net=/run/netns/{self.netns}", *argv]
        return argv

    def start(self, timeout: float = 120.0) -> dict:
        """Start the node and wait until HTTP answers; returns ``_cluster/health``.

        (``GET /`` answers 405 in the integ-test-zip, so health is the readiness probe.)
        """
        self.prepare()
        env = {k: v for k, v in os.environ.items() if k not in _JAVA_NOISE}
        with (self.workdir / "stdout.log").open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )
        try:
            info = self.wait_http(timeout)
            # Read the pid now: ES deletes es.pid as soon as shutdown starts.
            self.server_pid = int((self.workdir / "es.pid").read_text().strip())
            return info
        except BaseException:
            self.stop()
            raise

    def wait_http(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise EsNodeError(
                    f"Elasticsearch exited with {self.proc.returncode} "
                    f"(78 = bootstrap checks failed):\n{self.log_tail()}"
                )
            try:
                return self.get("/_cluster/health", timeout=5)  # type: ignore[return-value]
            except HttpUnreachable:
                time.sleep(0.5)
        raise EsNodeError(f"no HTTP answer on {self.url} after {timeout:.0f}s:\n{self.log_tail()}")

    def get(self, path: str, timeout: float = 10.0) -> object:
        return http_json(self.url + path, netns=self.netns, timeout=timeout)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM the server JVM and wait for the launcher to exit (SIGKILL on timeout)."""
        if self.proc is None:
            return None
        if self.server_pid is None:
            pidfile = self.workdir / "es.pid"
            if pidfile.exists():
                self.server_pid = int(pidfile.read_text().strip() or 0) or None
        if self.server_pid and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server_pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        rc = stop(self.proc, timeout=15)  # no-op when it already exited
        if self.server_pid:
            wait_gone(self.server_pid, 10)
        return rc

    def log_tail(self, lines: int = 30) -> str:
        out = []
        logs = sorted(p for p in (self.workdir / "logs").glob("*.log") if p.name != "gc.log")
        for path in [self.workdir / "stdout.log", *logs]:
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(out) or "(no logs)"
