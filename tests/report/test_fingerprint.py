"""A configuration is a session fingerprint: runs that differ in a measured setting are never
pooled, they are labelled by the keys that differ, and a side of ``compare`` that would pool
them is refused in one line naming those keys and their values.

Every variant is a copy of the real (trimmed) ``dev`` fixture run in ``tmp_path`` with one
thing edited -- its ``session.toml``, its stream header, its ``run.json`` or a ``bench.json``
written beside it; the fixtures themselves are never changed.  One test per fingerprint key:
the keys esdash declares for ``[cluster]`` and ``[benchmark]`` are varied from their
declarations (so a key added later is covered too), the others from :data:`RECORDED` and
:data:`SESSION`; a test checks that together they cover every key of the fingerprint.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import tomli_w
from support import synthetic
from support.cli import esdash

from esdash.errors import BadInput
from esdash.plugin.options import parse_duration, parse_size
from esdash.plugin.values import Option
from esdash.report.document import build_report
from esdash.session import BENCHMARK, CLUSTER, tomllib
from esdash.view.compare import load_side
from esdash.view.fingerprint import NOT_MEASURED, describe, fingerprint
from esdash.view.inputs import load_inputs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
DEV = FIXTURES / "dev-20261121-032918"

Edit = Callable[[Path], None]


# ------------------------------------------------------------------- editing copies


def copy(tmp_path: Path, name: str) -> Path:
    """A copy of the dev run with a bench.json of its own (the fixture has none)."""
    target = tmp_path / name
    shutil.copytree(DEV, target)
    (target / "bench.json").write_text(json.dumps(bench_plan()))
    return target


def bench_plan() -> dict:
    """What ``bench.json`` records of the dev run: its index fingerprint and its steps."""
    meta = {
        "format": 1,
        "fingerprint": {
            "corpus": {
                "documents": 2000,
                "size": 3097090,
                "offsets": "ab12",
                "origin": {"seed": 42},
            },
            "mapping": "9f00",
            "settings": {"index.number_of_shards": "3", "index.number_of_replicas": "0"},
        },
        "layout": None,
    }
    return {
        "index": "mri",
        "index_body": {"mappings": {"_meta": {"esdash": meta}}},
        "corpus_path": "/cache/mri.json",
        "corpus_documents": 2000,
        "corpus_has_actions": False,
        "bulk_size": 1000,
        "interval": 1.0,
        "seed": 7,
        "ranks": 1,
        "encryption": "none",
        "client_codec": None,
        "steps": [
            {
                "name": name,
                "warmup": 1.0,
                "duration": 5.0,
                "target_throughput": None,
                "queries": [{"name": name, "index": "mri", "body": {"query": {"term": {name: 1}}}}],
            }
            for name in ("body_part", "vendor", "age")
        ],
    }


def session_of(run: Path) -> dict:
    return tomllib.loads((run / "session.toml").read_text())


def set_session(key: str, value: object) -> Edit:
    """Set a dotted key (``cluster.backend_options.x``) in the run's session copy."""

    def edit(run: Path) -> None:
        data = session_of(run)
        *tables, last = key.split(".")
        node = data
        for table in tables:
            node = node.setdefault(table, {})
        node[last] = value
        (run / "session.toml").write_text(tomli_w.dumps(data))

    return edit


def edit_json(name: str, change: Callable[[dict], None]) -> Edit:
    def edit(run: Path) -> None:
        data = json.loads((run / name).read_text())
        change(data)
        (run / name).write_text(json.dumps(data))

    return edit


def edit_header(change: Callable[[dict], None]) -> Edit:
    def edit(run: Path) -> None:
        lines = (run / "stream.jsonl").read_text().splitlines()
        header = json.loads(lines[0])
        change(header)
        lines[0] = json.dumps(header)
        (run / "stream.jsonl").write_text("\n".join(lines) + "\n")

    return edit


def _stamp(plan: dict) -> dict:
    return plan["index_body"]["mappings"]["_meta"]["esdash"]["fingerprint"]


# --------------------------------------------------------------------- the variants


def other_value(option: Option) -> object:
    """A valid value of ``option`` other than its default, as a session would write it."""
    default = option.default
    if option.choices:
        return next(c for c in option.choices if c != default)
    if option.kind == "bool":
        return not default
    if option.kind == "int":
        value = (default if isinstance(default, int) else option.minimum or 1) + 1
        return int(min(value, option.maximum)) if option.maximum is not None else value
    if option.kind == "float":
        return float((default or option.minimum or 1.0) * 2)
    if option.kind == "duration":
        return f"{parse_duration(default or option.minimum or 1) + 1:g}s"
    if option.kind == "size":
        return "2g" if parse_size(default or "1g") != 2 * 1024**3 else "3g"
    if option.kind == "list[str]":
        return ["x"]
    return "other"


