#!/usr/bin/env python3
"""esdash against Rally 2.13 on the same Elasticsearch cluster, track, challenge and clients.

Issue 18's bench: Rally (PyPI ``esrally==2.13.0`` in a throw-away venv) and ``esdash run``
take turns on ONE esdash-started cluster for ``--rounds`` rounds (the first tool alternates
from round to round, so a drift of the machine does not favour one of them).  Prints, per
task, the median over the rounds of each tool's median throughput and the ratio
esdash/Rally, and for a throttled task each tool's achieved/target ratio.  The targets: the
ratio is >= 1.0 for every unthrottled search task and for ingest docs/s, and a throttled
task run by esdash lands within 0.97-1.03 of its target (Rally's achieved/target is shown
beside it).

    .venv/bin/python bench/rally_side_by_side.py [--rounds 5] [--documents 50000] \
        [--bulk-size 1000] [--bulk-clients 2] [--warmup 2] [--period 10] [--security] \
        [--venv /tmp/esdash-rally-venv] [--cluster RUN]

**The track** is Rally's ``noaa`` (``../shared/rally-tracks/tracks/noaa``; its mapping needs
no module the integ-test zip lacks: keyword, float, date, double_range, geo_point), copied
at run time into a temporary directory — never into the repository — with:

- a seeded generated corpus of ``--documents`` NOAA-like documents (the real one is 9.7 GB),
  ``documents.json`` in the track copy, which both tools read;
- ``track.json``'s corpus entry rewritten for that file (no download);
- one challenge of our own, ``esdash-side-by-side``, in place of the track's challenges: the
  default challenge's setup (delete-index, create-index, cluster-health), the ``index`` bulk
  task with ``--bulk-clients`` clients and no warm-up (the track's 70 s warm-up would swallow a
  small corpus), refresh, then search tasks of the track's own operations, each with 1 client
  and ``--warmup`` + ``--period`` seconds: three at the default challenge's target
  throughputs (throttled) and three of the ``aggs`` challenge's aggregations unthrottled.
  The force-merge and the merge wait of the original are left out (esdash does not run a
  force-merge task; its ``after_ingest = "none"`` matches).

**Rally** runs ``esrally race --offline --pipeline=benchmark-only --track-path=COPY
--challenge=esdash-side-by-side --track-params=bulk_size:N`` with ``RALLY_HOME`` in the
scratch directory; its numbers come from ``race.json``.  With ``--security`` its client
options (HTTPS, the superuser and password, certificates verified against the run's CA) are
in a JSON file of mode 0600 that ``--client-options`` names (Rally reads a value ending in
``.json`` as a file): the password never appears in a command line, which every local user
can read in ``/proc``.  The venv gets
``bench/rally_shim.py`` (a ``.pth`` line, that venv only), because the zip answers
``GET /`` with 405 (../shared/research/rally.md section 3.2).

**esdash** runs ``esdash run SESSION --cluster RUN`` with ``[track] name = "rally"`` on the
same copy and challenge; its ingest uses its own bench ranks as bulk clients, so the session
sets ``workers_per_node = --bulk-clients`` (one node) and ``bulk_size = --bulk-size``;
``warmup_max = "0s"`` (no global warm-up: Rally has none).  Its numbers come from
``esdash report RUN --format rally``.  Before each esdash run the bench deletes Rally's index
(esdash never deletes an index it did not create).

Run as root on an otherwise idle machine; both load generators share its cores with the node.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from _common import esdash, free_port_block

RALLY_VERSION = "2.13.0"
TRACK_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "rally-tracks" / "tracks" / "noaa"
INDEX = "weather-data-2016"
CHALLENGE = "esdash-side-by-side"
INGEST_TASK = "index"
#: Search tasks with their target throughput (ops/s; None: unthrottled).  The throttled ones
#: are the default challenge's tasks at its targets; the unthrottled ones come from the
#: ``aggs`` challenge (which runs them closed-loop with 1 client).
SEARCHES: tuple[tuple[str, float | None], ...] = (
    ("range_field_big_range", 6.0),
    ("range_field_small_range", 10.0),
    ("range_field_conjunction_big_range_small_term_query", 10.0),
    ("keyword-terms", None),
    ("date-histo-entire-range", None),
    ("max_temp_per_station_10", None),
)
THROTTLE_BAND = (0.97, 1.03)
SHIM_MODULE = "esdash_rally_root_shim"


# ------------------------------------------------------------------------------ Rally venv


def setup_venv(venv: Path) -> Path:
    """``venv`` with esrally 2.13.0 and the root shim (idempotent); its ``esrally`` path."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating the Rally venv {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(python), "-c", "import esrally; print(esrally.__version__)"],
        capture_output=True,
        text=True,
    )
    if installed.stdout.strip() != RALLY_VERSION:
        print(f"installing esrally=={RALLY_VERSION} into {venv} ...", flush=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"esrally=={RALLY_VERSION}"], check=True
        )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    install_shim(Path(purelib))
    return venv / "bin" / "esrally"


