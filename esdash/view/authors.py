"""Reading the reference implementation's result files, to put their numbers beside ours.

Two formats (``reference-impl.md`` §2b and §2c):

* **query results** (``queryer.py``'s JSON): a list of steps, each ``{"search_results":
  [{"query": {"body": ...}, "responses": [[rank 0's responses], [rank 1's], ...]}],
  "warmup_time_secs", "execution_time_secs", "sleep_between_requests_secs"}``; a response is
  ``{"latency": seconds, "docs": n}`` or ``{"error_code": status}``;
* **ingest times** (``results_<epoch>.txt``): each rank's list of bulk durations as Python
  list reprs of ``"H:MM:SS.ff"`` strings, glued together (``['0:00:00.49', ...]['0:00:00.51',
  ...]``) or one list per line.

Both become a ``results.json``-shaped document (:class:`esdash.rundir.records.Results`), so
reports and comparisons treat them like runs.  The statistics follow esdash's definitions,
applied to what the authors stored (their files hold every latency, so these are exact):

* throughput = successful requests / ``execution_time_secs`` (the authors had no timestamps,
  so there is no per-interval spread: ``intervals.n`` is 0);
* latency = the authors' measured time (send to response, which is Rally's *service time*);
  it fills both ``latency`` and ``service_time``;
* errors: ``http_<status>`` per ``error_code`` (``-1`` becomes ``other``);
* ingest: duration = the slowest rank's summed bulk time (the report's "wall clock"); the
  files record no document count, so docs/s appears only when ``docs=N`` is given.

Nothing about the cluster is in their files (size, workers, setup): pass it as metadata,
``FILE#nodes=3,workers_per_node=1,setup=none,interconnect=ethernet,docs=165346692``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

from esdash.errors import BadInput
from esdash.rundir import files, hdr
from esdash.rundir.records import JsonMapping, JsonObject, JsonValue, Results
from esdash.stats import latency_stats, spread, summarize
from esdash.stats.merge import SeriesData

SCHEMA = "esdash.results/1"
_LIST = re.compile(r"\[[^\[\]]*\]")
_TIME = re.compile(r"^(\d+):(\d{1,2}):(\d{1,2}(?:\.\d*)?)$")

#: The longest time the authors' files may give (a request, a step, a bulk): a year.  Longer
#: is damage, and would overflow the statistics (a latency of 1e308 s has no histogram bin).
MAX_SECONDS = 365 * 86400.0
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)]
#: Documents a response may return: within what a float counts exactly.
Docs = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
#: An HTTP status, or -1 for "no answer" (their ``Failure`` docstring's timeout).
ErrorCode = Annotated[int, msgspec.Meta(ge=-1, le=999)]


class AuthorsResponse(msgspec.Struct):
    """One request: ``{"latency": s, "docs": n}`` (a success) or ``{"error_code": status}``."""

    latency: Seconds | None = None
    docs: Docs | None = None
    error_code: ErrorCode | None = None

    def __post_init__(self) -> None:
        if (self.latency is None) == (self.error_code is None):
            raise ValueError("expected either latency (a success) or error_code (a failure)")


class AuthorsResult(msgspec.Struct):
    """One query of a step: the ``search_queries`` item and every rank's responses."""

    query: JsonObject = {}
    responses: list[list[AuthorsResponse]] = []


class AuthorsStep(msgspec.Struct):
    """One step of ``queryer.py``'s output (reference-impl.md §2b)."""

    search_results: list[AuthorsResult]
    warmup_time_secs: Seconds | None = None
    execution_time_secs: Seconds | None = None
    sleep_between_requests_secs: Seconds | None = None
    name: str | None = None


def sniff(path: Path) -> str | None:
    """``"queries"``, ``"ingest"`` or None: which of the authors' formats ``path`` holds."""
    try:
        head = path.read_bytes()[:4096].decode("utf-8", "replace").lstrip()
    except OSError:
        return None
    if head.startswith("[") and '"search_results"' in head:
        return "queries"
    if head.startswith("[") and re.match(r"^\[\s*'\d+:\d", head):
        return "ingest"
    return None