def declared() -> dict[str, Edit]:
    """Every measured [cluster] / [benchmark] key esdash declares, set to another value."""
    found = {}
    for section, options in (("cluster", CLUSTER), ("benchmark", BENCHMARK)):
        for option in options:
            key = f"{section}.{option.name}"
            if key in NOT_MEASURED or option.kind == "path" or key in RECORDED:
                continue
            found[key] = set_session(key, other_value(option))
    return found


#: Plugin choices and options, taken as written.
SESSION: dict[str, Edit] = {
    "track.name": set_session("track.name", "nyc_taxis"),
    "track.documents": set_session("track.documents", 1000),
    "engine": set_session("cluster.backend", "opensearch"),
    "encryption.mode": set_session("encryption.mode", "gocryptfs"),
}
#: Keys read from the run's records (header, run.json, results.json, bench.json).
RECORDED: dict[str, Edit] = {
    "engine.version": edit_json("run.json", lambda d: d.update(version="9.1.0")),
    "steps": edit_header(lambda h: h["steps"].append({**h["steps"][0], "name": "extra"})),
    "corpus.documents": edit_json("bench.json", lambda p: p.update(corpus_documents=1000)),
    "corpus.identity": edit_json(
        "bench.json", lambda p: _stamp(p)["corpus"].update(offsets="cd34")
    ),
    "index.layout": edit_json(
        "bench.json", lambda p: _stamp(p)["settings"].update({"index.number_of_shards": "1"})
    ),
    "steps.bodies": edit_json(
        "bench.json", lambda p: p["steps"][0]["queries"][0].update(body={"query": {"x": 2}})
    ),
    "encryption.layout": edit_json(
        "bench.json", lambda p: p.update(client_codec={"fields": {"age": "ope"}})
    ),
    # the order and rounds the plan made (the session's "auto" resolved), not its words
    "benchmark.order": edit_json("bench.json", lambda p: p.update(order="mirrored")),
    "benchmark.repetitions": edit_json("bench.json", lambda p: p.update(repetitions=2)),
}
#: Options of plugins (the fixture sets none): present in one run, unset in the other.
OPTIONS: dict[str, Edit] = {
    "track.seed": set_session("track.seed", 7),
    "track.test_mode": set_session("track.test_mode", True),
    "track.challenge": set_session("track.challenge", "append-no-conflict"),
    "encryption.key_mode": set_session("encryption.key_mode", "single"),
    "cluster.backend_options.container_runtime": set_session(
        "cluster.backend_options.container_runtime", "singularity"
    ),
}
VARIANTS = {**declared(), **SESSION, **RECORDED, **OPTIONS}


def test_the_variants_cover_every_key_of_the_fingerprint(tmp_path: Path) -> None:
    (entry,) = load_inputs([str(copy(tmp_path, "a"))]).entries
    assert set(entry.fingerprint) <= set(VARIANTS), set(entry.fingerprint) - set(VARIANTS)
    assert entry.fingerprint["corpus.identity"] is not None  # from bench.json, as written


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_a_run_that_differs_in_one_key_is_another_configuration(tmp_path: Path, key: str) -> None:
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    VARIANTS[key](b)
    first, second = load_inputs([str(a), str(b)]).entries
    assert first.key != second.key
    assert first.fingerprint.get(key) != second.fingerprint.get(key), key
    others = {k for k in set(first.fingerprint) | set(second.fingerprint) if k != key}
    changed = {k for k in others if first.fingerprint.get(k) != second.fingerprint.get(k)}
    assert not changed, changed  # only the key
    report = build_report(load_inputs([str(a), str(b)]))
    assert {r["runs"] for r in report.table("queries").records} == {1}  # never pooled
    assert any(note.startswith("2 runs are 2 configurations") for note in report.notes)
    # a side that would pool them as repetitions: refused in one line naming the key
    campaign = synthetic.write_campaign(tmp_path, "study", [({}, 1, a), ({}, 2, b)])
    with pytest.raises(BadInput) as refused:
        load_side(str(campaign))
    message = str(refused.value)
    assert "\n" not in message and "not repetitions of one: they differ in" in message
    assert describe([first.fingerprint, second.fingerprint], [key]) in message


