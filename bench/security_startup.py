"""What security costs at startup: one node with TLS + file realm vs security off.

    sudo .venv/bin/python bench/security_startup.py [--rounds 3]

Run as root on an otherwise idle machine: it starts nodes as the unprivileged user
``esdash`` (``--user``) from the newest distribution in esdash's cache (``--home``), on free
loopback ports, one at a time, alternating the order of the two modes in each round.  Prints
the seconds from ``Popen`` until ``_cluster/health`` answers, per mode (median, min, max),
their ratio, and the cost of producing the file-realm password hash in Python vs with
``bin/elasticsearch-users``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from esdash_plugins.backends.elasticsearch import security  # noqa: E402

from esdash import paths  # noqa: E402
from esdash.cluster import pki  # noqa: E402

JAVA_HOME = os.environ.get("ES_JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def es_env(node: Path) -> list[str]:
    return [
        "env",
        f"ES_JAVA_HOME={JAVA_HOME}",
        f"ES_PATH_CONF={node / 'config'}",
        f"ES_TMPDIR={node / 'tmp'}",
    ]


def start_once(root: Path, home: Path, user: str, secure: bool, tag: str) -> float:
    node = root / tag
    node.mkdir()
    shutil.copytree(home / "config", node / "config")
    (node / "tmp").mkdir()
    http_port, transport_port = free_port(), free_port()
    settings: dict[str, object] = {
        "cluster.name": "bench-security",
        "node.name": tag,
        "path.data": str(node / "data"),
        "path.logs": str(node / "logs"),
        "network.host": "127.0.0.1",
        "http.port": http_port,
        "transport.port": transport_port,
        "discovery.type": "single-node",
        "discovery.seed_hosts": [f"127.0.0.1:{transport_port}"],
    }
    creds = None
    if secure:
        cluster_pki = pki.create_cluster_pki(root / f"{tag}-pki", "bench", [["127.0.0.1"]])
        (root / f"{tag}-run").mkdir()
        creds = pki.create_credentials(root / f"{tag}-run", ca_certs=cluster_pki.ca_cert)
        security.install_node_security(node / "config", pki.node_security(cluster_pki, 0, creds))
        settings.update(security.security_settings())
    else:
        settings.update(security.disabled_settings())
    yml = "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items())
    (node / "config" / "elasticsearch.yml").write_text(yml)
    (node / "config" / "jvm.options.d" / "heap.options").write_text("-Xms512m\n-Xmx512m\n")
    subprocess.run(["chown", "-R", f"{user}:", str(node)], check=True)

    url = pki.base_url("127.0.0.1", http_port, secure=secure) + "/_cluster/health"
    headers = pki.basic_auth_header(creds) if creds else {}
    context = pki.ssl_context(creds) if creds else None
    argv = ["runuser", "-u", user, "--", *es_env(node), str(home / "bin" / "elasticsearch")]
    argv += ["-p", str(node / "es.pid")]
    with open(node / "console.log", "wb") as log:
        began = time.monotonic()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"{tag} exited with {proc.returncode}; see {node / 'console.log'}")
            try:
                request = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(request, context=context, timeout=2):
                    elapsed = time.monotonic() - began
                    break
            except OSError:
                time.sleep(0.1)
        os.kill(int((node / "es.pid").read_text()), signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return elapsed


def users_tool_argv(config_parent: Path, home: Path, user: str) -> list[str]:
    """``elasticsearch-users useradd`` as ``user``, without the password: a command line is
    readable by every local user (``/proc/PID/cmdline``), so the tool reads it from stdin
    (it asks twice), as :func:`users_tool_seconds` gives it."""
    argv = ["runuser", "-u", user, "--", *es_env(config_parent)]
    return argv + [str(home / "bin" / "elasticsearch-users"), "useradd", "bench", "-r", "superuser"]


def users_tool_seconds(root: Path, home: Path, user: str, password: str) -> float:
    config = root / "users-tool" / "config"
    shutil.copytree(home / "config", config)
    (root / "users-tool" / "tmp").mkdir()
    subprocess.run(["chown", "-R", f"{user}:", str(root / "users-tool")], check=True)
    argv = users_tool_argv(config.parent, home, user)
    began = time.monotonic()
    answer = f"{password}\n{password}\n"
    subprocess.run(argv, check=True, input=answer, text=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--user", default="esdash")
    parser.add_argument("--home", type=Path, default=paths.default_distribution("elasticsearch"))
    args = parser.parse_args()
    if args.home is None:
        raise SystemExit("no distribution: pass --home")
    root = Path(tempfile.mkdtemp(prefix="esdash-bench-security-"))
    root.chmod(0o711)
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for secure in order:
                tag = f"r{round_}-{'on' if secure else 'off'}"
                times[secure].append(start_once(root, args.home, args.user, secure, tag))
                print(f"{tag}: {times[secure][-1]:.2f} s", flush=True)
        password = secrets.token_urlsafe(32)  # as esdash makes them
        began = time.perf_counter()
        security.pbkdf2_hash(password)
        python_hash = time.perf_counter() - began
        tool = users_tool_seconds(root, args.home, args.user, password)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (nproc {os.cpu_count()})")
    for secure in (False, True):
        values = times[secure]
        print(
            f"security {'on ' if secure else 'off'}: median {statistics.median(values):.2f} s "
            f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
        )
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    print(f"on/off ratio of medians: {ratio:.2f}")
    print(
        f"file-realm hash in Python: {python_hash * 1000:.1f} ms; elasticsearch-users: {tool:.2f} s"
    )


if __name__ == "__main__":
    main()