def _op(
    latencies: list[float], docs: int, errors: Mapping[str, int], seconds: float | None
) -> JsonObject:
    """A results.json ``<op>`` from exact per-request values (latencies in seconds)."""
    series = SeriesData()
    counts: dict[int, int] = {}
    for value in latencies:
        index = hdr.index_of(min(max(round(value * 1e6), hdr.LOWEST_US), hdr.HIGHEST_US))
        counts[index] = counts.get(index, 0) + 1
        logged = math.log(max(value, 1e-6))
        series.ln_sum += logged
        series.ln_sq_sum += logged * logged
    series.counts = hdr.from_mapping(counts)
    series.count = len(latencies)
    series.sum = math.fsum(latencies)
    series.min = min(latencies, default=None)
    series.max = max(latencies, default=None)
    ok = len(latencies)
    failed = sum(errors.values())
    stats = files.to_builtins(latency_stats(summarize(series), scale=1000.0, digits=4))
    encoded = hdr.encode(series.counts)
    rate = None if not seconds else round(ok / seconds, 3)
    return {
        "requests": ok + failed,
        "ok": ok,
        "failed": failed,
        "errors": dict(sorted(errors.items())),
        "error_rate": round(failed / (ok + failed), 6) if ok + failed else None,
        "docs": docs,
        "bytes": 0,
        "rejected_docs": {},
        "throughput": {
            "requests_per_s": rate,
            "docs_per_s": None if not seconds else round(docs / seconds, 3),
            "intervals": spread([]).to_dict(),
            "docs_intervals": spread([]).to_dict(),
        },
        "latency": stats,
        "service_time": dict(stats),
        "error_time_mean": None,
        "per_rank": {},
        "per_node": {},
        "last_errors": {},
        "histograms": {"latency": encoded, "service_time": encoded},
    }


def _query_name(query: JsonMapping, taken: set[str], index: int) -> str:
    given = query.get("name")
    name = given if isinstance(given, str) else f"q{index}"
    while name in taken:
        name += "'"
    taken.add(name)
    return name


def load_queries(path: Path, label: str) -> Results:
    """The authors' query result JSON as a results document (see the module docstring).

    The file is decoded into :class:`AuthorsStep` records: any damage is one
    :class:`~esdash.rundir.files.RunFileError` naming the file and the JSON path.
    """
    steps = files.read(path, list[AuthorsStep])
    out_steps: list[JsonValue] = []
    ranks = 0
    for k, step in enumerate(steps):
        seconds = step.execution_time_secs or None
        queries: JsonObject = {}
        taken: set[str] = set()
        for j, result in enumerate(step.search_results):
            ranks = max(ranks, len(result.responses))
            latencies: list[float] = []
            docs = 0
            errors: dict[str, int] = {}
            for response in (r for rank in result.responses for r in rank):
                if response.error_code is not None:
                    code = response.error_code
                    key = f"http_{code}" if code > 0 else "other"
                    errors[key] = errors.get(key, 0) + 1
                elif response.latency is not None:
                    latencies.append(response.latency)
                    docs += response.docs or 0
            op = _op(latencies, docs, errors, seconds)
            op["body"] = result.query.get("body")
            queries[_query_name(result.query, taken, j)] = op
        out_steps.append(
            {
                "index": k,
                "name": step.name if step.name is not None else f"step{k}",
                "planned": {
                    "queries": list(queries),
                    "warmup": step.warmup_time_secs,
                    "duration": step.execution_time_secs,
                    "target_throughput": None,
                    "think_time": step.sleep_between_requests_secs,
                },
                "status": "measured",
                "duration_s": seconds,
                "warmup": {"requests": None, "errors": None},
                "queries": queries,
            }
        )
    return _imported(path, "authors-queries", label, ranks, None, out_steps)


def _seconds(text: object) -> float:
    """``'H:MM:SS.ff'`` as seconds; ValueError for anything else (or longer than a year)."""
    match = _TIME.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(text)
    hours, minutes, seconds = match.groups()
    if len(hours) > 6 or int(hours) * 3600.0 > MAX_SECONDS:
        raise ValueError(text)
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def load_ingest(path: Path, label: str, docs: int | None = None) -> Results:
    """The authors' ingest time file as a results document with only ``ingest``."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    ranks = []
    for number, chunk in enumerate(_LIST.findall(text)):
        try:
            ranks.append([_seconds(item) for item in ast.literal_eval(chunk)])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise BadInput(
                f"{path}: list {number + 1} is not a list of 'H:MM:SS.ff' bulk times"
            ) from None
    if not ranks:
        raise BadInput(f"{path}: no bulk time lists found (their §2c ingest format)")
    duration = max(sum(rank) for rank in ranks)
    op = _op([t for rank in ranks for t in rank], docs or 0, {}, duration)
    if docs is None:
        op["throughput"]["docs_per_s"] = None
    ingest: JsonObject = {
        "duration_s": round(duration, 3),
        "docs": docs,
        "docs_per_s": None if docs is None or not duration else round(docs / duration, 3),
        "rejected_docs": {},
        "ops": {"bulk": op},
        "cpu_time_s": round(sum(sum(rank) for rank in ranks), 3),
    }
    return _imported(path, "authors-ingest", label, len(ranks), ingest, [])


def _imported(
    path: Path, kind: str, label: str, ranks: int, ingest: JsonObject | None, steps: list[JsonValue]
) -> Results:
    """A results document of one of the authors' files: what ``esdash run`` would have
    written, with no times of its own (their files have none) and where it came from."""
    document: JsonObject = {
        "schema": SCHEMA,
        "run_id": label,
        "started": None,
        "ended": None,
        "status": "ok",
        "reason": None,
        "ranks": ranks,
        "ingest": ingest,
        "steps": steps,
        "imported_from": {"format": kind, "path": str(path)},
    }
    return files.convert(document, Results, path)
