"""The valid inputs every fuzz case starts from, built once per test session.

Each seed is something the project itself wrote or documents as valid: the run directories
of ``tests/fixtures/runs`` (plus ``health.json``, ``bench.json`` and ``leakage.json``
written by esdash's own writers), sessions that ``esdash session check`` accepts, key,
passphrase, password and salt files as the docs tell users to make them, the Rally track
fixtures, the generated MRI corpus, and a campaign written by the campaign code
(``support.campaign``) whose points completed in copies of the fixture runs.

The distribution.  ``plan``, ``submit --dry-run`` and ``session check`` look for an
Elasticsearch distribution (``cluster.home`` or esdash's cache).  The fuzzer never starts a
node, and it must behave the same on a developer's machine without the 500 MB download as
in CI, so ``ESDASH_CACHE`` points at a directory holding the files
:func:`esdash_plugins.backends.elasticsearch.distribution.inspect` reads (launcher, version
jar, module directories) and nothing else: the real distribution is not needed to read
files, and its absence would change what the commands check.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FIXTURE_RUNS = sorted(p for p in (FIXTURES / "runs").iterdir() if p.is_dir())
RALLY = FIXTURES / "rally"
ES_VERSION = "8.19.21"
#: Modules of the integ-test-zip (``distribution.INTEG_TEST_MODULES``).
ES_MODULES = ("apm", "transport-netty4", "x-pack-core", "x-pack-security")
#: Documents of the generated corpus sample ``esdash leakage --documents`` analyses.
SAMPLE_DOCUMENTS = 20


@dataclass(frozen=True)
class Seeds:
    """Where each valid input lives (read-only: every case copies what it damages)."""

    root: Path
    cache: Path
    runs: tuple[Path, ...]
    authors: Path
    sessions: Path
    tracks: Path
    campaign: Path

    def session_files(self) -> list[Path]:
        return sorted(self.sessions.glob("*.toml"))


def build(root: Path) -> Seeds:
    """Write every seed under ``root`` and check that each one is accepted as it is."""
    cache = root / "cache"
    fake_distribution(cache / f"elasticsearch-{ES_VERSION}")
    runs = root / "runs"
    copied = tuple(shutil.copytree(run, runs / run.name) for run in FIXTURE_RUNS)
    tracks = shutil.copytree(RALLY, root / "tracks")
    sessions = root / "sessions"
    write_sessions(sessions, tracks)
    seeds = Seeds(
        root=root,
        cache=cache,
        runs=tuple(Path(p) for p in copied),
        authors=Path(shutil.copy2(FIXTURES / "authors" / "query-3n-1ppn.json", root)),
        sessions=sessions,
        tracks=Path(tracks),
        campaign=root / "campaign",
    )
    add_run_records(seeds)
    write_campaign(seeds)
    return seeds


def fake_distribution(home: Path) -> None:
    """The files ``inspect`` reads of an Elasticsearch integ-test-zip (see the module doc)."""
    (home / "bin").mkdir(parents=True)
    launcher = home / "bin" / "elasticsearch"
    launcher.write_text("#!/bin/sh\necho 'esdash fuzz: not a real distribution' >&2\nexit 1\n")
    launcher.chmod(0o755)
    (home / "lib").mkdir()
    (home / "lib" / f"elasticsearch-{ES_VERSION}.jar").write_bytes(b"")
    for module in ES_MODULES:
        (home / "modules" / module).mkdir(parents=True)


def private(path: Path, data: bytes) -> Path:
    """A secret file as the docs say to make one: owned by the caller, mode 0600."""
    path.write_bytes(data)
    path.chmod(0o600)
    return path


SESSION_HEAD = 'name = "{name}"\ndescription = "fuzz seed {name}"\n\n[cluster]\nrun_as = "esdash"\n'

SESSIONS = {
    "minimal": '[track]\nname = "mri"\ndocuments = 200\n',
    "full": """\
backend = "elasticsearch"
nodes = 2
nodes_per_host = 2
heap = "256m"
interconnect = "loopback"
security = true
http_port = 29200
transport_port = 29300

[encryption]
mode = "none"

[track]
name = "mri"
documents = 500
seed = 7

[benchmark]
workers_per_node = 2
warmup = "1s"
duration = "2s"
bulk_size = 100
target_throughput = 50.0
interval = "1s"
seed = 3
after_ingest = "none"
warmup_max = "0s"
order = "balanced"
repetitions = 8

[slurm]
partition = "debug"
time = "00:10:00"
account = "proj"
extra = ["--exclusive"]

[references.age]
throughput = [100.0, 80.0, 120.0]
p99 = [20.0, 0.0, 40.0]
""",
    "nyc": '[track]\nname = "nyc_taxis"\ndocuments = 300\n',
    "gocryptfs": """\
[encryption]
mode = "gocryptfs"
password_file = "secrets/gocryptfs.pass"
scrypt_n = 10

[track]
name = "mri"
documents = 200
""",
    "abe-key": """\
[encryption]
mode = "abe"
key_file = "secrets/abe.key"

[track]
name = "mri"
documents = 200
""",
    "abe-pass": """\
[encryption]
mode = "abe"
passphrase_file = "secrets/abe.pass"
salt_file = "secrets/abe-kdf.json"

[track]
name = "mri"
documents = 200
""",
    "rally": """\
[track]
name = "rally"
path = "../tracks/weblogs"
challenge = "append-and-query"
track_params = ["bulk_size=10", "number_of_shards=2"]
""",
    "rally-smoke": """\
