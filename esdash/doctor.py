"""``esdash doctor``: is this machine ready to spawn Elasticsearch clusters?

Each check is a small function returning a :class:`Check` with a status, a one-line detail
and, for ``warn``/``fail``, the command or setting that fixes it.  The checks look at the
machine as the nodes will see it: the Java runtime :func:`esdash.java.find_java` picks, the
distribution as the backend plugin understands it, the MPI launcher next to this interpreter,
and files and limits *as the unprivileged user Elasticsearch runs as*.  Probes for that user
start the way :class:`esdash.cluster.node.NodeProcess` starts a node when esdash is root:
``setuid``/``setgid`` to the user with no supplementary groups and no PAM, so the limits and
permissions measured are the ones the nodes get.

:func:`run_checks` takes the distribution and the user explicitly, so ``esdash doctor`` can
get them from options today and from a session file later.  A check never raises: an
unexpected error becomes a ``fail`` naming it, because a doctor that crashes helps nobody.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from esdash import java, paths
from esdash.errors import EsdashError, PluginError
from esdash.launch.mpi import find_mpiexec
from esdash.plugin.api import Distribution

Status = Literal["pass", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail")

#: Elasticsearch's production-mode bootstrap checks (see :func:`check_max_map_count`).
MIN_MAX_MAP_COUNT = 262144
MIN_OPEN_FILES = 65535

#: Why the bootstrap-check limits are warnings, not failures (verified in the infra notes).
PRODUCTION_MODE_NOTE = (
    "Fatal only in production mode: when a node's transport binds or publishes a "
    "non-loopback address (multi-node clusters over ethernet/opa/infiniband) the bootstrap "
    "check fails and the node exits with 78; on loopback (127.0.0.0/8) or with "
    "discovery.type: single-node it is only a logged warning"
)

PRODUCTION_MODE_SHORT = (
    "Fatal only in production mode (transport on a non-loopback address: exit 78), "
    "a logged warning on loopback"
)


@dataclass(frozen=True)
class Check:
    """The outcome of one check.  ``data`` holds machine-readable facts for ``--json``."""

    name: str
    status: Status
    detail: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} not in {STATUSES}")
        if self.status != "pass" and not self.fix:
            raise ValueError(f"check {self.name}: a {self.status} needs a fix")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- helpers


def default_user() -> str:
    """The user Elasticsearch runs as unless told otherwise.

    ``ESDASH_USER`` wins; as root it is ``esdash`` (Elasticsearch refuses to run as root, so
    root must hand the nodes to an unprivileged user); otherwise it is whoever runs esdash,
    because only root can switch users.
    """
    if os.environ.get("ESDASH_USER"):
        return os.environ["ESDASH_USER"]
    if os.geteuid() == 0:
        return "esdash"
    return pwd.getpwuid(os.geteuid()).pw_name


def _run(
    argv: list[str], timeout: float = 20.0, as_user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a probe command; a missing program or a timeout becomes a failed result.

    ``as_user`` runs it as that user when esdash is root (see the module docstring); the
    caller has checked that the user exists.
    """
    switch: dict[str, Any] = {}
    if as_user is not None and _switches_user(as_user):
        entry = pwd.getpwnam(as_user)
        switch = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd="/",  # the user may not be allowed into our working directory
            **switch,
        )
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f} s")


def _switches_user(user: str) -> bool:
    """Whether probes for ``user`` switch to it (only root can, and nodes do it then)."""
    return os.geteuid() == 0 and user != "root"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _limit(value: int | float) -> int | str:
    """An rlimit for display and JSON (which has no infinity)."""
    return "unlimited" if value == float("inf") else int(value)


