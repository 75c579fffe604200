"""Session files: TOML in, validated frozen objects out.

A session describes one study: the cluster to spawn, how data is protected, the workload, how
the benchmark is driven and how Slurm is asked for resources.  ``sessions/*.toml`` are
examples.  The objects (:class:`~esdash.plugin.session.Session` and its parts) belong to the
plugin contract, since plugins are handed them, and are defined in
:mod:`esdash.plugin.session`; this module turns TOML into them and re-exports them.  Every
problem is reported together, each naming the file, the key path, what was expected and what
was found; unknown keys get a "did you mean" hint.  Relative paths are resolved against the
session file's directory, so a session means the same thing whatever directory it is
started from.

    name = "quickstart"

    [cluster]           # backend, nodes, home, heap, interconnect, data_dir, run_as, ...
    [cluster.backend_options]   # options the backend plugin declares
    [encryption]        # mode = "none" | "gocryptfs" | ..., plus the mode's options
    [track]             # name = "mri" | ..., plus the track's options
    [benchmark]         # workers_per_node, warmup, duration, bulk_size, target_throughput,
                        # after_ingest, warmup_max, order, repetitions, ...
    [slurm]             # partition, time, account, extra
    [references.QUERY]  # throughput / p50 / p90 / p99 / error_rate = [value, lower, upper]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import MappingProxyType

from esdash.errors import BadInput
from esdash.plugin.api import Track
from esdash.plugin.checks import PreflightCheck
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.plugin.options import Problem, describe, subtable, suggest, validate
from esdash.plugin.order import CHOICES

# The session's types belong to the plugin contract (plugins are handed a Session); they are
# re-exported here, where most of esdash reads sessions.
from esdash.plugin.session import DEFAULT_BACKEND as DEFAULT_BACKEND
from esdash.plugin.session import TRUST_TRACK_CODE as TRUST_TRACK_CODE
from esdash.plugin.session import BenchmarkSpec as BenchmarkSpec
from esdash.plugin.session import ClusterSpec as ClusterSpec
from esdash.plugin.session import PluginChoice as PluginChoice
from esdash.plugin.session import Session as Session
from esdash.plugin.session import SlurmSpec as SlurmSpec
from esdash.plugin.steps import load_steps
from esdash.plugin.values import REQUIRED, Option, OptionValues
from esdash.references import Reference, parse_references
from esdash.rundir.files import TOO_DEEP, read_regular
from esdash.rundir.layout import RunDir
from esdash.rundir.records import JsonMapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class SessionError(BadInput):
    """A session file is not valid; ``problems`` lists every finding."""

    def __init__(self, path: Path, problems: list[Problem]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {problem}" for problem in problems]
        super().__init__("invalid session file\n  " + "\n  ".join(lines))


#: Slurm's time formats: minutes, m:s, h:m:s, d-h, d-h:m, d-h:m:s.  Every pattern here is
#: used with ``fullmatch``: ``$`` would also match before a trailing newline, and a newline in
#: a value that reaches ``job.sbatch`` turns the rest of the value into a shell command.
_SLURM_TIME = re.compile(r"(\d+-)?\d+(:\d{2}){0,2}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Partition (or a comma-separated list of them) and account: what Slurm names are made of.
_SLURM_PARTITION = re.compile(r"[A-Za-z0-9_.+-]{1,64}(,[A-Za-z0-9_.+-]{1,64})*")
_SLURM_ACCOUNT = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: One sbatch option: ``--long[=value]`` or ``-Xvalue``, the value kept to characters sbatch
#: reads literally on an #SBATCH line (no white space, quotes, backslash or ``#``) and no shell
#: reads specially where the line is shown (no ``$``, backtick or ``;``).
_SLURM_VALUE = r"[A-Za-z0-9_.,:=@%+/\[\]|&*?()~-]*"
_SLURM_EXTRA = re.compile(rf"(--[A-Za-z][A-Za-z0-9-]*(={_SLURM_VALUE})?|-[A-Za-z]{_SLURM_VALUE})")
#: sbatch reads these words anywhere in an #SBATCH line (any case) as the start of another
#: component of a heterogeneous job: the directives after them would go to that component.
_SLURM_SEPARATORS = ("hetjob", "packjob")
#: The options esdash writes itself, with the session key that sets each ("": the run
#: directory); an ``extra`` that repeated one would silently override it (sbatch keeps the last).
_SLURM_OWN = {
    "--job-name": "name",
    "-J": "name",
    "--nodes": "cluster.nodes",
    "-N": "cluster.nodes",
    "--ntasks-per-node": "cluster.nodes_per_host",
    "--time": "slurm.time",
    "-t": "slurm.time",
    "--output": "",
    "-o": "",
    "--chdir": "",
    "-D": "",
    "--partition": "slurm.partition",
    "-p": "slurm.partition",
    "--account": "slurm.account",
    "-A": "slurm.account",
}
#: sbatch options of their own that are also abbreviations of one in ``_SLURM_OWN``.
_SLURM_OTHER_PREFIXES = ("--ntasks",)

TOP_LEVEL = (
    Option("name", "str", "short name of the session (letters, digits, _ . -)", default=REQUIRED),
    Option("description", "str", "one line shown in listings", default=""),
)
SECTIONS = ("cluster", "encryption", "track", "benchmark", "slurm", "references")

CLUSTER = (
    Option("backend", "str", "search engine plugin", default=DEFAULT_BACKEND),
    Option("nodes", "int", "number of search nodes (one per MPI rank)", 1, (), 1, 4096),
    Option("nodes_per_host", "int", "nodes placed on one host", 1, (), 1, 64),
    Option("home", "path", "distribution directory (default: newest in esdash's cache)"),
    Option("heap", "size", "JVM heap per node", "1g", (), 128 * 1024**2, 1024**4),
    Option("interconnect", "str", "network plugin the nodes talk over", default="loopback"),
    Option("interface", "str", "explicit network interface (overrides the plugin's patterns)"),
    Option("data_dir", "path", "data root; node data lives under it keyed by rank"),
    Option("run_as", "str", "unprivileged user the nodes run as when esdash runs as root"),
    Option("security", "bool", "TLS and authentication (off only for comparison runs)", True),
    Option(
        "insecure_ok",
        "bool",
        "allow security = false on an interconnect other than loopback (a trusted network)",
        False,
    ),
    Option(
        "owner_grace",
        "duration",
        "seconds the ranks wait after the esdash that owns the run is gone before they stop "
        "everything of it",
        3.0,
        (),
        1.0,
        600.0,
    ),
    # Unset (the default): every rank chooses free ports on its own host (esdash.cluster.ports)
    Option(
        "http_port",
        "int",
        "HTTP port of node-local rank 0, rank k uses it + k (default: auto, a free port per node)",
        None,
        (),
        1024,
        65000,
    ),
    Option(
        "transport_port",
        "int",
        "transport port of node-local rank 0, rank k uses it + k (default: auto, a free port "
        "per node)",
        None,
        (),
        1024,
        65000,
    ),
)
#: What ``benchmark.after_ingest`` may say (see :mod:`esdash.bench.settle`).
AFTER_INGEST = ("force-merge", "wait", "none")
#: What ``benchmark.order`` may say (see :mod:`esdash.plugin.order`).
ORDERS = CHOICES
BENCHMARK = (
    Option("workers_per_node", "int", "load-generating MPI ranks per search node", 1, (), 1, 1024),
    Option("warmup", "duration", "warm-up of each query step", 5.0, (), 0, 86400),
    Option("duration", "duration", "measured time of each query step", 30.0, (), 0.1, 7 * 86400),
    Option("bulk_size", "int", "documents per bulk request", 1000, (), 1, 1_000_000),
    Option(
        "target_throughput",
        "float",
        "requests/s of all workers together, paced (as Rally); unset: closed loop",
        None,
        (),
        0.001,
        1e7,
    ),
    Option("interval", "duration", "recording interval of the live stream", 1.0, (), 0.1, 3600),
    Option("seed", "int", "seed for target-node choice and query order (default: random)"),
    Option(
        "queries", "path", "query file (JSON steps, the authors' format) run instead of the track's"
    ),
    Option(
        "after_ingest",
        "str",
        "settling after ingest (and refresh + flush): force-merge, wait for merges and "
        "shard moves to finish, or none",
        "wait",
        AFTER_INGEST,
    ),
    Option(
        "max_num_segments", "int", "segments per shard a force-merge leaves", 1, (), 1, 1_000_000
    ),
    Option("settle_timeout", "duration", "longest settling after ingest", 600.0, (), 1, 86400),
    Option(
        "warmup_max",
        "duration",
        "longest global warm-up before the steps (rounds until the cluster is warm); 0: none",
        300.0,
        (),
        0,
        86400,
    ),
    Option(
        "warmup_round", "duration", "time per query in one global warm-up round", 5.0, (), 1, 3600
    ),
    Option(
        "order",
        "str",
        "order of the query steps in each round (auto: mirrored, or listed where the order "
        "is part of the track, e.g. a Rally schedule)",
        "auto",
        ORDERS,
    ),
    Option(
        "repetitions",
        "int",
        "rounds of all query steps inside the run, on one cluster (default: 2 when mirrored, "
        "else 1)",
        None,
        (),
        1,
        1000,
    ),
)
SLURM = (
    Option("partition", "str", "partition to submit to"),
    Option("time", "str", "time limit, e.g. 00:30:00 or 1-00:00:00", default="00:30:00"),
    Option("account", "str", "account to charge"),
    Option("extra", "list[str]", "further sbatch options, e.g. ['--exclusive']", default=()),
)


def _plugin_choice(
    section: str,
    table: JsonMapping,
    selector: str,
    default: str | None,
    kind: str,
    plugins: PluginSet,
    problems: list[Problem],
    base_dir: Path,
    options_table: JsonMapping | None = None,
    options_prefix: str | None = None,
) -> PluginChoice:
    """Resolve ``table[selector]`` to a registered plugin and validate that plugin's options."""
    name = table.get(selector, default)
    key = f"{section}.{selector}"
    if name is None:
        problems.append(Problem(key, "missing; expected the name of a registered " + kind))
        return PluginChoice("")
    if not isinstance(name, str):
        problems.append(Problem(key, f"expected a string, found {describe(name)}"))
        return PluginChoice("")
    registry = plugins.registries[kind]
    if name not in registry:
        available = sorted(registry)
        message = f"no {kind} called {name!r}{suggest(name, available)}; available: "
        message += ", ".join(available) or "none"
        broken = [b.name for b in plugins.broken]
        if broken:
            message += f" (broken plugins, see `esdash plugins`: {', '.join(broken)})"
        problems.append(Problem(key, message))
        return PluginChoice(name)
    chosen = registry[name].obj
    # Sessions choose backends, interconnects, modes and tracks: each declares its options.
    declared = () if isinstance(chosen, PreflightCheck) else chosen.options
    if options_table is None:
        values, found = validate(declared, table, section, base_dir, ignore=(selector,))
    else:
        values, found = validate(declared, options_table, options_prefix or section, base_dir)
    problems.extend(found)
    return PluginChoice(name, MappingProxyType(values))


