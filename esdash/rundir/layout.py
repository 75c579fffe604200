"""Every file name of a run directory and of a campaign directory, spelled exactly once.

The run directory is the one place a run's state lives.  It sits on the shared file system,
so ranks on compute nodes write it and every viewer (``esdash cluster status`` on a login
node, the dashboard, ``esdash report``) reads it, with no network path between them.  Code
outside :mod:`esdash.rundir` never spells a name below: it asks :class:`RunDir` (or
:class:`CampaignFiles`) for the path, and a test fails on any string literal that holds one.

Run directory (``<runs>/<session>-<UTC time>/``)::

    run.json                    what was started, by whom, where; processes; Slurm job
    session.toml                the session as it was when the run started
    launcher.log                output of the cluster's mpiexec/srun (and of its ranks)
    topology.json               the plan rank 0 made: nodes, addresses, ports, roles
    credentials.json            user, password, CA path (mode 0600; absent without security)
    pki/pki.json                the run's CA and node certificates (manifest)
    nodes/<rank>/status.json    the node's state: starting, running, stopped or failed
    nodes/<rank>/{config,logs,tmp}/ and stdout.log
    health.json                 the cluster's latest health (replaced every second)
    cluster.jsonl               one sample per 2 s: health and per-node statistics
    bench.json                  the benchmark plan every bench rank reads
    bench.log                   output of the benchmark's mpiexec/srun
    stream.jsonl                header | interval | event | final records (docs/stream.md)
    ranks/<rank>.jsonl          a bench worker's intervals and heartbeats, read by rank 0
    ranks/coordinator.jsonl     rank 0's word to the workers (warm-up, steps' start)
    results.json                the numbers, per step and query (+ results-authors-format.json)
    leakage.json                what a client-side encryption mode leaks (esdash_leakage)
    esdash-run.log, tui-launch.json   an ``esdash run`` the dashboard started, and its pid
    job.sbatch, slurm-<job>.out       ``esdash submit``
    stop                        created by ``esdash cluster down``: every rank stops its node
    owner.json                  the lease of the process that owns the run (``esdash run``,
                                ``cluster up --foreground``, a sweep): its ranks stop without it

Campaign directory (``<runs>/campaigns/<name>/``)::

    campaign.toml, campaign.json      the campaign file as last read; the progress summary
    points/<id>/{session.toml,state.json,output.log}
    runners/<host>-<pid>.json         one per sweep process
    jobs/nodes-<N>/{job.sbatch,job.json}
    data/<root label>/                data roots
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from esdash import boundary
from esdash.boundary import make_dirs, require_trusted_path
from esdash.errors import BadInput
from esdash.rundir import files
from esdash.rundir.records import (
    BenchPlan,
    CampaignSummary,
    Health,
    LaunchRecord,
    Leakage,
    NodeStatus,
    OpResult,
    OwnerLease,
    PointState,
    Results,
    RunInfo,
    Topology,
)

# ------------------------------------------------------------------- run directory
RUN_INFO = "run.json"
SESSION = "session.toml"
LAUNCHER_LOG = "launcher.log"
TOPOLOGY = "topology.json"
CREDENTIALS = "credentials.json"
PKI = "pki"
PKI_MANIFEST = "pki.json"
NODES = "nodes"
NODE_STATUS = "status.json"
NODE_STDOUT = "stdout.log"
NODE_CONFIG = "config"
NODE_LOGS = "logs"
NODE_TMP = "tmp"
HEALTH = "health.json"
CLUSTER_SAMPLES = "cluster.jsonl"
BENCH_PLAN = "bench.json"
BENCH_LOG = "bench.log"
STREAM = "stream.jsonl"
RANKS = "ranks"
RANK_CHANNEL = "{rank}.jsonl"
COORDINATOR_CHANNEL = "coordinator.jsonl"
RESULTS = "results.json"
RESULTS_AUTHORS = "results-authors-format.json"
LEAKAGE = "leakage.json"
RUN_LOG = "esdash-run.log"
LAUNCH_RECORD = "tui-launch.json"
JOB_SCRIPT = "job.sbatch"
SLURM_OUTPUT = "slurm-%j.out"
STOP = "stop"
OWNER_LEASE = "owner.json"

# -------------------------------------------------------------- campaign directory
CAMPAIGNS = "campaigns"
CAMPAIGN_FILE = "campaign.toml"
CAMPAIGN_SUMMARY = "campaign.json"
POINTS = "points"
POINT_STATE = "state.json"
POINT_OUTPUT = "output.log"
RUNNERS = "runners"
JOBS = "jobs"
JOB_RECORD = "job.json"
DATA = "data"

#: Mode of a directory root makes that a node account must pass through (list nothing).
PASSABLE = 0o711
#: Every name above, for the test that no other module spells one.
NAMES: tuple[str, ...] = tuple(
    value for key, value in dict(globals()).items() if key.isupper() and isinstance(value, str)
)


@dataclass(frozen=True)
class RunDir:
    """A run directory: the path of every file in it, and its creation."""

    path: Path

    @classmethod
    def create(cls, root: Path, session_name: str) -> RunDir:
        """A new run directory ``<root>/<session>-<UTC timestamp>`` (made unique).

        Private to its owner: as root 0711 (the node account passes through to its own
        directories below ``nodes/``, nobody lists or reads anything), otherwise 0700.  The
        runs directory is made the same way when missing, and as root it must be root's
        alone (:func:`esdash.boundary.require_trusted_path`).
        """
        mode = PASSABLE if os.geteuid() == 0 else 0o700
        make_dirs(root, mode)
        require_trusted_path(root, "runs directory")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for attempt in range(100):
            suffix = f"-{attempt}" if attempt else ""
            path = root / f"{session_name}-{stamp}{suffix}"
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                continue
            path.chmod(mode)
            (path / NODES).mkdir(mode=0o700)
            (path / NODES).chmod(mode)
            return cls(path)
        raise BadInput(f"cannot create a new run directory under {root}")

    @classmethod
    def open(cls, path: str | Path, foreign_ok: bool = False) -> RunDir:
        """An existing run directory, or a :class:`BadInput` naming what is missing.

        As root, a run directory that another user owns or could rewrite (it, or a directory
        above it) is refused unless ``foreign_ok`` (the commands' ``--allow-foreign``): its
        ``run.json`` names the processes root would signal and the job it would cancel.
        """
        run = cls(Path(path).resolve())
        if not run.info_file.is_file():
            raise BadInput(
                f"{run.path} is not an esdash run directory (no {RUN_INFO}); pass the "
                f"directory that `esdash cluster up` or `esdash run` printed"
            )
        if not foreign_ok:
            require_trusted_path(run.path, "run directory", boundary.FOREIGN_FLAG)
        return run

    # ------------------------------------------------------------------- its files
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def info_file(self) -> Path:
        return self.path / RUN_INFO

    @property
    def session_file(self) -> Path:
        return self.path / SESSION

    @property
    def launcher_log(self) -> Path:
        return self.path / LAUNCHER_LOG

    @property
    def topology_file(self) -> Path:
        return self.path / TOPOLOGY

    @property
    def credentials_file(self) -> Path:
        return self.path / CREDENTIALS

    @property
    def pki_dir(self) -> Path:
        return self.path / PKI

    @property
    def nodes_dir(self) -> Path:
        return self.path / NODES

    def node_dir(self, rank: int) -> Path:
        return self.nodes_dir / str(rank)

    def node_status_file(self, rank: int) -> Path:
        return self.node_dir(rank) / NODE_STATUS

    def node_stdout(self, rank: int) -> Path:
        return self.node_dir(rank) / NODE_STDOUT

    def node_config_dir(self, rank: int) -> Path:
        return self.node_dir(rank) / NODE_CONFIG

    def node_logs_dir(self, rank: int) -> Path:
        return self.node_dir(rank) / NODE_LOGS

    def node_tmp_dir(self, rank: int) -> Path:
        return self.node_dir(rank) / NODE_TMP

    def node_status_files(self) -> list[tuple[int, Path]]:
        """``(rank, path)`` of every node status file present, by rank."""
        found = []
        for path in self.nodes_dir.glob(f"*/{NODE_STATUS}"):
            if path.parent.name.isdigit():
                found.append((int(path.parent.name), path))
        return sorted(found)

    @property
    def health_file(self) -> Path:
        return self.path / HEALTH

    @property
    def cluster_samples_file(self) -> Path:
        return self.path / CLUSTER_SAMPLES

    @property
    def bench_plan_file(self) -> Path:
        return self.path / BENCH_PLAN

    @property
    def bench_log(self) -> Path:
        return self.path / BENCH_LOG

    @property
    def stream_file(self) -> Path:
        return self.path / STREAM

    @property
    def ranks_dir(self) -> Path:
        return self.path / RANKS

    def rank_channel(self, rank: int) -> Path:
        """Where bench worker ``rank`` appends its interval payloads and heartbeats."""
        return self.ranks_dir / RANK_CHANNEL.format(rank=int(rank))

    @property
    def coordinator_channel(self) -> Path:
        """Where bench rank 0 appends what the workers must hear (warm-up, steps' start)."""
        return self.ranks_dir / COORDINATOR_CHANNEL

    @property
    def results_file(self) -> Path:
        return self.path / RESULTS

    @property
    def authors_results_file(self) -> Path:
        return self.path / RESULTS_AUTHORS

    @property
    def leakage_file(self) -> Path:
        return self.path / LEAKAGE

    @property
    def run_log(self) -> Path:
        """Output of an ``esdash run`` the dashboard started in this directory."""
        return self.path / RUN_LOG

    @property
    def launch_record_file(self) -> Path:
        return self.path / LAUNCH_RECORD

    @property
    def job_script(self) -> Path:
        return self.path / JOB_SCRIPT

    @property
    def slurm_output_pattern(self) -> Path:
        """sbatch's ``--output`` pattern (``%j`` is the job id)."""
        return self.path / SLURM_OUTPUT

    @property
    def stop_file(self) -> Path:
        return self.path / STOP

    @property
    def owner_lease_file(self) -> Path:
        return self.path / OWNER_LEASE

    def read_owner_lease(self) -> OwnerLease | None:
        """The owner's lease, None when the run has no owner (a ``cluster up`` cluster)."""
        return files.read_optional(self.owner_lease_file, OwnerLease)

    def write_owner_lease(self, lease: OwnerLease) -> None:
        files.write(self.owner_lease_file, lease)

    def request_stop(self) -> None:
        """Ask every rank of the run to stop its node (``esdash cluster down``)."""
        self.stop_file.touch()

    def stop_requested(self) -> bool:
        return self.stop_file.exists()

    # --------------------------------------------------------------- typed records
    def read_info(self) -> RunInfo:
        return files.read(self.info_file, RunInfo)

    @contextmanager
    def edit_info(self) -> Iterator[RunInfo]:
        """Change ``run.json`` by attribute (created when missing); ``updated`` is set."""
        with files.edit(self.info_file, RunInfo, RunInfo()) as info:
            yield info
            info.updated = time.time()

    def write_session(self, text: bytes) -> None:
        """Keep the session file as it was when the run started (private: 0600)."""
        files.write_bytes(self.session_file, text)

    def read_topology(self) -> Topology:
        return files.read(self.topology_file, Topology)

    def write_topology(self, topology: Topology) -> None:
        files.write(self.topology_file, topology)

    @contextmanager
    def edit_node_status(self, rank: int) -> Iterator[NodeStatus]:
        """Change a node's ``status.json`` (this host and the time are recorded)."""
        self.node_dir(rank).mkdir(parents=True, exist_ok=True)
        with files.edit(self.node_status_file(rank), NodeStatus, NodeStatus(rank=rank)) as status:
            yield status
            status.updated = time.time()
            status.host = socket.gethostname()

    def node_statuses(self) -> dict[int, NodeStatus]:
        """Every node's status by rank; a file being replaced right now is left out."""
        found: dict[int, NodeStatus] = {}
        for rank, path in self.node_status_files():
            try:
                found[rank] = files.read(path, NodeStatus)
            except files.RunFileError:
                continue
        return found

    def read_health(self) -> Health | None:
        return files.read_optional(self.health_file, Health)

    def write_health(self, health: Health) -> None:
        files.write(self.health_file, health)

    def read_bench_plan(self) -> BenchPlan:
        return files.read(self.bench_plan_file, BenchPlan)

    def write_bench_plan(self, plan: BenchPlan) -> None:
        files.write(self.bench_plan_file, plan)

    def read_results(self) -> Results:
        """``results.json``, every latency histogram in it decoded once (a damaged one is a
        RunFileError naming its JSON path, not a failure of whichever table reads it)."""
        from esdash.rundir import hdr  # numpy and hdrh: not for every command that opens a run

        results = files.read(self.results_file, Results)
        for where, encoded in _histograms(results):
            try:
                hdr.decode(encoded)
            except ValueError as exc:
                raise files.RunFileError(self.results_file, f"{exc} - at `{where}`") from None
        return results

    def write_results(self, results: Results) -> None:
        files.write(self.results_file, results)

    def read_leakage(self) -> Leakage | None:
        """The leakage report, or None when the run has none (not a client-side mode, or
        the analysis failed); a damaged file is a RunFileError naming it and the JSON path."""
        return files.read_optional(self.leakage_file, Leakage)

    def write_leakage(self, leakage: Leakage) -> None:
        files.write(self.leakage_file, leakage)

    def read_launch_record(self) -> LaunchRecord | None:
        return files.read_optional(self.launch_record_file, LaunchRecord)

    def write_launch_record(self, record: LaunchRecord) -> None:
        files.write(self.launch_record_file, record)


def _histograms(results: Results) -> Iterator[tuple[str, str]]:
    """``(JSON path, encoded histogram)`` of every histogram of ``results``."""
    ops: list[tuple[str, OpResult]] = []
    if results.ingest is not None:
        ops += [(f"$.ingest.ops.{name}", op) for name, op in results.ingest.ops.items()]
    for k, step in enumerate(results.steps):
        ops += [(f"$.steps[{k}].queries.{name}", op) for name, op in step.queries.items()]
    for where, op in ops:
        tables = [(where, op.histograms)]
        tables += [(f"{where}.per_rank.{r}", s.histograms) for r, s in op.per_rank.items()]
        for base, histograms in tables:
            for kind in ("latency", "service_time"):
                encoded = getattr(histograms, kind)
                if encoded:
                    yield f"{base}.histograms.{kind}", encoded


@dataclass(frozen=True)
class CampaignFiles:
    """A campaign directory: the path of every file in it."""

    path: Path

    @classmethod
    def default(cls, runs_root: Path, name: str) -> CampaignFiles:
        """``<runs>/campaigns/<name>``."""
        return cls(runs_root / CAMPAIGNS / name)

    @staticmethod
    def summaries_under(runs_root: Path) -> list[Path]:
        """The summary files of every campaign under ``<runs>/campaigns/``."""
        return sorted((runs_root / CAMPAIGNS).glob(f"*/{CAMPAIGN_SUMMARY}"))

    @staticmethod
    def summary_in(directory: Path) -> Path:
        return directory / CAMPAIGN_SUMMARY

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def summary_file(self) -> Path:
        return self.path / CAMPAIGN_SUMMARY

    @property
    def campaign_file(self) -> Path:
        return self.path / CAMPAIGN_FILE

    def point_dir(self, point_id: str) -> Path:
        return self.path / POINTS / point_id

    def point_session(self, point_id: str) -> Path:
        return self.point_dir(point_id) / SESSION

    def point_state(self, point_id: str) -> Path:
        return self.point_dir(point_id) / POINT_STATE

    def point_output(self, point_id: str) -> Path:
        return self.point_dir(point_id) / POINT_OUTPUT

    @property
    def runners_dir(self) -> Path:
        return self.path / RUNNERS

    def runner_file(self, host: str, pid: int) -> Path:
        return self.runners_dir / f"{host}-{pid}.json"

    def runner_files(self) -> list[Path]:
        return sorted(self.runners_dir.glob("*.json"))

    def job_dir(self, nodes: int) -> Path:
        return self.path / JOBS / f"nodes-{nodes}"

    def job_script(self, nodes: int) -> Path:
        return self.job_dir(nodes) / JOB_SCRIPT

    def job_record(self, nodes: int) -> Path:
        return self.job_dir(nodes) / JOB_RECORD

    def job_records(self) -> list[Path]:
        return sorted((self.path / JOBS).glob(f"*/{JOB_RECORD}"))

    def data_root(self, label: str) -> Path:
        return self.path / DATA / label

    def read_summary(self) -> CampaignSummary:
        return files.read(self.summary_file, CampaignSummary)

    def write_summary(self, summary: CampaignSummary) -> None:
        files.write(self.summary_file, summary)

    def read_point_state(self, point_id: str) -> PointState | None:
        return files.read_optional(self.point_state(point_id), PointState)

    def write_point_state(self, state: PointState) -> None:
        self.point_dir(state.id).mkdir(parents=True, exist_ok=True)
        files.write(self.point_state(state.id), state)
