"""Fuzz: damaged NDJSON corpora — a Rally track's documents files and esdash's cached corpus.

Lines of a corpus are damaged (a field of the wrong type, a truncated or joined line,
garbage, bytes that are not UTF-8, a missing last newline, deep nesting), the file is
emptied, truncated, or replaced by a directory, a link or a FIFO; the offsets file cached
next to a generated corpus is damaged the same way.  ``session check`` and ``plan`` check
the corpus, ``export-rally`` links or copies it, ``leakage`` encrypts a sample of it.
"""

from __future__ import annotations

from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: Rally session seeds and the documents files their corpus reads.
RALLY = {
    "rally.toml": ("tracks/weblogs/documents.json",),
    "rally-smoke.toml": ("tracks/smoke/documents.json", "tracks/smoke/more.json",
                         "tracks/smoke/documents-1k.json"),
}  # fmt: skip


def damage_corpus(path: Path, pick: Pick) -> str:
    if path.is_symlink() or not path.is_file():
        return f"{path.name}: {fuzzlib.replace_file(path, pick)}"
    return fuzzlib.damage_file(path, pick, pick.choice(("jsonl", "jsonl", "jsonl", "bytes")))


def build_rally_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A Rally session whose documents files are damaged, and a command that reads them."""
    sessions = fuzzlib.copy_seed(seeds.sessions, tmp)
    tracks = fuzzlib.copy_seed(seeds.tracks, tmp)
    name = pick.choice(sorted(RALLY))
    session = sessions / name
    files = [tmp / relative for relative in RALLY[name]]
    what = [damage_corpus(pick.choice(files), pick) for _ in range(pick.integer(1, 2))]
    if pick.choice((False, False, True)):
        text = session.read_text().replace("test_mode = false", "test_mode = true")
        session.write_text(text + ("" if "test_mode" in text else "test_mode = true\n"))
        what.append("test_mode = true")
    out = tmp / "export"
    argv, codes = pick.choice(
        (
            (["session", "check", str(session)], frozenset({0, 2})),
            (["plan", "--json", str(session)], frozenset({0, 2})),
            (["export-rally", str(session), str(out)], frozenset({0, 2})),
            (["export-rally", "--copy", str(session), str(out)], frozenset({0, 2})),
        )
    )
    cache = seed_inputs.case_cache(seeds, tmp)
    names = [session.name, "track.json", str(tracks), str(cache), *(f.name for f in files)]
    env = {"ESDASH_RUNS": str(tmp / "runs"), "ESDASH_CACHE": str(cache)}
    return Case("corpora", argv, "; ".join(what), [sessions, tracks], codes, names, env)


def build_cache_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """esdash's cache with its generated MRI sample (or the sample's offsets file) damaged,
    and ``leakage``, which reads it.  A cache is an input too: a file esdash wrote and a
    crash or a full disk left damaged.  The offsets file is esdash's own index of the
    corpus, rewritten when it does not match: only the corpus must stay unchanged.  Needs
    the ``mri_sample`` fixture (the sample in the seeds' cache)."""
    cache = fuzzlib.copy_seed(seeds.cache, tmp)
    corpora = cache / "corpora"
    files = sorted(p for p in corpora.iterdir() if p.is_file())
    target = pick.choice(files)
    if target.suffix == ".ndjson":
        what = damage_corpus(target, pick)
    else:
        what = fuzzlib.damage_file(target, pick, "json")
    session = seeds.sessions / "abe-key.toml"
    argv = ["leakage", "--documents", str(seed_inputs.SAMPLE_DOCUMENTS), str(session)]
    if pick.choice((True, False)):
        argv.insert(1, "--json")
    names = [session.name, str(cache), *(f.name for f in files)]
    corpus = [p for p in files if p.suffix == ".ndjson"]
    env = {"ESDASH_CACHE": str(cache), "ESDASH_RUNS": str(tmp / "runs")}
    return Case("corpora", argv, what, [*corpus, seeds.sessions], frozenset({0, 1, 2, 5}),
                names, env)  # fmt: skip


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(300))
@given(data=st.data())
def test_damaged_rally_corpora(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_rally_case(seeds, DrawPick(data), tmp), sink)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(250))
@given(data=st.data())
def test_damaged_cached_corpus(seeds, mri_sample, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_cache_case(seeds, DrawPick(data), tmp), sink)
