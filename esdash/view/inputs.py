"""What a report or a comparison is made of: runs, campaigns and the authors' files.

Every input becomes one or more :class:`Entry` objects — one per run — with the run's
``results.json`` document, its *fingerprint* (:mod:`esdash.view.fingerprint`: every setting
that changes what the run measured) and its *configuration* labels: the setup (encryption
mode), the interconnect, the cluster size, workers per node, for campaign runs the
campaign's other axes, and the fingerprint keys that tell the runs of one report apart
(:func:`mark_differences`).  Entries with the same fingerprint and labels are repetitions
of one configuration: the tables pool them, ``compare`` resamples them; runs that differ in
any measured setting are never pooled.

Accepted inputs (``esdash report`` / ``compare`` arguments):

* a run directory (``results.json`` in it);
* a campaign directory (``campaign.json``) or a campaign file (its default directory): its
  completed points;
* a file in the authors' query or ingest format (:mod:`esdash.view.authors`).

``INPUT#key=value,...`` selects points of a campaign (``#mode=abe,nodes=3``; axis short
names, key paths, or the configuration names ``setup``, ``nodes``, ``workers_per_node``,
``interconnect``) and gives the authors' files what they do not record (``#nodes=3,
workers_per_node=1,setup=none,interconnect=ethernet,docs=165346692``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from esdash.errors import BadInput, EsdashError
from esdash.paths import runs_dir
from esdash.rundir import files
from esdash.rundir.keys import value_key
from esdash.rundir.layout import CampaignFiles, RunDir
from esdash.rundir.records import (
    MAX_INT,
    BenchPlan,
    CampaignPoint,
    CampaignSummary,
    Header,
    JsonMapping,
    JsonObject,
    JsonValue,
    OpResult,
    Results,
)
from esdash.rundir.stream import read_header
from esdash.view import fingerprint as fingerprints
from esdash.view import format as fmt

#: Configuration fields every entry has, in display order.
CONFIG_FIELDS = ("setup", "interconnect", "nodes", "workers_per_node")
#: The engine a run without ``cluster.backend`` used; other engines go into the configuration.
DEFAULT_ENGINE = "elasticsearch"
#: Baseline setup for overheads: the encryption mode without encryption.
BASELINE = "none"
_ALIASES = {"ppn": "workers_per_node", "workers": "workers_per_node", "mode": "setup"}

#: What identifies a configuration (:attr:`Entry.key`): source, labels, fingerprint.
ConfigKey = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
#: A campaign point without a completed run: campaign, point label, status, reason.
MissingPoint = tuple[str, str, str, "str | None"]
#: What makes two planned steps one (:func:`_step_key`): their request bodies, think time.
StepKey = tuple[tuple[str, ...], float]


@dataclass
class Entry:
    """One run (or one imported result file) in a report."""

    id: str
    source: str  # "esdash" or "authors"
    path: Path
    results: Results
    config: JsonObject
    repetition: int = 1
    campaign: str | None = None
    session_text: str | None = None
    env: JsonObject = field(default_factory=dict)
    stream: Path | None = None
    #: the planned steps: ``{"name", "think_time", "queries": {name: body}}``, to match the
    #: authors' unnamed queries to esdash's by their request bodies
    plan: list[JsonObject] = field(default_factory=list)
    #: every measured setting (:func:`esdash.view.fingerprint.fingerprint`); an authors'
    #: file records none: its configuration is what its ``#key=value`` says
    fingerprint: fingerprints.Fingerprint = field(default_factory=dict)
    #: the key paths of the campaign axes in ``config`` (labelled by their short names)
    axes: tuple[str, ...] = ()

    @property
    def key(self) -> ConfigKey:
        """Identifies the configuration: entries with equal keys are repetitions (same
        source, same labels, same fingerprint)."""
        return (
            self.source,
            tuple(sorted((k, str(v)) for k, v in self.config.items())),
            tuple((k, json.dumps(v, sort_keys=True)) for k, v in sorted(self.fingerprint.items())),
        )


@dataclass
class Inputs:
    entries: list[Entry]
    #: campaign points without a completed run, as (campaign, label, status, reason)
    missing: list[MissingPoint] = field(default_factory=list)
    campaigns: list[CampaignSummary] = field(default_factory=list)


def config_label(config: JsonMapping) -> str:
    """``none, loopback, 3 nodes, 2 workers/node`` (+ other axes)."""
    parts = [
        setting_label(name, config[name]) for name in CONFIG_FIELDS if config.get(name) is not None
    ]
    parts += [f"{k}={v}" for k, v in config.items() if k not in CONFIG_FIELDS]
    return ", ".join(parts)


def setting_label(name: str, value: JsonValue) -> str:
    """One setting of :data:`CONFIG_FIELDS` as labels show it: ``3 nodes``, ``1 node``,
    ``2 workers/node``, else the value itself (``none``, ``loopback``)."""
    if name == "nodes" and isinstance(value, int):
        return fmt.counted(value, "node")
    if name == "workers_per_node" and isinstance(value, int):
        return fmt.counted(value, "worker/node")
    return str(value)


# ----------------------------------------------------------------------------- parsing


def split_spec(spec: str) -> tuple[Path, dict[str, str]]:
    """``PATH#k=v,k=v`` -> (PATH, {k: v}); a ``#`` that is part of an existing path stays."""
    if "#" in spec and not Path(spec).exists():
        path, _, meta = spec.rpartition("#")
        pairs: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in meta.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise BadInput(f"{spec}: expected KEY=VALUE after '#', found {item!r}")
            pairs[_ALIASES.get(key.strip(), key.strip())] = value.strip()
        return Path(path), pairs
    return Path(spec), {}


