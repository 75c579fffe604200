"""``esdash doctor``: is this machine ready to spawn search clusters?

Each check is a :class:`~esdash.plugin.host.HostCheck` with a status, a one-line detail and,
for ``warn``/``fail``, the command or setting that fixes it.  esdash checks what every
engine needs here: MPI next to this interpreter, Slurm, and the kernel limits the JVM search
engines enforce in production mode.  The backend adds what its engine needs (distribution,
Java, the node user's access: :meth:`~esdash.plugin.api.Backend.doctor`) and every
encryption mode what it needs (:meth:`~esdash.plugin.api.EncryptionMode.doctor`).

:func:`run_checks` takes the distribution and the user explicitly, so ``esdash doctor`` can
get them from options or a session file.  A check never raises: an unexpected error becomes
a ``fail`` naming it, because a doctor that crashes helps nobody.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from esdash.errors import PluginError
from esdash.launch.mpi import find_mpiexec
from esdash.paths import cache_dir
from esdash.plugin.host import HostCheck, HostProbe, last_line, run_as_user
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.rundir.records import JsonObject
from esdash.session import DEFAULT_BACKEND

#: The JVM engines' production-mode bootstrap checks (see :func:`check_max_map_count`).
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


def default_user() -> str:
    """The user the nodes run as unless told otherwise.

    ``ESDASH_USER`` wins; as root it is ``esdash`` (search engines refuse to run as root, so
    root must hand the nodes to an unprivileged user); otherwise it is whoever runs esdash,
    because only root can switch users.
    """
    if os.environ.get("ESDASH_USER"):
        return os.environ["ESDASH_USER"]
    if os.geteuid() == 0:
        return "esdash"
    return pwd.getpwuid(os.geteuid()).pw_name


def _limit(value: int | float) -> int | str:
    """An rlimit for display and JSON (which has no infinity)."""
    return "unlimited" if value == float("inf") else int(value)


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


def _probe_mpi4py(python: str) -> JsonObject | str:
    """mpi4py's view of its MPI library, from a child process so nothing stays loaded here."""
    proc = run_as_user([python, "-c", _MPI4PY_PROBE], timeout=30)
    if proc.returncode != 0:
        return last_line(proc.stderr) or f"exited with {proc.returncode}"
    try:
        found: JsonObject = json.loads(proc.stdout.strip().splitlines()[-1])
        return found
    except (ValueError, IndexError):
        return f"unexpected output: {proc.stdout.strip()[:200]!r}"


