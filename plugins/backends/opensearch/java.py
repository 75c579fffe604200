"""The Java OpenSearch runs on: 3.x needs 21 or newer, which is rarely the system's default.

:func:`esdash.plugin_api.find_java` gives the runtime in the launcher's order (a bundled
``jdk/``, ``OPENSEARCH_JAVA_HOME``, ``JAVA_HOME``, ``java`` on ``PATH``).  When that runtime
came from ``JAVA_HOME`` or ``PATH`` (nobody chose it for OpenSearch) and is too old, as
Debian 12's Java 17 is, the newest JDK under ``/usr/lib/jvm`` that is new enough is taken
instead: machines keep a second JDK there (these keep Temurin 25), and a run should not fail
over a variable the user never had to know.  An explicit ``OPENSEARCH_JAVA_HOME`` or a
bundled JDK is never overridden, so a wrong one is reported, not silently replaced.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from esdash.plugin_api import BadInput, JavaRuntime, find_java

#: The variable OpenSearch's launcher takes its Java from (it ignores JAVA_HOME).
JAVA_HOME_VARIABLE = "OPENSEARCH_JAVA_HOME"

#: OpenSearch 3.x is compiled for Java 21 (2.x ran on 11).
MIN_JAVA_MAJOR = 21

#: Where distribution packages and the machine images put JDKs.
JVM_DIRS = (Path("/usr/lib/jvm"),)

FIX = (
    f"install a JDK >= {MIN_JAVA_MAJOR} (e.g. Eclipse Temurin 25 in "
    f"/usr/lib/jvm/temurin-25-jdk-amd64) and export {JAVA_HOME_VARIABLE}=<its home>"
)


def min_java_major(version: str) -> int:
    """The oldest Java major the given OpenSearch version runs on."""
    return MIN_JAVA_MAJOR if int(version.split(".")[0]) >= 3 else 11


def release_major(java_home: Path) -> int | None:
    """The Java major from a JDK's ``release`` file (``JAVA_VERSION="25.0.1"``), no JVM start."""
    try:
        text = (java_home / "release").read_text()
    except OSError:
        return None
    match = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', text, re.MULTILINE)
    if not match:
        return None
    first = int(match.group(1))
    return int(match.group(2) or 0) if first == 1 else first


def newest_jdk(need: int, dirs: tuple[Path, ...] = JVM_DIRS) -> JavaRuntime | None:
    """The newest JDK under ``dirs`` whose major is at least ``need``."""
    found: list[tuple[int, str, Path]] = []
    for directory in dirs:
        if not directory.is_dir():
            continue
        for home in directory.iterdir():
            if home.is_symlink() or not (home / "bin" / "java").is_file():
                continue
            major = release_major(home)
            if major is not None and major >= need:
                found.append((major, home.name, home))
    if not found:
        return None
    major, _name, home = max(found)
    return JavaRuntime(home, home / "bin" / "java", f"{home.parent} (newest JDK >= {need})")


def resolve_java(home: Path | None, need: int = MIN_JAVA_MAJOR) -> JavaRuntime:
    """The runtime the nodes of the distribution at ``home`` get (see the module docstring).

    Raises :class:`BadInput` naming the fix when no runtime at all is found.
    """
    runtime = find_java(home, JAVA_HOME_VARIABLE)
    if runtime.source in ("JAVA_HOME", "PATH"):
        major = release_major(runtime.java_home)
        if major is None or major < need:
            better = newest_jdk(need)
            if better is not None:
                return better
    return runtime


def java_env(home: Path | None) -> dict[str, str]:
    """``{OPENSEARCH_JAVA_HOME: ...}`` for a node, or ``{}`` for a bundled JDK."""
    runtime = resolve_java(home)
    if runtime.source == "bundled JDK":
        return {}
    if not os.access(runtime.executable, os.X_OK):
        raise BadInput(f"{runtime.executable} is not executable; {FIX}")
    return {JAVA_HOME_VARIABLE: str(runtime.java_home)}
