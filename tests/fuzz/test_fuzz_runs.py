"""Fuzz: damaged run directories and result files through every reader of the CLI.

A copy of a complete fixture run (``run.json``, ``results.json``, ``topology.json``,
``health.json``, ``bench.json``, node statuses, ``stream.jsonl``, ``cluster.jsonl``,
``session.toml``), or of an authors' result file, gets one to three damages; then
``cluster status`` (text and JSON), ``report`` (every format) or ``compare`` (the damaged
run as baseline or contender) reads it.  The rule: a documented exit code, no traceback, no
hang, a refusal naming the run or the file, and no input file changed.
"""

from __future__ import annotations

from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: The files of a run directory the readers use, with their format.
RUN_FILES = {
    "run.json": "json",
    "results.json": "json",
    "topology.json": "json",
    "health.json": "json",
    "bench.json": "json",
    "nodes/0/status.json": "json",
    "stream.jsonl": "jsonl",
    "cluster.jsonl": "jsonl",
    "session.toml": "toml",
}
#: Node directory names a writer never makes (a reader must not trip over them).
ODD_RANKS = ("-1", "00", "99999999999999999999999", "1e3", " 1", "\u0663", "1.json")


def damage_run(run: Path, pick: Pick) -> list[str]:
    """One to three damages to the files of ``run``, or to its node directories."""
    done = []
    for _ in range(pick.integer(1, 3)):
        target = pick.choice((*RUN_FILES, "nodes/", "new-node"))
        if target == "nodes/":
            done.append(f"nodes/: {fuzzlib.replace_file(run / 'nodes', pick)}")
        elif target == "new-node":
            status = run / "nodes" / "0" / "status.json"
            rank = pick.choice(ODD_RANKS + ("1", "7", "4096"))
            odd = run / "nodes" / rank
            try:
                odd.mkdir(parents=True, exist_ok=True)
            except OSError:
                done.append("nodes/ is no directory any more: no node added")
                continue
            if status.is_file() and not status.is_symlink():
                added = odd / "status.json"
                fuzzlib.remove(added)  # an earlier damage's FIFO there would block the write
                added.write_bytes(status.read_bytes())
                done.append(f"nodes/{rank}/status.json added, then " + fuzzlib.damage_file(
                    odd / "status.json", pick, "json"))  # fmt: skip
            else:
                done.append(f"nodes/{rank}/ added (empty)")
        else:
            path = run / target
            if path.exists() or path.is_symlink():
                done.append(fuzzlib.damage_file(path, pick, RUN_FILES[target]))
    return done


def run_commands(damaged: Path, other: Path, out: Path, pick: Pick) -> list[str]:
    """One reader of the damaged run (``other`` is an intact run, ``out`` a fresh dir)."""
    return pick.choice(
        (
            ["cluster", "status", str(damaged)],
            ["cluster", "status", "--json", str(damaged)],
            ["report", "--no-figures", "--out", str(out), str(damaged)],
            ["report", "--no-figures", "--format", "json,csv,html", "--out", str(out),
             str(damaged), str(other)],
            ["cluster", "status", str(damaged)],
            ["report", "--no-figures", "--format", "md,json", "--out", str(out), str(damaged)],
            ["compare", str(damaged), str(other)],
            ["compare", "--format", "json", str(other), str(damaged)],
        )
    )  # fmt: skip


def allowed(argv: list[str]) -> frozenset[int]:
    """Exit codes the command documents: compare may also say a reference was missed."""
    return frozenset({0, 1, 2, 3}) if argv[0] == "compare" else frozenset({0, 1, 2})


def build_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged copy of a fixture run, an intact copy of the other, and a reader of both."""
    index = pick.integer(0, len(seeds.runs) - 1)
    damaged = fuzzlib.copy_seed(seeds.runs[index], tmp / "damaged")
    other = fuzzlib.copy_seed(seeds.runs[1 - index], tmp / "intact")
    what = damage_run(damaged, pick)
    argv = run_commands(damaged, other, tmp / "report", pick)
    names = [damaged.name, *(w.split(":")[0] for w in what)]
    return Case("runs", argv, "; ".join(what), [damaged, other], allowed(argv), names)


def build_authors_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged authors' result file (``FILE#nodes=..``) as a report or compare input."""
    authors = fuzzlib.copy_seed(seeds.authors, tmp / "in")
    run = fuzzlib.copy_seed(seeds.runs[0], tmp / "run")
    what = fuzzlib.damage_file(authors, pick, "json")
    spec = f"{authors}#nodes=3,workers_per_node=1,setup=none,docs=1000"
    argv = pick.choice(
        (
            ["compare", str(run), spec],
            ["compare", "--format", "json", spec, str(run)],
            ["report", "--no-figures", "--out", str(tmp / "report"), spec],
        )
    )
    return Case("runs", argv, what, [authors, run], allowed(argv), [authors.name])


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(1250))
@given(data=st.data())
def test_damaged_run_directories(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_case(seeds, DrawPick(data), tmp), sink)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(150))
@given(data=st.data())
def test_damaged_authors_result_files(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_authors_case(seeds, DrawPick(data), tmp), sink)