[track]
name = "rally"
path = "../tracks/smoke"
corpus_dir = "../tracks/smoke"
test_mode = false
""",
    "queries": """\
[track]
name = "mri"
documents = 200

[benchmark]
queries = "queries.json"
warmup = "1s"
duration = "1s"
""",
}

QUERY_FILE = [
    {
        "name": "all",
        "search_queries": [{"body": {"query": {"match_all": {}}}, "name": "match_all"}],
        "warmup_time_secs": 1,
        "execution_time_secs": 2,
    },
    {
        "search_queries": [
            {"body": {"query": {"range": {"age": {"gte": 30}}}}},
            {"body": {"query": {"term": {"sex": "F"}}, "size": 5}},
        ],
        "sleep_between_requests_secs": 0.01,
    },
]

#: A salt file as the ABE mode writes it (``keys.load_kdf``).
SALT = {"kdf": "argon2id", "salt": "00112233445566778899aabbccddeeff", "iterations": 1,
        "memory_cost": 8, "lanes": 1}  # fmt: skip


def write_sessions(directory: Path, tracks: Path) -> None:
    """The session seeds, their secrets and query file (the smoke track's corpus too)."""
    directory.mkdir(parents=True)
    secrets = directory / "secrets"
    secrets.mkdir(mode=0o700)
    private(secrets / "gocryptfs.pass", b"a-long-gocryptfs-password-of-one-line\n")
    private(secrets / "abe.key", os.urandom(32))
    private(secrets / "abe.pass", b"correct horse battery staple\n")
    private(secrets / "abe-kdf.json", json.dumps(SALT).encode())
    (directory / "queries.json").write_text(json.dumps(QUERY_FILE, indent=1))
    for name, body in SESSIONS.items():
        (directory / f"{name}.toml").write_text(SESSION_HEAD.format(name=name) + body)
    smoke = tracks / "smoke"
    lines = [json.dumps({"n": i, "level": "error" if i % 7 == 0 else "info"}) for i in range(20)]
    (smoke / "more.json").write_text("\n".join(lines) + "\n")
    (smoke / "documents-1k.json").write_text("\n".join(lines[:10]) + "\n")
    full = [json.dumps({"n": i % 20, "level": "info"}) for i in range(1500)]
    (smoke / "documents.json").write_text("\n".join(full) + "\n")


def add_run_records(seeds: Seeds) -> None:
    """``health.json`` and ``bench.json`` in every seed run, written by esdash's writers."""
    from esdash.rundir.layout import RunDir
    from esdash.rundir.records import BenchPlan, Health, PlannedQuery, PlannedStep

    for path in seeds.runs:
        run = RunDir(path)
        run.write_health(
            Health(ok=True, time=time.time(), cluster_name="esdash-dev", status="green",
                   number_of_nodes=1, active_shards=1, active_shards_percent_as_number=100.0)
        )  # fmt: skip
        query = PlannedQuery(name="age", index="mri", body={"query": {"match_all": {}}})
        step = PlannedStep(name="age", queries=(query,), warmup=1.0, duration=5.0,
                           target_throughput=None)  # fmt: skip
        run.write_bench_plan(
            BenchPlan(index="mri", index_body={"mappings": {}}, corpus_path="/dev/null",
                      corpus_documents=2000, corpus_has_actions=False, bulk_size=1000,
                      steps=(step,), interval=1.0, seed=42, ranks=1, track="mri")
        )  # fmt: skip


def write_campaign(seeds: Seeds) -> None:
    """A campaign file, its base session, and its directory (by the campaign code), every
    point completed in a copy of a fixture run."""
    from support.campaign import write_campaign as written_campaign

    from esdash.campaign.spec import load_campaign
    from esdash.campaign.state import CampaignDir

    root = seeds.campaign
    root.mkdir()
    written = written_campaign(root, root / "runs")
    base = (root / "base.toml").read_text()
    (root / "base.toml").write_text(base.replace("[cluster]\n", '[cluster]\nrun_as = "esdash"\n'))
    for index, point in enumerate(written.points):
        run = shutil.copytree(FIXTURE_RUNS[index % len(FIXTURE_RUNS)], root / "runs" / point.id)
        written.running(index, Path(run))
        written.ended(index, "completed")
    written.finish()
    written.summary()
    load_campaign(root / "study.toml")  # still valid after the edit
    assert CampaignDir(written.directory.path).summary_file.is_file()


def rebase(tree: Path, old: Path, new: Path) -> None:
    """Rewrite absolute paths of ``old`` to ``new`` in the JSON and TOML files of a copied
    tree (a campaign directory records where its runs are)."""
    for path in tree.rglob("*"):
        if path.suffix in (".json", ".toml") and path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8")
            if str(old) in text:
                path.write_text(text.replace(str(old), str(new)), encoding="utf-8")


def case_cache(seeds: Seeds, tmp: Path) -> Path:
    """A private esdash cache for one case: the distribution's files and the generated MRI
    sample when the seeds have it.  Commands write corpora there (a Rally track's test-mode
    files, a generated corpus): in a shared cache one case's damage would meet the next."""
    cache = tmp / "cache"
    fake_distribution(cache / f"elasticsearch-{ES_VERSION}")
    corpora = seeds.cache / "corpora"
    if corpora.is_dir():
        (cache / "corpora").mkdir()
        for path in corpora.glob("mri-*"):
            shutil.copy2(path, cache / "corpora" / path.name)
    return cache