def _shorten(items: list[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


# ------------------------------------------------------------------------- distribution


def load_distribution(
    home: Path | None, backend: str = "elasticsearch"
) -> tuple[Check, Distribution | None]:
    """Find and inspect the distribution through the backend plugin."""
    from esdash.plugin.manager import get_plugins

    fetch_fix = f"esdash fetch {backend}, or pass --home pointing at an unpacked tarball"
    if home is None:
        return (
            Check(
                "distribution",
                "fail",
                f"no {backend} distribution in the cache ({paths.cache_dir()}) and no --home",
                fetch_fix,
            ),
            None,
        )
    home = Path(home).expanduser()
    if not home.exists():
        return Check("distribution", "fail", f"{home} does not exist", fetch_fix), None
    try:
        plugin = get_plugins().backend(backend)
        dist = plugin.inspect(home)
    except PluginError as exc:
        return Check("distribution", "fail", str(exc), "esdash plugins (shows why)"), None
    except EsdashError as exc:  # BadInput: not a (supported) distribution
        return Check("distribution", "fail", str(exc), fetch_fix), None
    except OSError as exc:  # e.g. an unreadable or half-unpacked directory
        return Check("distribution", "fail", f"cannot read {home}: {exc}", fetch_fix), None
    data = {
        "home": str(dist.home),
        "version": dist.version,
        "flavor": dist.flavor,
        "modules": list(dist.modules),
        "scripting": dist.scripting,
    }
    summary = (
        f"{backend} {dist.version} ({dist.flavor}) at {dist.home}; "
        f"{len(dist.modules)} modules: {_shorten(list(dist.modules))}"
    )
    if dist.problems:
        return (
            Check(
                "distribution",
                "fail",
                f"{summary}; " + "; ".join(dist.problems),
                "use Elasticsearch 7.17, 8.x or 9.x: esdash fetch elasticsearch",
                data,
            ),
            dist,
        )
    return Check("distribution", "pass", summary, data=data), dist


def check_scripting(dist: Distribution) -> Check:
    """Painless is what the MRI track's brain-age query needs; the integ-test-zip lacks it."""
    if dist.scripting:
        return Check("scripting", "pass", "painless is available (lang-painless module)")
    detail = f"no painless in this {dist.flavor} distribution: the MRI brain-age query needs it"
    if dist.flavor.startswith("integ-test-zip"):
        detail += " (this flavor also lacks _reindex, _update_by_query and ingest processors)"
    return Check(
        "scripting",
        "warn",
        detail,
        "use an official tarball, e.g. elasticsearch-"
        f"{dist.version}-linux-x86_64.tar.gz from artifacts.elastic.co, and pass --home",
    )


# --------------------------------------------------------------------------------- java


def find_runtime(home: Path | None) -> java.JavaRuntime | None:
    """The runtime the nodes get, or None when there is none (check_java says why)."""
    try:
        return java.find_java(home)
    except EsdashError:
        return None


def check_java(home: Path | None, dist: Distribution | None) -> Check:
    """The runtime the nodes get (see :mod:`esdash.java`) and whether it is new enough."""
    es_version = dist.version if dist else paths.DEFAULT_ES_VERSION
    need = java.min_java_major(es_version)
    for_what = f"Elasticsearch {es_version}" + ("" if dist else " (assumed: no distribution)")
    install = (
        "apt-get install openjdk-17-jre-headless, then "
        "export ES_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64"
        if need <= 17
        else f"install a JDK >= {need} (e.g. Eclipse Temurin) and export ES_JAVA_HOME=<its home>"
    )
    try:
        runtime = java.find_java(home)
    except EsdashError as exc:
        return Check("java", "fail", f"{exc}; {for_what} needs Java >= {need}", install)
    data: dict[str, Any] = {
        "java_home": str(runtime.java_home),
        "executable": str(runtime.executable),
        "source": runtime.source,
        "required_major": need,
    }
    try:
        version = java.java_version(runtime.executable)
    except EsdashError as exc:
        return Check("java", "fail", str(exc), install, data)
    data.update(version=version.version, major=version.major)
    detail = (
        f"{version.vendor} {version.version} from {runtime.source} "
        f"({runtime.java_home}); {for_what} needs >= {need}"
    )
    if version.major < need:
        return Check("java", "fail", detail, install, data)
    if runtime.source in ("JAVA_HOME", "PATH"):
        detail += f"; Elasticsearch ignores {runtime.source}, esdash passes it as ES_JAVA_HOME"
    return Check("java", "pass", detail, data=data)


# --------------------------------------------------------------------------------- user


def _unreadable(user: str, home: Path, java_exe: Path | None) -> list[str]:
    """Paths of the distribution (and the java binary) that ``user`` cannot use.

    Runs ``find -readable`` as the user, which asks the kernel (access(2)), so ACLs and every
    parent directory count, not just mode bits.  The integ-test-zip ships ``config/`` as 0660,
    which bites when root unpacks it.
    """
    script = (
        'test -x "$1/bin/elasticsearch" || echo "$1/bin/elasticsearch (not executable)"\n'
        'if [ -n "$2" ] && [ ! -x "$2" ]; then echo "$2 (not executable)"; fi\n'
        'find "$1" \\( ! -readable -o -type d ! -executable \\) -print 2>&1\n'
    )
    argv = ["sh", "-c", script, "sh", str(home), str(java_exe or "")]
    proc = _run(argv, timeout=60, as_user=user)
    problems = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 and not problems:
        problems.append(_last_line(proc.stderr) or f"probe exited with {proc.returncode}")
    return problems


def check_user(user: str, dist: Distribution | None, runtime: java.JavaRuntime | None) -> Check:
    """Elasticsearch must not run as root and must be able to read its distribution."""
    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    user_fix = (
        f"create it: useradd -m -s /bin/bash {user}; or pass --user/ESDASH_USER naming an "
        "existing unprivileged user"
    )
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return Check("es-user", "fail", f"no user {user!r} on this machine", user_fix)
    data = {"user": user, "uid": entry.pw_uid, "esdash_runs_as": me}
    if entry.pw_uid == 0:
        return Check(
            "es-user",
            "fail",
            f"{user!r} is uid 0: Elasticsearch refuses to run as root",
            "useradd -m -s /bin/bash esdash (the default ES user when esdash runs as root), "
            "or pass --user/ESDASH_USER naming an unprivileged user"
            if root
            else "drop --user/ESDASH_USER: without root, the nodes run as you",
            data,
        )
    if not root and entry.pw_uid != os.geteuid():
        return Check(
            "es-user",
            "fail",
            f"esdash runs as {me!r}, not root, so the nodes run as {me!r} and cannot switch "
            f"to {user!r}",
            f"run esdash as root to use {user!r}, or drop --user/ESDASH_USER",
            data,
        )
    how = "nodes are switched to it (no supplementary groups)" if root else "nodes run as you"
    if dist is None:
        return Check(
            "es-user",
            "pass",
            f"{user} (uid {entry.pw_uid}), {how}; distribution access not checked "
            "(no distribution)",
            data=data,
        )
    java_exe = runtime.executable if runtime else None
    problems = _unreadable(user, dist.home, java_exe)
    if problems:
        data["unreadable"] = problems
        return Check(
            "es-user",
            "fail",
            f"{user} cannot use {len(problems)} path(s): {_shorten(problems, 3)}",
            f"chmod -R a+rX {dist.home} (the integ-test-zip ships config/ as 0660), and keep "
            f"the JDK and every parent directory readable by {user}",
            data,
        )
    return Check(
        "es-user",
        "pass",
        f"{user} (uid {entry.pw_uid}), {how}; can read {dist.home}"
        + (f" and run {java_exe}" if java_exe else ""),
        data=data,
    )


# ---------------------------------------------------------------------------------- mpi


def mpi_implementation(text: str) -> str | None:
    """Name the MPI implementation from ``mpiexec --version`` or the library version string.

    MPICH's launcher (Hydra) prints "HYDRA build details" without the word MPICH; Open MPI
    4 prints "mpiexec (OpenRTE)", Open MPI 5 "(Open MPI)" or PRRTE.
    """
    if re.search(r"Open MPI|OpenRTE|PRRTE|prterun", text, re.IGNORECASE):
        return "Open MPI"
    if re.search(r"Intel\(R\) MPI", text):
        return "Intel MPI"
    if re.search(r"MVAPICH", text, re.IGNORECASE):
        return "MVAPICH"
    if re.search(r"MPICH|HYDRA", text, re.IGNORECASE):
        return "MPICH"
    return None


def mpi_abi(implementation: str | None) -> str | None:
    """Intel MPI and MVAPICH are MPICH derivatives; their launchers and libraries mix."""
    if implementation is None:
        return None
    return "openmpi" if implementation == "Open MPI" else "mpich"


_MPI4PY_PROBE = """
import json, mpi4py
mpi4py.rc.initialize = False   # MPI_Get_library_version may be called before MPI_Init
mpi4py.rc.finalize = False
from mpi4py import MPI
libraries = sorted({line.split()[-1] for line in open("/proc/self/maps")
                    if "/libmpi" in line.split()[-1]})
print(json.dumps({"mpi4py": mpi4py.__version__,
                  "library_version": MPI.Get_library_version(),
                  "libraries": libraries}))
"""


def _probe_mpi4py(python: str) -> dict[str, Any] | str:
    """mpi4py's view of its MPI library, from a child process so nothing stays loaded here."""
    proc = _run([python, "-c", _MPI4PY_PROBE], timeout=30)
    if proc.returncode != 0:
        return _last_line(proc.stderr) or f"exited with {proc.returncode}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"unexpected output: {proc.stdout.strip()[:200]!r}"


def _first_version(text: str) -> str | None:
    match = re.search(r"(?:Version:?|\)|v)\s*(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def check_mpi(mpiexec: str | None = None, python: str | None = None) -> Check:
    """``mpiexec`` and mpi4py's library must be the same implementation (MPICH vs Open MPI).

    A mismatch starts N singleton ranks of size 1 instead of one job of size N.
    """
    mpiexec = mpiexec or find_mpiexec()
    probe = _probe_mpi4py(python or sys.executable)
    if isinstance(probe, str):
        return Check(
            "mpi",
            "fail",
            f"mpi4py does not load: {probe}",
            f"{Path(sys.executable).parent}/pip install mpi4py mpich",
        )
    library = probe["library_version"]
    lib_impl = mpi_implementation(library)
    lib_version = _first_version(library)
    lib_desc = f"{lib_impl or 'unknown MPI'} {lib_version or ''}".strip()
    libs = ", ".join(probe["libraries"]) or "?"
    data: dict[str, Any] = {
        "mpi4py": probe["mpi4py"],
        "library_version": library.strip(),
        "library_implementation": lib_impl,
        "libraries": probe["libraries"],
        "mpiexec": mpiexec,
    }
    if not mpiexec:
        return Check(
            "mpi",
            "warn",
            f"mpi4py {probe['mpi4py']} uses {lib_desc} ({libs}), but there is no mpiexec "
            "(inside a Slurm allocation srun can still start the ranks)",
            f"{Path(sys.executable).parent}/pip install mpich, or load your site's MPI module",
            data,
        )
    proc = _run([mpiexec, "--version"])
    launcher_text = proc.stdout + proc.stderr
    exec_impl = mpi_implementation(launcher_text)
    exec_version = _first_version(launcher_text)
    exec_desc = f"{exec_impl or 'unknown launcher'} {exec_version or ''}".strip()
    data.update(mpiexec_implementation=exec_impl, mpiexec_version=exec_version)
    detail = f"mpiexec {mpiexec} is {exec_desc}; mpi4py {probe['mpi4py']} loads {lib_desc} ({libs})"
    if exec_impl is None or lib_impl is None:
        return Check(
            "mpi",
            "warn",
            f"{detail}; cannot tell whether they match",
            "make sure mpiexec and mpi4py come from the same MPI (e.g. pip install mpich "
            "into this venv)",
            data,
        )
    if mpi_abi(exec_impl) != mpi_abi(lib_impl):
        return Check(
            "mpi",
            "warn",
            f"{detail}: different implementations, so each rank would start alone (size 1)",
            f"use one MPI: put {Path(sys.executable).parent} first on PATH and "
            f"pip install mpich there, or rebuild mpi4py against {exec_impl} "
            "(pip install --no-binary mpi4py mpi4py)",
            data,
        )
    return Check("mpi", "pass", f"{detail}: same implementation", data=data)


# -------------------------------------------------------------------------------- slurm


SLURM_COMMANDS = ("sbatch", "srun", "squeue")


def check_slurm() -> Check:
    """Slurm is optional: without it esdash runs ranks with mpiexec on this machine."""
    found = {name: shutil.which(name) for name in SLURM_COMMANDS}
    missing = [name for name, where in found.items() if not where]
    data: dict[str, Any] = {"commands": found, "job_id": os.environ.get("SLURM_JOB_ID")}
    install = "apt-get install slurm-client (or load your site's Slurm module)"
    if missing:
        return Check(
            "slurm",
            "warn",
            f"{', '.join(missing)} not found: fine for local runs (mpiexec), but esdash "
            "submit and runs inside allocations need Slurm",
            install,
            data,
        )
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        nodes = os.environ.get("SLURM_JOB_NODELIST", "?")
        tasks = os.environ.get("SLURM_NTASKS", "?")
        return Check(
            "slurm",
            "pass",
            f"inside allocation {job} (nodes {nodes}, {tasks} tasks): esdash run uses srun",
            data=data,
        )
    sinfo = shutil.which("sinfo")
    proc = _run([sinfo or "sinfo", "-h", "-o", "%P %a %D %T"], timeout=20)
    if proc.returncode != 0:
        return Check(
            "slurm",
            "warn",
            "commands present but the controller does not answer: "
            f"{_last_line(proc.stderr) or proc.returncode}; not in an allocation",
            "set SLURM_CONF to your cluster's slurm.conf (or start slurmctld/slurmd); "
            "only needed for esdash submit and allocations",
            data,
        )
    partitions = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    data["partitions"] = partitions
    return Check(
        "slurm",
        "pass",
        f"sbatch/srun/squeue present, controller answers (partitions: "
        f"{', '.join(partitions) or 'none'}); not inside an allocation: esdash run uses "
        "mpiexec here, esdash submit uses sbatch",
        data=data,
    )


# ----------------------------------------------------------------------- fuse/gocryptfs


def _mode_allows(st: os.stat_result, user: str, want: int) -> bool:
    """Whether mode bits grant ``user`` the ``want`` bits (4 = read, 2 = write).

    Only the primary group counts: nodes (and what they start) get no supplementary groups
    when root switches to the user, so membership in a ``fuse`` group would not help them.
    """
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        return True
    if st.st_uid == entry.pw_uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == entry.pw_gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def check_fuse(user: str, device: Path = Path("/dev/fuse")) -> Check:
    """gocryptfs mounts as the ES user, who therefore must open /dev/fuse read-write."""
    scope = "only the gocryptfs encryption mode needs it"
    if not device.exists():
        return Check(
            "fuse",
            "warn",
            f"{device} does not exist; {scope}",
            "modprobe fuse (as root), or ask your site for FUSE on compute nodes",
        )
    st = device.stat()
    mode = stat.filemode(st.st_mode)
    owner = f"{_user_name(st.st_uid)}:{_group_name(st.st_gid)}"
    data = {"device": str(device), "mode": mode, "owner": owner}
    if not stat.S_ISCHR(st.st_mode):
        return Check(
            "fuse",
            "warn",
            f"{device} is not a character device ({mode}); {scope}",
            f"ask your administrator to restore {device} (character device 10,229)",
            data,
        )
    try:
        usable = _mode_allows(st, user, 4 | 2)
    except KeyError:
        return Check(
            "fuse",
            "warn",
            f"{device} is {mode} {owner}; cannot tell for user {user!r}, who does not exist",
            "fix the es-user check first",
            data,
        )
    if not usable:
        return Check(
            "fuse",
            "warn",
            f"{device} is {mode} {owner}: {user} cannot open it, so gocryptfs mounts fail; {scope}",
            f"chmod 0666 {device} (as root; the usual udev default elsewhere)",
            data,
        )
    return Check("fuse", "pass", f"{device} is {mode} {owner}: usable by {user}", data=data)


def check_gocryptfs() -> Check:
    """The gocryptfs mode needs ``gocryptfs`` to mount and ``fusermount3`` to unmount."""
    found = {name: shutil.which(name) for name in ("gocryptfs", "fusermount3")}
    missing = [name for name, where in found.items() if not where]
    if missing:
        return Check(
            "gocryptfs",
            "warn",
            f"{', '.join(missing)} not on PATH; only the gocryptfs encryption mode needs them",
            "apt-get install gocryptfs fuse3 (or load your site's module)",
            {"commands": found},
        )
    proc = _run([found["gocryptfs"] or "gocryptfs", "-version"])
    version = (proc.stdout.strip().split(";") or [""])[0] or "version unknown"
    return Check(
        "gocryptfs",
        "pass",
        f"{version} and fusermount3 on PATH",
        data={"commands": found, "version": version},
    )


# ---------------------------------------------------------------- bootstrap-check limits


def check_max_map_count(proc_file: Path = Path("/proc/sys/vm/max_map_count")) -> Check:
    """Lucene memory-maps index files; Elasticsearch wants room for 262144 mappings."""
    try:
        value = int(proc_file.read_text().strip())
    except (OSError, ValueError) as exc:
        return Check(
            "vm.max_map_count",
            "warn",
            f"cannot read {proc_file}: {exc}",
            "run on Linux with /proc mounted",
        )
    data = {"value": value, "required": MIN_MAX_MAP_COUNT}
    if value >= MIN_MAX_MAP_COUNT:
        return Check("vm.max_map_count", "pass", f"{value} >= {MIN_MAX_MAP_COUNT}", data=data)
    return Check(
        "vm.max_map_count",
        "warn",
        f"{value} < {MIN_MAX_MAP_COUNT}. {PRODUCTION_MODE_NOTE}",
        f"sysctl -w vm.max_map_count={MIN_MAX_MAP_COUNT} (as root, on every node), or set "
        "node.store.allow_mmap: false (slower, but makes the check irrelevant)",
        data,
    )


def _rlimit(value: int) -> int | float:
    import resource

    return float("inf") if value == resource.RLIM_INFINITY else value


def check_open_files() -> Check:
    """Elasticsearch wants 65535 file descriptors.

    The nodes inherit this process's limits: switching to the ES user with ``setuid`` keeps
    them, and no PAM session (pam_limits) is opened.  Only the hard limit decides, because
    the JVM raises its soft limit to the hard one at start (HotSpot's MaxFDLimit, on by
    default); a node started with soft 1024 still reports the hard value.
    """
    import resource

    soft, hard = (_rlimit(v) for v in resource.getrlimit(resource.RLIMIT_NOFILE))
    data = {"soft": _limit(soft), "hard": _limit(hard), "required": MIN_OPEN_FILES}
    shown = (
        f"soft {_limit(soft)}, hard {_limit(hard)} (of this process; the nodes inherit them "
        "and the JVM raises soft to hard)"
    )
    if hard >= MIN_OPEN_FILES:
        return Check("open-files", "pass", f"{shown}; hard >= {MIN_OPEN_FILES}", data=data)
    if os.geteuid() == 0:
        fix = (
            f"ulimit -Hn {MIN_OPEN_FILES} in the root shell (or Slurm prolog) that starts "
            "esdash; raising a hard limit needs CAP_SYS_RESOURCE, which some containers "
            "and VMs lack"
        )
    else:
        fix = (
            f"ask root for '{pwd.getpwuid(os.geteuid()).pw_name} - nofile {MIN_OPEN_FILES}' "
            "in /etc/security/limits.conf (applies at your next login); under Slurm the "
            "submitting shell's limits propagate to the job"
        )
    return Check(
        "open-files",
        "warn",
        f"{shown}; hard < {MIN_OPEN_FILES}. {PRODUCTION_MODE_SHORT}",
        fix,
        data,
    )


# ---------------------------------------------------------------------------- run them


def _crashed(name: str, exc: Exception) -> Check:
    return Check(
        name,
        "fail",
        f"the check itself failed: {type(exc).__name__}: {exc}",
        "report this as an esdash bug",
    )


def _guarded(name: str, function: Callable[[], Check]) -> Check:
    try:
        return function()
    except Exception as exc:  # a doctor must report, not crash
        return _crashed(name, exc)


def run_checks(
    home: Path | None, user: str | None = None, backend: str = "elasticsearch"
) -> list[Check]:
    """Every check, in display order, for the distribution at ``home`` and the ES ``user``.

    ``user=None`` means :func:`default_user`.  The slow probes (java, mpi4py, Slurm, the
    ``find`` over the distribution) run in parallel threads; they are all subprocesses.
    """
    user = user or default_user()
    try:
        dist_check, dist = load_distribution(home, backend)
    except Exception as exc:  # same policy as _guarded, for the one check with two results
        dist_check = _crashed("distribution", exc)
        dist = None
    java_home = dist.home if dist else home
    runtime = find_runtime(java_home)

    independent: list[tuple[str, Callable[[], Check]]] = [
        ("java", lambda: check_java(java_home, dist)),
        ("es-user", lambda: check_user(user, dist, runtime)),
        ("mpi", check_mpi),
        ("slurm", check_slurm),
        ("fuse", lambda: check_fuse(user)),
        ("gocryptfs", check_gocryptfs),
        ("vm.max_map_count", check_max_map_count),
        ("open-files", check_open_files),
    ]
    with ThreadPoolExecutor(max_workers=len(independent)) as pool:
        futures = [pool.submit(_guarded, name, fn) for name, fn in independent]
        java_check, *rest = [future.result() for future in futures]

    checks = [java_check, dist_check]
    if dist is not None:
        checks.append(_guarded("scripting", lambda: check_scripting(dist)))
    return checks + rest


def any_failed(checks: list[Check]) -> bool:
    """True when any check failed: ``esdash doctor`` then exits non-zero."""
    return any(check.status == "fail" for check in checks)