def _separator_in(value: str) -> str | None:
    """The heterogeneous-job separator word sbatch would find in ``value``, if any."""
    lowered = value.lower()
    return next((word for word in _SLURM_SEPARATORS if word in lowered), None)


def _name_problems(name: str) -> list[Problem]:
    """The session name names run directories and the Slurm job: a short, plain word."""
    if not _NAME.fullmatch(name):
        return [
            Problem("name", f"expected letters, digits, '_', '.', '-' (max 64), found {name!r}")
        ]
    word = _separator_in(name)
    if word:
        return [
            Problem(
                "name",
                f"{name!r} holds {word!r}, which sbatch reads in the job name's #SBATCH line as "
                f"the start of a heterogeneous job; choose a name without it",
            )
        ]
    return []


def _slurm_text_problem(
    key: str, value: str, pattern: re.Pattern[str], expected: str
) -> Problem | None:
    """``value`` must be exactly ``pattern`` (no newline, space, quote, ``#`` or ``$``) and
    hold no heterogeneous-job separator: it is written onto an #SBATCH line as is."""
    if not pattern.fullmatch(value):
        return Problem(key, f"expected {expected}, found {value!r}")
    word = _separator_in(value)
    if word:
        return Problem(
            key,
            f"{value!r} holds {word!r}, which sbatch reads anywhere in an #SBATCH line as the "
            f"start of a heterogeneous job; esdash cannot pass it",
        )
    return None


