"""Query files in the authors' JSON step format, loaded as :class:`QueryStep` tuples.

The format is that of ``queryer.py`` (reference implementation, section 2a): strict JSON, a
top-level array of steps, each step an object with

``search_queries`` (required, non-empty)
    a list of ``{"body": {...}}`` objects; ``body`` is the ``_search`` request body.
    Several queries alternate within the step.
``warmup_time_secs``, ``execution_time_secs`` (optional)
    seconds of warm-up and of measurement; absent: the session's ``benchmark.warmup`` and
    ``benchmark.duration``.
``sleep_between_requests_secs`` (optional, default 0)
    the authors' think time: a pause after every response, kept as
    :attr:`QueryStep.think_time` (a closed loop with think time is not a target rate).

esdash also accepts ``"name"`` in a step and in a query (defaults ``step<k>`` and ``q<i>``,
counted from 0 like the authors' result files) and ``"index"`` in a query (default: the
track's index).  The authors' tool ignores unknown keys, so such a file still runs there;
esdash refuses unknown keys, with a did-you-mean, because a misspelt key would otherwise
silently fall back to a default.

Every problem is a :class:`BadInput` naming the file, the line, the JSON path of the value
(``[3].search_queries[1].body``) and the fix.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from pathlib import Path
from typing import NoReturn

from esdash.errors import BadInput
from esdash.plugin.options import suggest
from esdash.plugin.values import Query, QueryStep
from esdash.rundir.records import JsonMapping, JsonObject, JsonValue

STEP_KEYS = (
    "name",
    "search_queries",
    "warmup_time_secs",
    "execution_time_secs",
    "sleep_between_requests_secs",
)
QUERY_KEYS = ("name", "body", "index")
#: Longest accepted step duration, warm-up or think time (seconds): one week.
MAX_SECONDS = 7 * 86400.0
#: Largest accepted query file.
MAX_FILE_BYTES = 64 * 1024 * 1024

_WS = re.compile(r"[ \t\n\r]*")
#: Step and query names, used with ``fullmatch`` (``$`` also matches before a final newline).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*")

#: Where a value sits in a JSON text: object keys and array indices from the top.
JsonPath = tuple[str | int, ...]


class _Located:
    """Line numbers of the values of a JSON text, by JSON path, and its first strictness issue.

    Only used on text that :func:`json.loads` accepted, to put line numbers into messages.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.offsets: dict[JsonPath, int] = {}
        #: (offset, message) of the first duplicate key or NaN/Infinity.
        self.problem: tuple[int, str] | None = None
        with contextlib.suppress(ValueError, IndexError, RecursionError):
            self._value(0, ())

    def line_at(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def line(self, path: JsonPath) -> int | None:
        while path not in self.offsets and path:
            path = path[:-1]
        offset = self.offsets.get(path)
        return None if offset is None else self.line_at(offset)

    def _skip(self, at: int) -> int:
        whitespace = _WS.match(self.text, at)
        assert whitespace is not None  # the pattern matches the empty string
        return whitespace.end()

    def _flag(self, at: int, message: str) -> None:
        if self.problem is None:
            self.problem = (at, message)

    def _value(self, at: int, path: JsonPath) -> int:
        text = self.text
        at = self._skip(at)
        self.offsets[path] = at
        if text.startswith("[", at):
            at = self._skip(at + 1)
            if text.startswith("]", at):
                return at + 1
            index = 0
            while True:
                at = self._skip(self._value(at, (*path, index)))
                if not text.startswith(",", at):
                    return at + 1
                at, index = at + 1, index + 1
        if text.startswith("{", at):
            at = self._skip(at + 1)
            if text.startswith("}", at):
                return at + 1
            keys: set[str] = set()
            while True:
                start = at
                # the key string at ``at`` (what json.decoder.scanstring reads after its quote)
                key, at = _DECODER.raw_decode(text, at)
                if key in keys:
                    self._flag(
                        start,
                        f"duplicate key {json.dumps(key)} in one object (JSON keeps only the "
                        "last); remove one of them",
                    )
                keys.add(key)
                at = self._skip(at) + 1  # the colon
                at = self._skip(self._value(at, (*path, key)))
                if not text.startswith(",", at):
                    return at + 1
                at = self._skip(at + 1)
        for constant in ("NaN", "Infinity", "-Infinity"):
            if text.startswith(constant, at):
                self._flag(at, f"{constant} is not JSON; use a number or null")
        return _DECODER.raw_decode(text, at)[1]


_DECODER = json.JSONDecoder()


def _where(path: JsonPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".") or "top level"


def _quoted(text: str) -> str:
    """``text`` as a JSON string that keeps letters of any script but escapes every character
    that is not printable (U+2028, U+0085, bidi controls): the message stays one line."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in quoted)


def _kind(value: JsonValue) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return f"the string {_quoted(shown)}"
    return "an array" if isinstance(value, list) else "an object"


class _Reader:
    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.located = _Located(text)

    def error(self, path: JsonPath, problem: str, fix: str) -> BadInput:
        line = self.located.line(path)
        where = f", line {line}" if line is not None else ""
        return BadInput(f"query file {self.source}{where}, {_where(path)}: {problem}; {fix}")

    def entry(
        self, value: JsonValue, path: JsonPath, what: str, allowed: tuple[str, ...], fix: str
    ) -> JsonMapping:
        """``value`` as a ``what`` (step, query): an object of the ``allowed`` keys only;
        ``fix`` is the example shown when it is no object at all."""
        if not isinstance(value, dict):
            raise self.error(path, f"expected a {what} object, found {_kind(value)}", fix)
        self.keys(value, allowed, path)
        return value

    def keys(self, obj: JsonMapping, allowed: tuple[str, ...], path: JsonPath) -> None:
        for key in obj:
            if key not in allowed:
                raise self.error(
                    (*path, key),
                    f"unknown key {json.dumps(key)}{suggest(key, allowed)}",
                    f"allowed keys are {', '.join(allowed)}",
                )

    def seconds(self, step: JsonMapping, key: str, path: JsonPath, positive: bool) -> float | None:
        if key not in step:
            return None
        value = step[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
            or (positive and value == 0)
            or value > MAX_SECONDS
        ):
            lowest = "greater than 0" if positive else "0 or more"
            raise self.error(
                (*path, key),
                f"expected a number of seconds, {lowest}, at most {MAX_SECONDS:.0f}; "
                f"found {_kind(value)}",
                f'write e.g. "{key}": {60 if "warmup" in key else 300 if positive else 0.5}',
            )
        return float(value)

    def name(self, obj: JsonMapping, default: str, path: JsonPath) -> str:
        if "name" not in obj:
            return default
        value = obj["name"]
        if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > 100:
            raise self.error(
                (*path, "name"),
                f"expected a name of letters, digits and _ . : + - (at most 100), "
                f"found {_kind(value)}",
                'write e.g. "name": "match_all_1000"',
            )
        return value

    def unique_name(
        self,
        obj: JsonMapping,
        default: str,
        path: JsonPath,
        taken: dict[str, int],
        position: int,
        what: str,
    ) -> str:
        """:meth:`name`, refused when ``taken`` (the names so far, with their positions) has
        it, else recorded there at ``position``.  ``what`` is "step", or "query": queries are
        named within their step."""
        name = self.name(obj, default, path)
        if name in taken:
            within, every = (" of this step", " of a step") if what == "query" else ("", "")
            raise self.error(
                (*path, "name") if "name" in obj else path,
                f"{what} name {name!r} is already used by {what} {taken[name]}{within}",
                f"give every {what}{every} its own name",
            )
        taken[name] = position
        return name


def parse_steps(text: str, source: str = "<query file>") -> tuple[QueryStep, ...]:
    """Parse the text of a query file; ``source`` names it in error messages."""
    if not text.strip():
        raise BadInput(
            f"query file {source}, line 1: the file is empty; write a JSON array of steps, "
            'e.g. [{"search_queries": [{"body": {"query": {"match_all": {}}}}]}]'
        )
    try:
        data: JsonValue = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.msg.startswith(("Expecting property name", "Expecting value")):
            hint = " (JSON allows no comments, trailing commas or single quotes)"
        raise BadInput(
            f"query file {source}, line {exc.lineno}, column {exc.colno}: invalid JSON: "
            f"{exc.msg}{hint}; fix the file, e.g. check it with python -m json.tool"
        ) from None
    except _Strict as exc:
        located = _Located(text)
        if located.problem is None:
            raise BadInput(f"query file {source}: {exc}") from None
        offset, message = located.problem
        raise BadInput(f"query file {source}, line {located.line_at(offset)}: {message}") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        found = re.search(r"\d{4000,}", text)
        line = text.count("\n", 0, found.start() if found else 0) + 1
        raise BadInput(
            f"query file {source}, line {line}: invalid JSON: {exc}; shorten the number"
        ) from None
    except RecursionError:
        line = text.count("\n", 0, _too_deep(text)) + 1
        raise BadInput(
            f"query file {source}, line {line}: JSON nests too deeply; a query file holds "
            "search bodies, flatten this one"
        ) from None
    reader = _Reader(source, text)
    if not isinstance(data, list):
        fix = "write a JSON array of steps: [ {...}, {...} ]"
        if isinstance(data, dict) and "search_queries" in data:
            fix = "this looks like one step: wrap it in [ ]"
        raise reader.error((), f"expected an array of steps, found {_kind(data)}", fix)
    if not data:
        raise reader.error(
            (),
            "the file has no steps",
            'add one, e.g. [{"search_queries": [{"body": {"query": {"match_all": {}}}}]}]',
        )
    steps: list[QueryStep] = []
    seen: dict[str, int] = {}
    for k, step in enumerate(data):
        path: JsonPath = (k,)
        step = reader.entry(
            step,
            path,
            "step",
            STEP_KEYS,
            'write e.g. {"search_queries": [{"body": {"query": {"match_all": {}}}}]}',
        )
        name = reader.unique_name(step, f"step{k}", path, seen, k, "step")
        queries = _queries(reader, step, path)
        warmup = reader.seconds(step, "warmup_time_secs", path, positive=False)
        duration = reader.seconds(step, "execution_time_secs", path, positive=True)
        think = reader.seconds(step, "sleep_between_requests_secs", path, positive=False)
        steps.append(QueryStep(name, queries, warmup, duration, think_time=think or 0.0))
    return tuple(steps)


def _queries(reader: _Reader, step: JsonMapping, path: JsonPath) -> tuple[Query, ...]:
    example = '"search_queries": [{"body": {"query": {"match_all": {}}}}]'
    if "search_queries" not in step:
        raise reader.error(path, 'missing key "search_queries"', f"add it: {example}")
    items = step["search_queries"]
    qpath = (*path, "search_queries")
    if not isinstance(items, list) or not items:
        found = "an empty array" if isinstance(items, list) else _kind(items)
        raise reader.error(
            qpath, f"expected a non-empty array of queries, found {found}", f"write {example}"
        )
    queries: list[Query] = []
    names: dict[str, int] = {}
    for i, item in enumerate(items):
        ipath = (*qpath, i)
        item = reader.entry(
            item,
            ipath,
            "query",
            QUERY_KEYS,
            'write {"body": {...}} with the _search request body inside',
        )
        if "body" not in item:
            raise reader.error(
                ipath,
                'missing key "body"',
                'each query is {"body": {...}} with the _search request body inside',
            )
        body = item["body"]
        if not isinstance(body, dict):
            raise reader.error(
                (*ipath, "body"),
                f"expected the _search request body as an object, found {_kind(body)}",
                'write e.g. "body": {"query": {"match_all": {}}, "size": 10}',
            )
        name = reader.unique_name(item, f"q{i}", ipath, names, i, "query")
        index = item.get("index")
        if index is not None and (not isinstance(index, str) or not index.strip()):
            raise reader.error(
                (*ipath, "index"),
                f"expected an index name, found {_kind(index)}",
                'write e.g. "index": "nyc_taxis", or leave it out for the track\'s index',
            )
        queries.append(Query(name, body, index=index))
    return tuple(queries)


def _too_deep(text: str, limit: int = 500) -> int:
    """Offset where brackets (outside strings) first nest deeper than ``limit``."""
    depth, in_string, escaped = 0, False, False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return offset
        elif char in "]}":
            depth -= 1
    return 0


class _Strict(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    obj: JsonObject = {}
    for key, value in pairs:
        if key in obj:
            raise _Strict(
                f"duplicate key {json.dumps(key)} in one object (JSON keeps only the last); "
                "remove one of them"
            )
        obj[key] = value
    return obj


def _no_constant(name: str) -> NoReturn:
    raise _Strict(f"{name} is not JSON; use a number or null")


def load_steps(path: str | Path) -> tuple[QueryStep, ...]:
    """Read and validate a query file; raise :class:`BadInput` naming file and line."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BadInput(
                f"query file {path}: {size} bytes, more than {MAX_FILE_BYTES // 2**20} MB; "
                "a query file holds search bodies, not data"
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"query file {path}: no such file; check benchmark.queries") from None
    except IsADirectoryError:
        raise BadInput(f"query file {path}: is a directory; name the JSON file") from None
    except OSError as exc:
        raise BadInput(f"query file {path}: cannot read ({exc.strerror})") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BadInput(
            f"query file {path}, line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); "
            "save the file as UTF-8"
        ) from None
    return parse_steps(text, str(path))
