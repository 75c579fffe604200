"""Node ports: free ones chosen per rank by default, explicit ones checked before a start.

The pure part (choosing, holding, checking, naming the holder, planning, the retry's
bookkeeping) runs without a cluster.  The real part starts 1-node clusters: two sessions
without ports at the same time, one of them with an automatic port taken between choice and
bind (one retry, new ports); and an explicit port already held (refused before anything
starts).
"""

from __future__ import annotations

import errno
import json
import os
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import (
    ESDASH,
    esdash,
    free_port_block,
    free_port_blocks,
    java_pids_under,
    run_dir_from,
    status_json,
    write_session,
)

from esdash.cluster import ports
from esdash.cluster.rank import _record_port_clash, _with_ports
from esdash.cluster.topology import RankReport, plan_topology
from esdash.plugin.checks import CheckContext
from esdash.plugin.manager import get_plugins
from esdash.prepare.checks.cluster import PortsFree
from esdash.rundir.layout import RunDir
from esdash.rundir.records import NodePlan
from esdash.session import Session, load_session

LOOPBACK = "127.0.0.1"


def listener(port: int = 0, address: str = LOOPBACK) -> socket.socket:
    """A listening socket of this process (as a foreign node or service would hold it)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen()
    return sock


def session_file(tmp_path: Path, name: str, *, explicit: bool, nodes: int = 1) -> Session:
    return load_session(write_session(tmp_path, name, nodes, security=False, ports=explicit))


# ------------------------------------------------------------------------------ choosing


@pytest.mark.parametrize(
    ("ephemeral", "expected"),
    [
        ((32768, 60999), (20000, 32767)),  # Linux's default: everything below it
        ((25000, 60999), (20000, 24999)),  # a lower ephemeral range narrows the choice
        ((1024, 65535), (20000, 32767)),  # nothing left below it: the default range anyway
        (None, (20000, 32767)),  # not Linux
    ],
)
def test_automatic_ports_come_from_below_the_ephemeral_range(ephemeral, expected) -> None:
    assert ports.below(ephemeral) == expected


def test_reserved_ports_are_distinct_held_and_released() -> None:
    reservation = ports.reserve(LOOPBACK, 2)
    low, high = ports.auto_range()
    try:
        assert len(set(reservation.ports)) == 2
        assert all(low <= port <= high for port in reservation.ports)
        for port in reservation.ports:
            # held: nobody can bind it, not even with SO_REUSEADDR as the engines bind
            assert ports.in_use(LOOPBACK, port)
            # and a concurrent choice skips it
            assert port not in ports.reserve(LOOPBACK, 1, port_range=(port, port + 1)).ports
    finally:
        reservation.release()
    assert not any(ports.in_use(LOOPBACK, port) for port in reservation.ports)


def test_a_port_in_use_is_never_chosen() -> None:
    base = free_port_block(2)
    with listener(base):
        for seed in range(20):
            chosen = ports.reserve(
                LOOPBACK, 1, port_range=(base, base + 1), rng=random.Random(seed)
            )
            chosen.release()
            assert chosen.ports == (base + 1,)


def test_an_explicit_port_of_the_session_is_never_chosen() -> None:
    """``http_port`` set, ``transport_port`` automatic: no rank takes another's HTTP port."""
    base = free_port_block(2)
    for seed in range(20):
        chosen = ports.reserve(
            LOOPBACK, 1, port_range=(base, base + 1), rng=random.Random(seed), exclude={base}
        )
        chosen.release()
        assert chosen.ports == (base + 1,)


def test_no_free_port_or_a_foreign_address_is_an_error() -> None:
    base = free_port_block(1)
    with listener(base), pytest.raises(OSError, match=f"no free port on {LOOPBACK}"):
        ports.reserve(LOOPBACK, 1, port_range=(base, base), attempts=5)
    with pytest.raises(OSError) as raised:
        ports.reserve("192.0.2.1", 1)  # TEST-NET-1: no address of this host
    assert raised.value.errno == errno.EADDRNOTAVAIL


