"""What the ``rally`` track reads a Rally track into, and the vocabulary its parts share.

The data classes (:class:`DocumentSet`, :class:`RallyTask`, :class:`TrackPy` with
:func:`scan_track_py`, :class:`LoadedTrack`) and small helpers (:func:`_describe`,
:func:`_suggest`, :func:`rally_data_dir`, ...) used by the reader, the schedule mapping, the
loader and the corpus code alike.  It imports no sibling but
:mod:`esdash_plugins.tracks.rally.template` and :mod:`esdash_plugins.tracks.rally.dialect` (and
:mod:`esdash_plugins.tracks.rally.requests` for types only), so every other module of the
package can import it.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import template as tpl

if TYPE_CHECKING:
    from .requests import OneOff
from esdash.plugin_api import (
    JsonMapping,
    JsonObject,
    JsonValue,
    PlannedTask,
    Query,
    QueryStep,
)

from .dialect import dialect_of_file, track_python_file


@dataclass(frozen=True)
class DocumentSet:
    """One ``corpora[].documents[]`` entry of a Rally track."""

    corpus: str
    source_file: str
    documents: int
    target_index: str | None
    includes_action_and_meta_data: bool
    uncompressed_bytes: int | None = None
    base_url: str | None = None
    compressed_bytes: int | None = None
    #: In test mode, the track's own ``source-file`` (``source_file`` is then its ``-1k``
    #: file), with its sizes, for :meth:`RallyTrack.corpus` to take the first documents of.
    full: DocumentSet | None = None
    #: ``target_index`` names a data stream (``target-data-stream``), not an index.
    data_stream: bool = False


@dataclass(frozen=True)
class IndexSet:
    """Another index of a track beside the main one: its rendered body and the document
    sets the bulk tasks send to it (empty: created, never ingested)."""

    name: str
    body: JsonObject
    documents: tuple[DocumentSet, ...] = ()
    #: True: ``name`` is a data stream (``target-data-stream``), made by an index template.
    data_stream: bool = False


@dataclass
class RallyTask:
    """One task of a challenge's schedule, with its operation resolved."""

    name: str
    op_name: str
    op_type: str
    op: JsonMapping
    spec: JsonMapping
    where: str
    warmup_time: float | None = None
    time: float | None = None
    warmup_iterations: int | None = None
    iterations: int | None = None
    clients: int = 1
    throughput: float | None = None
    #: Rally's ``ramp-up-time-period``: the task's clients start one after another over it.
    ramp_up: float | None = None
    block: int | None = None
    #: What test mode changed in the task's schedule (empty outside test mode).
    test_mode: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrackPy:
    """What a track's ``track.py`` registers, read without running it (a static scan; the
    file runs only when the session trusts it: :mod:`esdash_plugins.tracks.rally.trackcode`)."""

    path: Path
    exists: bool
    runners: frozenset[str] = frozenset()
    param_sources: frozenset[str] = frozenset()

    def holds(self, kind: str, name: str) -> str:
        """Where the runner or parameter source ``name`` lives, said in a clause."""
        registered = self.runners if kind == "runner" else self.param_sources
        if not self.exists:
            return (
                f"{self.path} would register it, but the track directory holds no {self.path.name}"
            )
        if name in registered:
            return f"registered in {self.path}"
        return f"{self.path} does not register it by name"


def scan_track_py(directory: Path) -> TrackPy:
    """The runners and parameter sources ``track.py`` registers with string literals."""
    path = track_python_file(directory)  # an OSB workload's workload.py
    if not path.is_file() or not tpl.inside(path, directory):
        return TrackPy(path, path.is_file())
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return TrackPy(path, True)
    found: dict[str, set[str]] = {"register_runner": set(), "register_param_source": set()}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in found
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found[node.func.attr].add(node.args[0].value)
    return TrackPy(
        path, True, frozenset(found["register_runner"]), frozenset(found["register_param_source"])
    )


NO_BULK = "(no bulk task; the corpus is ingested anyway)"


@dataclass(frozen=True)
class LoadedTrack:
    """What a Rally track directory means to esdash, for one set of options."""

    name: str
    directory: Path
    track_file: Path
    challenge: str
    challenges: tuple[str, ...]
    index: str
    indices: tuple[str, ...]
    index_body: JsonObject
    documents: tuple[DocumentSet, ...]
    steps: tuple[QueryStep, ...]
    ingest: str | None
    by_esdash: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    params: JsonMapping = field(default_factory=dict)
    #: Every task of the challenge, in schedule order, as esdash maps it (no distribution).
    tasks: tuple[PlannedTask, ...] = ()
    #: The query each task that became (part of) a query step sends, by task name.
    task_queries: Mapping[str, Query] = field(default_factory=dict)
    #: Why esdash cannot run this track at all (only loaded with ``plan=True``), else None.
    blocker: str | None = None
    #: The track's other indices, in the order the bulk tasks send to them.
    more: tuple[IndexSet, ...] = ()
    #: Every bulk task esdash runs, in schedule order (``ingest`` is the first).
    bulks: tuple[str, ...] = ()
    #: The track's data streams (``data-streams[].name``); ``index`` may be one of them.
    data_streams: tuple[str, ...] = ()
    #: The requests of the administrative tasks, sent once by rank 0, in schedule order.
    one_offs: tuple[OneOff, ...] = ()
    #: The document sets of each bulk task that indexes during a query step, by task name
    #: (``QueryStep.indexing``); they are not part of any index's ingest.
    step_documents: Mapping[str, tuple[DocumentSet, ...]] = field(default_factory=dict)

    def summary(self) -> str:
        """A readable account of what runs, what esdash does itself and what does not run."""
        dialect = dialect_of_file(self.track_file)  # an OSB workload in its own words
        lines = [
            f"{dialect.tool} {dialect.kind} {self.name!r} ({self.track_file}), "
            f"{dialect.procedure} {self.challenge!r}, index {self.index!r}:",
            f"  ingest: {', '.join(self.bulks) or self.ingest or NO_BULK}",
            f"  query steps: {', '.join(s.name for s in self.steps) or 'none'}",
        ]
        if self.more:
            lines.insert(1, f"  other indices: {', '.join(i.name for i in self.more)}")
        for title, items in (
            ("done by esdash itself", self.by_esdash),
            ("NOT SUPPORTED, not run", self.unsupported),
            ("notes", self.notes),
        ):
            if items:
                lines.append(f"  {title}:")
                lines += [f"    - {item}" for item in items]
        return "\n".join(lines)


def _describe(value: JsonValue) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kinds: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
    kinds.update({list: "array", dict: "object", type(None): "null"})
    return f"{text} ({kinds.get(type(value), type(value).__name__)})"


def _suggest(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _is_number(value: JsonValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _needs_scripting(body: JsonValue) -> bool:
    """True when a query body contains a script (``script``, ``script_score``, ...)."""
    if isinstance(body, Mapping):
        return any("script" in str(k) or _needs_scripting(v) for k, v in body.items())
    if isinstance(body, list):
        return any(_needs_scripting(v) for v in body)
    return False


def _index_matches(target: str, index: str) -> bool:
    """Whether a search target (``a,b``, ``logs-*``, ``_all``) includes ``index``."""
    for part in target.split(","):
        part = part.strip()
        if part in ("_all", "*") or fnmatch.fnmatchcase(index, part):
            return True
    return False


def rally_data_dir() -> Path:
    """Rally's default ``local.dataset.cache``: ``$RALLY_HOME/.rally/benchmarks/data``."""
    home = Path(os.environ.get("RALLY_HOME") or Path.home())
    return home / ".rally" / "benchmarks" / "data"
