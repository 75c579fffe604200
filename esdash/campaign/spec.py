"""Campaign files: TOML in, validated points (complete sessions) out.

A campaign is the paper's matrix written down once::

    name = "paper-small"
    session = "paper-small-base.toml"    # the base session, relative to this file
    repetitions = 3                      # every point is run this many times
    ingest = "once"                      # "each": re-ingest at every point

    [set]                                # session keys changed for every point
    benchmark.duration = "1m"

    [axes]                               # session key path -> values; the cross product
    cluster.nodes = [1, 3]
    benchmark.workers_per_node = [1, 2]
    encryption.mode = ["none", "gocryptfs", "abe"]

    [per_value."encryption.mode".gocryptfs]   # keys set only where the axis has that value
    encryption.password_file = "~/.esdash-gocryptfs.pass"

    [slurm]                              # the [slurm] of the jobs `esdash sweep --submit` writes
    time = "04:00:00"

Why points are complete sessions: each one is written to ``points/<id>/session.toml`` in the
campaign directory and run with plain ``esdash run``, so a point can be reproduced (or
debugged) without the campaign machinery, and the run directory holds its exact session.

Validation follows sessions (:mod:`esdash.session`): every problem is reported at once,
naming the file and the key path.  A problem of a point's session names the campaign file
when the campaign set that key, and the base session otherwise.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esdash.errors import BadInput
from esdash.plugin.options import Problem, describe, subtable, suggest, validate
from esdash.plugin.values import REQUIRED, Option
from esdash.rundir.files import TOO_DEEP, read_regular
from esdash.rundir.keys import digest, value_key
from esdash.rundir.records import JsonMapping, JsonObject, JsonValue
from esdash.session import (
    BENCHMARK,
    CLUSTER,
    DEFAULT_BACKEND,
    SECTIONS,
    SLURM,
    SessionError,
    parse_session,
    slurm_problems,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from esdash.plugin.manager import PluginSet

#: A session key a campaign sets (its path of keys) and the value it sets, as TOML parsed it.
Override = tuple[tuple[str, ...], JsonValue]

#: Keys of the campaign's top level (tables are handled separately).
TOP_LEVEL = (
    Option("name", "str", "short name of the campaign (letters, digits, _ . -)", REQUIRED),
    Option("description", "str", "one line shown in listings and reports", ""),
    Option("session", "path", "the base session file, relative to the campaign file", REQUIRED),
    Option("repetitions", "int", "runs of every point (for run-to-run spread)", 1, (), 1, 1000),
    Option(
        "ingest",
        "str",
        "once: ingest per cluster and reuse the index; each: re-ingest at every point",
        "once",
        ("once", "each"),
    ),
)
TABLES = ("set", "axes", "per_value", "slurm")
#: Plugin selectors: changing one drops the base's options of the previous plugin.
SELECTORS = {
    ("encryption", "mode"): "none",
    ("track", "name"): None,
    ("cluster", "backend"): DEFAULT_BACKEND,
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}\Z")
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class CampaignError(BadInput):
    """A campaign file (or a point it makes) is not valid; ``lines`` lists every finding."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("invalid campaign\n  " + "\n  ".join(lines))


@dataclass(frozen=True)
class Axis:
    """One key of ``[axes]``: a session key path and the values the campaign crosses with
    every other axis's (each combination, once per repetition, is a point)."""

    path: tuple[str, ...]
    values: tuple[JsonValue, ...]
    #: the name used in labels, point ids and ``--only``: the last key, unless ambiguous
    short: str

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Point:
    """One session of the campaign: a combination of axis values and a repetition."""

    id: str
    label: str
    #: axis (dotted path) -> value
    values: JsonMapping
    repetition: int
    #: the complete session as TOML data (paths absolute)
    session: JsonMapping
    #: names the data root: cluster size, encryption mode and its options
    root_label: str

    @property
    def digest(self) -> str:
        """Changes whenever anything in the point's session changes (resume checks it)."""
        return digest(self.session, 16)

    def get(self, dotted: str, default: Any = None) -> Any:
        """The session's value at a dotted key path (``cluster.nodes``), else ``default``."""
        node: JsonValue = self.session
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def nodes(self) -> int:
        return int(self.get("cluster.nodes", 1))