def test_a_connection_in_time_wait_does_not_make_a_port_in_use() -> None:
    """Restarting a session with explicit ports right after a stop must not be refused."""
    server = listener()
    port = server.getsockname()[1]
    client = socket.create_connection((LOOPBACK, port))
    accepted, _ = server.accept()
    server.close()
    accepted.close()  # the server side closes first: its end waits in TIME_WAIT on ``port``
    client.recv(1)
    client.close()
    time.sleep(0.1)
    assert not ports.in_use(LOOPBACK, port)


# ------------------------------------------------------------------------- naming holders


def test_the_holder_of_a_port_is_named_with_its_pid() -> None:
    with listener() as sock:
        port = sock.getsockname()[1]
        holder = ports.holder(LOOPBACK, port)
        assert holder.pid == os.getpid()
        line = ports.clash_line(ports.HTTP_KEY, port, LOOPBACK)
    assert line.startswith(f"cluster.http_port: port {port} on {LOOPBACK} is in use by PID ")
    assert str(os.getpid()) in line and "\n" not in line


def test_a_listener_on_all_addresses_counts_and_an_offset_is_explained() -> None:
    with listener(address="0.0.0.0") as sock:
        port = sock.getsockname()[1]
        assert ports.in_use(LOOPBACK, port)
        line = ports.clash_line(ports.TRANSPORT_KEY, port, LOOPBACK, offset=2)
    assert line.startswith(f"cluster.transport_port: port {port} ({port - 2} + node-local rank 2)")
    assert f"PID {os.getpid()}" in line


def test_an_invisible_holder_is_said_to_be_invisible() -> None:
    port = free_port_block(1)
    assert ports.holder(LOOPBACK, port).pid is None
    assert "not visible" in ports.clash_line(ports.HTTP_KEY, port, LOOPBACK)


# ------------------------------------------------------------------------------ sessions


def test_ports_are_automatic_unless_a_session_sets_them(tmp_path: Path) -> None:
    auto = session_file(tmp_path, "auto", explicit=False)
    assert auto.cluster.http_port is None and auto.cluster.transport_port is None
    assert ports.explicit_ports(auto) == {}
    assert ports.describe(auto.cluster.http_port) == "auto"
    fixed = session_file(tmp_path, "fixed", explicit=True)
    assert set(ports.explicit_ports(fixed)) == {ports.HTTP_KEY, ports.TRANSPORT_KEY}
    assert ports.describe(fixed.cluster.http_port) == str(fixed.cluster.http_port)


def test_session_check_says_auto(tmp_path: Path) -> None:
    path = write_session(tmp_path, "says-auto", 1, ports=False)
    result = esdash("session", "check", str(path), env_runs=tmp_path / "runs")
    assert "(ports http auto, transport auto)" in result.stdout


def test_the_launch_check_names_the_key_the_port_and_the_pid(tmp_path: Path) -> None:
    fixed = session_file(tmp_path, "held", explicit=True, nodes=2)
    context = CheckContext(session=fixed, plugins=get_plugins())
    assert list(PortsFree().run(context)) == []
    with listener(fixed.cluster.transport_port + 1):  # node-local rank 1's transport port
        found = [str(finding) for finding in PortsFree().run(context)]
    assert len(found) == 1
    assert found[0].startswith(f"cluster.transport_port: port {fixed.cluster.transport_port + 1}")
    assert f"PID {os.getpid()}" in found[0]
    auto = session_file(tmp_path, "free", explicit=False)
    assert list(PortsFree().run(CheckContext(session=auto, plugins=get_plugins()))) == []


# --------------------------------------------------------------------- ranks and topology


def test_each_rank_reports_the_ports_it_holds(tmp_path: Path) -> None:
    auto = session_file(tmp_path, "ranks", explicit=False)
    reports, held = [], []
    for rank in range(3):
        report, error, reservation = _with_ports(
            auto, RankReport(rank, "h", "lo", LOOPBACK), [LOOPBACK] * 3
        )
        assert error is None and report is not None and reservation is not None
        reports.append(report)
        held.append(reservation)
    try:
        topology = plan_topology("c", reports)
        chosen = [p for node in topology.nodes for p in (node.http_port, node.transport_port)]
        assert len(set(chosen)) == 6  # ranks on one host hold theirs: never the same port
        assert [n.http_port for n in topology.nodes] == [r.http_port for r in reports]
    finally:
        for reservation in held:
            reservation.release()


