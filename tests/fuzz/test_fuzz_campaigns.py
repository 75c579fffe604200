"""Fuzz: damaged campaign files and campaign directories.

The campaign file (``esdash.campaign.spec``: name, session, repetitions, ingest, ``[set]``,
``[axes]``, ``[per_value]``, ``[slurm]``) and its base session get structured TOML damage
and odd axis values; ``sweep --dry-run`` (with and without ``--submit``, ``--only``) plans
it into a fresh directory and ``report`` reads the campaign file.  A campaign directory whose
points completed (``campaign.json``, ``points/*/state.json``, ``runners/*.json``) gets JSON
damage and is read by ``report`` and ``compare DIR#...``.
"""

from __future__ import annotations

from pathlib import Path

import fuzzlib
import seeds as seed_inputs
from fuzzlib import Case, DrawPick, Pick
from hypothesis import given, settings
from hypothesis import strategies as st

#: Campaign keys and values a user might write (fuzzlib's odd values come on top).
KEYS = (
    ("name",), ("description",), ("session",), ("repetitions",), ("ingest",),
    ("set", "benchmark", "duration"), ("set", "cluster", "nodes"), ("set", "nope"),
    ("axes", "cluster", "nodes"), ("axes", "benchmark", "workers_per_node"),
    ("axes", "encryption", "mode"), ("axes", "cluster", "backend"), ("axes", "track", "name"),
    ("axes", "nope"), ("per_value", "encryption.mode", "abe", "encryption", "key_file"),
    ("per_value", "cluster.nodes", "3", "cluster", "heap"), ("slurm", "time"),
    ("slurm", "extra"),
)  # fmt: skip
VALUES = (
    [1, 3], [1, 1], [], [0], [-1], [1, "3"], [1.5], [2**40], list(range(1, 40)),
    ["none", "abe", "gocryptfs"], ["nope"], [["a"]], [{}], "1m", "each", "once", "never",
    "base.toml", "../base.toml", "/etc/hostname", "study.toml", 1, 0, 1000, 1001, 10**6,
)  # fmt: skip
#: Files of a campaign directory the readers use.
DIR_FILES = ("campaign.json", "campaign.toml")


def set_key(doc: dict, pick: Pick) -> str:
    path = pick.choice(KEYS)
    value = pick.choice(VALUES) if pick.choice((True, False)) else fuzzlib.odd_value(pick, False)
    table = doc
    for part in path[:-1]:
        if not isinstance(table.get(part), dict):
            table[part] = {}
        table = table[part]
    table[path[-1]] = value
    return f"{'.'.join(path)} = {fuzzlib._short(value)}"


def damage_campaign_file(campaign: Path, base: Path, pick: Pick) -> list[str]:
    done = []
    for _ in range(pick.integer(1, 3)):
        target = pick.choice((campaign, campaign, campaign, base))
        if target.is_file() and not target.is_symlink() and pick.choice((True, True, False)):
            try:
                doc = fuzzlib.tomllib.loads(target.read_text(encoding="utf-8"))
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict):
                done.append(f"{target.name}: {set_key(doc, pick)}")
                target.write_bytes(fuzzlib.dump_toml(doc, pick))
                continue
        done.append(fuzzlib.damage_file(target, pick, pick.choice(("toml", "text"))))
    return done


def build_file_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged campaign file (or base session), planned or reported."""
    inputs = tmp / "in"
    inputs.mkdir()
    campaign = inputs / "study.toml"
    base = inputs / "base.toml"
    campaign.write_bytes((seeds.campaign / "study.toml").read_bytes())
    base.write_bytes((seeds.campaign / "base.toml").read_bytes())
    what = damage_campaign_file(campaign, base, pick)
    out = tmp / "campaign-dir"
    argv, codes = pick.choice(
        (
            (["sweep", "--dry-run", "--dir", str(out), str(campaign)], frozenset({0, 1, 2})),
            (["sweep", "--dry-run", "--submit", "--dir", str(out), str(campaign)],
             frozenset({0, 1, 2})),
            (["sweep", "--dry-run", "--only", pick.choice(("nodes=3", "nodes=x", "=", "x")),
              "--dir", str(out), str(campaign)], frozenset({0, 1, 2})),
            (["report", "--no-figures", "--out", str(tmp / "report"), str(campaign)],
             frozenset({0, 1, 2})),
        )
    )  # fmt: skip
    env = {
        "ESDASH_RUNS": str(tmp / "runs"),
        "ESDASH_CACHE": str(seed_inputs.case_cache(seeds, tmp)),
    }
    names = ["study.toml", "base.toml", "--only"]  # --only: a bad option is named
    return Case("campaigns", argv, "; ".join(what), [inputs], codes, names, env)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(450))
@given(data=st.data())
def test_damaged_campaign_files(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_file_case(seeds, DrawPick(data), tmp), sink)


def damage_campaign_dir(directory: Path, pick: Pick) -> list[str]:
    candidates = [directory / name for name in DIR_FILES]
    candidates += sorted(directory.glob("points/*/state.json"))
    candidates += sorted(directory.glob("points/*/session.toml"))
    candidates += sorted(directory.glob("runners/*.json"))
    done = []
    for _ in range(pick.integer(1, 3)):
        path = pick.choice(candidates)
        if not (path.exists() or path.is_symlink()):
            continue
        fmt = "toml" if path.suffix == ".toml" else "json"
        done.append(f"{path.relative_to(directory)}: " + fuzzlib.damage_file(path, pick, fmt))
    if pick.choice((False, False, False, True)):
        point = pick.choice(sorted(directory.glob("points/*")))
        done.append(f"{point.relative_to(directory)}: " + fuzzlib.replace_file(point, pick))
    return done


def build_dir_case(seeds: seed_inputs.Seeds, pick: Pick, tmp: Path) -> Case:
    """A damaged copy of a completed campaign directory, read by report or compare."""
    root = fuzzlib.copy_seed(seeds.campaign, tmp)
    seed_inputs.rebase(root, seeds.campaign, root)
    directory = next((root / "runs" / "campaigns").iterdir())
    what = damage_campaign_dir(directory, pick)
    selector = pick.choice(("", "#nodes=1", "#nodes=3,workers_per_node=2", "#nope=1", "#"))
    argv, codes = pick.choice(
        (
            (["report", "--no-figures", "--out", str(tmp / "report"), str(directory)],
             frozenset({0, 1, 2})),
            (["report", "--no-figures", "--format", "json,csv", "--out",
              str(tmp / "report"), f"{directory}{selector}"], frozenset({0, 1, 2})),
            (["compare", f"{directory}#nodes=1", f"{directory}{selector or '#nodes=3'}"],
             frozenset({0, 1, 2, 3})),
        )
    )  # fmt: skip
    names = [directory.name, *DIR_FILES, "state.json", "session.toml", "runners"]
    return Case("campaigns", argv, "; ".join(what), [root], codes, names)


@settings(settings.get_profile("esdash-fuzz"), max_examples=fuzzlib.examples(350))
@given(data=st.data())
def test_damaged_campaign_directories(seeds, sink, data) -> None:
    with fuzzlib.scratch() as tmp:
        fuzzlib.run_case(build_dir_case(seeds, DrawPick(data), tmp), sink)
