"""Rally's test mode (``track.test_mode``) and the corpus check before a run (issue 18, 4-5).

The fixture ``tests/fixtures/rally/smoke`` names two document sets (one given as a ``.bz2``
archive with both sizes, one plain) and a schedule with every kind of timing test mode
changes: warm-up time, a long time period, iterations above the client count, target
throughput, and a ``parallel`` block.  Its documents are written by the tests into a
``corpus_dir`` of their own, so each test decides which files are there.  No cluster starts.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
from esdash_plugins.tracks import rally
from esdash_plugins.tracks.rally import corpus as rally_corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rally"
SMOKE = FIXTURES / "smoke"


def write_docs(path: Path, count: int, start: int = 0) -> Path:
    """``count`` NDJSON documents, numbered from ``start``."""
    levels = ("info", "warn", "error")
    path.write_text(
        "".join(
            json.dumps({"n": n, "level": levels[n % 3]}) + "\n" for n in range(start, start + count)
        )
    )
    return path


def options(corpus_dir: Path, **more: object) -> dict[str, object]:
    return {"path": str(SMOKE), "corpus_dir": str(corpus_dir), **more}


# ------------------------------------------------------------------------- test mode


@pytest.mark.parametrize(
    ("name", "one_k"),
    [
        ("documents.json.bz2", "documents-1k.json.bz2"),
        ("documents.json", "documents-1k.json"),
        ("logs/documents-181998.json.zst", "logs/documents-181998-1k.json.zst"),
        ("docs.ndjson.gz", "docs-1k.ndjson.gz"),
    ],
)
def test_the_1k_file_is_named_as_rally_names_it(name, one_k):
    assert rally.test_mode_name(name) == one_k


def test_test_mode_changes_the_steps_as_rally_changes_the_tasks(tmp_path):
    full = rally.load(options(tmp_path))
    quick = rally.load(options(tmp_path, test_mode=True))

    def timing(step):
        times = (step.warmup, step.duration, step.target_throughput)
        return times + (step.warmup_iterations, step.iterations)

    steps = {s.name: timing(s) for s in full.steps}
    assert steps == {
        "match-all": (None, None, 100.0, 500, 1000),  # iterations per client, counted
        "errors": (60.0, 300.0, 50.0, None, None),
        "low+high": (30.0, 5.0, None, None, None),
    }
    steps = {s.name: timing(s) for s in quick.steps}
    assert steps == {
        # iterations cut to the 2 clients, throughput lifted
        "match-all": (None, None, None, 2, 2),
        "errors": (0.0, 10.0, None, None, None),  # capped at 10 s, warm-up 0, unthrottled
        "low+high": (0.0, 5.0, None, None, None),  # a time period under 10 s stays
    }
    docs = [(d.source_file, d.documents, d.uncompressed_bytes) for d in quick.documents]
    assert docs == [("documents-1k.json.bz2", 1000, None), ("more-1k.json", 20, None)]


def test_the_plan_says_what_test_mode_changed_for_each_task(tmp_path):
    tasks = {t.name: t for t in rally.RallyTrack().plan(options(tmp_path, test_mode=True), None)}
    changes = {name: task.schedule["test mode"] for name, task in tasks.items()}
    assert changes == {
        "delete": "nothing to change",
        "create": "nothing to change",
        "index-append": "warmup-time-period 120 -> 0; the -1k document files, 1,000 documents "
        "per file",
        "match-all": "warmup-iterations 500 -> 2; iterations 1000 -> 2; target-throughput 100 "
        "ops/s lifted (unthrottled)",
        "errors": "warmup-time-period 60 -> 0; time-period 300 -> 10; target-throughput 50 "
        "ops/s lifted (unthrottled)",
        "low": "warmup-time-period 30 -> 0",
        "high": "warmup-time-period 30 -> 0",
    }
    assert "2 warm-up then 2 measured request(s) per client, counted" in tasks["match-all"].esdash
    plain = rally.RallyTrack().plan(options(tmp_path), None)
    assert all("test mode" not in t.schedule for t in plain)


def test_esdash_plan_prints_the_test_mode_schedule(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_docs(corpus / "documents-1k.json", 1000)
    write_docs(corpus / "more-1k.json", 20)
    path = tmp_path / "smoke.toml"
    path.write_text(
        'name = "smoke"\n[cluster]\nnodes = 1\nheap = "256m"\nrun_as = "esdash"\n'
        f'[track]\nname = "rally"\npath = "{SMOKE}"\ncorpus_dir = "{corpus}"\n'
        "test_mode = true\n"
    )
    env = {**os.environ, "ESDASH_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "plan", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        "errors (search, 1 client; warmup-time-period=60, time-period=300, "
        "target-throughput=50 (test mode: warmup-time-period 60 -> 0; time-period 300 -> 10; "
        "target-throughput 50 ops/s lifted (unthrottled)))" in result.stdout
    )
    # the session's own timing does not stretch a test-mode step
    assert "-> 0 s warm-up + 10 s measured" in result.stdout
    assert f"corpus 'logs': {corpus / 'documents-1k.json'} is present" in result.stdout


def test_test_mode_reads_the_1k_files(tmp_path):
    write_docs(tmp_path / "documents-1k.json", 1000)
    write_docs(tmp_path / "more-1k.json", 20, start=5000)
    cache = tmp_path / "cache"
    corpus = rally.RallyTrack().corpus(options(tmp_path, test_mode=True), cache)
    assert corpus.documents == 1020
    lines = corpus.path.read_text().splitlines()
    assert len(lines) == 1020 and json.loads(lines[-1])["n"] == 5019


def test_test_mode_with_only_the_full_file_takes_its_first_1000_documents(tmp_path, caplog):
    write_docs(tmp_path / "documents.json", 1500)  # only the full files are here
    write_docs(tmp_path / "more.json", 20, start=5000)
    cache = tmp_path / "cache"
    check = rally.RallyTrack().corpus_check(options(tmp_path, test_mode=True), cache)
    assert check.problems == ()
    assert any(
        "test mode: no documents-1k.json, so the run takes the first 1,000 documents of "
        f"{tmp_path / 'documents.json'}" in line
        for line in check.lines
    ), check.lines
    assert not cache.exists()  # a check writes nothing
    with caplog.at_level(logging.WARNING, logger=rally.__name__):
        corpus = rally.RallyTrack().corpus(options(tmp_path, test_mode=True), cache)
    assert corpus.documents == 1020
    numbers = [json.loads(line)["n"] for line in corpus.path.read_text().splitlines()]
    assert numbers == [*range(1000), *range(5000, 5020)]
    said = [r.getMessage() for r in caplog.records]
    assert any(
        "test mode:" in m and "holds no documents-1k.json" in m and "first 1000 documents" in m
        for m in said
    ), said


# --------------------------------------------------------------------------- corpora


def test_a_missing_corpus_lists_its_files_sizes_and_total(tmp_path):
    corpus = tmp_path / "empty"
    corpus.mkdir()
    check = rally.RallyTrack().corpus_check(options(corpus), tmp_path / "cache")
    assert len(check.problems) == 1
    key, message = check.problems[0]
    assert key == "track.corpus_dir"
    assert message == (
        f"2 corpus file(s) of {SMOKE / 'track.json'} are missing: documents.json of corpus "
        "'logs' (1,500 documents; uncompressed-bytes 30,000; compressed-bytes 2,000 as "
        "documents.json.bz2); more.json of corpus 'logs' (20 documents; uncompressed-bytes "
        "400); total 30,400 bytes (30.4 kB) uncompressed (+ 2,000 bytes (2 kB) for the archives "
        f"while decompressing); looked in {corpus}. Put the uncompressed files in {corpus}; "
        "Rally downloads them from https://example.invalid/logs/<source-file>, or set "
        "track.corpus_dir to the directory holding them"
    )
    assert f"REFUSED: {message}" in check.lines


def test_a_present_corpus_passes_and_the_join_is_sized(tmp_path):
    write_docs(tmp_path / "documents.json", 1500)
    write_docs(tmp_path / "more.json", 20)
    # the sizes track.json gives (a run refuses a file of another size)
    track = tmp_path / "track"
    shutil.copytree(SMOKE, track)
    spec = json.loads((track / "track.json").read_text())
    sizes = [(tmp_path / "documents.json").stat().st_size, (tmp_path / "more.json").stat().st_size]
    for doc, size in zip(spec["corpora"][0]["documents"], sizes, strict=True):
        doc["uncompressed-bytes"] = size
    (track / "track.json").write_text(json.dumps(spec))
    cache = tmp_path / "cache"
    check = rally.RallyTrack().corpus_check({**options(tmp_path), "path": str(track)}, cache)
    assert check.problems == ()
    assert check.lines[0] == (
        f"corpus 'logs': {tmp_path / 'documents.json'} is present ({sizes[0]:,} bytes "
        f"({sizes[0] / 1000:.3g} kB))"
    )
    assert check.lines[-1].startswith(f"the run joins the 2 files into {cache}/rally-")
    assert not cache.exists()


Usage = namedtuple("Usage", "total used free")


def test_files_too_big_for_the_free_disk_are_refused_before_copying(tmp_path, monkeypatch):
    """A corpus larger than the free space of its filesystem is refused, naming both sizes.

    ``shutil.disk_usage`` is replaced in the module under test because the real condition,
    a filesystem with less free space than the corpus, cannot be produced here: the tests
    have no disk that is actually full, and filling one (or mounting a tiny tmpfs) would need
    privileges and disturb the CI run sharing this machine.
    """
    monkeypatch.setattr(rally_corpus.shutil, "disk_usage", lambda path: Usage(10**6, 10**6, 1000))
    empty = tmp_path / "empty"
    empty.mkdir()
    check = rally.RallyTrack().corpus_check(options(empty), tmp_path / "cache")
    assert [key for key, _ in check.problems] == ["track.corpus_dir", "track.corpus_dir"]
    assert check.problems[1][1] == (
        f"the missing corpus files need 32,400 bytes (32.4 kB), but {empty} has only 1,000 "
        "bytes (1 kB) free; free space there or set track.corpus_dir to a directory on a larger "
        "filesystem"
    )
    # present files whose joined copy would not fit esdash's cache
    write_docs(tmp_path / "documents-1k.json", 1000)
    write_docs(tmp_path / "more-1k.json", 20)
    cache = tmp_path / "cache"
    check = rally.RallyTrack().corpus_check(options(tmp_path, test_mode=True), cache)
    assert len(check.problems) == 1
    assert check.problems[0][1].startswith("joining 2 corpus files needs ")
    assert (
        f"in esdash's corpus cache {cache}, which has only 1,000 bytes (1 kB) free"
        in (check.problems[0][1])
    )
    assert not cache.exists()


def test_an_archive_only_corpus_says_how_to_decompress_it(tmp_path):
    (tmp_path / "documents.json.bz2").write_bytes(b"BZh9")
    write_docs(tmp_path / "more.json", 20)
    track = tmp_path / "track"
    shutil.copytree(SMOKE, track)
    spec = json.loads((track / "track.json").read_text())
    spec["corpora"][0]["documents"][1]["uncompressed-bytes"] = (
        (tmp_path / "more.json").stat().st_size
    )
    (track / "track.json").write_text(json.dumps(spec))
    check = rally.RallyTrack().corpus_check(
        {**options(tmp_path), "path": str(track)}, tmp_path / "cache"
    )
    assert len(check.problems) == 1
    assert "bunzip2 -k documents.json.bz2" in check.problems[0][1]


def test_a_missing_test_mode_corpus_names_the_1k_file_and_its_full_file(tmp_path):
    check = rally.RallyTrack().corpus_check(options(tmp_path, test_mode=True), tmp_path / "c")
    assert len(check.problems) == 1
    message = check.problems[0][1]
    assert message.startswith(
        f"2 corpus file(s) of {SMOKE / 'track.json'} are missing: documents-1k.json of corpus "
        "'logs' (1,000 documents; test mode: or its full file documents.json (1,500 documents, "
        "uncompressed-bytes 30,000), whose first documents esdash takes)"
    ), message
    assert "not counting 2 file(s) whose size track.json does not give" in message
