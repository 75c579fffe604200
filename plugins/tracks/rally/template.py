"""Rendering Rally track files (``track.json``, index bodies) the way Rally renders them.

Rally track files are Jinja2 templates that render to JSON.  This module reproduces what the
published tracks rely on, so that they render here exactly as under ``esrally``:

* ``{% import "rally.helpers" as rally with context %}`` with the macros ``rally.collect(parts=
  "operations/*.json")`` (the matching files, in name order, joined by commas) and
  ``rally.exists_set_param(...)``; OpenSearch Benchmark's ``benchmark.helpers`` and
  ``benchmark.collect`` are the same macros under its names (see ``dialect``);
* ``rally.collect`` calls are first replaced *textually*, recursively and relative to the file
  that contains them, as Rally does.  That is what lets ``challenges/default.json`` collect
  ``common/schedule.json`` from its own directory; the macro remains for unusual spellings;
* track parameters as template variables, so ``{{ bulk_size | default(5000) }}`` works, and
  Rally's own variables and filters: ``build_flavor`` (``"default"``), ``serverless_operator``
  (false), ``now`` (seconds since the epoch), ``glob``, ``days_ago``, ``get_start_date``,
  ``get_end_date``.

Track files come from anywhere, so templates run in Jinja2's sandbox (no access to Python
internals, includes confined to the track directory), with ``*``/``**`` guarded against
results that exhaust memory and a limit on the size and time of the output.

Every failure becomes :class:`esdash.errors.BadInput` naming the file and line it comes from:
the assembled source remembers, for each of its lines, which file and line it was taken from.
"""

from __future__ import annotations

import glob as globlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.sandbox
from jinja2.exceptions import SecurityError

from esdash.plugin_api import TOO_DEEP, BadInput, JsonMapping, JsonValue

from .dialect import HELPER_TEMPLATES

#: ``{{ rally.collect(parts="...") }}`` (OSB: ``benchmark.collect``): replaced by the files'
#: text before Jinja2 runs.  Groups: the macro's namespace, the quote, the pattern.
COLLECT = re.compile(
    r"\{\{-?\s*(rally|benchmark)\.collect\(\s*parts\s*=\s*([\"'])(.*?)\2\s*\)\s*-?\}\}"
)
#: Nesting depth of ``rally.collect`` beyond which the track is taken to include itself.
MAX_COLLECT_DEPTH = 16
#: Upper bounds on rendering; real tracks render in milliseconds to a few hundred KiB.
MAX_RENDERED_CHARS = 64 * 1024 * 1024
MAX_RENDER_SECONDS = 30.0
MAX_SEQUENCE = 10_000_000

#: The helper macros Rally tracks import as ``rally``.  ``collect`` is only reached for
#: spellings the textual pass does not recognise (e.g. a variable as the pattern).
HELPERS = """\
{%- macro collect(parts) -%}
{%- for part in glob(parts) -%}
{{ "," if not loop.first }}
{% include part %}
{% endfor -%}
{%- endmacro -%}
{%- macro exists_set_param(setting_name, value, default_value=none, comma=true) -%}
{%- if value is defined or default_value is not none -%}
{{ " ," if comma }} "{{ setting_name }}": {{ (value | default(default_value)) | tojson }}
{%- endif -%}
{%- endmacro -%}
"""

#: What Rally's compression formats are undone with, for the "decompress it" hint.
DECOMPRESS = {
    ".bz2": "bunzip2 -k",
    ".gz": "gunzip -k",
    ".zst": "zstd -d",
    ".zip": "unzip",
    ".tar": "tar -xf",
    ".tgz": "tar -xzf",
    ".tar.gz": "tar -xzf",
    ".tar.bz2": "tar -xjf",
}