@dataclass(frozen=True)
class Campaign:
    name: str
    description: str
    path: Path
    base_path: Path
    base: JsonMapping
    axes: tuple[Axis, ...]
    overrides: tuple[Override, ...]
    #: axis dotted path -> value key -> ((path, value), ...)
    per_value: Mapping[str, Mapping[str, tuple[Override, ...]]]
    repetitions: int
    ingest: str
    slurm: JsonMapping = field(default_factory=dict)
    source: JsonMapping = field(default_factory=dict)

    def axis(self, name: str) -> Axis | None:
        """An axis by its dotted path or its short name."""
        for axis in self.axes:
            if name in (axis.dotted, axis.short):
                return axis
        return None

    def points(self, directory: Path, plugins: PluginSet | None = None) -> list[Point]:
        """Every point, validated; ``directory`` is the campaign directory (for data roots)."""
        if plugins is None:
            from esdash.plugin.manager import get_plugins

            plugins = get_plugins()
        slugs = [_axis_slugs(axis) for axis in self.axes]
        points: list[Point] = []
        failures: dict[tuple[str, str, str], list[str]] = {}
        for combination in itertools.product(*(range(len(a.values)) for a in self.axes)):
            for repetition in range(1, self.repetitions + 1):
                point, found = self._point(combination, repetition, slugs, Path(directory), plugins)
                for file, key, message in found:
                    failures.setdefault((file, key, message), []).append(point.label)
                points.append(point)
        if failures:
            lines = []
            for (file, key, message), labels in failures.items():
                where = f"{key}: " if key else ""
                shown = ", ".join(labels[:3]) + (
                    f", +{len(labels) - 3} more" if len(labels) > 3 else ""
                )
                lines.append(f"{file}: {where}{message} (point {shown})")
            raise CampaignError(lines)
        return points

    def sets(self, point: Point, key: str) -> bool:
        """Whether this file (``[set]``, an axis, ``[per_value]``), not the base session,
        gives ``key`` (a dotted session key) its value in ``point``: findings name that file."""
        overrides = list(self.overrides)
        for axis in self.axes:
            value = point.values.get(axis.dotted)
            overrides.append((axis.path, value))
            overrides.extend(self.per_value.get(axis.dotted, {}).get(value_key(value), ()))
        return _overridden(key, overrides)

    # ------------------------------------------------------------------ one point
    def _point(
        self,
        combination: tuple[int, ...],
        repetition: int,
        slugs: list[list[str]],
        directory: Path,
        plugins: PluginSet,
    ) -> tuple[Point, list[tuple[str, str, str]]]:
        values = {a.dotted: a.values[k] for a, k in zip(self.axes, combination, strict=True)}
        overrides = list(self.overrides)
        for axis, k in zip(self.axes, combination, strict=True):
            overrides.append((axis.path, axis.values[k]))
        for axis, k in zip(self.axes, combination, strict=True):
            overrides.extend(self.per_value.get(axis.dotted, {}).get(value_key(axis.values[k]), ()))
        data = copy.deepcopy(dict(self.base))
        _drop_replaced_plugins(data, overrides)
        problems: list[tuple[str, str, str]] = []
        for path, value in overrides:
            where = _assign(data, path, value)
            if where:
                problems.append((str(self.path), ".".join(path), where))
        _absolutize(
            data, overrides, self.base_path.parent.resolve(), self.path.parent.resolve(), plugins
        )
        root_label = _root_label(data)
        session_name = _session_name(self.name, root_label)
        parts = [
            f"{a.short}={slugs[i][k]}"
            for i, (a, k) in enumerate(zip(self.axes, combination, strict=True))
        ]
        point_id = "__".join([*parts, f"r{repetition}"])
        label = " ".join(
            f"{a.short}={value_key(a.values[k])}"
            for a, k in zip(self.axes, combination, strict=True)
        )
        label = f"{label} #{repetition}".strip() if self.repetitions > 1 or not label else label
        data["name"] = session_name
        data["description"] = f"campaign {self.name}: {label}"
        cluster = data.setdefault("cluster", {})
        if isinstance(cluster, dict):
            parent = cluster.get("data_dir")
            root = Path(parent) if isinstance(parent, str) else directory / "data"
            cluster["data_dir"] = str(root / root_label)
        point = Point(point_id, label, values, repetition, data, root_label)
        if not problems:
            try:
                parse_session(data, self.base_path, plugins)
            except SessionError as exc:
                for problem in exc.problems:
                    file = self.path if _overridden(problem.key, overrides) else self.base_path
                    problems.append((str(file), problem.key, problem.message))
        return point, problems