def test_explicit_ports_stay_base_plus_node_local_rank(tmp_path: Path) -> None:
    fixed = session_file(tmp_path, "bases", explicit=True, nodes=3)
    base = fixed.cluster.http_port
    addresses: list[str | None] = [LOOPBACK, "127.0.0.2", LOOPBACK]
    report, error, reservation = _with_ports(fixed, RankReport(2, "h", "lo", LOOPBACK), addresses)
    assert error is None and reservation is None and report is not None
    assert (report.http_port, report.transport_port) == (base + 1, fixed.cluster.transport_port + 1)
    with listener(base + 1):
        report, error, _ = _with_ports(fixed, RankReport(2, "h", "lo", LOOPBACK), addresses)
    assert report is None and error is not None
    assert error.startswith(f"rank 2 on h: cluster.http_port: port {base + 1} ({base} + ")
    assert f"PID {os.getpid()}" in error


def test_the_topology_takes_reported_ports_and_falls_back_to_base_plus_offset() -> None:
    reported = [
        RankReport(0, "h", "lo", LOOPBACK, 21000, 22000),
        RankReport(1, "h", "lo", LOOPBACK),
    ]
    topology = plan_topology("c", reported, 9250, 9350)
    assert [(n.http_port, n.transport_port) for n in topology.nodes] == [
        (21000, 22000),
        (9251, 9351),
    ]
    with pytest.raises(ValueError, match="rank 1 reported no HTTP port"):
        plan_topology("c", reported)


# ------------------------------------------------------------------------ the one retry


def failed_node(run: RunDir, rank: int, http: int, transport: int) -> NodePlan:
    with run.edit_node_status(rank) as status:
        status.state, status.exit_code, status.message = "failed", 1, "node exited"
    return NodePlan(
        rank=rank,
        name=f"node-{rank}",
        host="h",
        interface="lo",
        address=LOOPBACK,
        http_port=http,
        transport_port=transport,
        master_eligible=rank == 0,
    )


def test_a_node_whose_automatic_port_was_taken_makes_the_start_retry(tmp_path: Path) -> None:
    auto = session_file(tmp_path, "retry", explicit=False)
    run = RunDir.create(tmp_path / "runs", "retry")
    http, transport = free_port_blocks(1)
    node = failed_node(run, 0, http, transport)
    _record_port_clash(run, auto, node, 0)
    assert ports.retry_reason(run, auto) == ""  # both ports free: some other failure
    with listener(http):
        _record_port_clash(run, auto, node, 0)
    status = run.node_statuses()[0]
    assert status.port_in_use == ports.HTTP_KEY
    assert (status.message or "").startswith(
        f"node-0 exited with code 1: cluster.http_port: port {http} on {LOOPBACK} is in use "
        f"by PID {os.getpid()}"
    )
    assert ports.retry_reason(run, auto).startswith("node 0: node-0 exited with code 1: ")
    # the same clash on an explicit port is reported, never retried
    fixed = session_file(tmp_path, "no-retry", explicit=True)
    assert ports.retry_reason(run, fixed) == ""


def test_a_failed_start_is_forgotten_but_its_logs_stay(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "runs", "forget")
    failed_node(run, 0, 1, 2)
    logs = run.node_logs_dir(0)
    logs.mkdir(parents=True)
    (logs / "node.log").write_text("BindException\n")
    run.request_stop()
    run.pki_dir.mkdir()
    for path in (run.health_file, run.topology_file, run.credentials_file):
        path.write_text("{}")
    with run.edit_info() as info:
        info.stopped = 1.0
    ports.forget_failed_start(run)
    assert run.node_statuses() == {} and not run.stop_requested()
    assert not any(
        p.exists() for p in (run.health_file, run.topology_file, run.credentials_file, run.pki_dir)
    )
    assert run.read_info().stopped is None
    assert (logs / "node.log").read_text() == "BindException\n"


