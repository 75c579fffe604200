"""The fuzz campaign's settings, seeds, environment and per-kind case counts.

Hypothesis runs derandomized (no example database), with no deadline (a case's time is
bounded by its own alarm, ``fuzzlib``).  Derandomized is not fully fixed: Hypothesis (6.170)
mixes literal constants of the modules already imported into its draws, so the cases of a
test depend on which tests ran before it in the same process (the suite runs on several
pytest-xdist processes); a failure prints its draws, the damage to redo by hand.  Each
test module takes the profile below and sets its own ``max_examples``; together they run
more than 5,000 cases.  The counts per input kind are printed at the end of a session run
in one process (``-n 0``, or ``ESDASH_TEST_WORKERS=0 scripts/test``): the pytest-xdist
workers count their own cases and the controller, which runs no test, has none to print.

``ESDASH_FUZZ_SURVEY=FILE`` keeps a test going after its first failing case: every failure
is appended to FILE (one JSON object per line) and the test still fails at its end with the
number found.  Without it a failure stops the test and Hypothesis shrinks it to a minimal
damage; with it one run lists every failing site, for fixing them together.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import fuzzlib
import pytest
import seeds as seed_inputs
from hypothesis import HealthCheck, Phase, settings

#: Shrinking a failure replays it hundreds of times (a hang 20 s each) for up to five
#: minutes per test; the failure message already names the damage and the command, so
#: it is off unless ``ESDASH_FUZZ_SHRINK=1`` asks for the minimal example.
_PHASES = (
    tuple(Phase)
    if os.environ.get("ESDASH_FUZZ_SHRINK")
    else tuple(phase for phase in Phase if phase not in (Phase.shrink, Phase.explain))
)

settings.register_profile(
    "esdash-fuzz",
    phases=_PHASES,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
)

#: Input kinds in the order the summary lists them.
KINDS = ("runs", "sessions", "secrets", "corpora", "tracks", "campaigns")


@pytest.fixture(scope="session")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> seed_inputs.Seeds:
    """Every valid seed input, built once; cases copy what they damage."""
    return seed_inputs.build(tmp_path_factory.mktemp("fuzz-seeds"))


@pytest.fixture(scope="module", autouse=True)
def fuzz_environment(seeds: seed_inputs.Seeds) -> Iterator[None]:
    """esdash's cache is the seeds' (the distribution's files, generated corpora); runs
    that a case writes (``submit --dry-run``) go to a scratch directory, never the repo.
    Per module, so that the tests after these in a whole-suite run see the real ones."""
    import esdash.cli

    scratch = Path(tempfile.mkdtemp(prefix="fuzz-runs-"))
    with pytest.MonkeyPatch.context() as patch:
        # The parser is the same for every call and building it (every sub-command's
        # module imported and registered) costs more than most cases: built once here.  The
        # cases through the real executable build it each time, as users do.
        patch.setattr(esdash.cli, "build_parser", functools.cache(esdash.cli.build_parser))
        patch.setenv("ESDASH_CACHE", str(seeds.cache))
        patch.setenv("ESDASH_RUNS", str(scratch))
        patch.setenv("NO_COLOR", "1")
        patch.delenv("ESDASH_USER", raising=False)
        yield
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def mri_sample(seeds: seed_inputs.Seeds) -> Path:
    """The generated MRI sample ``leakage --documents`` analyses, in the seeds' cache,
    written by esdash itself (a first, undamaged leakage run)."""
    session = seeds.sessions / "abe-key.toml"
    argv = ["leakage", "--documents", str(seed_inputs.SAMPLE_DOCUMENTS), str(session)]
    with fuzzlib.environment(ESDASH_CACHE=str(seeds.cache)):
        outcome = fuzzlib.call_main(argv)
    assert outcome.code == 0, outcome.err
    corpora = seeds.cache / "corpora"
    assert any(corpora.glob("*.ndjson")), sorted(corpora.iterdir())
    return corpora


@pytest.fixture
def sink(request: pytest.FixtureRequest) -> Iterator[fuzzlib.Sink]:
    """Where a failing case goes: raised at once, or (survey mode) logged and counted, the
    test failing at its end."""
    survey = os.environ.get("ESDASH_FUZZ_SURVEY")
    if not survey:
        yield fuzzlib.raise_failure
        return
    found: list[str] = []

    def record(case: fuzzlib.Case, problems: list[str]) -> None:
        found.append(fuzzlib.report(case, problems))
        entry = {
            "test": request.node.name,
            "kind": case.kind,
            "argv": case.argv,
            "damage": case.damage,
            "problems": problems,
        }
        with open(survey, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    yield record
    assert not found, f"{len(found)} failing case(s), the first:\n{found[0]}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The number of cases run per input kind, in process and through the executable."""
    counts = fuzzlib.COUNTS
    if not counts:
        return
    terminalreporter.section("fuzz cases per input kind")
    in_process = {k: counts.get(k, 0) for k in KINDS}
    executable = {k: counts.get(f"{k} (executable)", 0) for k in KINDS}
    for kind in KINDS:
        terminalreporter.write_line(
            f"{kind:<10} {in_process[kind]:>6} in process  {executable[kind]:>4} executable"
        )
    total = sum(in_process.values()) + sum(executable.values())
    terminalreporter.write_line(
        f"{'total':<10} {sum(in_process.values()):>6} in process  "
        f"{sum(executable.values()):>4} executable  = {total} cases"
    )