# ------------------------------------------------------------------------ building points


def _drop_replaced_plugins(data: JsonObject, overrides: list[Override]) -> None:
    """A point that picks another plugin than the base must not inherit the base's options.

    ``encryption.mode = ["none", "gocryptfs"]`` over a base with ``mode = "gocryptfs"`` and a
    ``password_file``: the ``none`` point gets an ``[encryption]`` table with only its mode.
    """
    chosen: dict[tuple[str, ...], JsonValue] = {}
    for path, value in overrides:
        for selector in SELECTORS:
            if path == selector:
                chosen[selector] = value
            elif len(path) == 1 and path[0] == selector[0] and isinstance(value, Mapping):
                chosen[selector] = value.get(selector[1], SELECTORS[selector])
    for (section, key), value in chosen.items():
        table = data.get(section)
        if not isinstance(table, dict):
            continue
        if table.get(key, SELECTORS[(section, key)]) == value:
            continue
        if section == "cluster":
            table.pop("backend_options", None)
        else:
            data[section] = {key: table[key]} if key in table else {}


def _assign(data: JsonObject, path: tuple[str, ...], value: JsonValue) -> str | None:
    """Set ``path`` to ``value`` (tables replace tables); say why not, if it cannot be."""
    node = data
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return f"cannot set a key inside {'.'.join(path[: depth + 1])}, which is not a table"
        node = child
    node[path[-1]] = copy.deepcopy(value)
    return None


def _overridden(key: str, overrides: list[Override]) -> bool:
    for path, value in overrides:
        dotted = ".".join(path)
        if key == dotted or key.startswith(dotted + ".") or dotted.startswith(key + "."):
            return True
        if isinstance(value, Mapping) and not key:
            return True
    return False


def _path_keys(data: JsonMapping, plugins: PluginSet) -> list[tuple[str, ...]]:
    """Key paths of every option of kind ``path`` the session's plugins and sections declare."""
    found: list[tuple[str, ...]] = [("cluster", o.name) for o in CLUSTER if o.kind == "path"]
    found += [("benchmark", o.name) for o in BENCHMARK if o.kind == "path"]

    def plugin_options(kind: str, name: JsonValue) -> tuple[Option, ...]:
        registry = getattr(plugins, "registries", {}).get(kind, {})
        entry = registry.get(name) if isinstance(name, str) else None
        return tuple(getattr(getattr(entry, "obj", None), "options", ()) or ())

    def table(name: str) -> JsonMapping:
        value = data.get(name)
        return value if isinstance(value, Mapping) else {}

    backend = table("cluster").get("backend", DEFAULT_BACKEND)
    found += [
        ("cluster", "backend_options", o.name)
        for o in plugin_options("backend", backend)
        if o.kind == "path"
    ]
    mode = table("encryption").get("mode", "none")
    found += [
        ("encryption", o.name) for o in plugin_options("encryption", mode) if o.kind == "path"
    ]
    track = table("track").get("name")
    found += [("track", o.name) for o in plugin_options("track", track) if o.kind == "path"]
    return found