def _number(value: JsonValue) -> JsonValue:
    """``value`` as an integer where it is one (``"4"`` from a file name), else as it is."""
    if isinstance(value, str | int | float):  # what int() takes (others: a TypeError)
        with contextlib.suppress(ValueError):
            return int(value)
    return value


#: A cluster size or a worker count: a whole number from 1.
_Size = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]


class _ClusterView(msgspec.Struct):
    nodes: _Size = 1
    interconnect: str = "loopback"
    security: bool = True
    backend: Any = DEFAULT_ENGINE  # a name, or a table of the plugin's options


class _EncryptionView(msgspec.Struct):
    mode: Any = BASELINE


class _BenchmarkView(msgspec.Struct):
    workers_per_node: _Size = 1


class _TrackView(msgspec.Struct):
    name: Any = None


class SessionView(msgspec.Struct):
    """What a report takes from a run's session (``session.toml``, or the stream header's
    copy): its configuration.  Typed, so a damaged copy is one error naming the file and
    the key, not a crash where a table was expected; the rest of the session is not read."""

    cluster: _ClusterView = msgspec.field(default_factory=_ClusterView)
    encryption: _EncryptionView = msgspec.field(default_factory=_EncryptionView)
    benchmark: _BenchmarkView = msgspec.field(default_factory=_BenchmarkView)
    track: _TrackView = msgspec.field(default_factory=_TrackView)


def _session_config(session: SessionView) -> JsonObject:
    cluster = session.cluster
    setup = str(session.encryption.mode)
    if cluster.security is False:
        setup += " (no TLS)"
    config: JsonObject = {
        "setup": setup,
        "interconnect": cluster.interconnect,
        "nodes": cluster.nodes,
        "workers_per_node": session.benchmark.workers_per_node,
    }
    if cluster.backend != DEFAULT_ENGINE:
        # another engine is another configuration (never pooled with Elasticsearch runs)
        config["engine"] = cluster.backend
    return config


def _bench_plan(run: RunDir) -> BenchPlan | None:
    try:
        return run.read_bench_plan()
    except EsdashError:
        return None


def _plan(plan: BenchPlan | None) -> list[JsonObject]:
    if plan is None:
        return []
    return [
        {
            "name": step.name,
            "think_time": step.think_time or 0.0,
            "queries": {q.name: q.body for q in step.queries},
        }
        for step in plan.steps
    ]