@dataclass
class Source:
    """Template text assembled from one or more files, with each line's origin.

    ``origins[i]`` is the (file, line) the ``i``-th line (0-based) of ``text`` came from;
    ``files`` lists every file read, so unused-parameter checks can look at all of them.
    """

    text: str
    origins: list[tuple[Path, int]]
    files: list[Path] = field(default_factory=list)

    def origin(self, line: int) -> tuple[Path, int]:
        """The file and line of 1-based ``line`` of the assembled text."""
        if not self.origins:
            return (self.files[0] if self.files else Path("?"), line)
        return self.origins[max(0, min(line, len(self.origins)) - 1)]

    def locate(self, needle: str, limit: int = 3, near: int | None = None) -> list[str]:
        """``file:line`` of the source lines whose text equals ``needle`` (stripped).

        With ``near`` (a 0-based line of the rendered text) the closest lines come first:
        rendering shifts lines, but rarely far.
        """
        needle = needle.strip()
        if len(needle) < 2:
            return []
        matches = [i for i, line in enumerate(self.text.split("\n")) if line.strip() == needle]
        if near is not None:
            matches.sort(key=lambda index: abs(index - near))
        found = []
        for index in matches[:limit]:
            path, number = self.origins[index]
            found.append(f"{path}:{number}")
        return found


def _read(path: Path, included_from: str = "") -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file{included_from}") from None
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{path}: not UTF-8 text (byte {exc.start}){included_from}; Rally track files "
            f"are UTF-8 JSON templates"
        ) from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read: {exc.strerror}{included_from}") from None


