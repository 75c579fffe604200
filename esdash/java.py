"""The Java runtime Elasticsearch runs on: which one, and which version it is.

Elasticsearch's own launcher (``bin/elasticsearch-env``) takes ``ES_JAVA_HOME``, else the JDK
bundled in the distribution (``jdk/``), and ignores ``JAVA_HOME`` and ``PATH`` (8.x even prints
"warning: ignoring JAVA_HOME").  The Maven integ-test-zip has no bundled JDK, so on its own it
cannot start at all.  The Elasticsearch backend therefore starts nodes with a clean
environment and this runtime:

1. the distribution's bundled ``jdk/`` (the runtime that version was tested with; the node
   environment then carries no ``ES_JAVA_HOME``),
2. ``ES_JAVA_HOME``,
3. ``JAVA_HOME``,
4. ``java`` on ``PATH`` (symlinks resolved, so Debian's ``/usr/bin/java`` gives
   ``/usr/lib/jvm/java-17-openjdk-amd64``),

passing 2-4 to the node as ``ES_JAVA_HOME``.  :func:`find_java` implements that order so that
``esdash doctor`` reports the runtime the nodes really get.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput, EsdashError

#: Minimum Java major version per Elasticsearch major version.  8.x refuses anything older
#: than 17 (its java-version-checker), 9.x needs 21.  7.17 itself still starts on Java 8, but
#: esdash asks for 11, the oldest LTS release it supports.
MIN_JAVA_MAJOR = {7: 11, 8: 17, 9: 21}


@dataclass(frozen=True)
class JavaRuntime:
    """A Java installation and where esdash found it (``source`` is shown to the user)."""

    java_home: Path
    executable: Path
    source: str


@dataclass(frozen=True)
class JavaVersion:
    """What ``java -version`` said: the vendor word, the version string and its major."""

    vendor: str
    version: str
    major: int


def _runtime_in(java_home: Path, source: str) -> JavaRuntime | None:
    executable = java_home / "bin" / "java"
    if executable.is_file() and os.access(executable, os.X_OK):
        return JavaRuntime(java_home, executable, source)
    return None


def find_java(home: Path | None, env: Mapping[str, str] | None = None) -> JavaRuntime:
    """The runtime the nodes of the distribution at ``home`` will run on.

    A bundled ``jdk/``, ``ES_JAVA_HOME`` or ``JAVA_HOME`` that holds no ``bin/java`` is an
    error, not something to skip silently: the node launch would use it and fail, and the
    user would otherwise get a different Java than they think.
    """
    env = os.environ if env is None else env
    if home is not None and (Path(home) / "jdk").is_dir():
        found = _runtime_in(Path(home) / "jdk", "bundled JDK")
        if found is None:
            raise BadInput(
                f"{home}/jdk has no executable bin/java: the bundled JDK is damaged; "
                "unpack the distribution again"
            )
        return found
    es_java_home = env.get("ES_JAVA_HOME")
    if es_java_home:
        found = _runtime_in(Path(es_java_home), "ES_JAVA_HOME")
        if found is None:
            raise BadInput(
                f"ES_JAVA_HOME={es_java_home} has no executable bin/java; point it at a JDK "
                f"(e.g. /usr/lib/jvm/java-17-openjdk-amd64) or unset it"
            )
        return found
    java_home = env.get("JAVA_HOME")
    if java_home:
        found = _runtime_in(Path(java_home), "JAVA_HOME")
        if found is None:
            raise BadInput(
                f"JAVA_HOME={java_home} has no executable bin/java; point it at a JDK or unset it"
            )
        return found
    on_path = shutil.which("java", path=env.get("PATH", os.defpath))
    if on_path:
        resolved = Path(on_path).resolve()
        return JavaRuntime(resolved.parent.parent, resolved, "PATH")
    raise BadInput(
        "no Java found: ES_JAVA_HOME and JAVA_HOME are unset, the distribution has no bundled "
        "jdk/ and there is no java on PATH"
    )


def parse_java_version(text: str) -> JavaVersion:
    """Read ``java -version`` output, e.g. ``openjdk version "17.0.21" 2026-10-20``.

    Java 8 and older report ``1.8.0_292``, whose major is the second number.
    """
    match = re.search(r'^(\S+) version "([^"]+)"', text, re.MULTILINE)
    if not match:
        raise EsdashError(f"cannot read a Java version from: {text.strip()[:200]!r}")
    vendor, version = match.groups()
    numbers = [int(n) for n in re.findall(r"\d+", version)]
    if not numbers:
        raise EsdashError(f"cannot read a Java version from {version!r}")
    major = numbers[1] if numbers[0] == 1 and len(numbers) > 1 else numbers[0]
    return JavaVersion(vendor, version, major)


def java_version(executable: Path, timeout: float = 30.0) -> JavaVersion:
    """Run ``java -version`` (it prints to stderr) and parse it."""
    try:
        proc = subprocess.run(
            [str(executable), "-version"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EsdashError(f"{executable} -version failed: {exc}") from exc
    output = proc.stderr + proc.stdout
    if proc.returncode != 0:
        raise EsdashError(
            f"{executable} -version exited with {proc.returncode}: {output.strip()[:200]}"
        )
    return parse_java_version(output)


def min_java_major(es_version: str) -> int:
    """The oldest Java major the given Elasticsearch version runs on (newest rule if unknown)."""
    major = int(es_version.split(".")[0])
    return MIN_JAVA_MAJOR.get(major, MIN_JAVA_MAJOR[max(MIN_JAVA_MAJOR)])