def load_run(path: Path, extra: JsonMapping | None = None) -> Entry:
    """A run directory as an entry (its session, environment and results)."""
    path = path.resolve()
    run = RunDir(path)
    if not run.results_file.exists():  # a FIFO or directory there: refused on reading
        if run.info_file.is_file():
            raise BadInput(
                f"{path}: the run has no {run.results_file.name} (still running, or it failed "
                f"before the benchmark ended)"
            )
        raise BadInput(f"{path}: not a run directory, campaign directory or result file")
    results = run.read_results()
    info = None
    with contextlib.suppress(EsdashError):
        info = run.read_info()
    session_text = None
    session: JsonObject = {}
    # unreadable (a TOML error, "[[[[..." too deep to parse): the stream header's copy
    with contextlib.suppress(OSError, ValueError, RecursionError):
        session_text = files.read_regular(run.session_file).decode("utf-8")
        session = tomllib.loads(session_text)
    header: Header | None = read_header(run.stream_file)
    source = run.session_file
    if not session and header is not None:
        session = header.session
        source = Path(f"{run.stream_file} (the header's session)")
    view = files.convert(session, SessionView, source)
    topology = header.topology if header is not None else None
    if topology is None:
        with contextlib.suppress(EsdashError):
            topology = run.read_topology()
    hosts = sorted({n.host for n in topology.nodes if n.host}) if topology is not None else []
    config = _session_config(view)
    if results.encryption and not (session.get("encryption") or {}).get("mode"):
        config["setup"] = results.encryption
    config.update(extra or {})
    plan = _bench_plan(run)
    env = {
        "run": str(path),
        "status": results.status,
        "started": results.started,
        "ended": results.ended,
        # the engine with its version: an Elasticsearch 8.19 beside an OpenSearch 3.4 must
        # not read as two versions of one thing
        "distribution": (
            " ".join(str(part) for part in (info.engine, info.version) if part) or None
            if info is not None
            else None
        ),
        "home": info.home if info is not None else None,
        "plugins": header.plugins if header is not None else {},
        "hosts": hosts,
        "bench_ranks": results.ranks,
        "slurm_job": (header.slurm_job_id if header is not None else None)
        or (info.slurm_job if info is not None else None),
        "track": view.track.name,
        "cluster_run": info.cluster_run if info is not None else None,
        "orphaned": info.orphaned if info is not None else None,
    }
    return Entry(
        id=str(results.run_id or path.name),
        source="esdash",
        path=path,
        results=results,
        config=config,
        session_text=session_text,
        env=env,
        stream=run.stream_file if run.stream_file.is_file() else None,
        plan=_plan(plan),
        fingerprint=fingerprints.fingerprint(
            session, results=results, header=header, info=info, plan=plan
        ),
    )


def _selected(
    point: CampaignPoint,
    shorts: Mapping[str, str],
    entry_config: JsonMapping,
    meta: Mapping[str, str],
) -> bool:
    for key, wanted in meta.items():
        if key in ("repetition", "r"):
            if str(point.repetition) != wanted:
                return False
            continue
        value = None
        for dotted, found in point.values.items():
            if key in (dotted, shorts.get(dotted)):
                value = value_key(found)
        if value is None and key in entry_config:
            value = str(entry_config[key])
        if value is None:
            return False
        if value != wanted:
            return False
    return True


def load_campaign_dir(path: Path, meta: Mapping[str, str], inputs: Inputs) -> None:
    """The completed points of a campaign directory (filtered by ``meta``)."""
    summary = CampaignFiles(path).read_summary()
    shorts = summary.short_names
    inputs.campaigns.append(summary)
    found = 0
    for point in summary.points:
        run = point.run
        if point.status != "completed" or not run or not RunDir(Path(run)).results_file.is_file():
            if _selected(point, shorts, {}, {k: v for k, v in meta.items() if k != "setup"}):
                inputs.missing.append((summary.name, point.label, point.status, point.reason))
            continue
        extra = {
            shorts.get(dotted, dotted): _number(value_key(value))
            for dotted, value in point.values.items()
            if dotted
            not in (
                "cluster.nodes",
                "benchmark.workers_per_node",
                "encryption.mode",
                "cluster.interconnect",
                "cluster.backend",
            )
            and not isinstance(value, dict)
        }
        entry = load_run(Path(run), extra)
        if not _selected(point, shorts, entry.config, meta):
            continue
        entry.id = f"{summary.name}/{point.id}"
        entry.repetition = point.repetition
        entry.campaign = summary.name
        entry.axes = tuple(point.values)
        inputs.entries.append(entry)
        found += 1
    if not found and not inputs.missing:
        raise BadInput(f"{path}: no completed point matches {meta or 'the campaign'}")


#: The largest count a ``#docs=``/``#repetition=`` may give (exact as a float, so every
#: rate computed from it is finite).
MAX_COUNT = 2**53


