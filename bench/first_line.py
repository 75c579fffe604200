#!/usr/bin/env python3
"""How long does each README command keep its user waiting for a sign of life?

Runs every command of the README's table "What a user does" as a subprocess, its standard
output and error on one pipe (or a terminal, ``--pty``), and records when each line
appears.  Prints per command: the time to its first line and its longest silent gap (from
the start to the first line, between two lines, or from the last line to the exit), with
the line the gap followed.  Goals (issue 17, item 6): first line under 1 s, no gap of 2 s
or more.

    .venv/bin/python bench/first_line.py                 # every command (starts clusters)
    .venv/bin/python bench/first_line.py --no-cluster    # only those that need no cluster
    .venv/bin/python bench/first_line.py --only report --only compare --json

Commands that need a cluster use a 1-node session in a scratch directory (its own runs
and data directory, free ports; the ES distribution from esdash's cache), one cluster at a
time: ``cluster up``, ``cluster status``, ``run --cluster``, ``cluster down``, ``cluster
status`` after it, and ``run`` (which starts and stops its own).  ``fetch`` is timed twice:
the cached default version, and ``--version 99.0.0`` (Maven asks the repository).  With a
terminal (``--pty``) any output counts as a sign of life, since progress bars redraw in
place instead of writing lines.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _common import free_port_block, throwaway_key

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUNS = sorted((ROOT / "tests" / "fixtures" / "runs").glob("dev*"))

#: Goals: the first line within this many seconds, and no silence this long.
FIRST_LINE_GOAL = 1.0
GAP_GOAL = 2.0

#: Seconds one command may take before the bench gives up on it (and says so).
COMMAND_TIMEOUT = 900.0


@dataclass
class Timing:
    """When a command's lines appeared, relative to its start."""

    name: str
    argv: list[str]
    exit_code: int | None = None
    total: float = 0.0
    first_line: float | None = None
    longest_gap: float = 0.0
    gap_after: str = ""
    lines: int = 0
    output_tail: list[str] = field(default_factory=list)

    @property
    def meets_goals(self) -> bool:
        return (
            self.first_line is not None
            and self.first_line < FIRST_LINE_GOAL
            and self.longest_gap < GAP_GOAL
        )


# --------------------------------------------------------------- the README's table


def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """``esdash ...`` of every row of the table under "What a user does", as written there.

    A cell may hold two commands (``esdash cluster status RUN` / `down RUN``): the second
    is completed with the first one's prefix.
    """
    text = readme.read_text()
    section = text.split("## What a user does", 1)[1].split("\n\n", 2)[1]
    commands = []
    for row in section.splitlines():
        cells = re.split(r"(?<!\\)\|", row)  # "auto\|require" stays in its cell
        if len(cells) < 3 or not cells[1].strip().startswith("`esdash"):
            continue
        found = re.findall(r"`([^`]+)`", cells[1])
        commands.append(found[0])
        prefix = " ".join(found[0].split()[:2])
        commands.extend(f"{prefix} {more}" for more in found[1:])
    return commands


# ----------------------------------------------------------------------- scratch setup


@dataclass
class Scratch:
    """Sessions, runs and outputs of the bench, in a temporary directory."""

    root: Path
    session: Path
    abe_session: Path
    campaign: Path
    env: dict[str, str]
    cluster_run: Path | None = None


