"""Fuzz: damaged session files (and their query files) through every command that reads one.

A copy of a seed session (``seeds.SESSIONS``: minimal, every option set, each encryption
mode, the Rally and query-file variants, and the repository's ``sessions/*.toml``) gets one
to three damages: a TOML value of the wrong type or out of range, a key deleted or
misspelt, an option set to an odd value, a half-written line, bytes that are not UTF-8, a
truncated file, a query file damaged.  Then ``session check``, ``plan`` (text and
``--json``), ``submit --dry-run`` or ``leakage`` reads it.
"""

from __future__ import annotations

from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: Session keys whose values the fuzzer sets (every option of esdash.session, the modes'
#: and the built-in tracks' options).
KNOWN_KEYS = (
    ("name",), ("description",),
    ("cluster", "backend"), ("cluster", "nodes"), ("cluster", "nodes_per_host"),
    ("cluster", "home"), ("cluster", "heap"), ("cluster", "interconnect"),
    ("cluster", "interface"), ("cluster", "data_dir"), ("cluster", "run_as"),
    ("cluster", "security"), ("cluster", "insecure_ok"), ("cluster", "http_port"),
    ("cluster", "transport_port"),
    ("cluster", "backend_options"),
    ("encryption", "mode"), ("encryption", "password_file"), ("encryption", "password_command"),
    ("encryption", "scrypt_n"), ("encryption", "key_file"), ("encryption", "passphrase_file"),
    ("encryption", "passphrase_command"), ("encryption", "salt_file"),
    ("encryption", "key_mode"), ("encryption", "ope_backend"),
    ("track", "name"), ("track", "documents"), ("track", "seed"), ("track", "path"),
    ("track", "challenge"), ("track", "track_params"), ("track", "corpus_dir"),
    ("track", "index"), ("track", "test_mode"),
    ("benchmark", "workers_per_node"), ("benchmark", "warmup"), ("benchmark", "duration"),
    ("benchmark", "bulk_size"), ("benchmark", "target_throughput"), ("benchmark", "interval"),
    ("benchmark", "seed"), ("benchmark", "queries"), ("benchmark", "after_ingest"),
    ("benchmark", "max_num_segments"), ("benchmark", "settle_timeout"),
    ("benchmark", "warmup_max"), ("benchmark", "warmup_round"), ("benchmark", "order"),
    ("benchmark", "repetitions"),
    ("slurm", "partition"), ("slurm", "time"), ("slurm", "account"), ("slurm", "extra"),
    ("references", "age", "p99"), ("references", "age"), ("references",),
)  # fmt: skip

#: Values a user plausibly types for those keys, right type but wrong (units, ranges).
PLAUSIBLE = (
    "1g", "0", "-5s", "5 minutes", "1e9h", "NaN s", "10TB", "1.5", "00:99:99", "1-",
    "99999999-00:00:00", "none", "abe", "gocryptfs", "rally", "mri", "elasticsearch",
    "opensearch", "infiniband", "balanced", "random", "force-merge", ["a=1"], ["=", "x="],
    ["k=" + "[" * 3000 + "]" * 3000], ["k={\"a\": NaN}"], [1, 2], [100.0, 200.0, 50.0],
    [1.0, 0.0], ["--x"], 0, 1, -1, 65001, 1023, 4097, 2**31, 2.5, True,
)  # fmt: skip


def set_known(doc: dict, pick: Pick) -> str:
    """An option of the session set to an odd or plausible-but-wrong value."""
    path = pick.choice(KNOWN_KEYS)
    value = pick.choice(PLAUSIBLE) if pick.choice((True, False)) else fuzzlib.odd_value(pick, False)
    table = doc
    for part in path[:-1]:
        if not isinstance(table.get(part), dict):
            table[part] = {}
        table = table[part]
    table[path[-1]] = value
    return f"{'.'.join(path)} = {fuzzlib._short(value)}"


def damage_session(path: Path, pick: Pick) -> str:
    """One to three damages to a session file (or its query file)."""
    done = []
    for _ in range(pick.integer(1, 3)):
        op = pick.choice(("known", "known", "known", "file", "file", "queries"))
        if op == "queries":
            queries = path.parent / "queries.json"
            if queries.is_file():
                done.append(fuzzlib.damage_file(queries, pick, "json"))
            continue
        if op == "known" and path.is_file() and not path.is_symlink():
            try:
                doc = fuzzlib.tomllib.loads(path.read_text(encoding="utf-8"))
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict):
                done.append(f"{path.name}: {set_known(doc, pick)}")
                path.write_bytes(fuzzlib.dump_toml(doc, pick))
                continue
        if path.exists() or path.is_symlink():
            done.append(fuzzlib.damage_file(path, pick, pick.choice(("toml", "text"))))
    return "; ".join(done) or "none"


def commands(session: Path, out: Path, pick: Pick) -> tuple[list[str], frozenset[int]]:
    """A reader of the session and the exit codes it documents.  ``export-rally`` only for
    the Rally seeds: for a generated track it generates the corpus, which is no reading."""
    rally = session.stem.startswith("rally")
    return pick.choice(
        (
            (["session", "check", str(session)], frozenset({0, 2})),
            (["session", "check", str(session), str(session)], frozenset({0, 2})),
            (["plan", str(session)], frozenset({0, 2})),
            (["plan", "--json", str(session)], frozenset({0, 2})),
            (["submit", "--dry-run", str(session)], frozenset({0, 2, 5})),
            (["submit", "--dry-run", "--bench", str(session)], frozenset({0, 2, 5})),
            (["leakage", "--documents", str(seed_inputs.SAMPLE_DOCUMENTS), "--json",
              str(session)], frozenset({0, 1, 2, 5})),
        )
        + ((["export-rally", str(session), str(out)], frozenset({0, 2})),) * rally
    )  # fmt: skip


def session_seeds(seeds: seed_inputs.Seeds) -> list[Path]:
    return [*seeds.session_files(), *sorted((seed_inputs.REPO / "sessions").glob("*.toml"))]


def build_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged copy of a seed session (sessions/ and tracks/ side by side, as the seeds'
    relative paths expect) and a command that reads it."""
    sessions = fuzzlib.copy_seed(seeds.sessions, tmp)
    tracks = fuzzlib.copy_seed(seeds.tracks, tmp)
    source = pick.choice(session_seeds(seeds))
    session = sessions / source.name
    if source.parent != seeds.sessions:
        session.write_bytes(source.read_bytes())
    what = damage_session(session, pick)
    argv, codes = commands(session, tmp / "export", pick)
    names = [session.name, "queries.json", "track.json", str(tracks)]
    env = {
        "ESDASH_RUNS": str(tmp / "runs"),
        "ESDASH_CACHE": str(seed_inputs.case_cache(seeds, tmp)),
    }
    return Case("sessions", argv, what, [sessions, tracks], codes, names, env)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(1100))
@given(data=st.data())
def test_damaged_sessions(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_case(seeds, DrawPick(data), tmp), sink)