def _whole(path: Path, key: str, text: str) -> int:
    """``#key=text`` of an input as a positive whole number, or a BadInput saying so."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 0 < value <= MAX_COUNT:
        raise BadInput(f"{path}#{key}={text}: expected a whole number from 1 to {MAX_COUNT}")
    return value


def load_authors(path: Path, meta: Mapping[str, str]) -> Entry:
    from esdash.view import authors

    kind = authors.sniff(path)
    label = meta.get("label") or path.stem
    if kind == "queries":
        results = authors.load_queries(path, label)
    elif kind == "ingest":
        docs = meta.get("docs")
        results = authors.load_ingest(path, label, _whole(path, "docs", docs) if docs else None)
    else:
        raise BadInput(
            f"{path}: not a run or campaign directory, nor a file in the authors' query or "
            f"ingest format"
        )
    config = {
        "setup": meta.get("setup", "none"),
        "interconnect": meta.get("interconnect"),
        "nodes": _number(meta.get("nodes")),
        "workers_per_node": _number(meta.get("workers_per_node")),
    }
    config.update(
        {
            k: _number(v)
            for k, v in meta.items()
            if k not in (*CONFIG_FIELDS, "docs", "label", "repetition")
        }
    )
    plan = [
        {
            "name": step.name,
            "think_time": step.planned.think_time or 0.0,
            "queries": {name: op.body for name, op in step.queries.items()},
        }
        for step in results.steps
    ]
    return Entry(
        id=f"authors:{label}",
        source="authors",
        path=path.resolve(),
        results=results,
        config=config,
        repetition=_whole(path, "repetition", meta.get("repetition", "1")),
        env={"run": str(path.resolve()), "imported": (results.imported_from or {}).get("format")},
        plan=plan,
    )


def _campaign_name(path: Path) -> str:
    """The ``name`` of a campaign file (its runs are under the campaign's default directory)."""
    try:
        data = tomllib.loads(files.read_regular(path).decode("utf-8"))
    except RecursionError:
        raise BadInput(f"{path}: {files.TOO_DEEP}") from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable campaign file: {exc}") from None
    name = data.get("name")
    if "axes" not in data or not isinstance(name, str) or not name:
        raise BadInput(f"{path}: not a campaign file (a campaign has a name and [axes])")
    return name


def load_inputs(specs: Sequence[str]) -> Inputs:
    """Every input of a report, in the order given; the same run is used once."""
    inputs = Inputs([])
    for spec in specs:
        path, meta = split_spec(spec)
        if path.is_dir() and CampaignFiles(path).summary_file.is_file():
            load_campaign_dir(path, meta, inputs)
        elif path.is_dir():
            entry = load_run(path, {k: _number(v) for k, v in meta.items()})
            inputs.entries.append(entry)
        elif path.is_file() and path.suffix == ".toml":
            directory = CampaignFiles.default(runs_dir(), _campaign_name(path)).path
            if not CampaignFiles(directory).summary_file.is_file():
                raise BadInput(f"{path}: the campaign has not run yet ({directory} is empty)")
            load_campaign_dir(directory, meta, inputs)
        elif path.is_file():
            inputs.entries.append(load_authors(path, meta))
        else:
            raise BadInput(f"{path}: no such run, campaign or file")
    seen: set[tuple[str, Path]] = set()
    unique = []
    for entry in inputs.entries:
        if (entry.source, entry.path) not in seen:
            seen.add((entry.source, entry.path))
            unique.append(entry)
    inputs.entries = unique
    align_queries(inputs.entries)
    mark_differences(inputs.entries)
    return inputs


# ------------------------------------------------------------------ configurations

#: Fingerprint keys the configuration labels already show (setup, interconnect, nodes,
#: workers per node, engine; security as "(no TLS)" in the setup).
LABELLED = frozenset(
    {
        "encryption.mode",
        "cluster.interconnect",
        "cluster.nodes",
        "benchmark.workers_per_node",
        "engine",
        "cluster.security",
    }
)


#: Fingerprint keys an encryption mode changes by itself (its options, its codec, the
#: encoded mapping and request bodies): a label only where the mode does not explain them,
#: and left out when an overhead is matched to its baseline.
ENCRYPTION_DERIVED = ("encryption.", "index.layout", "steps.bodies")


def encryption_derived(key: str) -> bool:
    return key != "encryption.mode" and key.startswith(ENCRYPTION_DERIVED)


def _implied_by(key: str) -> str | None:
    """The labelled key that may explain ``key``: the encryption mode its options, codec and
    encoded bodies; the engine its version and backend options."""
    if encryption_derived(key):
        return "encryption.mode"
    if key == "engine.version" or key.startswith("cluster.backend_options."):
        return "engine"
    return None


def _follows(entries: Sequence[Entry], key: str, parent: str) -> bool:
    """Whether every run with one value of ``parent`` has one value of ``key``."""
    seen: dict[str, str] = {}
    for entry in entries:
        mine = json.dumps(entry.fingerprint.get(parent), sort_keys=True)
        value = json.dumps(entry.fingerprint.get(key), sort_keys=True)
        if seen.setdefault(mine, value) != value:
            return False
    return True


def distinguishing(entries: Sequence[Entry]) -> list[str]:
    """The fingerprint keys in which the esdash runs among ``entries`` differ, without those
    a labelled key explains (:func:`_implied_by`: the mode's options where the modes
    differ, the engine's version where the engines do)."""
    ours = [e for e in entries if e.source == "esdash"]
    found = []
    for key in fingerprints.differing([e.fingerprint for e in ours]):
        parent = _implied_by(key)
        if parent is None or not _follows(ours, key, parent):
            found.append(key)
    return found


def mark_differences(entries: Sequence[Entry]) -> list[str]:
    """Label each run with the settings that tell it apart from the others given with it.

    Every fingerprint key whose value differs among the esdash runs and that the labels do
    not show yet (:data:`LABELLED`, the run's campaign axes, what the encryption mode or the
    engine implies) goes into each run's
    ``config`` as ``key: shown value``, so two runs that differ only in
    ``track.documents`` are two configurations, each labelled by it, in every table,
    figure and comparison.  Returns those keys.
    """
    keys = [k for k in distinguishing(entries) if k not in LABELLED]
    for entry in entries:
        if entry.source != "esdash":
            continue
        for key in keys:
            if key not in entry.axes:
                entry.config[key] = fingerprints.show(key, entry.fingerprint.get(key))
    return keys


def configurations_note(entries: Sequence[Entry]) -> str | None:
    """What made the esdash runs given together more than one configuration, if anything:
    ``4 runs are 2 configurations, never pooled; they differ in track.documents (2000 vs
    1000)``."""
    ours = [e for e in entries if e.source == "esdash"]
    groups = {e.key for e in ours}
    keys = distinguishing(ours)
    if len(groups) < 2 or not keys:
        return None
    told = fingerprints.describe([e.fingerprint for e in ours], keys)
    return f"{len(ours)} runs are {len(groups)} configurations, never pooled; they differ in {told}"


def _body(body: JsonValue) -> str:
    return json.dumps(body, sort_keys=True)


def _step_key(step: JsonMapping) -> StepKey:
    bodies = tuple(sorted(_body(b) for b in step["queries"].values()))
    return bodies, round(float(step.get("think_time") or 0.0), 6)


def align_queries(entries: Iterable[Entry]) -> None:
    """Rename imported steps and queries to esdash's names where the requests are equal.

    The authors' files carry no names.  A step of an esdash run in the same report with the
    same request bodies and the same think time gives the imported step its name, and each
    imported query the name of the query with its body, so both land in one row.  Steps that
    look alike (the nyc_taxis sleep steps share one body) are matched in order.
    """
    entries = list(entries)
    candidates: dict[StepKey, list[JsonObject]] = {}
    for entry in entries:
        if entry.source != "esdash":
            continue
        for step in entry.plan:
            same = candidates.setdefault(_step_key(step), [])
            if all(s["name"] != step["name"] for s in same):
                same.append(step)
    if not candidates:
        return
    for entry in entries:
        if entry.source != "authors":
            continue
        used: dict[StepKey, int] = {}
        for planned, measured in zip(entry.plan, entry.results.steps, strict=False):
            key = _step_key(planned)
            options = candidates.get(key, [])
            index = used.get(key, 0)
            used[key] = index + 1
            if index >= len(options):
                continue
            match = options[index]
            names = {_body(body): name for name, body in match["queries"].items()}
            measured.name = planned["name"] = match["name"]
            measured.queries = {
                names.get(_body(op.body), name): op for name, op in measured.queries.items()
            }
            measured.planned.queries = list(measured.queries)


def queries_of(entries: Iterable[Entry]) -> list[tuple[str, str]]:
    """Every (step name, query name), in step order of first appearance."""
    found: dict[tuple[str, str], tuple[int, int, int]] = {}
    for number, entry in enumerate(entries):
        for step in entry.results.steps:
            for position, name in enumerate(step.queries):
                found.setdefault((step.name, name), (step.index, number, position))
    return sorted(found, key=lambda k: found[k])


def op_of(entry: Entry, step: str, query: str) -> OpResult | None:
    for candidate in entry.results.steps:
        if candidate.name == step and query in candidate.queries:
            return candidate.queries[query]
    return None


def ops_of(entry: Entry, step: str, query: str) -> list[OpResult]:
    """Every measurement of ``query`` in step ``step``: one per round of the run."""
    return [
        candidate.queries[query]
        for candidate in entry.results.steps
        if candidate.name == step and query in candidate.queries
    ]


def query_label(step: str, query: str) -> str:
    return query if step == query else f"{step}/{query}"