# ----------------------------------------------------------------------- real clusters


def _down(run: Path, runs: Path) -> None:
    esdash("cluster", "down", str(run), env_runs=runs)
    assert java_pids_under(run) == []


def _node_ports(run: Path) -> tuple[int, int]:
    """The node's ports as the topology has them, checked against its status file."""
    node = json.loads((run / "topology.json").read_text())["nodes"][0]
    status = json.loads((run / "nodes" / "0" / "status.json").read_text())
    assert (status["http_port"], status["transport_port"]) == (
        node["http_port"],
        node["transport_port"],
    )
    return node["http_port"], node["transport_port"]


def _take_port_once_planned(runs: Path, name: str, deadline: float) -> socket.socket:
    """Listen on the HTTP port ``name``'s first plan chose, as soon as its rank lets go.

    Deterministic: the rank releases its ports right before its node starts, and the JVM
    binds them seconds later (after its boot); this polls every 10 ms.
    """
    topologies: list[Path] = []
    while not topologies and time.monotonic() < deadline:
        topologies = list(runs.glob(f"{name}-*/topology.json"))
        time.sleep(0.01)
    assert topologies, f"{name}: no topology was planned"
    port = json.loads(topologies[0].read_text())["nodes"][0]["http_port"]
    while time.monotonic() < deadline:
        try:
            return listener(port)
        except OSError:
            time.sleep(0.01)  # the rank still holds it
    raise AssertionError(f"{name}: port {port} was never released")


@pytest.mark.es
@pytest.mark.mpi
def test_two_sessions_without_ports_start_at_once_and_a_taken_port_is_retried(
    shared_tmp: Path,
) -> None:
    """Two sessions without ports start at the same time and both come up, on four
    distinct ports.  One of them finds the HTTP port its rank chose taken before its node
    binds it (this test takes it): it says so in one line naming the key, the port and the
    PID, and starts again once with new ports.  (One test for both: each start of a JVM
    costs 15-30 s here.)"""
    runs = shared_tmp / "runs-auto"
    env = {**os.environ, "ESDASH_RUNS": str(runs)}
    names = ("auto-free", "auto-taken")
    procs = [
        subprocess.Popen(
            [*ESDASH, "cluster", "up", str(write_session(shared_tmp, name, 1, ports=False))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in names
    ]
    taken: socket.socket | None = None
    try:
        taken = _take_port_once_planned(runs, names[1], time.monotonic() + 180)
        port = taken.getsockname()[1]
        outputs = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if taken is not None:
            taken.close()
    started = [run_dir_from(out) for out, _ in outputs if "run directory:" in out]
    try:
        for proc, (out, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, out + err
        err = outputs[1][1]
        assert f"cluster.http_port: port {port} on {LOOPBACK} is in use by PID {os.getpid()}" in err
        assert err.count("starting again with new ports") == 1
        assert "starting again" not in outputs[0][1]
        chosen = [_node_ports(run) for run in started]
        assert len({p for pair in chosen for p in pair} | {port}) == 5
        for run in started:
            assert status_json(run, runs)["health"]["status"] in ("green", "yellow")
    finally:
        for run in started:
            _down(run, runs)


@pytest.mark.es
@pytest.mark.mpi
def test_an_explicit_port_in_use_is_refused_before_anything_starts(shared_tmp: Path) -> None:
    runs = shared_tmp / "runs-held"
    session = write_session(shared_tmp, "held-port", 1, security=False)
    port = load_session(session).cluster.http_port
    with listener(port):
        result = esdash("cluster", "up", str(session), env_runs=runs, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    # one line of refusal (checks that outlast 0.5 s on a loaded machine say "checking ...")
    lines = [line for line in result.stderr.strip().splitlines() if not line.endswith(" ...")]
    assert len(lines) == 1, result.stderr
    assert (
        f"cluster.http_port: port {port} on {LOOPBACK} is in use by PID {os.getpid()}" in (lines[0])
    )
    assert not runs.exists() or not any(runs.iterdir())  # no run directory, no process