def _own_option(option: str) -> tuple[str, str] | None:
    """(option, session key) when ``option`` sets one of the directives esdash writes itself;
    long options also by the abbreviations sbatch (getopt_long) accepts."""
    if option.startswith("--"):
        long = option.partition("=")[0]
        hits = [own for own in _SLURM_OWN if own.startswith("--") and own.startswith(long)]
        if hits and long not in _SLURM_OTHER_PREFIXES:
            own = long if long in hits else hits[0]
            return own, _SLURM_OWN[own]
        return None
    short = option[:2]
    return (short, _SLURM_OWN[short]) if short in _SLURM_OWN else None


#: The ``[slurm]`` keys written onto an #SBATCH line as is: pattern and what it means.
_SLURM_WORDS = (
    ("time", _SLURM_TIME, "a Slurm time limit such as 30, 00:30:00 or 1-12:00:00"),
    (
        "partition",
        _SLURM_PARTITION,
        "a partition name (or several, comma-separated) of letters, digits, '_', '.', '+', '-'",
    ),
    ("account", _SLURM_ACCOUNT, "an account name of letters, digits, '_', '.', '+', '-'"),
)


def slurm_problems(values: OptionValues) -> list[Problem]:
    """Everything in ``[slurm]`` ends up on an #SBATCH line of ``job.sbatch``: each value must
    be one plain word there, so the script sbatch reads holds exactly these directives."""
    checks: list[Problem | None] = []
    for name, pattern, expected in _SLURM_WORDS:
        value = values.get(name)
        if isinstance(value, str):
            checks.append(_slurm_text_problem(f"slurm.{name}", value, pattern, expected))
    extra = values.get("extra")
    for index, option in enumerate(extra if isinstance(extra, tuple) else ()):
        checks.append(_extra_problem(f"slurm.extra[{index}]", option))
    return [problem for problem in checks if problem is not None]


