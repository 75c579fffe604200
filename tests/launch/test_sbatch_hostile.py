"""A hostile session cannot change what ``job.sbatch`` asks Slurm for or what it runs.

Every value of a session that reaches the batch script either is refused, with one line
naming its key (exit code 2 from ``esdash session check`` and ``esdash submit --dry-run``),
or the script reads back -- the way sbatch reads #SBATCH lines, and the way a shell splits
the command line -- to exactly the directives and the argv esdash meant.

sbatch (``src/sbatch/opt.c``: ``_opt_batch_script``, ``_get_argument``) takes options only from
lines that begin with ``#SBATCH`` before the first line that is neither blank nor a comment;
it splits them at white space, drops quotes, reads a backslash as an escape and an unquoted
``#`` as the start of a comment, and reads ``hetjob``/``packjob`` anywhere in such a line (any
case) as the start of another component of a heterogeneous job.  :func:`sbatch_reads` does the
same; sbatch itself cannot run here without a Slurm controller (tests/cluster has those).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from esdash.campaign.spec import CampaignError, parse_campaign
from esdash.errors import BadInput
from esdash.launch.slurm import batch_script, python_command
from esdash.plugin.steps import parse_steps
from esdash.prepare.slurm_job import job_request
from esdash.rundir.layout import RunDir
from esdash.session import Session, SessionError, parse_session

VALID = {
    "name": "hostile",
    "cluster": {"nodes": 3, "nodes_per_host": 2, "heap": "256m", "run_as": "esdash"},
    "track": {"name": "mri", "documents": 100},
    "slurm": {"time": "00:10:00", "partition": "debug", "account": "proj", "extra": []},
}

#: Text that would end a line, start a command or a comment, or be read differently.
NASTY = {
    "newline": "a\nb",
    "trailing-newline": "a\n",
    "directive": "a\n#SBATCH --time=99:00:00",
    "command": "a\nrm -rf ~",
    "semicolon": "a;id",
    "subshell": "a$(id)",
    "backticks": "a`id`",
    "space": "a b",
    "single-quote": "a'b",
    "double-quote": 'a"b',
    "backslash": "a\\b",
    "hash": "a#b",
    "dollar": "a$HOME",
    "nul": "a\x00b",
    "carriage-return": "a\rb",
    "tab": "a\tb",
    "line-separator": "a\u2028b",
    "next-line": "a\x85b",
    "bidi-override": "a\u202eb",
    "hetjob": "a-HetJob",
    "packjob": "packjob",
    "empty": "",
}


def with_value(key: str, text: str) -> dict:
    """``VALID`` with ``key`` (``name``, ``slurm.partition``, ``slurm.extra``, ...) set so that
    ``text`` is in it: an option's value for ``slurm.extra``, the whole value otherwise."""
    data = json.loads(json.dumps(VALID))
    if key == "name":
        data["name"] = text
    elif key == "slurm.extra":
        data["slurm"]["extra"] = ["--exclusive", f"--comment={text}"]
    elif key == "slurm.time":
        data["slurm"]["time"] = "30" + text.removeprefix("a")  # "30\n", "30;id", "30", ...
    else:
        data["slurm"][key.split(".")[1]] = text
    return data


#: The only (key, text) pairs above that make a valid session: time "30", "--comment=".
ACCEPTED = {("slurm.time", ""), ("slurm.extra", "")}
HOSTILE = [
    pytest.param(key, text, id=f"{key}-{name}")
    for key in ("name", "slurm.partition", "slurm.account", "slurm.time", "slurm.extra")
    for name, text in NASTY.items()
]
#: Whole ``slurm.extra`` entries that are not one plain option.
HOSTILE_EXTRA = [
    "--exclusive\n#SBATCH --time=99:00:00",
    " --exclusive",
    "--exclusive ",
    "exclusive",
    ":--exclusive",
    "--gres=gpu:2 --exclusive",
    "--exclusive;id",
    "--time=99:00:00",
    "-t99",
    "--tim=99",
    "--output=/tmp/elsewhere",
    "-D/tmp",
    "--part=other",
    "-Aother",
    "--job-name=other",
    "--nodes=99",
    "--ntasks-per-node=99",
    "--hetjob",
]


# ----------------------------------------------------------------------- reading back


def get_arguments(text: str, line: str) -> list[str]:
    """The arguments sbatch's ``_get_argument`` finds in the rest of an #SBATCH line."""
    arguments: list[str] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return arguments
        assert text[at] != ":", f"sbatch refuses a leading ':' in {line!r}"
        word, quote, escaped = "", "", False
        while at < len(text) and (quote or not text[at].isspace()):
            char = text[at]
            at += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                return [*arguments, word] if word else arguments
            word += char
        assert not quote, f"sbatch refuses the unmatched {quote} in {line!r}"
        if word:
            arguments.append(word)


