#!/usr/bin/env python3
"""Why does the global warm-up not converge?  A long warm-up, with the JVMs' own work beside it.

    .venv/bin/python bench/warmup_curve.py [--session sessions/quickstart.toml] \\
        [--warmup-max 20m] [--round 5s] [--figure docs/figures/warmup-curve.png]

Runs the session once with a long global warm-up (``warmup_max``) and one short step, and
while it runs samples, every 2 s, every search node's server JVM from ``/proc``: the CPU
seconds of its JIT compiler threads (``C1/C2 CompilerThread``), of its garbage collector
threads and of everything else (searching), and the bench ranks' CPU.  Afterwards it prints,
per warm-up round, each query's cluster throughput (req/s) next to the compiler and search
CPU of that round, and draws them as one figure: the curve the warm-up has to wait out, and
what the JVMs were doing meanwhile.  Run as root on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import psutil
import tomli_w

from esdash.rundir.layout import RunDir

TICKS = os.sysconf("SC_CLK_TCK")
#: The server JVM's main class (not the launcher JVM's), by engine.
SERVER_MAINS = ("org.elasticsearch.bootstrap.Elasticsearch", "org.opensearch.bootstrap")
#: How /proc names a JVM's threads (15 characters at most), by what they do.
CATEGORIES = (
    ("compiler", ("C1 CompilerThre", "C2 CompilerThre", "C2 CompilerThread")),
    ("gc", ("GC Thread", "G1 ", "VM Thread")),
)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a JVM's threads by category (see :data:`CATEGORIES`), from /proc."""
    found = {"compiler": 0.0, "gc": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        kind = next(
            (k for k, prefixes in CATEGORIES if any(name.startswith(p) for p in prefixes)),
            "other",
        )
        found[kind] += seconds
    return found


def server_jvms(run: Path) -> dict[str, int]:
    """``node-k`` -> pid of the server JVM of every node of ``run`` running now."""
    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        text = " ".join(cmd)
        if (
            "org.elasticsearch.bootstrap.Elasticsearch" in text
            or "org.opensearch.bootstrap" in text
        ):
            nodes = f"{RunDir(run).nodes_dir}/"
            for part in cmd:
                if nodes in part:
                    rank = part.split(nodes, 1)[1].split("/", 1)[0]
                    found[f"node-{rank}"] = proc.pid
                    break
    return found


def bench_cpu(run: Path) -> float:
    """CPU seconds of the bench ranks (every process whose command line names ``run``)."""
    total = 0.0
    for proc in psutil.process_iter(["cmdline", "cpu_times"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "esdash.bench.rank" in cmd and str(run) in cmd:
            times = proc.info.get("cpu_times")
            if times is not None:
                total += times.user + times.system
    return total


class Sampler(threading.Thread):
    """Samples :func:`thread_cpu` of every node and the bench's CPU every ``every`` s."""

    def __init__(self, runs: Path, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.runs = runs
        self.every = every
        self.samples: list[dict] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            runs = [p for p in self.runs.glob("*") if RunDir(p).info_file.exists()]
            if not runs:
                continue
            run = runs[0]
            sample = {"time": time.time(), "nodes": {}, "bench": bench_cpu(run)}
            for node, pid in server_jvms(run).items():
                try:
                    sample["nodes"][node] = thread_cpu(pid)
                except OSError:
                    continue
            self.samples.append(sample)


def run_session(args: argparse.Namespace, directory: Path) -> tuple[Path, list[dict]]:
    source = Path(args.session).resolve()
    session = tomllib.loads(source.read_text())
    session["name"] = "warmupcurve"
    bench = session.setdefault("benchmark", {})
    bench.update(warmup_max=args.warmup_max, warmup_round=args.round, warmup="1s", duration="2s")
    cluster = session.setdefault("cluster", {})
    cluster["data_dir"] = str(directory / "data")
    path = directory / "warmupcurve.toml"
    path.write_bytes(tomli_w.dumps(session).encode())
    env = {**os.environ, "ESDASH_RUNS": str(directory / "runs")}
    sampler = Sampler(directory / "runs")
    sampler.start()
    print(f"esdash run {path} (warm-up at most {args.warmup_max}) ...", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "esdash", "run", str(path), "--fresh"],
        env=env,
        capture_output=True,
        text=True,
    )
    sampler.done.set()
    sampler.join()
    if done.returncode not in (0, 3):
        sys.exit(f"esdash run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    run = next(p for p in (directory / "runs").glob("warmupcurve-*"))
    return run, sampler.samples


def warmup_start(run: Path) -> float:
    for line in RunDir(run).stream_file.read_text().splitlines():
        record = json.loads(line)
        phase = record.get("kind") == "phase" and record["data"].get("phase")
        if record.get("type") == "event" and phase == "warmup":
            return float(record["wall"])
    raise SystemExit("no warm-up phase in the stream")


def per_round(samples: list[dict], start: float, seconds: float, rounds: int) -> list[dict]:
    """Compiler, GC and other CPU (cores used, all nodes) and bench CPU in each round."""
    found = []
    for r in range(rounds):
        begin, end = start + r * seconds, start + (r + 1) * seconds
        inside = [s for s in samples if begin <= s["time"] <= end]
        if len(inside) < 2:
            found.append({})
            continue
        first, last = inside[0], inside[-1]
        span = last["time"] - first["time"]
        use = {}
        for kind in ("compiler", "gc", "other"):
            total = sum(
                last["nodes"].get(n, {}).get(kind, 0.0) - first["nodes"].get(n, {}).get(kind, 0.0)
                for n in last["nodes"]
            )
            use[kind] = total / span
        use["bench"] = (last["bench"] - first["bench"]) / span
        found.append(use)
    return found


LABELS = {
    "compiler": "JIT compiler threads",
    "gc": "GC threads",
    "other": "searching (other JVM threads)",
    "bench": "bench ranks",
}


def draw(
    path: Path, rounds: dict[str, list[float]], cpu: list[dict], seconds: float, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for query, rates in rounds.items():
        minutes = [(r + 1) * seconds / 60 for r in range(len(rates))]
        top.plot(minutes, rates, marker="o", markersize=3, label=query)
    top.set_yscale("log")
    top.set_ylabel("cluster req/s in the round (log)")
    top.set_title(f"Global warm-up of {title}: throughput per round")
    top.legend(fontsize=8, ncol=3)
    top.grid(True, which="both", alpha=0.3)
    minutes = [(r + 1) * seconds / 60 for r in range(len(cpu))]
    for kind, colour in (("compiler", "C3"), ("gc", "C2"), ("other", "C0"), ("bench", "C7")):
        label = LABELS[kind]
        bottom.plot(minutes, [c.get(kind, float("nan")) for c in cpu], label=label, color=colour)
    bottom.set_ylabel("CPU cores used (all nodes)")
    bottom.set_xlabel("minutes into the warm-up")
    bottom.legend(fontsize=8)
    bottom.grid(True, alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _at(series: list[float], index: int) -> float:
    return series[index] if index < len(series) else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", default="sessions/quickstart.toml")
    parser.add_argument("--warmup-max", default="20m")
    parser.add_argument("--round", default="5s", help="seconds per query in a round")
    parser.add_argument("--figure", default="docs/figures/warmup-curve.png")
    parser.add_argument("--keep", help="copy the run directory and the samples here")
    parser.add_argument(
        "--from", dest="kept", help="table and figure of a run kept with --keep (runs nothing)"
    )
    args = parser.parse_args()
    if args.kept:
        kept = Path(args.kept)
        report(kept / "run", json.loads((kept / "samples.json").read_text()), args)
        return 0
    with tempfile.TemporaryDirectory(prefix="warmup-curve-") as tmp:
        directory = Path(tmp)
        os.chmod(directory, 0o711)
        run, samples = run_session(args, directory)
        if args.keep:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copytree(run, keep / "run", dirs_exist_ok=True)
            (keep / "samples.json").write_text(json.dumps(samples))
        report(run, samples, args)
    return 0


def report(run: Path, samples: list[dict], args: argparse.Namespace) -> None:
    """The table (per round: each query's req/s, the nodes' CPU by kind) and the figure."""
    warm = json.loads(RunDir(run).results_file.read_text())["global_warmup"]
    start = warmup_start(run)
    rounds = {q: data["rounds"] for q, data in warm["queries"].items()}
    cpu = per_round(samples, start, warm["round_seconds"], warm["rounds"])
    print(f"warm-up: {warm['rounds']} rounds of {warm['round_seconds']:g} s, "
          f"converged {warm['converged']}: {warm.get('reason') or '-'}")  # fmt: skip
    queries = list(rounds)
    print(f"{'round':>5} {'min':>5} " + " ".join(f"{q[:10]:>10}" for q in queries)
          + f" {'jit':>5} {'gc':>5} {'search':>6} {'bench':>5}")  # fmt: skip
    for r in range(warm["rounds"]):
        c = cpu[r] if r < len(cpu) else {}
        print(
            f"{r + 1:>5} {(r + 1) * warm['round_seconds'] / 60:>5.1f} "
            + " ".join(f"{_at(rounds[q], r):>10.1f}" for q in queries)
            + f" {c.get('compiler', float('nan')):>5.2f} {c.get('gc', float('nan')):>5.2f}"
            f" {c.get('other', float('nan')):>6.2f} {c.get('bench', float('nan')):>5.2f}"
        )
    nodes = len(samples[-1]["nodes"]) if samples else 0
    title = f"{Path(args.session).stem} ({nodes} node{'s' if nodes != 1 else ''})"
    draw(Path(args.figure), rounds, cpu, warm["round_seconds"], title)
    print(f"figure: {args.figure}")


if __name__ == "__main__":
    sys.exit(main())
