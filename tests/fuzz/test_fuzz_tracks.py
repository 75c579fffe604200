"""Fuzz: damaged Rally tracks — track.json, challenges, operations, index bodies, track.py,
and the session's track options (challenge, track_params, index, test_mode, paths).

Templated files (Jinja, as Rally writes them) get text damage: a line deleted or repeated,
a half-written ``{{``/``{%`` construct, an include of a file outside the track; plain JSON
files get structured damage.  ``session check``, ``plan`` (text and ``--json``),
``export-rally`` and ``submit --dry-run`` load the track.
"""

from __future__ import annotations

from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: Track fixture -> whether its JSON files are Jinja templates (text damage) or plain JSON.
TRACKS = {"weblogs": "text", "smoke": "json", "planned": "json", "actions": "text"}
#: Track options and odd values for them (besides fuzzlib's odd values).
OPTIONS = {
    "challenge": ("append-and-query", "parallel-queries", "smoke", "nope", "", "../x", "\x00"),
    "track_params": (
        ["bulk_size=10"], ["bulk_size=-1"], ["bulk_size=1e999"], ["bulk_size"], ["=1"],
        ["number_of_shards=NaN"], ["x=" + "[" * 5000 + "]" * 5000], ["x={\"a\":"],
        ["bulk_indexing_clients=0"], ["status_from=\"\\u0000\""], ["a=1", "a=2"], [],
    ),
    "index": ("weblogs", "weblogs-archive", "nope", "", "*", "../items"),
    "test_mode": (True, False),
    "corpus_dir": (".", "..", "/", "/etc", "/nonexistent", "../smoke", "x/" * 2000),
    "path": (".", "..", "/", "/etc", "../smoke", "track.json", "/dev/null", "x/" * 2000),
}  # fmt: skip


def session_text(name: str, track: Path, options: dict[str, object]) -> bytes:
    doc = {
        "name": "tracks",
        "cluster": {"run_as": "esdash"},
        "track": {"name": "rally", "path": str(track), **options},
    }
    return fuzzlib.tomli_w.dumps(fuzzlib._tomlable(doc)).encode("utf-8", "surrogatepass")


def damage_track(track: Path, fmt: str, pick: Pick) -> list[str]:
    files = fuzzlib.files_under(track, (".json", ".py"))
    done = []
    for _ in range(pick.integer(1, 2)):
        if not files:
            break
        path = pick.choice(files)
        kind = "text" if path.suffix == ".py" else fmt
        if kind == "text" and path.name == "index.json" and track.name == "weblogs":
            kind = "json"  # weblogs' index body is plain JSON
        done.append(f"{path.relative_to(track.parent)}: " + fuzzlib.damage_file(path, pick, kind))
    return done


def build_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged copy of a Rally track fixture, a session with odd track options, and a
    command that loads the track."""
    tracks = fuzzlib.copy_seed(seeds.tracks, tmp)
    name = pick.choice(sorted(TRACKS))
    track = tracks / name
    what = []
    if pick.choice((True, True, True, False)):
        what.extend(damage_track(track, TRACKS[name], pick))
    options: dict[str, object] = {}
    for _ in range(pick.integer(0, 2)):
        key = pick.choice(sorted(OPTIONS))
        value = (
            pick.choice(OPTIONS[key])
            if pick.choice((True, True, False))
            else fuzzlib.odd_value(pick, False)
        )
        if key == "path":
            track = Path(str(value)) if str(value).startswith("/") else track / str(value)
            what.append(f"track.path = {fuzzlib._short(str(track))}")
            continue
        options[key] = value
        what.append(f"track.{key} = {fuzzlib._short(value)}")
    session = tmp / "session.toml"
    session.write_bytes(session_text(name, track, options))
    out = tmp / "export"
    argv, codes = pick.choice(
        (
            (["session", "check", str(session)], frozenset({0, 2})),
            (["plan", str(session)], frozenset({0, 2})),
            (["plan", "--json", str(session)], frozenset({0, 2})),
            (["export-rally", str(session), str(out)], frozenset({0, 2})),
            (["submit", "--dry-run", str(session)], frozenset({0, 2, 5})),
        )
    )
    names = ["session.toml", "track", name]
    env = {
        "ESDASH_RUNS": str(tmp / "runs"),
        "ESDASH_CACHE": str(seed_inputs.case_cache(seeds, tmp)),
    }
    return Case("tracks", argv, "; ".join(what) or "none", [tracks, session], codes, names, env)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(800))
@given(data=st.data())
def test_damaged_rally_tracks(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_case(seeds, DrawPick(data), tmp), sink)