def sbatch_reads(script: str) -> tuple[list[str], list[list[str]]]:
    """The options sbatch takes from ``script`` and the shell's argv of each command line."""
    assert script.endswith("\n")
    lines = script[:-1].split("\n")
    # what sbatch and bash call lines is what every reader calls lines (no U+2028, \r, ...)
    assert lines == script.splitlines(), script
    options: list[str] = []
    at = 0
    for at, line in enumerate(lines):  # noqa: B007 - `at` is the first command line after it
        if line.startswith("#SBATCH"):
            lowered = line.lower()
            assert "hetjob" not in lowered and "packjob" not in lowered, line
            options += get_arguments(line[len("#SBATCH") :], line)
        elif line.strip() and not line.lstrip().startswith("#"):
            break
    commands = [
        shlex.split(line) for line in lines[at:] if line.strip() and not line.startswith("#")
    ]
    return options, commands


def intended(session: Session, run: RunDir) -> list[str]:
    """The directives the session means, written out here independently of esdash."""
    slurm = session.slurm
    hosts = -(-session.cluster.nodes // session.cluster.nodes_per_host)
    return [
        f"--job-name=esdash-{session.name}",
        f"--nodes={hosts}",
        f"--ntasks-per-node={session.cluster.nodes_per_host}",
        f"--time={slurm.time}",
        f"--output={run.path}/slurm-%j.out",
        f"--chdir={run.path}",
        *([f"--partition={slurm.partition}"] if slurm.partition else []),
        *([f"--account={slurm.account}"] if slurm.account else []),
        *slurm.extra,
    ]


def assert_refused_naming(error: SessionError | CampaignError, key: str) -> None:
    """One problem, on one line, naming ``key``; the bad text shown escaped."""
    message = str(error)
    problems = message.splitlines()[1:]
    assert len(problems) == 1, message
    assert problems[0].split(": ", 2)[1].startswith(key), message


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("key", "text"), HOSTILE)
def test_hostile_value_is_refused_or_reads_back_exactly(
    key: str, text: str, tmp_path: Path
) -> None:
    data = with_value(key, text)
    if (key, text) not in ACCEPTED:
        with pytest.raises(SessionError) as error:
            parse_session(data, tmp_path / "s.toml")
        assert_refused_naming(error.value, key)
        return
    session = parse_session(data, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / "runs", session.name)
    command = python_command("cluster", "up", str(tmp_path / "s.toml"), "--run-dir", str(run.path))
    options, commands = sbatch_reads(batch_script(job_request(session), run, command))
    assert options == intended(session, run)
    assert commands == [["set", "-euo", "pipefail"], ["exec", *command]]


@pytest.mark.parametrize("option", HOSTILE_EXTRA)
def test_an_extra_that_is_not_one_plain_option_is_refused(option: str, tmp_path: Path) -> None:
    data = json.loads(json.dumps(VALID))
    data["slurm"]["extra"] = ["--exclusive", option]
    with pytest.raises(SessionError) as error:
        parse_session(data, tmp_path / "s.toml")
    assert_refused_naming(error.value, "slurm.extra[1]")


def test_real_slurm_values_read_back_exactly(tmp_path: Path) -> None:
    """What sites write: lists, constraints, dependencies, mail, node ranges, signals."""
    data = json.loads(json.dumps(VALID))
    data["slurm"] = {
        "time": "1-12:00:00",
        "partition": "standard96,large96",
        "account": "proj-1.x",
        "extra": [
            "--exclusive",
            "--constraint=[ib|opa]&gpu*2",
            "--dependency=afterok:1?afterany:2",
            "-Cgpu",
            "--mail-user=someone@example.org",
            "--mail-type=END,FAIL",
            "--export=ALL,X=1",
            "--exclude=node[01-05]",
            "--ntasks=6",
            "--signal=B:USR1@60",
            "--begin=now+60",
            "--gres=gpu:a100:2",
            "--comment=(x)~y%z",
        ],
    }
    session = parse_session(data, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / "runs", session.name)
    command = python_command("run", str(tmp_path / "s.toml"), "--run-dir", str(run.path))
    options, commands = sbatch_reads(batch_script(job_request(session), run, command))
    assert options == intended(session, run)
    assert commands == [["set", "-euo", "pipefail"], ["exec", *command]]