def make_scratch(root: Path) -> Scratch:
    """A 1-node session (free ports, small corpus, short steps), an ABE one and a campaign."""
    user = "esdash" if os.geteuid() == 0 else os.environ.get("USER", "esdash")
    root.chmod(0o755)  # the node user enters the run directories below it
    body = (
        '[cluster]\nnodes = 1\nheap = "256m"\ninterconnect = "loopback"\n'
        f'run_as = "{user}"\nhttp_port = {free_port_block(1)}\n'
        f'transport_port = {free_port_block(1)}\ndata_dir = "data"\n'
        '[track]\nname = "mri"\ndocuments = 2000\n'
        '[benchmark]\nwarmup = "1s"\nduration = "2s"\nwarmup_max = "0s"\n'
    )
    session = root / "first-line.toml"
    session.write_text(f'name = "first-line"\n{body}')
    key = root / "abe.key"
    throwaway_key(key)
    abe_session = root / "first-line-abe.toml"
    abe_session.write_text(
        f'name = "first-line-abe"\n{body}[encryption]\nmode = "abe"\nkey_file = "{key}"\n'
    )
    campaign = root / "first-line-campaign.toml"
    campaign.write_text(
        f'name = "first-line"\nsession = "{session.name}"\n'
        "[axes]\nbenchmark.workers_per_node = [1, 2]\n"
    )
    env = {**os.environ, "ESDASH_RUNS": str(root / "runs"), "PYTHONUNBUFFERED": "1"}
    env.pop("ESDASH_PROGRESS", None)
    return Scratch(root, session, abe_session, campaign, env)


# ------------------------------------------------------------------------ the commands


def plan(scratch: Scratch, readme: list[str], cluster: bool) -> list[tuple[str, list[str]]]:
    """``(name, argv)`` for each README command, in an order clusters allow (one at a time).

    Commands needing the cluster of ``cluster up`` get its run directory when it is known,
    so this is a list of templates: ``{RUN}`` is filled in by :func:`main`.
    """
    s, out = scratch, scratch.root / "out"
    fixtures = [str(p) for p in FIXTURE_RUNS]
    free: dict[str, list[tuple[str, list[str]]]] = {
        "session check": [("session check", ["session", "check", str(s.session)])],
        "plan": [("plan", ["plan", str(s.session)])],
        "doctor": [("doctor", ["doctor", "--session", str(s.session)])],
        "fetch": [
            ("fetch (cached)", ["fetch", "elasticsearch"]),
            ("fetch --version 99.0.0", ["fetch", "elasticsearch", "--version", "99.0.0"]),
        ],
        "submit": [("submit --dry-run", ["submit", str(s.session), "--dry-run"])],
        "plugins": [("plugins", ["plugins"])],
        "export-rally": [("export-rally", ["export-rally", str(s.session), str(out / "rally")])],
        "sweep": [("sweep --dry-run", ["sweep", str(s.campaign), "--dry-run"])],
        "report": [("report", ["report", *fixtures, "--format", "md", "--out", str(out / "r")])],
        "leakage": [("leakage", ["leakage", str(s.abe_session), "--documents", "2000"])],
        "compare": [("compare", ["compare", *fixtures])],
    }
    clustered: dict[str, list[tuple[str, list[str]]]] = {
        "cluster up": [("cluster up", ["cluster", "up", str(s.session)])],
        "cluster status": [("cluster status", ["cluster", "status", "{RUN}"])],
        "run": [
            ("run --cluster", ["run", str(s.session), "--cluster", "{RUN}"]),
            ("cluster down", ["cluster", "down", "{RUN}"]),
            ("cluster status (after down)", ["cluster", "status", "{RUN}"]),
            ("run --cluster (stopped)", ["run", str(s.session), "--cluster", "{RUN}"]),
            ("run", ["run", str(s.session)]),
        ],
    }
    chosen: list[tuple[str, list[str]]] = []
    for command in readme:
        words = command.split()[1:]
        key = " ".join(words[:2]) if words[0] in ("session", "cluster") else words[0]
        if key in free:
            chosen.extend(free.pop(key))
        elif key in clustered and cluster:
            chosen.extend(clustered.pop(key))
        elif key not in clustered and key != "cluster down":
            print(f"first_line: no way to run `{command}` here; add it to plan()", file=sys.stderr)
    return chosen


# ---------------------------------------------------------------------- measuring


