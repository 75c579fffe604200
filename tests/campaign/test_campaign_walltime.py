"""A campaign's wall time: per point, per cluster (started and stopped once), per Slurm job.

``esdash sweep --submit`` writes one job per cluster size; each runs its clusters one after
the other and every point of a cluster against it.  So a job's time is, per cluster, its
start and stop once plus each point's own ``esdash run --cluster`` (a point that reuses the
index ingests nothing), and the job asks for that sum with the margin when neither the
campaign nor its base session sets ``[slurm] time``.  Real campaign files, the real plan and
estimate, no cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esdash.campaign.plan import EACH, FIRST, REUSE
from esdash.campaign.spec import load_campaign
from esdash.campaign.state import CampaignDir
from esdash.campaign.submit import job_scripts, wall_times
from esdash.prepare.timelimit import time_limit

BASE = """\
name = "base"
[cluster]
heap = "256m"
run_as = "esdash"
[track]
name = "mri"
documents = 4000
[benchmark]
warmup = "1s"
duration = "4s"
warmup_max = "20s"
settle_timeout = "30s"
"""
CAMPAIGN = """\
name = "sizes"
session = "base.toml"
repetitions = 2

[axes]
cluster.nodes = [1, 3]
benchmark.workers_per_node = [1, 2]
"""


@pytest.fixture(autouse=True)
def private_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESDASH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ESDASH_RUNS", str(tmp_path / "runs"))


def campaign_in(tmp_path: Path, text: str = CAMPAIGN, base: str = BASE):
    (tmp_path / "base.toml").write_text(base)
    (tmp_path / "sizes.toml").write_text(text)
    campaign = load_campaign(tmp_path / "sizes.toml")
    directory = CampaignDir(tmp_path / "runs" / "campaigns" / campaign.name)
    return campaign, directory, campaign.points(directory.path)


def test_each_job_sums_its_clusters_once_and_its_points_runs(tmp_path: Path) -> None:
    campaign, directory, points = campaign_in(tmp_path)
    sizes = wall_times(campaign, directory, points, ())
    assert [size.nodes for size in sizes] == [1, 3]
    for size in sizes:
        (cluster,) = size.clusters  # one cluster per size: the axes share [cluster] otherwise
        assert len(cluster.points) == 4
        actions = [point.planned.ingest for point in cluster.points]
        assert actions == [FIRST, REUSE, REUSE, REUSE]
        walls = [point.wall for point in cluster.points]
        assert all(wall is not None for wall in walls)
        ingests = [wall.phase("ingest").seconds for wall in walls]  # type: ignore[union-attr]
        assert ingests[0] == 4000 / 1000.0 and ingests[1:] == [0.0, 0.0, 0.0]
        first = walls[0]
        assert first is not None
        # the cluster starts and stops once; every point counts without them
        assert cluster.cluster_seconds == first.cluster_seconds == 60.0 + 15.0
        runs = sum(wall.run_seconds for wall in walls if wall is not None)
        assert size.seconds == pytest.approx(cluster.cluster_seconds + runs)
        assert size.job_time.own is None
        assert size.job_time.text == time_limit(size.seconds).text
        # a point's own run: corpus, ingest, settling, warm-up, 7 steps in 2 mirrored rounds
        # (order "auto"), results
        assert first.run_seconds == pytest.approx(0.4 + 4.0 + 30.0 + 20.0 + 7 * 2 * 5.0 + 5.0)


def test_only_the_selected_points_count_and_ingest_each_reingests(tmp_path: Path) -> None:
    campaign, directory, points = campaign_in(
        tmp_path, CAMPAIGN.replace("repetitions = 2", 'repetitions = 2\ningest = "each"')
    )
    sizes = wall_times(campaign, directory, points, ("nodes=3", "repetition=1"))
    (size,) = sizes
    assert size.nodes == 3
    (cluster,) = size.clusters
    assert [point.planned.ingest for point in cluster.points] == [EACH, EACH]
    assert all(p.wall and p.wall.phase("ingest").seconds == 4.0 for p in cluster.points)  # type: ignore[union-attr]


def test_the_job_script_asks_for_the_estimate_unless_a_time_is_set(tmp_path: Path) -> None:
    campaign, directory, points = campaign_in(tmp_path)
    sizes = wall_times(campaign, directory, points, ())
    scripts = job_scripts(campaign, directory, points, (), ["--retries", "1"])
    for size, script in zip(sizes, scripts, strict=True):
        assert f"#SBATCH --time={time_limit(size.seconds).text}\n" in script.text
    # a [slurm] time in the campaign is kept, whatever the estimate
    campaign, directory, points = campaign_in(tmp_path, CAMPAIGN + '[slurm]\ntime = "07:00:00"\n')
    for script in job_scripts(campaign, directory, points, (), []):
        assert "#SBATCH --time=07:00:00\n" in script.text
    # and so is one in the base session
    campaign, directory, points = campaign_in(
        tmp_path, CAMPAIGN, BASE + '[slurm]\ntime = "2-00:00:00"\n'
    )
    sizes = wall_times(campaign, directory, points, ())
    assert {size.job_time.text for size in sizes} == {"2-00:00:00"}
    for script in job_scripts(campaign, directory, points, (), [], sizes):
        assert "#SBATCH --time=2-00:00:00\n" in script.text


def test_a_point_without_an_estimate_stops_the_submit_naming_it(tmp_path: Path) -> None:
    """Its track does not load: the sum would leave it out, so no --time is guessed."""
    from esdash.errors import BadInput

    base = BASE.replace('name = "mri"\ndocuments = 4000', 'name = "rally"\npath = "/nonexistent"')
    campaign, directory, points = campaign_in(tmp_path, CAMPAIGN, base)
    sizes = wall_times(campaign, directory, points, ())
    assert all(len(size.missing) == 4 for size in sizes)
    assert all(point.problem for size in sizes for point in size.missing)
    with pytest.raises(BadInput) as caught:
        job_scripts(campaign, directory, points, (), [], sizes)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{campaign.path}: point nodes=1 workers_per_node=1 #1: no wall")
    assert "set [slurm] time in the campaign" in message
