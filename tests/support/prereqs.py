"""One place that knows what each test marker needs, and what to do when it is missing.

Outside CI a test whose prerequisite is missing is skipped with the reason.  Under CI
(``CI=true``) it fails instead: a CI run must never quietly test less than it claims to.
The checks are cheap and cached for the session.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pwd
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

from esdash import paths

#: Extra directories searched for daemons: a non-login root shell may lack the sbin dirs.
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
_CAP_NET_ADMIN = 12


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def unavailable(reason: str) -> NoReturn:
    """Skip the current test, or fail it under CI."""
    if in_ci():
        pytest.fail(f"prerequisite missing (CI=true, so this fails): {reason}", pytrace=False)
    pytest.skip(reason)


def require(marker: str) -> None:
    """Skip or fail (see :func:`unavailable`) unless the prerequisites of ``marker`` are met."""
    reason = problem(marker)
    if reason:
        unavailable(f"[{marker}] {reason}")


def find_tool(name: str) -> str | None:
    """``shutil.which`` that also looks in the sbin directories."""
    found = shutil.which(name)
    if found:
        return found
    for directory in _SBIN:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def venv_bin() -> Path:
    """The ``bin`` directory of the interpreter running the tests (the project venv)."""
    return Path(sys.executable).parent


def es_home() -> Path | None:
    """``ESDASH_TEST_ES_HOME``, else the newest distribution in the esdash cache."""
    configured = os.environ.get("ESDASH_TEST_ES_HOME")
    if configured:
        return Path(configured)
    return paths.default_distribution("elasticsearch")


def es_user() -> str:
    """The unprivileged user that runs Elasticsearch and gocryptfs in tests."""
    return os.environ.get("ESDASH_TEST_USER", "esdash")


def java_home() -> Path | None:
    """``ES_JAVA_HOME``, else the JDK behind ``java`` on PATH (the integ-test-zip has none)."""
    configured = os.environ.get("ES_JAVA_HOME")
    if configured:
        return Path(configured)
    java = shutil.which("java")
    if java is None:
        return None
    return Path(java).resolve().parent.parent


def _missing_tools(*names: str) -> str | None:
    missing = [name for name in names if find_tool(name) is None]
    return f"not installed: {', '.join(missing)} (run scripts/provision)" if missing else None


def _is_root() -> bool:
    return os.geteuid() == 0


def _user_problem(user: str) -> str | None:
    """Can the tests run things as ``user``: it exists, is not root, and we can switch to it."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return f"user {user!r} does not exist (scripts/provision creates it; ESDASH_TEST_USER)"
    if entry.pw_uid == 0:
        return f"ESDASH_TEST_USER={user!r} is root; Elasticsearch must never run as root"
    if not _is_root() and os.geteuid() != entry.pw_uid:
        return f"switching to user {user!r} needs root"
    if _is_root() and find_tool("runuser") is None:
        return "runuser is not installed (util-linux)"
    return None


def _check_es() -> str | None:
    user = _user_problem(es_user())
    if user:
        return user
    home = es_home()
    if home is None or not (home / "bin" / "elasticsearch").is_file():
        where = home or f"{paths.cache_dir()}/elasticsearch-*"
        return f"no Elasticsearch distribution at {where} (esdash fetch elasticsearch)"
    jvm_options = home / "config" / "jvm.options"
    if jvm_options.exists() and not jvm_options.stat().st_mode & stat.S_IROTH:
        return f"{home}/config is not world-readable (chmod -R a+rX {home})"
    java = java_home()
    if java is None or not (java / "bin" / "java").is_file():
        return "no Java runtime (install openjdk-17-jre-headless or set ES_JAVA_HOME)"
    return None


def os_home() -> Path | None:
    """``ESDASH_TEST_OS_HOME``, else the newest OpenSearch distribution in the esdash cache."""
    configured = os.environ.get("ESDASH_TEST_OS_HOME")
    if configured:
        return Path(configured)
    return paths.default_distribution("opensearch")


def _check_opensearch() -> str | None:
    """The OpenSearch distribution (painless and security included) and a Java >= 21."""
    from esdash_plugins.backends.opensearch import distribution, java

    user = _user_problem(es_user())
    if user:
        return user
    home = os_home()
    if home is None or not distribution.is_unpacked(home):
        where = home or f"{paths.cache_dir()}/opensearch-*"
        return f"no OpenSearch distribution at {where} (esdash fetch opensearch)"
    found = distribution.inspect(home)
    if not found.scripting or not distribution.has_security(found):
        return (
            f"{home} lacks painless or the security plugin; remove it and run "
            "`esdash fetch opensearch`"
        )
    try:
        runtime = java.resolve_java(home)
    except Exception as exc:
        return f"no Java for OpenSearch: {exc}"
    major = java.release_major(runtime.java_home)
    if major is None or major < java.MIN_JAVA_MAJOR:
        return f"Java {major} from {runtime.source} is too old for OpenSearch: {java.FIX}"
    return None


def _check_mpi() -> str | None:
    if not (venv_bin() / "mpiexec").is_file():
        return f"no mpiexec next to {sys.executable} (pip install '.[mpich]')"
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed in the test interpreter"
    return None


def _check_slurm() -> str | None:
    if not _is_root():
        return "slurmd must run as root"
    return _missing_tools("slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel", "munged")


def _check_gocryptfs() -> str | None:
    tools = _missing_tools("gocryptfs", "fusermount3")
    if tools:
        return tools
    fuse = Path("/dev/fuse")
    if not fuse.exists():
        return "/dev/fuse does not exist (no FUSE in this kernel/container)"
    if _is_root():
        user = _user_problem(es_user())
        if user:
            return user
        if fuse.stat().st_mode & 0o006 != 0o006:
            return "/dev/fuse is not usable by unprivileged users (chmod 0666 /dev/fuse)"
    elif not os.access(fuse, os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    return None


def _has_cap(bit: int) -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def _check_netns() -> str | None:
    if not _is_root() or not _has_cap(_CAP_NET_ADMIN):
        return "network namespaces need root with CAP_NET_ADMIN"
    return _missing_tools("ip", "nsenter")


def _check_static_engine() -> str | None:
    """The static engine (support/static_engine.py) runs its nodes under esdash's MPI ranks."""
    from support import static_engine

    if not (static_engine.HOME / "server.py").is_file():
        return f"no static engine in {static_engine.TEST_PLUGINS} (run scripts/provision)"
    return _check_mpi()


CHECKS: dict[str, Callable[[], str | None]] = {
    "es": _check_es,
    "opensearch": _check_opensearch,
    "mpi": _check_mpi,
    "slurm": _check_slurm,
    "gocryptfs": _check_gocryptfs,
    "netns": _check_netns,
    "static_engine": _check_static_engine,
}


@functools.cache
def problem(marker: str) -> str | None:
    """Why the prerequisites of ``marker`` are not met, or None when they are."""
    return CHECKS[marker]()