def _first_version(text: str) -> str | None:
    match = re.search(r"(?:Version:?|\)|v)\s*(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def check_mpi(mpiexec: str | None = None, python: str | None = None) -> HostCheck:
    """``mpiexec`` and mpi4py's library must be the same implementation (MPICH vs Open MPI).

    A mismatch starts N singleton ranks of size 1 instead of one job of size N.
    """
    mpiexec = mpiexec or find_mpiexec()
    probe = _probe_mpi4py(python or sys.executable)
    if isinstance(probe, str):
        return HostCheck(
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
    data: JsonObject = {
        "mpi4py": probe["mpi4py"],
        "library_version": library.strip(),
        "library_implementation": lib_impl,
        "libraries": probe["libraries"],
        "mpiexec": mpiexec,
    }
    if not mpiexec:
        return HostCheck(
            "mpi",
            "warn",
            f"mpi4py {probe['mpi4py']} uses {lib_desc} ({libs}), but there is no mpiexec "
            "(inside a Slurm allocation srun can still start the ranks)",
            f"{Path(sys.executable).parent}/pip install mpich, or load your site's MPI module",
            data,
        )
    proc = run_as_user([mpiexec, "--version"])
    launcher_text = proc.stdout + proc.stderr
    exec_impl = mpi_implementation(launcher_text)
    exec_version = _first_version(launcher_text)
    exec_desc = f"{exec_impl or 'unknown launcher'} {exec_version or ''}".strip()
    data.update(mpiexec_implementation=exec_impl, mpiexec_version=exec_version)
    detail = f"mpiexec {mpiexec} is {exec_desc}; mpi4py {probe['mpi4py']} loads {lib_desc} ({libs})"
    if exec_impl is None or lib_impl is None:
        return HostCheck(
            "mpi",
            "warn",
            f"{detail}; cannot tell whether they match",
            "make sure mpiexec and mpi4py come from the same MPI (e.g. pip install mpich "
            "into this venv)",
            data,
        )
    if mpi_abi(exec_impl) != mpi_abi(lib_impl):
        return HostCheck(
            "mpi",
            "warn",
            f"{detail}: different implementations, so each rank would start alone (size 1)",
            f"use one MPI: put {Path(sys.executable).parent} first on PATH and "
            f"pip install mpich there, or rebuild mpi4py against {exec_impl} "
            "(pip install --no-binary mpi4py mpi4py)",
            data,
        )
    return HostCheck("mpi", "pass", f"{detail}: same implementation", data=data)


# -------------------------------------------------------------------------------- slurm


SLURM_COMMANDS = ("sbatch", "srun", "squeue")


def check_slurm() -> HostCheck:
    """Slurm is optional: without it esdash runs ranks with mpiexec on this machine."""
    found = {name: shutil.which(name) for name in SLURM_COMMANDS}
    missing = [name for name, where in found.items() if not where]
    data: JsonObject = {"commands": found, "job_id": os.environ.get("SLURM_JOB_ID")}
    install = "apt-get install slurm-client (or load your site's Slurm module)"
    if missing:
        return HostCheck(
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
        return HostCheck(
            "slurm",
            "pass",
            f"inside allocation {job} (nodes {nodes}, {tasks} tasks): esdash run uses srun",
            data=data,
        )
    sinfo = shutil.which("sinfo")
    proc = run_as_user([sinfo or "sinfo", "-h", "-o", "%P %a %D %T"], timeout=20)
    if proc.returncode != 0:
        return HostCheck(
            "slurm",
            "warn",
            "commands present but the controller does not answer: "
            f"{last_line(proc.stderr) or proc.returncode}; not in an allocation",
            "set SLURM_CONF to your cluster's slurm.conf (or start slurmctld/slurmd); "
            "only needed for esdash submit and allocations",
            data,
        )
    partitions = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    data["partitions"] = partitions
    return HostCheck(
        "slurm",
        "pass",
        f"sbatch/srun/squeue present, controller answers (partitions: "
        f"{', '.join(partitions) or 'none'}); not inside an allocation: esdash run uses "
        "mpiexec here, esdash submit uses sbatch",
        data=data,
    )


# ---------------------------------------------------------------- bootstrap-check limits


def check_max_map_count(proc_file: Path = Path("/proc/sys/vm/max_map_count")) -> HostCheck:
    """Lucene memory-maps index files; the engines want room for 262144 mappings."""
    try:
        value = int(proc_file.read_text().strip())
    except (OSError, ValueError) as exc:
        return HostCheck(
            "vm.max_map_count",
            "warn",
            f"cannot read {proc_file}: {exc}",
            "run on Linux with /proc mounted",
        )
    data = {"value": value, "required": MIN_MAX_MAP_COUNT}
    if value >= MIN_MAX_MAP_COUNT:
        return HostCheck("vm.max_map_count", "pass", f"{value} >= {MIN_MAX_MAP_COUNT}", data=data)
    return HostCheck(
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


def check_open_files() -> HostCheck:
    """The engines want 65535 file descriptors.

    The nodes inherit this process's limits: switching to the node user with ``setuid`` keeps
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
        return HostCheck("open-files", "pass", f"{shown}; hard >= {MIN_OPEN_FILES}", data=data)
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
    return HostCheck(
        "open-files",
        "warn",
        f"{shown}; hard < {MIN_OPEN_FILES}. {PRODUCTION_MODE_SHORT}",
        fix,
        data,
    )


# ---------------------------------------------------------------------------- run them


def _crashed(name: str, exc: Exception) -> HostCheck:
    return HostCheck(
        name,
        "fail",
        f"the check itself failed: {type(exc).__name__}: {exc}",
        "report this as an esdash bug",
    )


def _guarded(probe: HostProbe) -> HostCheck:
    try:
        return probe.run()
    except Exception as exc:  # a doctor must report, not crash
        return _crashed(probe.name, exc)


def probes(home: Path | None, user: str, backend: str, plugins: PluginSet) -> list[HostProbe]:
    """Every probe, in display order: the backend's, MPI and Slurm, the modes', the limits."""
    try:
        engine = plugins.backend(backend).doctor(home, user, cache_dir())
    except PluginError as exc:
        failed = HostCheck("distribution", "fail", str(exc), "esdash plugins (shows why)")
        engine = [HostProbe("distribution", lambda: failed)]
    modes = [
        probe
        for name in plugins.names("encryption")
        for probe in plugins.encryption(name).doctor(user)
    ]
    return [
        *engine,
        HostProbe("mpi", check_mpi),
        HostProbe("slurm", check_slurm),
        *modes,
        HostProbe("vm.max_map_count", check_max_map_count),
        HostProbe("open-files", check_open_files),
    ]


def run_checks(
    home: Path | None,
    user: str | None = None,
    backend: str = DEFAULT_BACKEND,
    plugins: PluginSet | None = None,
) -> list[HostCheck]:
    """Every check, in display order, for the distribution at ``home`` and the node ``user``.

    ``user=None`` means :func:`default_user`.  The probes run in parallel threads (most start
    a subprocess: java, mpi4py, Slurm, the ``find`` over the distribution).
    """
    user = user or default_user()
    plugins = plugins or get_plugins()
    try:
        found = probes(home, user, backend, plugins)
    except Exception as exc:  # a plugin's doctor failed before it made its probes
        return [_crashed(backend, exc)]
    with ThreadPoolExecutor(max_workers=len(found)) as pool:
        return list(pool.map(_guarded, found))


def any_failed(checks: list[HostCheck]) -> bool:
    """True when any check failed: ``esdash doctor`` then exits non-zero."""
    return any(check.status == "fail" for check in checks)
