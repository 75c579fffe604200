"""The validated session: the one value every hook, check and command is handed.

A session file (:mod:`esdash.session` reads, parses and validates it) becomes a frozen
:class:`Session`: the cluster to spawn, the plugins chosen with their validated options, how
the benchmark is driven and how Slurm is asked for resources.  The types live here, in the
plugin contract, because the contract passes a :class:`Session` to plugins (observer hooks,
pre-flight checks): :mod:`esdash.plugin_api` exports them, so a plugin can name what it is
given, and nothing in :mod:`esdash.plugin` has to import the TOML layer above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from esdash.plugin.api import Track
from esdash.plugin.order import Order, resolve
from esdash.plugin.steps import load_steps
from esdash.plugin.values import OptionValues, QueryStep
from esdash.references import Reference
from esdash.rundir.records import JsonMapping

#: The backend a session without ``cluster.backend`` uses.
DEFAULT_BACKEND = "elasticsearch"

#: The track option that lets a track run code of its input (a Rally track's ``track.py``);
#: ``--trust-track-code`` sets it.
TRUST_TRACK_CODE = "trust_code"


@dataclass(frozen=True)
class PluginChoice:
    """The plugin a section chose and its validated options."""

    name: str
    options: OptionValues = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ClusterSpec:
    backend: PluginChoice
    nodes: int
    nodes_per_host: int
    home: Path | None
    heap: int
    interconnect: str
    interface: str | None
    data_dir: Path | None
    run_as: str | None
    security: bool
    #: ``security = false`` accepted off the loopback interface (the network is trusted).
    insecure_ok: bool = False
    #: Seconds a run's ranks wait, once its owner (``esdash run``) is gone, before they stop.
    owner_grace: float = 3.0
    #: Explicit base ports; None: chosen free on each host when the cluster starts ("auto").
    http_port: int | None = None
    transport_port: int | None = None

    @property
    def heap_option(self) -> str:
        """The heap as a JVM option value (``512m``)."""
        mib = self.heap // 1024**2
        return f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"


@dataclass(frozen=True)
class BenchmarkSpec:
    workers_per_node: int
    warmup: float
    duration: float
    bulk_size: int
    target_throughput: float | None
    interval: float
    seed: int | None
    queries: Path | None = None
    after_ingest: str = "wait"
    max_num_segments: int = 1
    settle_timeout: float = 600.0
    warmup_max: float = 300.0
    warmup_round: float = 5.0
    #: As the session says it; :func:`esdash.plugin.order.resolve` gives what it means.
    order: str = "auto"
    repetitions: int | None = None


@dataclass(frozen=True)
class SlurmSpec:
    partition: str | None
    time: str
    account: str | None
    extra: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    """A validated session.  ``source`` keeps the parsed TOML for the run directory."""

    name: str
    description: str
    path: Path
    cluster: ClusterSpec
    encryption: PluginChoice
    track: PluginChoice
    benchmark: BenchmarkSpec
    slurm: SlurmSpec
    source: JsonMapping
    #: ``[references]``: figures per query the run is judged against (exit code 3 on a miss).
    references: tuple[Reference, ...] = ()

    @property
    def trusts_track_code(self) -> bool:
        """Whether the track may run its own code (``[track] trust_code``, or
        ``--trust-track-code``): a command that starts another esdash passes the flag on."""
        return bool(self.track.options.get(TRUST_TRACK_CODE))

    def query_steps(self, track: Track) -> tuple[QueryStep, ...]:
        """The steps the session runs: its ``benchmark.queries`` file if set, else the track's."""
        if self.benchmark.queries is not None:
            return load_steps(self.benchmark.queries)
        return tuple(track.query_steps(self.track.options))

    def rounds(self, track: Track, steps: Sequence[QueryStep]) -> tuple[Order, int]:
        """What ``benchmark.order``/``repetitions`` mean for these steps: ``auto`` mirrors
        the rounds, unless the track's schedule is its definition or a step indexes while it
        runs, so the order decides what later steps search (a query file replacing the
        track's steps is no schedule of the track).  See :func:`esdash.plugin.order.resolve`."""
        fixed = self.fixed_by_track(track) or any(step.indexing for step in steps)
        return resolve(self.benchmark.order, self.benchmark.repetitions, fixed)

    def fixed_by_track(self, track: Track) -> bool:
        """Whether the track alone fixes the order: its schedule is its definition and no
        query file replaces it (``auto`` is then listed whatever the steps are)."""
        return track.ordered_schedule and self.benchmark.queries is None
