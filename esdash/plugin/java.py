"""The Java runtime a JVM search engine runs on: which one, and which version it is.

Elasticsearch and OpenSearch launchers take their own variable (``ES_JAVA_HOME``,
``OPENSEARCH_JAVA_HOME``), else the JDK bundled in the distribution (``jdk/``), and ignore
``JAVA_HOME`` and ``PATH`` (Elasticsearch 8 even prints "warning: ignoring JAVA_HOME").
Distributions without a bundled JDK (the Maven integ-test-zips) cannot start on their own.
A backend therefore starts nodes with a clean environment and this runtime:

1. the distribution's bundled ``jdk/`` (the runtime that version was tested with; the node
   environment then carries no engine variable),
2. the engine's variable (``home_variable``),
3. ``JAVA_HOME``,
4. ``java`` on ``PATH`` (symlinks resolved, so Debian's ``/usr/bin/java`` gives
   ``/usr/lib/jvm/java-17-openjdk-amd64``),

passing 2-4 to the node in the engine's variable.  :func:`find_java` implements that order
so that ``esdash doctor`` reports the runtime the nodes really get.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput, EsdashError
from esdash.plugin.host import HostCheck
from esdash.rundir.records import JsonObject


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


def find_java(
    home: Path | None, home_variable: str, env: Mapping[str, str] | None = None
) -> JavaRuntime:
    """The runtime the nodes of the distribution at ``home`` will run on.

    ``home_variable`` is the engine launcher's own variable (``ES_JAVA_HOME``).  A bundled
    ``jdk/``, that variable or ``JAVA_HOME`` holding no ``bin/java`` is an error, not
    something to skip silently: the node launch would use it and fail, and the user would
    otherwise get a different Java than they think.
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
    engine_home = env.get(home_variable)
    if engine_home:
        found = _runtime_in(Path(engine_home), home_variable)
        if found is None:
            raise BadInput(
                f"{home_variable}={engine_home} has no executable bin/java; point it at a JDK "
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
        f"no Java found: {home_variable} and JAVA_HOME are unset, the distribution has no "
        "bundled jdk/ and there is no java on PATH"
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


def java_check(
    home: Path | None,
    home_variable: str,
    need: int,
    for_what: str,
    *,
    resolve: Callable[[Path | None], JavaRuntime] | None = None,
    fix: str | None = None,
) -> HostCheck:
    """The doctor's ``java`` check: the runtime the nodes get, and whether it is new enough.

    ``need`` is the oldest Java major the engine version runs on; ``for_what`` names that
    version in the report (``Elasticsearch 8.19.21``).  A backend that picks its nodes'
    runtime in its own way (OpenSearch: a JDK >= 21 under ``/usr/lib/jvm`` when the
    system's is too old) passes that as ``resolve`` (default: :func:`find_java`), and may
    name its own ``fix``.
    """
    install = fix or (
        "apt-get install openjdk-17-jre-headless, then "
        f"export {home_variable}=/usr/lib/jvm/java-17-openjdk-amd64"
        if need <= 17
        else f"install a JDK >= {need} (e.g. Eclipse Temurin) and export {home_variable}=<its home>"
    )
    try:
        runtime = resolve(home) if resolve is not None else find_java(home, home_variable)
    except EsdashError as exc:
        return HostCheck("java", "fail", f"{exc}; {for_what} needs Java >= {need}", install)
    data: JsonObject = {
        "java_home": str(runtime.java_home),
        "executable": str(runtime.executable),
        "source": runtime.source,
        "required_major": need,
    }
    try:
        version = java_version(runtime.executable)
    except EsdashError as exc:
        return HostCheck("java", "fail", str(exc), install, data)
    data.update(version=version.version, major=version.major)
    detail = (
        f"{version.vendor} {version.version} from {runtime.source} "
        f"({runtime.java_home}); {for_what} needs >= {need}"
    )
    if version.major < need:
        return HostCheck("java", "fail", detail, install, data)
    if runtime.source in ("JAVA_HOME", "PATH"):
        detail += (
            f"; the engine's launcher ignores {runtime.source}, esdash passes it as {home_variable}"
        )
    elif runtime.source not in ("bundled JDK", home_variable):
        detail += f"; passed to the nodes as {home_variable}"
    return HostCheck("java", "pass", detail, data=data)


def point_jvm_files(jvm_options: str, target: Path) -> str:
    """``jvm.options`` text with the JVM's own files -- GC log, crash (``hs_err``) files and
    heap dumps -- all absolute paths in ``target``.

    The Elasticsearch and OpenSearch templates name them relative to the working directory
    (or under ``logs/``) and leave the heap dump path unset or relative, so they would land
    wherever the JVM happens to run.  ``target`` is the node's logs directory, or, for an
    encryption mode that keeps them with the data
    (:meth:`esdash.plugin.api.EncryptionMode.node_scratch`), a directory inside its encrypted
    storage: a heap dump holds every document the node had in memory.
    """
    text = re.sub(
        r"(?m)^(-XX:ErrorFile=)(.*)$", lambda m: f"{m[1]}{target}/{Path(m[2]).name}", jvm_options
    )
    text = re.sub(r"(?<=file=)([^:]+)", lambda m: f"{target}/{Path(m[1]).name}", text)
    text = re.sub(r"(?<=-Xloggc:)(\S+)", lambda m: f"{target}/{Path(m[1]).name}", text)
    text = re.sub(r"(?m)^#?\s*-XX:HeapDumpPath=.*$", "", text)
    return text.rstrip("\n") + f"\n-XX:HeapDumpPath={target}\n"
