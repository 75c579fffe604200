"""``esdash export-rally TRACK_OR_SESSION OUT_DIR``: an esdash track as a Rally track directory.

Either a track name with ``--option key=value`` (values are TOML, as in a session file:
``--option documents=5000``, ``--option 'track_params=["a=1"]'``; a bare word is a string),
or a session file, whose ``[track]`` table and ``[benchmark]`` values (warm-up, duration,
bulk size, bench ranks as Rally clients, target throughput) are used; ``--option`` then
overrides single track options.  The conversion itself is :mod:`esdash.report.rally_export`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from esdash.cli._command import Subcommands, add_command, doc_body
from esdash.cli._trust import add_flag as add_trust_flag
from esdash.cli._trust import trusted
from esdash.errors import BadInput

if TYPE_CHECKING:
    from esdash.plugin.api import Track
    from esdash.plugin.values import OptionValue, OptionValues
    from esdash.rundir.records import JsonValue
    from esdash.session import Session

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def register(subparsers: Subcommands) -> None:
    summary = "write a track (or a session's track) as a Rally track directory"
    parser = add_command(subparsers, "export-rally", run, summary, doc_body(__doc__))
    parser.add_argument("source", metavar="TRACK_OR_SESSION", help="track name or session file")
    parser.add_argument("out_dir", metavar="OUT_DIR", type=Path, help="directory to write")
    parser.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a track option (TOML value); repeatable",
    )
    parser.add_argument(
        "--copy", action="store_true", help="copy the corpus instead of symlinking it"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace track.json, index.json, documents.json"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="where generated corpora are kept (default: esdash's cache, as `esdash run`)",
    )
    add_trust_flag(parser)


def parse_option(text: str) -> tuple[str, JsonValue]:
    """``key=value`` with a TOML value; a value that is not TOML is taken as a string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise BadInput(f"--option {text!r}: expected KEY=VALUE, e.g. --option documents=5000")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def _is_session(source: str) -> bool:
    return source.endswith(".toml") or Path(source).is_file()


def resolve(
    source: str, raw_options: list[str], trust_track_code: bool = False
) -> tuple[Track, OptionValues, Session | None]:
    """The track, its validated options and the session (None for a bare track name);
    ``trust_track_code`` (``--trust-track-code``) sets a Rally track's ``trust_code``."""
    from esdash.plugin.manager import get_plugins
    from esdash.plugin.options import validate
    from esdash.session import TRUST_TRACK_CODE

    table = dict(parse_option(text) for text in raw_options)
    session: Session | None = None
    options: dict[str, OptionValue]
    if _is_session(source):
        from esdash.session import load_session

        session = load_session(source, trust_track_code=trust_track_code)
        track = get_plugins().track(session.track.name)
        options = dict(session.track.options)
    else:
        track = get_plugins().track(source)
        options = {}
    values, problems = validate(track.options, table, "track", Path.cwd())
    if session is not None:  # the session already supplies what --option leaves out
        given = {f"track.{key}" for key in table}
        problems = [p for p in problems if p.key in given]
        values = {key: value for key, value in values.items() if key in table}
    if problems:
        raise BadInput("invalid track options\n  " + "\n  ".join(f"--option {p}" for p in problems))
    options.update(values)
    if trust_track_code and any(o.name == TRUST_TRACK_CODE for o in track.options):
        options[TRUST_TRACK_CODE] = True
    return track, options, session


def run(args: argparse.Namespace) -> int:
    from esdash.paths import cache_dir
    from esdash.progress import CHECKS_GRACE, for_stderr
    from esdash.report.rally_export import ExportSettings, export_track

    lines = for_stderr()
    with lines.phase(f"loading {args.source}", announce_after=CHECKS_GRACE):
        track, options, session = resolve(args.source, args.option, trusted(args))
    if session is not None:
        settings = ExportSettings.from_session(session, copy_corpus=args.copy)
    else:
        settings = ExportSettings(copy_corpus=args.copy)
    # the corpus is generated here when it is not cached yet: seconds for a large one
    what = f"writing track {track.name} as a Rally track (its corpus generated if not cached)"
    with lines.phase(what, announce_after=CHECKS_GRACE):
        result = export_track(
            track,
            options,
            args.out_dir,
            args.cache_dir or cache_dir() / "corpora",
            settings,
            force=args.force,
        )
    how = "copied from" if args.copy else "symlink to"
    print(f"wrote Rally track {result.directory} (track {track.name!r}, index {result.index!r})")
    print(f"  {result.corpus_file}: {how} {result.corpus_source}")
    print(f"  {result.documents} documents, {result.uncompressed_bytes} bytes")
    print(f"  {result.operations} operations in challenge 'esdash'")
    for note in result.notes:
        print(f"  note: {note}")
    print(
        f"run it with: esrally race --offline --pipeline=benchmark-only "
        f"--target-hosts=HOST:PORT --track-path={result.directory.resolve()}"
    )
    return 0