def test_what_does_not_change_the_measurement_is_not_in_it(tmp_path: Path) -> None:
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    for key, value in (
        ("name", "other"),
        ("description", "another study"),
        ("slurm.time", "02:00:00"),
        ("slurm.partition", "big"),
        ("cluster.data_dir", "/elsewhere"),
        ("cluster.home", "/opt/es"),
        ("cluster.run_as", "someone"),
        ("benchmark.interval", "2s"),
        ("benchmark.settle_timeout", "20m"),
        ("encryption.password_file", "/home/x/pass"),
        ("references.age.throughput", [1.0, 0.5, 2.0]),
    ):
        set_session(key, value)(b)
    set_session("benchmark.warmup", "1000ms")(b)  # the same duration, written otherwise
    set_session("cluster.heap", 512 * 1024**2)(b)  # the same heap, in bytes
    edit_json("results.json", lambda d: d.update(run_id="dev-again"))(b)
    edit_header(lambda h: h["steps"].reverse())(b)  # another order of one round (random order)
    first, second = load_inputs([str(a), str(b)]).entries
    assert first.fingerprint == second.fingerprint and first.key == second.key
    (row, *_) = build_report(load_inputs([str(a), str(b)])).table("queries").records
    assert row["runs"] == 2  # repetitions of one configuration, pooled
    assert (
        len(
            load_side(
                str(synthetic.write_campaign(tmp_path, "same", [({}, 1, a), ({}, 2, b)]))
            ).entries
        )
        == 2
    )


def test_the_header_copy_serves_when_the_session_file_is_gone(tmp_path: Path) -> None:
    a = copy(tmp_path, "a")
    (entry,) = load_inputs([str(a)]).entries
    (a / "session.toml").unlink()
    (again,) = load_inputs([str(a)]).entries
    assert again.fingerprint == entry.fingerprint


def test_report_of_two_runs_differing_in_documents(tmp_path: Path) -> None:
    """`report RUN_A RUN_B`: two configurations, each labelled, every figure kept."""
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    set_session("track.documents", 1000)(b)
    repeat = copy(tmp_path, "a2")  # a repetition of a: pooled with it, its timeline kept
    edit_json("results.json", lambda d: d.update(run_id="dev-repeated"))(repeat)
    out = tmp_path / "out"
    result = esdash(
        "report", str(a), str(b), str(repeat), "--format", "json,md", "--out", str(out),
        env_runs=tmp_path / "runs",
    )  # fmt: skip
    assert (
        "note: 3 runs are 2 configurations, never pooled; they differ in track.documents "
        "(2000 vs 1000)" in result.stdout
    )
    document = json.loads((out / "report.json").read_text())
    rows = [r for r in document["tables"]["queries"]["records"] if r["query"] == "age"]
    assert sorted((r["track.documents"], r["runs"]) for r in rows) == [("1000", 1), ("2000", 2)]
    markdown = (out / "report.md").read_text()
    assert "| none · track.documents=2000 | loopback | 1 | 1 | age | 2 |" in markdown
    assert "| none · track.documents=1000 | loopback | 1 | 1 | age | 1 |" in markdown
    timelines = sorted(p.name for p in (out / "figures").glob("timeline-*.png"))
    assert len(timelines) == 3  # one per input run, the repetition's too
    # the same two runs as compare's sides: labelled by the key that tells them apart
    compared = esdash("compare", str(a), str(b), env_runs=tmp_path / "runs")
    assert "the sides differ in track.documents (2000 vs 1000)" in compared.stdout


def test_fingerprint_without_records_is_the_session_with_defaults() -> None:
    from esdash.rundir.records import Results

    found = fingerprint({"track": {"name": "mri"}}, results=Results())
    assert found["benchmark.warmup"] == 5.0 and found["benchmark.duration"] == 30.0
    assert found["cluster.heap"] == 1024**3 and found["engine"] == "elasticsearch"
    assert found["encryption.mode"] == "none" and found["engine.version"] is None
    assert found["corpus.identity"] is None and found["steps"] is None


def test_the_order_is_what_the_plan_made_whatever_the_session_called_it(tmp_path: Path) -> None:
    """``order = "auto"`` and ``order = "listed"`` that planned the same rounds are one
    configuration; the plan, not the words, is the measurement."""
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    set_session("benchmark.order", "auto")(a)
    set_session("benchmark.order", "listed")(b)
    first, second = load_inputs([str(a), str(b)]).entries
    assert first.fingerprint["benchmark.order"] == "listed"  # the fixture's plan
    assert first.key == second.key