def measure(name: str, argv: list[str], env: dict[str, str], use_pty: bool) -> Timing:
    """Run ``esdash ARGV`` and time its lines (or, on a terminal, any output)."""
    timing = Timing(name, argv)
    command = [sys.executable, "-m", "esdash", *argv]
    if use_pty:
        reader, writer = pty.openpty()
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=writer, stderr=writer, env=env
        )
        os.close(writer)
    else:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        reader = proc.stdout.fileno()
    start = last = time.monotonic()
    last_text, pending = "(start)", b""
    with selectors.DefaultSelector() as selector:
        selector.register(reader, selectors.EVENT_READ)
        while True:
            if time.monotonic() - start > COMMAND_TIMEOUT:
                proc.kill()
                timing.gap_after += " (timed out)"
                break
            if not selector.select(timeout=0.5):
                continue
            try:
                chunk = os.read(reader, 65536)
            except OSError:  # a pty whose last writer closed
                chunk = b""
            if not chunk:
                break
            now = time.monotonic()
            pending += chunk
            *complete, pending = re.split(rb"\r?\n", pending)
            if use_pty and not complete:
                complete = [pending[-80:]]  # a redraw in place is a sign of life too
            for raw in complete:
                text = raw.decode(errors="replace").strip()
                if not text and not use_pty:
                    continue
                gap = now - last
                if timing.first_line is None:
                    timing.first_line = now - start
                if gap > timing.longest_gap:
                    timing.longest_gap, timing.gap_after = gap, last_text
                last, last_text = now, _shown(text)
                timing.lines += 1
                timing.output_tail = (timing.output_tail + [_shown(text)])[-3:]
    proc.wait()
    end = time.monotonic()
    if end - last > timing.longest_gap:  # silence before the exit counts too
        timing.longest_gap, timing.gap_after = end - last, f"{last_text} (then exit)"
    timing.total = end - start
    timing.exit_code = proc.returncode
    if use_pty:
        os.close(reader)
    return timing


def _shown(text: str) -> str:
    """A line as the table shows it: no escape codes, at most 60 characters."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).strip()
    return text if len(text) <= 60 else text[:57] + "..."


def run_dir_of(runs: Path) -> Path | None:
    """The run directory ``cluster up`` made (the newest under the scratch runs)."""
    found = sorted(p for p in runs.glob("first-line-*") if p.is_dir())
    return found[-1] if found else None


# ---------------------------------------------------------------------- reporting


def table(timings: list[Timing]) -> str:
    headers = ("command", "exit", "first line s", "longest gap s", "total s", "goals", "gap after")
    rows = [
        (
            t.name,
            "-" if t.exit_code is None else str(t.exit_code),
            "-" if t.first_line is None else f"{t.first_line:.2f}",
            f"{t.longest_gap:.2f}",
            f"{t.total:.1f}",
            "ok" if t.meets_goals else "MISSED",
            t.gap_after,
        )
        for t in timings
    ]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.append(
        f"goals: first line < {FIRST_LINE_GOAL:g} s, longest silent gap < {GAP_GOAL:g} s; "
        f"{sum(t.meets_goals for t in timings)} of {len(timings)} met"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cluster", action="store_true", help="only commands without one")
    parser.add_argument("--only", action="append", default=[], help="a command name (repeat)")
    parser.add_argument("--pty", action="store_true", help="run on a terminal, not a pipe")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="esdash-first-line-"))
    scratch = make_scratch(root)
    timings: list[Timing] = []
    try:
        for name, argv in plan(scratch, readme_commands(), cluster=not args.no_cluster):
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            if "{RUN}" in argv:
                if scratch.cluster_run is None:
                    print(f"first_line: skipped {name}: no cluster run", file=sys.stderr)
                    continue
                argv = [str(scratch.cluster_run) if a == "{RUN}" else a for a in argv]
            print(f"first_line: {name} ...", file=sys.stderr, flush=True)
            timing = measure(name, argv, scratch.env, args.pty)
            timings.append(timing)
            if name == "cluster up" and timing.exit_code == 0:
                scratch.cluster_run = run_dir_of(root / "runs")
    finally:
        if scratch.cluster_run is not None:  # whatever happened: no cluster is left behind
            subprocess.run(
                [sys.executable, "-m", "esdash", "cluster", "down", str(scratch.cluster_run)],
                env=scratch.env,
                capture_output=True,
                timeout=120,
            )
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps([asdict(t) | {"meets_goals": t.meets_goals} for t in timings], indent=2))
    else:
        print(table(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