def install_shim(site_packages: Path) -> None:
    """Copy ``rally_shim.py`` into the venv and activate it with a ``.pth`` line (venv only)."""
    shutil.copyfile(Path(__file__).with_name("rally_shim.py"), site_packages / f"{SHIM_MODULE}.py")
    (site_packages / f"{SHIM_MODULE}.pth").write_text(
        f"import {SHIM_MODULE}; {SHIM_MODULE}.install()\n"
    )


# ------------------------------------------------------------------------------- the track

COUNTRIES = (  # (name, code, weight): US-heavy as NOAA's GHCN is; the codes the queries use
    ("United States", "US", 50),
    ("Canada", "CA", 8),
    ("Japan", "JA", 6),
    ("Sweden", "SW", 4),
    ("Russia", "RS", 8),
    ("Australia", "AS", 8),
    ("Germany", "GM", 4),
    ("Brazil", "BR", 4),
    ("India", "IN", 4),
    ("Mexico", "MX", 4),
)
PLACES = ("NEWPORT", "MARSHALL", "JACKSON", "HILLSBORO", "FAIRFIELD", "SPRINGFIELD", "CLINTON")
STATES = (("Ohio", "OH"), ("Texas", "TX"), ("Oregon", "OR"), ("Maine", "ME"), ("Iowa", "IA"))


