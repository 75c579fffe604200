"""`esdash compare`: exact differences, and the noise rule for single and repeated runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import synthetic
from support.cli import esdash

from esdash.errors import BadInput
from esdash.view.compare import compare, judge, load_side

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
LAT = [2.0, 2.5, 3.0, 4.0]


def rows(records: list[dict], metric: str) -> list[dict]:
    return [r for r in records if r["metric"] == metric]


def test_single_runs_use_the_interval_spread(tmp_path: Path) -> None:
    base = synthetic.write_run(
        tmp_path, "base", {"s": {"q": synthetic.op(LAT, rates=[90, 100, 110], requests_per_s=100)}}
    )
    near = synthetic.write_run(
        tmp_path, "near", {"s": {"q": synthetic.op(LAT, rates=[100, 105, 110], requests_per_s=105)}}
    )
    far = synthetic.write_run(
        tmp_path, "far", {"s": {"q": synthetic.op(LAT, rates=[140, 150, 160], requests_per_s=150)}}
    )
    records = compare(load_side(str(base)), [load_side(str(near)), load_side(str(far))])
    first, second = rows(records, "req/s")
    assert (first["contender"], first["diff"], first["pct"]) == ("near", 5.0, 5.0)
    assert first["significant"] is False  # 5 <= max(std 10, std 5)
    assert first["note"] == "~ within interval spread (+-10)"
    assert (second["contender"], second["diff"], second["pct"]) == ("far", 50.0, 50.0)
    assert second["significant"] is True and second["note"].startswith("beyond interval spread")


def test_repetitions_use_the_run_to_run_ranges(tmp_path: Path) -> None:
    def runs(mode: str, rates: list[float]) -> list[tuple[dict, int, Path]]:
        return [
            (
                {"encryption.mode": mode},
                k + 1,
                synthetic.write_run(
                    tmp_path,
                    f"{mode}{k}",
                    {"s": {"q": synthetic.op(LAT, requests_per_s=rate)}},
                    {"mode": mode},
                ),
            )
            for k, rate in enumerate(rates)
        ]

    campaign = synthetic.write_campaign(
        tmp_path,
        "camp",
        runs("none", [100, 104, 98]) + runs("gocryptfs", [97, 99, 95]) + runs("abe", [60, 64, 61]),
    )
    result = esdash(
        "compare",
        f"{campaign}#mode=none",
        f"{campaign}#mode=gocryptfs",
        f"{campaign}#mode=abe",
        "--format",
        "json",
        env_runs=tmp_path / "runs",
    )
    document = json.loads(result.stdout)
    assert document["baseline"] == "none, loopback, 1 node, 1 workers/node (3 runs)"
    gocryptfs, abe = rows(document["comparisons"], "req/s")
    assert gocryptfs["baseline_runs"] == [100, 104, 98] and gocryptfs["value"] == 97.0
    assert gocryptfs["diff"] == pytest.approx(97 - 302 / 3)
    assert gocryptfs["note"] == "~ within the spread of repetitions (ranges overlap)"  # 98 <= 99
    assert abe["significant"] is True and abe["note"] == "outside the spread of repetitions"
    text = esdash("compare", f"{campaign}#mode=none", f"{campaign}#mode=abe", env_runs=tmp_path)
    assert "-38.7%" in text.stdout and "outside the spread of repetitions" in text.stdout
    with pytest.raises(BadInput, match="holds 3 configurations"):
        load_side(str(campaign))


def test_latency_spread_of_single_runs_comes_from_the_stream() -> None:
    records = compare(
        load_side(str(FIXTURES / "dev-20261121-032918")),
        [load_side(str(FIXTURES / "dev2-20261121-033750"))],
    )
    gmean = next(r for r in rows(records, "gmean ms") if r["query"] == "body_part")
    assert gmean["note"].split(" (")[0] in ("~ within interval spread", "beyond interval spread")


def test_the_rule() -> None:
    assert judge([1.0], [1.2], 0.5, None) == (False, "~ within interval spread (+-0.5)")
    assert judge([1.0], [2.0], 0.5, 0.2) == (True, "beyond interval spread (+-0.5)")
    assert judge([1.0], [2.0], None, None) == (None, "no spread known")
    assert judge([1.0, 3.0], [2.0], None, None)[0] is False
    assert judge([1.0, 1.5], [2.0, 2.5], None, None)[0] is True