def _absolutize(
    data: JsonObject,
    overrides: list[Override],
    base_dir: Path,
    campaign_dir: Path,
    plugins: PluginSet,
) -> None:
    """Make relative path options absolute: the point's session file lives elsewhere.

    A value the campaign set resolves against the campaign file's directory, a value from
    the base session against the base session's (as ``esdash run BASE`` would resolve it).
    """
    for path in _path_keys(data, plugins):
        node: JsonValue = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        value = node.get(path[-1])
        if not isinstance(value, str) or not value.strip() or value.startswith("~"):
            continue
        if os.path.isabs(value):
            continue
        base = campaign_dir if _overridden(".".join(path), overrides) else base_dir
        node[path[-1]] = os.path.normpath(base / value)


def _root_label(data: JsonMapping) -> str:
    """Names a data root: one per cluster size and encryption setup.

    Indices can be reused by every cluster of that size and setup (over any interconnect,
    with any heap); a different size or mode gets its own root, so no point ever needs
    ``--fresh`` to switch between them.
    """
    found_cluster, found_encryption = data.get("cluster"), data.get("encryption")
    cluster = found_cluster if isinstance(found_cluster, Mapping) else {}
    encryption = found_encryption if isinstance(found_encryption, Mapping) else {}
    nodes = cluster.get("nodes", 1)
    mode = encryption.get("mode", "none")
    label = f"{nodes}n-{_SLUG.sub('-', str(mode))}"
    options = {k: v for k, v in encryption.items() if k != "mode"}
    if options:
        label += f"-{digest(options)}"
    backend = cluster.get("backend", DEFAULT_BACKEND)
    if backend != DEFAULT_BACKEND:
        label += f"-{_SLUG.sub('-', str(backend))}"
    if cluster.get("security", True) is False:
        label += "-nosec"
    return label


def _session_name(campaign: str, root_label: str) -> str:
    """One session name per data root: the cluster name stored there must stay the same."""
    name = f"{campaign}-{root_label}"
    return name if len(name) <= 64 else f"{campaign[:40]}-{digest(root_label, 8)}"


def _axis_slugs(axis: Axis) -> list[str]:
    """File-name-safe spellings of an axis's values, unique within the axis."""
    slugs = [_SLUG.sub("-", value_key(v)).strip("-")[:40] or "x" for v in axis.values]
    if len(set(slugs)) < len(slugs):
        slugs = [f"{s}-{digest(v)}" for s, v in zip(slugs, axis.values, strict=True)]
    return slugs


# ---------------------------------------------------------------------------- parsing


def _leaves(table: JsonMapping, prefix: tuple[str, ...] = ()) -> Iterable[Override]:
    """Flatten nested tables into ``(key path, value)``; quoted dotted keys split too.

    ``benchmark.duration = "1s"`` and ``"benchmark.duration" = "1s"`` mean the same.  An
    empty table stays a value (it sets an empty table).
    """
    for key, value in table.items():
        path = (*prefix, *key.split("."))
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def _check_path(path: tuple[str, ...], where: str, problems: list[Problem]) -> bool:
    """The first key must be a session table; the built-in tables' keys must exist."""
    dotted = ".".join(path)
    head = path[0]
    if head == "name":
        problems.append(
            Problem(where, "the campaign names every point's session; `name` cannot be set")
        )
        return False
    if head == "description" and len(path) == 1:
        return True
    if head not in SECTIONS:
        problems.append(
            Problem(
                where,
                f"{dotted!r} is not a session key{suggest(head, list(SECTIONS))}; key paths "
                f"start with one of {', '.join(SECTIONS)}",
            )
        )
        return False
    known = {"cluster": CLUSTER, "benchmark": BENCHMARK, "slurm": SLURM}.get(head)
    if known is not None and len(path) > 1:
        names = [o.name for o in known] + (["backend_options"] if head == "cluster" else [])
        if path[1] not in names:
            problems.append(
                Problem(
                    where,
                    f"{dotted!r}: [{head}] has no key {path[1]!r}{suggest(path[1], names)}",
                )
            )
            return False
    return True