def _extra_problem(key: str, option: str) -> Problem | None:
    """One ``slurm.extra`` entry: a single sbatch option that does not redo esdash's own."""
    problem = _slurm_text_problem(
        key,
        option,
        _SLURM_EXTRA,
        "one sbatch option such as '--exclusive', '--gres=gpu:2' or '-Cgpu' (its value of "
        "letters, digits and _ . , : = @ % + / [ ] | & * ? ( ) ~ -; no spaces, quotes, '#', '$')",
    )
    own = None if problem else _own_option(option)
    if own is None:
        return problem
    flag, source = own
    fix = f"set {source} instead"
    if not source:
        fix = "the job's output and working directory are its run directory; leave it out"
    return Problem(key, f"{option!r} sets {flag}, which esdash writes itself; {fix}")


def parse_session(
    data: JsonMapping,
    path: Path,
    plugins: PluginSet | None = None,
    *,
    trust_track_code: bool = False,
) -> Session:
    """Validate already-parsed TOML ``data`` that came from ``path``.

    ``trust_track_code`` (``--trust-track-code``) sets the track's :data:`TRUST_TRACK_CODE`
    option, as ``trust_code = true`` in ``[track]`` does, for a track that declares it.
    """
    if plugins is None:
        plugins = get_plugins()
    base_dir = path.parent.resolve()
    problems: list[Problem] = []

    top = {k: v for k, v in data.items() if k not in SECTIONS}
    top_values, found = validate(TOP_LEVEL, top, "")
    for problem in found:
        if problem.message.startswith("unknown key"):
            hint = suggest(problem.key, list(SECTIONS) + [o.name for o in TOP_LEVEL])
            problem = Problem(
                problem.key,
                f"unknown key{hint}; a session has the keys name, description and the "
                f"tables {', '.join(f'[{s}]' for s in SECTIONS)}",
            )
        problems.append(problem)
    name = top_values.get("name")
    if isinstance(name, str):
        problems.extend(_name_problems(name))

    cluster_table = subtable(data, "cluster", problems)
    backend_options = cluster_table.get("backend_options", {})
    if not isinstance(backend_options, dict):
        problems.append(
            Problem(
                "cluster.backend_options", f"expected a table, found {describe(backend_options)}"
            )
        )
        backend_options = {}
    cluster_values, found = validate(
        CLUSTER, cluster_table, "cluster", base_dir, ignore=("backend_options",)
    )
    problems.extend(found)
    cluster_values.pop("backend", None)  # resolved to a plugin below
    backend = _plugin_choice(
        "cluster",
        cluster_table,
        "backend",
        DEFAULT_BACKEND,
        "backend",
        plugins,
        problems,
        base_dir,
        backend_options,
        "cluster.backend_options",
    )
    interconnect = cluster_values.get("interconnect")
    if isinstance(interconnect, str) and interconnect not in plugins.registries["interconnect"]:
        available = sorted(plugins.registries["interconnect"])
        problems.append(
            Problem(
                "cluster.interconnect",
                f"no interconnect called {interconnect!r}{suggest(interconnect, available)}; "
                f"available: {', '.join(available) or 'none'}",
            )
        )

    encryption = _plugin_choice(
        "encryption",
        subtable(data, "encryption", problems),
        "mode",
        "none",
        "encryption",
        plugins,
        problems,
        base_dir,
    )
    track = _plugin_choice(
        "track",
        subtable(data, "track", problems),
        "name",
        None,
        "track",
        plugins,
        problems,
        base_dir,
    )
    if trust_track_code:
        track = _trusting(track, plugins)
    bench_values, found = validate(
        BENCHMARK, subtable(data, "benchmark", problems), "benchmark", base_dir
    )
    problems.extend(found)
    if bench_values.get("queries") is not None:
        try:
            load_steps(bench_values["queries"])
        except BadInput as exc:
            problems.append(Problem("benchmark.queries", str(exc)))
    references: tuple[Reference, ...] = ()
    try:
        references = parse_references(subtable(data, "references", problems))
    except BadInput as exc:
        key, _, message = str(exc).partition(": ")
        problems.append(Problem(key, message))
    slurm_values, found = validate(SLURM, subtable(data, "slurm", problems), "slurm")
    problems.extend(found)
    problems.extend(slurm_problems(slurm_values))

    if problems:
        raise SessionError(path, problems)
    return Session(
        name=top_values["name"],
        description=top_values["description"],
        path=path,
        cluster=ClusterSpec(backend=backend, **cluster_values),
        encryption=encryption,
        track=track,
        benchmark=BenchmarkSpec(**bench_values),
        slurm=SlurmSpec(**slurm_values),
        source=MappingProxyType(dict(data)),
        references=references,
    )