def test_the_command_line_gives_bash_exactly_the_argv(tmp_path: Path) -> None:
    """Paths with shell syntax in them are quoted: bash runs the script's command line and the
    program receives each word as it was, nothing executed."""
    session = parse_session(VALID, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / "runs", session.name)
    words = ["a;b", "$(touch pwned)", "`touch pwned`", "a b", "it's", 'say "hi"', "$HOME", "é"]
    command = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *words]
    script = batch_script(job_request(session), run, command)
    assert sbatch_reads(script)[1][-1] == ["exec", *command]
    (tmp_path / "job.sbatch").write_text(script)
    result = subprocess.run(
        ["bash", str(tmp_path / "job.sbatch")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == words
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("word", ["a\nb", "a\rb", "a\u2028b", "a\x85b", "a\x1bb"])
def test_a_command_word_that_would_break_its_line_is_refused(word: str, tmp_path: Path) -> None:
    session = parse_session(VALID, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / "runs", session.name)
    with pytest.raises(BadInput, match="the job's command cannot hold") as error:
        batch_script(job_request(session), run, python_command("run", f"/x/{word}.toml"))
    assert len(str(error.value).splitlines()) == 1


@pytest.mark.parametrize("directory", ["my runs", "runs%j", "runs\nx", "run's", "hetjob-runs"])
def test_a_run_directory_sbatch_would_misread_is_refused(directory: str, tmp_path: Path) -> None:
    session = parse_session(VALID, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / directory, session.name)
    with pytest.raises(BadInput, match="ESDASH_RUNS") as error:
        batch_script(job_request(session), run, python_command("run", "s.toml"))
    assert str(error.value).startswith(f"run directory {str(run.path)!r} cannot be written")
    assert len(str(error.value).splitlines()) == 1


def test_a_session_built_in_code_is_held_to_the_same_rule(tmp_path: Path) -> None:
    """batch_script checks again what parse_session checks: a Session made by code (or
    changed with dataclasses.replace) cannot slip a directive in."""
    import dataclasses

    session = parse_session(VALID, tmp_path / "s.toml")
    run = RunDir.create(tmp_path / "runs", session.name)
    bad = dataclasses.replace(
        session, slurm=dataclasses.replace(session.slurm, partition="debug\nrm -rf ~")
    )
    with pytest.raises(BadInput, match="slurm.partition: 'debug\\\\nrm -rf ~' cannot be"):
        batch_script(job_request(bad), run, python_command("run", "s.toml"))


# ------------------------------------------------------------------------- the CLI

CLI_CASES = {
    "name": with_value("name", "nl\n"),
    "slurm.partition": with_value("slurm.partition", NASTY["directive"]),
    "slurm.account": with_value("slurm.account", NASTY["subshell"]),
    "slurm.time": with_value("slurm.time", NASTY["line-separator"]),
    "slurm.extra[1]": with_value("slurm.extra", NASTY["nul"]),
}


def write_sessions(directory: Path) -> dict[str, Path]:
    paths = {}
    for index, (key, data) in enumerate(CLI_CASES.items()):
        paths[key] = directory / f"hostile-{index}.toml"
        paths[key].write_text(tomli_w.dumps(data))
    return paths


def assert_one_problem_line(stderr: str, path: Path, key: str) -> None:
    """The file's error is its header and one problem line naming the key; nothing of the
    hostile text starts a line of its own."""
    lines = stderr.splitlines()
    assert all(line.startswith(("esdash: error: ", "  ")) for line in lines), stderr
    mine = [line for line in lines if line.startswith(f"  {path}: ")]
    assert len(mine) == 1, stderr
    assert mine[0].startswith(f"  {path}: {key}: "), stderr


def test_session_check_refuses_each_hostile_file_naming_the_key(tmp_path: Path) -> None:
    paths = write_sessions(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "session", "check", *map(str, paths.values())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for key, path in paths.items():
        assert_one_problem_line(result.stderr, path, key)


@pytest.mark.parametrize("key", list(CLI_CASES))
def test_submit_dry_run_refuses_and_writes_nothing(key: str, tmp_path: Path) -> None:
    path = write_sessions(tmp_path)[key]
    runs = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, "-m", "esdash", "submit", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        env={**os.environ, "ESDASH_RUNS": str(runs), "ESDASH_CACHE": str(tmp_path / "cache")},
        timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert_one_problem_line(result.stderr, path, key)
    assert "wrote" not in result.stdout
    assert not runs.exists() or not any(runs.rglob("*"))


# ------------------------------------------------------------- names elsewhere


@pytest.mark.parametrize("name", ["q\n", "q\r", "q\u2028", "q\x85", "q\x00", "q w", "q;id"])
def test_query_and_step_names_are_whole_words(name: str) -> None:
    body = {"body": {"query": {"match_all": {}}}}
    for steps, where in (
        ([{"name": name, "search_queries": [body]}], "[0].name"),
        ([{"search_queries": [{**body, "name": name}]}], "[0].search_queries[0].name"),
    ):
        with pytest.raises(BadInput) as error:
            parse_steps(json.dumps(steps), "queries.json")
        message = str(error.value)
        assert f"query file queries.json, line 1, {where}: expected a name" in message
        assert len(message.splitlines()) == 1, message


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"name": "study\n"}, "name"),
        ({"slurm": {"partition": NASTY["directive"]}}, "slurm.partition"),
        ({"slurm": {"extra": ["--exclusive;id"]}}, "slurm.extra[0]"),
    ],
)
def test_a_campaign_holds_its_name_and_slurm_to_the_same_rule(
    table: dict, key: str, tmp_path: Path
) -> None:
    (tmp_path / "base.toml").write_text(tomli_w.dumps(VALID))
    campaign = {"name": "study", "session": "base.toml", "axes": {"cluster": {"nodes": [1, 2]}}}
    campaign.update(table)
    with pytest.raises(CampaignError) as error:
        parse_campaign(campaign, tmp_path / "study.toml")
    assert_refused_naming(error.value, key)
