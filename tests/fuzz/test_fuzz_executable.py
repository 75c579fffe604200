"""Fuzz: 120 cases through the real ``esdash`` executable, every input kind in turn.

The in-process cases call ``esdash.cli.main``; these run the console script pip installed
next to this interpreter, as a user does: a fresh interpreter, real standard streams (a
pipe), the interpreter's own handling of an exception that escapes, real exit statuses.
The cases are built by the same functions as the in-process ones, from a seeded
:class:`random.Random` instead of Hypothesis, so that two can run at once (an interpreter
start costs a second of CPU: 120 of them are a minute on two cores, what the campaign's
five-minute budget leaves after its in-process cases).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fuzzlib
import test_fuzz_campaigns
import test_fuzz_corpora
import test_fuzz_runs
import test_fuzz_secrets
import test_fuzz_sessions
import test_fuzz_tracks
from fuzzlib import Case, Outcome, RandomPick

EXECUTABLE = Path(sys.executable).parent / "esdash"
#: Case builders, taken in turn.
BUILDERS = (
    test_fuzz_runs.build_case,
    test_fuzz_sessions.build_case,
    test_fuzz_secrets.build_case,
    test_fuzz_corpora.build_rally_case,
    test_fuzz_tracks.build_case,
    test_fuzz_campaigns.build_file_case,
    test_fuzz_runs.build_authors_case,
    test_fuzz_corpora.build_cache_case,
    test_fuzz_campaigns.build_dir_case,
)
#: Processes run at once (the machine has two cores).
PARALLEL = 2
#: Where a traceback's frame lies in esdash's own code.
_FRAME = re.compile(r'File "[^"]*/((?:esdash|plugins)/[^"]+)", line (\d+), in (\S+)')


def run_process(case: Case) -> Outcome:
    """The case's command through the executable: exit status, output, a hang as such."""
    env = {**os.environ, **case.env}
    try:
        done = subprocess.run(
            [str(EXECUTABLE), *case.argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=fuzzlib.PROCESS_TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace")
        return Outcome(None, "", err, hang=True, site="(a process: see its output)")
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    crash = None
    if done.returncode < 0:
        crash = f"killed by signal {signal.Signals(-done.returncode).name}"
    frames = _FRAME.findall(err)
    site = f"{frames[-1][0]}:{frames[-1][1]} ({frames[-1][2]})" if frames else ""
    return Outcome(done.returncode, out, err, crash, site=site)


def test_cases_through_the_real_executable(seeds, mri_sample, sink) -> None:
    assert EXECUTABLE.is_file(), f"{EXECUTABLE}: no esdash console script next to Python"
    count = fuzzlib.examples(120)
    with fuzzlib.scratch() as tmp:
        cases = []
        for number in range(count):
            build = BUILDERS[number % len(BUILDERS)]
            directory = tmp / f"case-{number}"
            directory.mkdir()
            case = build(seeds, RandomPick(7919 * number + 1), directory)
            case.kind = f"{case.kind} (executable)"
            cases.append((case, fuzzlib.snapshot([*case.inputs, *fuzzlib.LINK_TARGETS])))
        with ThreadPoolExecutor(PARALLEL) as pool:
            outcomes = list(pool.map(run_process, (case for case, _ in cases)))
        for (case, before), outcome in zip(cases, outcomes, strict=True):
            fuzzlib.COUNTS[case.kind] += 1
            problems = fuzzlib.verify(case, outcome, before)
            if problems:
                sink(case, problems)