def assemble(
    path: Path,
    text: str | None = None,
    root: Path | None = None,
    shared: tuple[Path, ...] = (),
) -> Source:
    """``path``'s text with every ``rally.collect`` replaced by the files it names.

    ``root`` is the track directory: a collected file that resolves (after symlinks) outside
    it is refused, so a track cannot make esdash read, and send to a cluster, files that
    are not part of it.  ``shared`` names further directories a track may collect from:
    an OpenSearch Benchmark workload's ``../common_operations``.
    """
    chunks: list[tuple[str, Path, int]] = []
    files: list[Path] = []
    base = (root or path.parent).resolve()
    roots = (base, *(directory.resolve() for directory in shared))
    _assemble(path, _read(path) if text is None else text, chunks, files, [], roots)
    return _lines(chunks, files)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` resolves (after symlinks) to ``root`` or below it."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name
        return False


def _assemble(
    path: Path,
    text: str,
    chunks: list[tuple[str, Path, int]],
    files: list[Path],
    stack: list[Path],
    roots: tuple[Path, ...],
) -> None:
    files.append(path)
    stack = [*stack, path.resolve()]
    position, line = 0, 1
    for match in COLLECT.finditer(text):
        before = text[position : match.start()]
        chunks.append((before, path, line))
        line += before.count("\n")
        collect = f"{match.group(1)}.collect"
        where = f" ({collect} in {path}:{line})"
        pattern = match.group(3)
        matched = sorted(p for p in globlib.glob(str(path.parent / pattern)) if Path(p).is_file())
        outside = [p for p in matched if not _inside_any(Path(p), roots)]
        if outside or (
            not globlib.has_magic(pattern) and not _inside_any(path.parent / pattern, roots)
        ):
            reached = Path(outside[0]).resolve() if outside else path.parent / pattern
            shared = "".join(f" or {directory}" for directory in roots[1:])
            raise BadInput(
                f"{path}:{line}: {collect}(parts={pattern!r}) reaches {reached}, outside "
                f"the track directory {roots[0]}{shared}; a track may collect only its own files"
            )
        if not matched and not globlib.has_magic(pattern):
            raise BadInput(
                f"{path}:{line}: {collect}(parts={pattern!r}) names "
                f"{path.parent / pattern}, which does not exist; add the file or fix the name "
                f"(parts are relative to the directory of the file that collects them)"
            )
        for number, part in enumerate(map(Path, matched)):
            if len(stack) >= MAX_COLLECT_DEPTH or part.resolve() in stack:
                raise BadInput(
                    f"{path}:{line}: {collect}(parts={pattern!r}) includes {part}, which "
                    f"(directly or indirectly) collects itself; narrow the pattern"
                )
            if number:
                chunks.append((",\n", path, line))
            _assemble(part, _read(part, where), chunks, files, stack, roots)
        line += match.group(0).count("\n")
        position = match.end()
    chunks.append((text[position:], path, line))


def _inside_any(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(inside(path, root) for root in roots)


def _lines(chunks: Iterable[tuple[str, Path, int]], files: list[Path]) -> Source:
    """Join chunks and work out each output line's origin.

    A line is attributed to the first chunk that puts non-blank text on it, so the line where
    an included file starts (after the includer's indentation) points into the included file.
    """
    text_parts: list[str] = []
    origins: list[tuple[Path, int] | None] = [None]
    fallback: list[tuple[Path, int]] = []
    for chunk, path, first in chunks:
        pieces = chunk.split("\n")
        for offset, piece in enumerate(pieces):
            if offset:
                origins.append(None)
            if len(fallback) < len(origins):
                fallback.append((path, first + offset))
            if origins[-1] is None and piece.strip():
                origins[-1] = (path, first + offset)
        text_parts.append(chunk)
    resolved = [o if o is not None else fallback[i] for i, o in enumerate(origins)]
    return Source("".join(text_parts), resolved, files)


# ----------------------------------------------------------------------- the environment


def _to_datetime(value: object, date_format: str, tz: timezone) -> datetime:
    """Rally's date arguments: a datetime, a Unix timestamp or a string in ``date_format``."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz)
    if isinstance(value, str):
        parsed = datetime.strptime(value, date_format)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)
    raise TypeError(f"expected a date, a timestamp or a date string, got {value!r}")


def days_ago(start: object, end: object, date_format: str = "%d-%m-%Y") -> int:
    """Whole days from ``start`` to ``end`` (``'15-05-1998' | days_ago(now)``)."""
    utc = timezone.utc
    return (_to_datetime(end, date_format, utc) - _to_datetime(start, date_format, utc)).days


def get_start_date(value: object, date_format: str = "%Y-%m-%d") -> str:
    """``value`` formatted as a date (timestamps are taken as UTC)."""
    return _to_datetime(value, date_format, timezone.utc).strftime(date_format)


def get_end_date(value: object, duration_days: int = 1, date_format: str = "%Y-%m-%d") -> str:
    """``value`` plus ``duration_days`` days, formatted as a date."""
    start = _to_datetime(value, date_format, timezone.utc)
    return (start + timedelta(days=duration_days)).strftime(date_format)


class _TrackEnvironment(jinja2.sandbox.SandboxedEnvironment):
    """The sandbox, plus a guard on ``*`` and ``**``, whose results can exhaust memory."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        numbers = _is_number(left) and _is_number(right)
        if operator == "**" and numbers and abs(right) > 64 and abs(left) > 1:
            raise SecurityError(f"{left} ** {right} is too large")
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                repeat = isinstance(seq, str | list | tuple) and _is_number(times)
                if repeat and len(seq) * times > MAX_SEQUENCE:
                    raise SecurityError("repeating a sequence that often")
        return super().call_binop(context, operator, left, right)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def environment(
    track_dir: Path, params: JsonMapping, loaded: list[Path] | None = None
) -> jinja2.Environment:
    """A sandboxed environment for one track: Rally's helpers, globals, filters and params.

    User parameters are set first and Rally's internal names after them, so (as in Rally) a
    parameter cannot replace ``now`` or ``build_flavor``.  Files pulled in through Jinja2's
    own ``include`` are appended to ``loaded``.
    """
    base = track_dir.resolve()

    def relative_glob(pattern: str) -> list[str]:
        if not isinstance(pattern, str) or Path(pattern).is_absolute() or ".." in pattern:
            raise SecurityError(f"glob({pattern!r}) outside the track directory")
        found = sorted(globlib.glob(str(base / pattern)))
        return [str(Path(p).relative_to(base)) for p in found if Path(p).is_file()]

    loader = _RecordingLoader(str(base), loaded if loaded is not None else [])
    env = _TrackEnvironment(
        loader=jinja2.ChoiceLoader([_HelpersLoader(), loader]),
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.globals.update(params)
    env.globals.update(
        {
            "build_flavor": "default",
            "serverless_operator": False,
            "now": time.time(),
            "glob": relative_glob,
        }
    )
    env.filters.update(
        {"days_ago": days_ago, "get_start_date": get_start_date, "get_end_date": get_end_date}
    )
    return env


class _HelpersLoader(jinja2.BaseLoader):
    """Serves ``rally.helpers`` (OSB: ``benchmark.helpers``); first in line, so a track file
    cannot replace it.

    Its file name is ``<rally.helpers>`` so that errors inside the macros are not mistaken
    for lines of the track file (which Jinja2 calls ``<template>``).
    """

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        if template not in HELPER_TEMPLATES:
            raise jinja2.TemplateNotFound(template)
        return HELPERS, f"<{template}>", lambda: True


class Outside(Exception):
    """An ``{% include %}`` or ``{% import %}`` that resolves outside the track directory."""

    def __init__(self, name: str, resolved: Path) -> None:
        super().__init__(name)
        self.name = name
        self.resolved = resolved


class _RecordingLoader(jinja2.FileSystemLoader):
    """Jinja2's file loader, confined to the track directory, that records what it read.

    Jinja2 refuses ``..`` in a template name but follows symlinks; a file that resolves
    outside the track directory is refused here (:class:`Outside`).
    """

    def __init__(self, searchpath: str, loaded: list[Path]) -> None:
        super().__init__(searchpath)
        self.loaded = loaded

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        if filename:
            if not inside(Path(filename), Path(self.searchpath[0])):
                raise Outside(template, Path(filename).resolve())
            self.loaded.append(Path(filename))
        return source, filename, uptodate


# ------------------------------------------------------------------------- rendering


def render(source: Source, env: jinja2.Environment, what: str) -> str:
    """Render assembled ``source``; any failure is a BadInput naming its file and line."""
    main = source.files[0] if source.files else Path("?")
    base = env_dir(env)
    try:
        template = env.from_string(source.text)
    except jinja2.TemplateSyntaxError as exc:
        raise BadInput(_syntax_message(exc, source, what)) from None
    except (RecursionError, MemoryError):
        raise BadInput(f"{main}: {what}: the template is too deeply nested to parse") from None
    started = time.monotonic()
    size = 0
    parts: list[str] = []
    try:
        for part in template.generate():
            size += len(part)
            parts.append(part)
            if size > MAX_RENDERED_CHARS:
                raise BadInput(
                    f"{main}: {what}: renders to more than {MAX_RENDERED_CHARS // 2**20} MiB; "
                    f"a loop in the template probably runs away"
                )
            if time.monotonic() - started > MAX_RENDER_SECONDS:
                raise BadInput(
                    f"{main}: {what}: rendering takes longer than {MAX_RENDER_SECONDS:g} s; "
                    f"a loop in the template probably runs away"
                )
    except BadInput:
        raise
    except Outside as exc:
        where = _runtime_origin(exc, source, base) or str(main)
        raise BadInput(
            f"{where}: {what}: includes {exc.name!r}, which resolves to {exc.resolved}, outside "
            f"the track directory {base}; includes and imports cannot leave it"
        ) from None
    except jinja2.TemplateSyntaxError as exc:  # in a file pulled in by {% include %}
        raise BadInput(_syntax_message(exc, source, what)) from None
    except jinja2.TemplateNotFound as exc:
        where = _runtime_origin(exc, source, base) or str(main)
        raise BadInput(
            f"{where}: {what}: includes {exc.name!r}, which is not a file in the track "
            f"directory {base}; fix the name (includes cannot leave the track directory)"
        ) from None
    except RecursionError as exc:
        where = _runtime_origin(exc, source, base) or str(main)
        raise BadInput(
            f"{where}: {what}: recursion too deep (a macro or include that calls itself?)"
        ) from None
    except Exception as exc:  # a template can fail in any way; say where and what
        where = _runtime_origin(exc, source, base) or str(main)
        detail = str(exc) or type(exc).__name__
        kind = "not allowed in a track template" if _is_security(exc) else "fails"
        raise BadInput(f"{where}: {what} {kind}: {detail}") from None
    return "".join(parts)


def env_dir(env: jinja2.Environment) -> Path | None:
    """The track directory an environment loads includes from."""
    loader = env.loader
    if isinstance(loader, jinja2.ChoiceLoader):
        for sub in loader.loaders:
            if isinstance(sub, jinja2.FileSystemLoader):
                return Path(sub.searchpath[0])
    return None


def _is_security(exc: BaseException) -> bool:
    return isinstance(exc, SecurityError)


def _syntax_message(exc: jinja2.TemplateSyntaxError, source: Source, what: str) -> str:
    if exc.filename and exc.filename != "<template>" and exc.name not in HELPER_TEMPLATES:
        where = f"{exc.filename}:{exc.lineno}"
    else:
        path, line = source.origin(exc.lineno or 1)
        where = f"{path}:{line}"
    return f"{where}: {what}: Jinja2 template syntax error: {exc.message}"


def _runtime_origin(
    exc: BaseException | None, source: Source, base: Path | None = None
) -> str | None:
    """``file:line`` of the innermost template frame of ``exc``'s traceback."""
    import traceback

    tb = exc.__traceback__ if exc is not None else None
    best: str | None = None
    for frame in traceback.extract_tb(tb):
        if not frame.lineno:
            continue
        if frame.filename == "<template>":
            path, line = source.origin(frame.lineno)
            best = f"{path}:{line}"
        elif base is not None and Path(frame.filename).is_relative_to(base):
            best = f"{frame.filename}:{frame.lineno}"  # a file pulled in by {% include %}
    return best


def load_json(text: str, source: Source, what: str) -> JsonValue:
    """Parse rendered JSON; an error shows the rendered lines and where they probably are."""
    main = source.files[0] if source.files else Path("?")
    try:
        value: JsonValue = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.split("\n")
        index = exc.lineno - 1
        start, end = max(0, index - 2), min(len(lines), index + 2)
        context = []
        for number in range(start, end):
            marker = ">" if number == index else " "
            context.append(f"  {marker} {number + 1:5d} | {lines[number][:200]}")
        hints = []
        for number in (index, index - 1):
            if 0 <= number < len(lines):
                hints = source.locate(lines[number], near=number)
                if hints:
                    break
        if not hints and len(lines) == len(source.origins):  # rendering kept the lines
            path, number = source.origin(exc.lineno)
            hints = [f"{path}:{number}"]
        hint = f"; this text is at {', '.join(hints)}" if hints else ""
        raise BadInput(
            f"{main}: {what} is not valid JSON after rendering: {exc.msg} at rendered line "
            f"{exc.lineno}, column {exc.colno}{hint}\nrendered text:\n" + "\n".join(context)
        ) from None
    except RecursionError:
        raise BadInput(f"{main}: {what}: JSON nested too deeply") from None
    return value


def variables(texts: Iterable[str]) -> set[str]:
    """Names the templates read but do not define: the parameters the track understands.

    Parsed in a bare environment: Jinja2 does not count names that are globals of the
    environment, and in the rendering one every given parameter is a global.
    """
    env = jinja2.Environment()
    env.filters.update(
        {"days_ago": days_ago, "get_start_date": get_start_date, "get_end_date": get_end_date}
    )
    names: set[str] = set()
    for text in texts:
        try:
            names |= jinja2.meta.find_undeclared_variables(env.parse(text))
        except (jinja2.TemplateError, RecursionError):
            continue  # reported when the file is rendered
    return names


def parse_param(text: str) -> tuple[str, JsonValue]:
    """``key=value`` to a parameter, with the value typed the way ``--track-params`` does.

    JSON values stay JSON (``5``, ``2.5``, ``true``, ``null``, ``{"a": 1}``, ``"text"``);
    ``'text'`` is a string; ``True``/``False``/``None`` are accepted as Rally accepts them;
    anything else is a string.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise ValueError(text)
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return key, value[1:-1]
    try:
        return key, json.loads(value)
    except ValueError:
        pass
    except RecursionError:
        raise BadInput(f"track.track_params: the value of {key!r} is {TOO_DEEP}") from None
    lowered = value.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    if lowered == "none":
        return key, None
    return key, value


def decompress_hint(name: str) -> tuple[str, str] | None:
    """(uncompressed name, command) for a Rally archive name, or None if not an archive."""
    for suffix in sorted(DECOMPRESS, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)], DECOMPRESS[suffix]
    return None