def stations(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` stations with the ``station.*`` fields of the mapping."""
    weights = [c[2] for c in COUNTRIES]
    result = []
    for k in range(count):
        country, code, _ = rng.choices(COUNTRIES, weights)[0]
        station: dict[str, Any] = {
            "id": f"{code}{k:09d}",
            "name": f"{rng.choice(PLACES)} {rng.randint(1, 99)}",
            "country": country,
            "country_code": code,
            "elevation": round(
                rng.uniform(0, 3500) if rng.random() < 0.3 else rng.uniform(0, 900), 1
            ),
            "location": {
                "lat": round(rng.uniform(-60, 75), 4),
                "lon": round(rng.uniform(-180, 180), 4),
            },
        }
        if code == "US":
            station["state"], station["state_code"] = rng.choice(STATES)
            station["hcn_crn_flag"] = rng.choice(("HCN", "CRN", ""))
        if rng.random() < 0.1:
            station["gsn_flag"] = "GSN"
            station["wmo_id"] = str(rng.randint(10000, 99999))
        result.append(station)
    return result


def document(rng: random.Random, station: dict[str, Any], day: date) -> dict[str, Any]:
    """One day of one station: temperatures (with TRANGE), precipitation, wind and flags."""
    tmin = round(rng.gauss(5, 12), 1)
    tmax = round(tmin + abs(rng.gauss(10, 4)), 1)
    doc: dict[str, Any] = {
        "date": f"{day.isoformat()}T00:00:00",
        "station": station,
        "TMIN": tmin,
        "TMAX": tmax,
        "TAVG": round((tmin + tmax) / 2, 1),
        "TRANGE": {"gte": tmin, "lte": tmax},
        "PRCP": round(max(0.0, rng.gauss(0, 8)), 1),
    }
    if rng.random() < 0.3:
        doc["SNOW"] = str(rng.randint(0, 300))
        doc["SNWD"] = str(rng.randint(0, 900))
    if rng.random() < 0.4:
        doc["AWND"] = round(abs(rng.gauss(3, 2)), 1)
        doc["WSF2"] = round(abs(rng.gauss(8, 3)), 1)
        doc["WDF2"] = str(rng.randrange(0, 360, 10))
    if rng.random() < 0.2:
        doc["TOBS"] = round(rng.uniform(tmin, tmax), 1)
    for flag in ("WT01", "WT03", "WT08", "WT11"):
        if rng.random() < 0.05:
            doc[flag] = "1"
    return doc


def write_corpus(path: Path, count: int, seed: int) -> int:
    """``count`` seeded documents as NDJSON (no action lines) at ``path``; its size in bytes."""
    rng = random.Random(seed)
    pool = stations(rng, 2000)
    first = date(2016, 1, 1)
    with path.open("w") as out:
        for _ in range(count):
            day = first + timedelta(days=rng.randrange(366))
            out.write(json.dumps(document(rng, rng.choice(pool), day), separators=(",", ":")))
            out.write("\n")
    return path.stat().st_size


def challenge(bulk_clients: int, warmup: int, period: int) -> dict[str, Any]:
    """The challenge both tools run (see the module docstring for what differs from noaa's)."""
    health = {
        "operation-type": "cluster-health",
        "index": INDEX,
        "request-params": {"wait_for_status": "green", "wait_for_no_relocating_shards": "true"},
        "retry-until-success": True,
    }
    schedule: list[dict[str, Any]] = [
        {"operation": "delete-index"},
        {"operation": {"operation-type": "create-index"}},
        {"name": "check-cluster-health", "operation": health},
        {"operation": INGEST_TASK, "warmup-time-period": 0, "clients": bulk_clients},
        {"name": "refresh-after-index", "operation": "refresh"},
    ]
    for name, target in SEARCHES:
        task: dict[str, Any] = {
            "operation": name,
            "clients": 1,
            "warmup-time-period": warmup,
            "time-period": period,
        }
        if target is not None:
            task["target-throughput"] = target
        schedule.append(task)
    return {"name": CHALLENGE, "default": True, "schedule": schedule}


def write_track(scratch: Path, args: argparse.Namespace) -> Path:
    """The noaa track copy with the generated corpus and our challenge; its directory."""
    if not (TRACK_SOURCE / "track.json").is_file():
        sys.exit(f"{TRACK_SOURCE}/track.json: not found; the bench needs rally-tracks' noaa track")
    track = scratch / "noaa"
    shutil.copytree(TRACK_SOURCE, track)
    shutil.rmtree(track / "challenges")
    (track / "challenges").mkdir()
    body = challenge(args.bulk_clients, args.warmup, args.period)
    (track / "challenges" / f"{CHALLENGE}.json").write_text(json.dumps(body, indent=2) + "\n")
    print(f"generating {args.documents:,} documents (seed {args.seed}) ...", flush=True)
    size = write_corpus(track / "documents.json", args.documents, args.seed)
    corpus = {
        "name": "noaa",
        "documents": [
            {
                "source-file": "documents.json",
                "document-count": args.documents,
                "uncompressed-bytes": size,
            }
        ],
    }
    (track / "track.json").write_text(
        '{% import "rally.helpers" as rally with context %}\n'
        "{\n"
        '  "version": 2,\n'
        '  "description": "noaa with a generated corpus (esdash bench/rally_side_by_side.py)",\n'
        f'  "indices": [{{"name": "{INDEX}", "body": "index.json"}}],\n'
        f'  "corpora": [{json.dumps(corpus)}],\n'
        '  "operations": [{{ rally.collect(parts="operations/*.json") }}],\n'
        '  "challenges": [{{ rally.collect(parts="challenges/*.json") }}]\n'
        "}\n"
    )
    return track


# -------------------------------------------------------------------------------- cluster


#: Rally's client options file (Rally reads a ``--client-options`` value ending in ``.json``
#: as a file holding ``{"default": {option: value}}``).
CLIENT_OPTIONS = "rally-client-options.json"


def write_client_options(path: Path, credentials: Any) -> Path:
    """Rally's client options for the cluster, as a JSON file only its owner can read.

    HTTPS with the server certificate verified against the run's own CA (``ca_certs`` of
    ``credentials.json``), and the superuser's name and password.  Rally takes the defaults
    (``timeout:60``) only from a command-line value, not from a file, so the timeout is
    written too.  The file is created exclusively with mode 0600, never through a link, and
    replaces one a previous race left.  A credentials file without a CA is refused: Rally
    would then verify against the system's CAs, which never signed the cluster.
    """
    if credentials.ca_certs is None:
        sys.exit(
            f"{credentials.path}: no ca_certs; Rally must verify the cluster's certificate "
            "against the run's CA: restart the cluster with esdash (it writes ca_certs)"
        )
    document = {
        "default": {
            "timeout": 60,
            "use_ssl": True,
            "verify_certs": True,
            "ca_certs": str(credentials.ca_certs),
            "basic_auth_user": credentials.username,
            "basic_auth_password": credentials.password,
        }
    }
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(document, out)
    return path


@dataclass
class Cluster:
    """The one cluster both tools measure: its run directory and how to reach it."""

    run: Path
    host: str
    secure: bool
    credentials: Any

    def rally_options(self, scratch: Path) -> list[str]:
        """Rally's ``--target-hosts`` and, with security, ``--client-options`` naming the
        private options file :func:`write_client_options` writes into ``scratch``."""
        options = [f"--target-hosts={self.host}"]
        if self.secure:
            path = write_client_options(scratch / CLIENT_OPTIONS, self.credentials)
            options.append(f"--client-options={path}")
        return options

    def delete_index(self) -> None:
        """Delete the index Rally left (esdash refuses an index it did not create)."""
        from esdash.cluster.http import Connection, Target

        connection = Connection(Target("node-0", self.host, self.secure), self.credentials, 120)
        try:
            status, reply = connection.request("DELETE", f"/{INDEX}")
        finally:
            connection.close()
        if status not in (200, 404):
            sys.exit(f"deleting index {INDEX}: HTTP {status}: {reply[:300]!r}")


def session_text(track: Path, args: argparse.Namespace, ports: tuple[int, int]) -> str:
    """The esdash session: one node, the track copy, ingest clients and bulk size as Rally's."""
    return (
        'name = "rally-side-by-side"\n'
        '[cluster]\nnodes = 1\nheap = "1g"\ninterconnect = "loopback"\n'
        f'run_as = "{args.user}"\nsecurity = {str(args.security).lower()}\n'
        f'http_port = {ports[0]}\ntransport_port = {ports[1]}\ndata_dir = "data"\n'
        f'[track]\nname = "rally"\npath = "{track}"\nchallenge = "{CHALLENGE}"\n'
        f'track_params = ["bulk_size={args.bulk_size}"]\n'
        f"[benchmark]\nworkers_per_node = {args.bulk_clients}\nbulk_size = {args.bulk_size}\n"
        'after_ingest = "none"\nwarmup_max = "0s"\n'
    )


def cluster_up(session: Path, env: dict[str, str]) -> Cluster:
    """``esdash cluster up`` on the session; the cluster it started."""
    output = esdash("cluster", "up", str(session), "--fresh", env=env)
    return attach(_run_directory(output, "esdash cluster up"))


def attach(run: Path) -> Cluster:
    """The cluster of a run directory: its first node's address and credentials."""
    from esdash.cluster import pki
    from esdash.rundir.layout import CREDENTIALS, RunDir

    secure = (run / CREDENTIALS).exists()
    node = RunDir(run).read_topology().nodes[0]
    return Cluster(run, node.http_address, secure, pki.read_credentials(run) if secure else None)


def _run_directory(output: str, what: str) -> Path:
    """The run directory an esdash command printed (``run directory:`` or ``results:``)."""
    from esdash.rundir.layout import RESULTS

    for line in output.splitlines():
        if line.startswith("run directory:"):
            return Path(line.split(":", 1)[1].strip())
        if line.startswith("results:") and line.rstrip().endswith(RESULTS):
            return Path(line.split(":", 1)[1].strip()).parent
    sys.exit(f"no run directory in the output of {what}:\n{output}")


# ---------------------------------------------------------------------------------- races


@dataclass
class Round:
    """One tool's numbers in one round: task -> median throughput (ops/s or docs/s)."""

    tool: str
    seconds: float
    throughput: dict[str, float] = field(default_factory=dict)


def rally_command(
    esrally: Path, cluster: Cluster, track: Path, scratch: Path, race_id: str, bulk_size: int
) -> list[str]:
    """The ``esrally race`` command line of one race (secrets go to a file, not here)."""
    return [
        str(esrally),
        "race",
        "--offline",
        "--pipeline=benchmark-only",
        *cluster.rally_options(scratch),
        f"--track-path={track}",
        f"--challenge={CHALLENGE}",
        f"--track-params=bulk_size:{bulk_size}",
        "--on-error=abort",
        f"--race-id={race_id}",
        "--report-format=csv",
        f"--report-file={scratch / f'{race_id}.csv'}",
    ]


def run_rally(
    esrally: Path, cluster: Cluster, track: Path, scratch: Path, k: int, args: argparse.Namespace
) -> Round:
    """One Rally race; the median throughput of every task from its ``race.json``."""
    race_id = f"side-by-side-{k}-{int(time.time())}"
    env = {
        **os.environ,
        "RALLY_HOME": str(scratch / "rally-home"),
        "RALLY_RUNNING_IN_DOCKER": "true",
        "TERM": "dumb",
    }
    command = rally_command(esrally, cluster, track, scratch, race_id, args.bulk_size)
    wait_for_no_rally()
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.monotonic() - start
    race = scratch / "rally-home" / ".rally" / "benchmarks" / "races" / race_id / "race.json"
    if result.returncode != 0 or not race.exists():
        sys.exit(
            f"esrally race failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-3000:]}"
        )
    metrics = json.loads(race.read_text())["results"]["op_metrics"]
    return Round("rally", seconds, _medians(metrics))


def rally_processes() -> list[int]:
    """PIDs Rally 2.13 counts as "other Rally processes" (``is_rally_process``) right now."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        python = name.lower().startswith("python") and any("esrally" in a for a in argv)
        if name in ("esrally", "rally") or (python and not any("esrallyd" in a for a in argv)):
            pids.append(int(entry.name))
    return pids


def wait_for_no_rally(timeout: float = 120.0) -> None:
    """Wait until the previous race's actor processes are gone: Rally refuses to start while
    any "Rally process" runs on the machine.  Never signals them (they may not be ours)."""
    deadline = time.monotonic() + timeout
    while pids := rally_processes():
        if time.monotonic() > deadline:
            sys.exit(
                f"Rally processes still running after {timeout:.0f} s (PIDs {pids}); "
                "Rally 2.13 runs only one race per machine: wait for them and rerun"
            )
        time.sleep(1.0)


def run_esdash(session: Path, cluster: Cluster, scratch: Path, env: dict[str, str]) -> Round:
    """One ``esdash run`` on the cluster; the median throughput of every task (rally.json)."""
    cluster.delete_index()
    start = time.monotonic()
    output = esdash("run", str(session), "--cluster", str(cluster.run), env=env)
    seconds = time.monotonic() - start
    run = _run_directory(output, "esdash run")
    out = Path(tempfile.mkdtemp(prefix="report-", dir=scratch))
    esdash("report", str(run), "--format", "rally", "--no-figures", "--out", str(out), env=env)
    metrics = json.loads((out / "rally.json").read_text())["runs"][0]["op_metrics"]
    for entry in metrics:  # esdash names its ingest by its operation ("bulk"); Rally by task
        if (entry.get("throughput") or {}).get("unit") == "docs/s":
            entry["task"] = INGEST_TASK
    return Round("esdash", seconds, _medians(metrics))


def _medians(op_metrics: list[dict[str, Any]]) -> dict[str, float]:
    """task -> ``throughput.median`` of Rally-named op metrics (esdash's or Rally's own)."""
    medians = {}
    for entry in op_metrics:
        median = (entry.get("throughput") or {}).get("median")
        if median is not None:
            medians[entry["task"]] = float(median)
    return medians


# --------------------------------------------------------------------------------- report


def report(rounds: list[Round], args: argparse.Namespace) -> None:
    """Per task: median over rounds of each tool, the ratio, and the throttled band."""
    tasks = [(INGEST_TASK, None)] + list(SEARCHES)
    by_tool = {tool: [r for r in rounds if r.tool == tool] for tool in ("rally", "esdash")}
    print()
    print(
        f"esdash vs Rally {RALLY_VERSION}: noaa, challenge {CHALLENGE}, {args.documents:,} "
        f"documents, bulk size {args.bulk_size}, {args.bulk_clients} bulk clients (esdash: 1 node "
        f"x {args.bulk_clients} workers), 1 search client, {args.warmup:g} s warm-up + "
        f"{args.period:g} s per search task, {len(by_tool['rally'])} rounds; medians over rounds"
    )
    header = f"{'task':<52} {'target':>7} {'Rally':>9} {'esdash':>9} {'ratio':>6}  verdict"
    print(header)
    print("-" * len(header))
    failures = 0
    for name, target in tasks:
        rally = _median_of(by_tool["rally"], name)
        ours = _median_of(by_tool["esdash"], name)
        if rally is None or ours is None:
            print(f"{name:<52} {'':>7} {_fmt(rally):>9} {_fmt(ours):>9} {'':>6}  MISSING")
            failures += 1
            continue
        ratio = ours / rally
        if target is None:
            ok = ratio >= 1.0
            verdict = f"{'ok' if ok else 'BELOW'} (esdash/Rally >= 1.0)"
            shown_target = "-"
        else:
            low, high = THROTTLE_BAND
            ok = low <= ours / target <= high  # the target is esdash's; Rally's is shown
            verdict = (
                f"{'ok' if ok else 'OUT'} (achieved/target esdash {ours / target:.3f}, "
                f"band {low}-{high}; Rally {rally / target:.3f})"
            )
            shown_target = f"{target:g}"
        failures += not ok
        print(f"{name:<52} {shown_target:>7} {rally:9.1f} {ours:9.1f} {ratio:6.3f}  {verdict}")
    print(f"units: {INGEST_TASK} docs/s, searches ops/s")
    print("per-round ratios esdash/Rally (round by round):")
    for name, _ in tasks:
        print(f"  {name:<50} " + " ".join(_round_ratios(by_tool, name)))
    wall = {tool: statistics.median(r.seconds for r in rs) for tool, rs in by_tool.items() if rs}
    print(
        f"wall time per round (median): Rally {wall.get('rally', 0):.0f} s, "
        f"esdash {wall.get('esdash', 0):.0f} s"
    )
    print("all targets met" if failures == 0 else f"{failures} task(s) missed their target")


def _median_of(rounds: list[Round], task: str) -> float | None:
    values = [r.throughput[task] for r in rounds if task in r.throughput]
    return statistics.median(values) if values else None


def _round_ratios(by_tool: dict[str, list[Round]], task: str) -> list[str]:
    pairs = zip(by_tool["rally"], by_tool["esdash"], strict=False)
    return [
        f"{e.throughput[task] / r.throughput[task]:.2f}"
        if task in e.throughput and r.throughput.get(task)
        else "-"
        for r, e in pairs
    ]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# ----------------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bulk-size", type=int, default=1000)
    parser.add_argument("--bulk-clients", type=int, default=2, help="Rally's bulk clients")
    parser.add_argument("--warmup", type=int, default=2, help="s per search task")
    parser.add_argument("--period", type=int, default=10, help="measured s per search task")
    parser.add_argument("--security", action="store_true", help="HTTPS and basic auth")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/esdash-rally-venv"))
    parser.add_argument("--user", default=os.environ.get("ESDASH_USER", "esdash"))
    parser.add_argument("--cluster", type=Path, help="use this running cluster's run directory")
    args = parser.parse_args()
    if args.rounds < 1 or args.documents < 1 or args.bulk_clients < 1 or args.bulk_size < 1:
        parser.error("--rounds, --documents, --bulk-clients and --bulk-size must be >= 1")
    return args


def main() -> None:
    args = parse_args()
    esrally = setup_venv(args.venv)
    scratch = Path(tempfile.mkdtemp(prefix="esdash-rally-sbs-", dir="/tmp"))
    scratch.chmod(0o755)
    env = {**os.environ, "ESDASH_RUNS": str(scratch / "runs")}
    cluster: Cluster | None = None
    started = False
    try:
        track = write_track(scratch, args)
        session = scratch / "side-by-side.toml"
        session.write_text(session_text(track, args, (free_port_block(1), free_port_block(1))))
        print(esdash("plan", str(session), env=env).rstrip(), flush=True)
        if args.cluster is None:
            print("starting a 1-node cluster ...", flush=True)
            cluster = cluster_up(session, env)
            started = True
        else:
            cluster = attach(args.cluster)
        print(f"cluster {cluster.run} at {cluster.host} (security {cluster.secure})", flush=True)
        rounds: list[Round] = []
        for k in range(args.rounds):
            order = ("rally", "esdash") if k % 2 == 0 else ("esdash", "rally")
            for tool in order:
                if tool == "rally":
                    result = run_rally(esrally, cluster, track, scratch, k, args)
                else:
                    result = run_esdash(session, cluster, scratch, env)
                rounds.append(result)
                shown = " ".join(f"{t}={v:.1f}" for t, v in result.throughput.items())
                print(f"round {k + 1} {tool:<6} {result.seconds:5.0f} s  {shown}", flush=True)
        report(rounds, args)
    finally:
        if started and cluster is not None:
            esdash("cluster", "down", str(cluster.run), env=env)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