def _parse_axes(table: JsonMapping, problems: list[Problem]) -> list[Axis]:
    raw: list[Override] = []

    def walk(node: JsonMapping, prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            path = (*prefix, *key.split("."))
            if isinstance(value, Mapping):
                walk(value, path)
            else:
                raw.append((path, value))

    walk(table, ())
    axes: list[Axis] = []
    for path, values in raw:
        where = "axes." + ".".join(path)
        if not _check_path(path, where, problems):
            continue
        if not isinstance(values, list):
            problems.append(
                Problem(where, f"expected an array of the values to try, found {describe(values)}")
            )
            continue
        if not values:
            problems.append(Problem(where, "expected at least one value, found an empty array"))
            continue
        keys = [json.dumps(v, sort_keys=True) for v in values]
        duplicates = sorted(
            {value_key(v) for v, k in zip(values, keys, strict=True) if keys.count(k) > 1}
        )
        if duplicates:
            problems.append(Problem(where, f"values repeat: {', '.join(duplicates)}"))
            continue
        kinds = {type(v).__name__ for v in values}
        if "dict" in kinds and len(kinds) > 1:
            problems.append(
                Problem(where, "expected either tables or plain values, not both in one axis")
            )
            continue
        axes.append(Axis(path, tuple(values), ""))
    for a, b in itertools.combinations(axes, 2):
        shorter, longer = sorted((a.path, b.path), key=len)
        if longer[: len(shorter)] == shorter:
            problems.append(
                Problem(
                    "axes." + ".".join(longer),
                    f"overlaps the axis {'.'.join(shorter)}; vary a key or its table, not both",
                )
            )
    lasts = [a.path[-1] for a in axes]
    return [
        Axis(a.path, a.values, a.path[-1] if lasts.count(a.path[-1]) == 1 else a.dotted)
        for a in axes
    ]


def _parse_per_value(
    table: JsonMapping, axes: list[Axis], problems: list[Problem]
) -> dict[str, dict[str, tuple[Override, ...]]]:
    by_path = {a.path: a for a in axes}
    result: dict[str, dict[str, tuple[Override, ...]]] = {}

    def walk(node: JsonMapping, prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            path = (*prefix, *key.split("."))
            where = "per_value." + ".".join(path)
            axis = by_path.get(path)
            if axis is not None:
                if not isinstance(value, Mapping):
                    problems.append(
                        Problem(where, f"expected a table per value, found {describe(value)}")
                    )
                    continue
                _per_axis(axis, value, where, problems, result)
            elif isinstance(value, Mapping) and any(p[: len(path)] == path for p in by_path):
                walk(value, path)
            else:
                names = [a.dotted for a in axes]
                problems.append(
                    Problem(
                        where,
                        f"no axis {'.'.join(path)!r}{suggest('.'.join(path), names)}; axes: "
                        f"{', '.join(names) or 'none'}",
                    )
                )

    walk(table, ())
    return result


def _per_axis(
    axis: Axis,
    table: JsonMapping,
    where: str,
    problems: list[Problem],
    result: dict[str, dict[str, tuple[Override, ...]]],
) -> None:
    if any(isinstance(v, Mapping) for v in axis.values):
        problems.append(
            Problem(where, "this axis has tables as values; put the keys into those tables")
        )
        return
    keys = {value_key(v): v for v in axis.values}
    for value, overrides in table.items():
        at = f'{where}."{value}"'
        if value not in keys:
            problems.append(
                Problem(
                    at,
                    f"{value!r} is not a value of the axis{suggest(value, list(keys))}; its "
                    f"values: {', '.join(keys)}",
                )
            )
            continue
        if not isinstance(overrides, Mapping):
            problems.append(
                Problem(at, f"expected a table of session keys, found {describe(overrides)}")
            )
            continue
        pairs: list[Override] = []
        for path, item in _leaves(overrides):
            key = f"{at}.{'.'.join(path)}"
            if path == axis.path:
                problems.append(Problem(key, "sets the axis itself"))
            elif _check_path(path, key, problems):
                pairs.append((path, item))
        result.setdefault(axis.dotted, {})[value] = tuple(pairs)


def parse_campaign(data: JsonMapping, path: Path, plugins: PluginSet | None = None) -> Campaign:
    """Validate already-parsed TOML ``data`` that came from ``path`` (points are not built)."""
    path = Path(path)
    base_dir = path.parent.resolve()
    problems: list[Problem] = []
    top = {k: v for k, v in data.items() if k not in TABLES}
    values, found = validate(TOP_LEVEL, top, "", base_dir)
    for problem in found:
        if problem.message.startswith("unknown key"):
            names = [o.name for o in TOP_LEVEL] + list(TABLES)
            problem = Problem(
                problem.key,
                f"unknown key{suggest(problem.key, names)}; a campaign has the keys "
                f"{', '.join(o.name for o in TOP_LEVEL)} and the tables "
                f"{', '.join(f'[{t}]' for t in TABLES)}",
            )
        problems.append(problem)
    name = values.get("name")
    if isinstance(name, str) and not _NAME.match(name):
        problems.append(
            Problem("name", f"expected letters, digits, '_', '.', '-' (max 48), found {name!r}")
        )
    overrides: list[Override] = []
    for key_path, value in _leaves(subtable(data, "set", problems)):
        if _check_path(key_path, "set." + ".".join(key_path), problems):
            overrides.append((key_path, value))
    axes = _parse_axes(subtable(data, "axes", problems), problems)
    for axis in axes:
        for key_path, _value in overrides:
            if key_path[: len(axis.path)] == axis.path or axis.path[: len(key_path)] == key_path:
                problems.append(
                    Problem(
                        "set." + ".".join(key_path),
                        f"is also the axis {axis.dotted}; set it in one place",
                    )
                )
    per_value = _parse_per_value(subtable(data, "per_value", problems), axes, problems)
    slurm, found = validate(SLURM, subtable(data, "slurm", problems), "slurm")
    problems.extend(found)
    problems.extend(slurm_problems(slurm))
    slurm_raw = dict(subtable(data, "slurm", []))

    base: JsonObject = {}
    base_path = values.get("session")
    if isinstance(base_path, Path):
        try:
            base = tomllib.loads(read_regular(base_path).decode("utf-8"))
        except RecursionError:
            problems.append(Problem("session", f"{base_path}: {TOO_DEEP}"))
        except FileNotFoundError:
            problems.append(Problem("session", f"{base_path}: no such file"))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("session", f"{base_path}: cannot read: {exc}"))
        except tomllib.TOMLDecodeError as exc:
            problems.append(Problem("session", f"{base_path}: invalid TOML: {exc}"))
    if problems:
        raise CampaignError([f"{path}: {problem}" for problem in problems])
    assert isinstance(base_path, Path)
    return Campaign(
        name=values["name"],
        description=values["description"],
        path=path,
        base_path=base_path,
        base=base,
        axes=tuple(axes),
        overrides=tuple(overrides),
        per_value=per_value,
        repetitions=values["repetitions"],
        ingest=values["ingest"],
        slurm={k: slurm_raw[k] for k in slurm_raw if k in slurm},
        source=dict(data),
    )


#: Top-level keys only a campaign has: ``session`` names its base session, ``[axes]`` what it
#: varies.  Neither is a session key, so a file with one of them is read as a campaign.
MARKERS = ("session", "axes")


def is_campaign_file(path: str | Path) -> bool:
    """Whether ``path`` holds a campaign rather than a session (``esdash session check``).

    A file that cannot be read or parsed is no campaign: the session loader reports why,
    as it does for any session file.
    """
    try:
        data = tomllib.loads(read_regular(Path(path)).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return False
    return any(key in data for key in MARKERS)


def load_campaign(path: str | Path, plugins: PluginSet | None = None) -> Campaign:
    """Read and validate a campaign file; raise :class:`CampaignError` on any problem."""
    path = Path(path)
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        raise CampaignError([f"{path}: no such file"]) from None
    except OSError as exc:
        raise CampaignError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise CampaignError([f"{path}: line {line}: not UTF-8 text; save as UTF-8"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError([f"{path}: invalid TOML: {exc}"]) from None
    except RecursionError:
        raise CampaignError([f"{path}: {TOO_DEEP}"]) from None
    return parse_campaign(data, path, plugins)