def _trusting(track: PluginChoice, plugins: PluginSet) -> PluginChoice:
    """``track`` with its :data:`TRUST_TRACK_CODE` option on, when its plugin declares one
    (a track that runs no code of its input has nothing to trust)."""
    registered = plugins.registries["track"].get(track.name)
    chosen = registered.obj if registered is not None else None
    declared = chosen.options if isinstance(chosen, Track) else ()
    if not any(option.name == TRUST_TRACK_CODE for option in declared):
        return track
    return PluginChoice(track.name, MappingProxyType({**track.options, TRUST_TRACK_CODE: True}))


def load_run_session(run: RunDir) -> Session:
    """The session copied into a run directory, with paths resolved as in the original file."""
    info = run.read_info()
    source = Path(info.session_path) if info.session_path else run.session_file
    try:
        data = tomllib.loads(read_regular(run.session_file).decode("utf-8"))
    except RecursionError:
        raise SessionError(run.session_file, [Problem("", TOO_DEEP)]) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SessionError(run.session_file, [Problem("", f"cannot read: {exc}")]) from None
    return parse_session(data, source)


def load_session(
    path: str | Path, plugins: PluginSet | None = None, *, trust_track_code: bool = False
) -> Session:
    """Read, parse and validate a session file; raise :class:`SessionError` on any problem.

    ``trust_track_code``: as :func:`parse_session`."""
    path = Path(path)
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        raise SessionError(path, [Problem("", "no such file")]) from None
    except OSError as exc:
        raise SessionError(path, [Problem("", f"cannot read: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SessionError(
            path, [Problem("", f"line {line}: not UTF-8 text (byte {exc.start}); save as UTF-8")]
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SessionError(path, [Problem("", f"invalid TOML: {exc}")]) from None
    except RecursionError:
        raise SessionError(path, [Problem("", TOO_DEEP)]) from None
    return parse_session(data, path, plugins, trust_track_code=trust_track_code)
