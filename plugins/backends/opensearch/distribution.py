"""OpenSearch distributions: which ones esdash runs, and how ``esdash fetch`` assembles one.

Two layouts are recognised:

* the **official tarball** (``opensearch-<v>-linux-x64.tar.gz``): a bundled ``jdk/``, every
  module and the security plugin already installed.  Sites install it; it is not on Maven
  Central, so it cannot be fetched (or tested) here.
* the **assembled** distribution that :func:`fetch` builds from Maven Central: the
  integ-test-zip (which has only the transport modules), the nine modules below from their
  ``org.opensearch.plugin`` jars with their dependencies and a plugin descriptor each, and
  the ``opensearch-security`` plugin.  A marker file (:data:`ASSEMBLY_MARKER`) says so.

Only 3.4.0 can be assembled: it is the only version whose security plugin is on Central, and
the plugin refuses any other core version.  The security zip names ``rule-framework`` as a
required parent plugin although it uses it only through ``META-INF/services`` files, and
Central publishes no such module; the fetch marks it optional and adds the one class the
plugin then lacks (commons-collections4).  Every step was verified on this machine class
(``shared/research/opensearch.md``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from esdash.plugin_api import (
    BadInput,
    Distribution,
    FetchError,
    engine_version,
    find_maven,
    install_into_cache,
    is_jvm_distribution,
    maven_copy,
    read_distribution,
    run_maven,
    unpack_integ_test_zip,
    workspace,
)

from .java import FIX, JAVA_HOME_VARIABLE, MIN_JAVA_MAJOR, release_major, resolve_java

#: The version ``esdash fetch opensearch`` assembles, and every test cluster runs.
DEFAULT_VERSION = "3.4.0"

#: Versions :func:`fetch` can assemble (the security plugin exists on Central for these).
ASSEMBLABLE = ("3.4.0",)

DISTRIBUTION_ARTIFACT = "org.opensearch.distribution.integ-test-zip:opensearch"
PLUGIN_GROUP = "org.opensearch.plugin"
SECURITY_ARTIFACT = f"{PLUGIN_GROUP}:opensearch-security"
COLLECTIONS4 = ("org.apache.commons:commons-collections4:4.5.0", "commons-collections4-4.5.0.jar")

#: Written into an assembled home, last; :func:`inspect` reads it.
ASSEMBLY_MARKER = "esdash-assembly.json"

SECURITY_PLUGIN = "opensearch-security"


@dataclass(frozen=True)
class Module:
    """A module assembled from its Maven jar: folder name, artifact, plugin class, parents."""

    name: str
    artifact: str
    classname: str
    extends: tuple[str, ...] = ()
    policy: str = ""


_PAINLESS_POLICY = """grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
"""

_REINDEX_POLICY = """grant {
  // reindex opens socket connections using the rest client
  permission java.net.SocketPermission "*", "connect";
};

grant codeBase "${codebase.opensearch-rest-client}" {
  permission java.net.NetPermission "getProxySelector";
};

grant codeBase "${codebase.httpasyncclient}" {
  permission java.net.NetPermission "getProxySelector";
};
"""

#: The modules the integ-test-zip lacks that esdash assembles, in dependency order
#: (analysis-common and ingest-common extend lang-painless).
MODULES = (
    Module(
        "lang-painless", "lang-painless", "org.opensearch.painless.PainlessModulePlugin",
        policy=_PAINLESS_POLICY,
    ),
    Module(
        "analysis-common", "analysis-common",
        "org.opensearch.analysis.common.CommonAnalysisModulePlugin", ("lang-painless",),
    ),
    Module(
        "mapper-extras", "mapper-extras-client",
        "org.opensearch.index.mapper.MapperExtrasModulePlugin",
    ),
    Module(
        "ingest-common", "ingest-common",
        "org.opensearch.ingest.common.IngestCommonModulePlugin", ("lang-painless",),
    ),
    Module("parent-join", "parent-join-client", "org.opensearch.join.ParentJoinModulePlugin"),
    Module("percolator", "percolator-client", "org.opensearch.percolator.PercolatorModulePlugin"),
    Module(
        "aggs-matrix-stats", "aggs-matrix-stats-client",
        "org.opensearch.search.aggregations.matrix.MatrixAggregationModulePlugin",
    ),
    Module("geo", "geo", "org.opensearch.geo.GeoModulePlugin"),
    Module(
        "reindex", "reindex-client", "org.opensearch.index.reindex.ReindexModulePlugin",
        policy=_REINDEX_POLICY,
    ),
)  # fmt: skip

#: Field types the core of OpenSearch 3.x maps without any module, as ``IndicesModule.
#: getMappers`` of 3.4.0 registers them (2.x lacks some: wildcard came in 2.15,
#: match_only_text in 2.12); ``geo_shape`` comes from the geo module.
CORE_MAPPERS = (
    "alias", "binary", "boolean", "byte", "completion", "constant_keyword",
    "context_aware_grouping", "date", "date_nanos", "date_range", "derived", "double",
    "double_range", "flat_object", "float", "float_range", "geo_point", "half_float",
    "integer", "integer_range", "ip", "ip_range", "keyword", "long", "long_range",
    "match_only_text", "nested", "object", "short", "star_tree", "text", "unsigned_long",
    "version", "wildcard",
)  # fmt: skip

#: Field types a module adds (the mapping of a track needing one fails without it).
MODULE_MAPPERS = {
    "mapper-extras": (
        "rank_feature", "rank_features", "scaled_float", "search_as_you_type", "token_count",
    ),
    "parent-join": ("join",),
    "percolator": ("percolator",),
    "geo": ("geo_shape",),
}  # fmt: skip

_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")
_JAR_VERSION = re.compile(r"^(?P<name>.+?)-\d[\w.]*(?:-[\w.]+)*\.jar$")


# --------------------------------------------------------------------------- inspecting


def version_of(home: Path) -> str | None:
    """The version from ``lib/opensearch-<version>.jar`` (present in every layout)."""
    return engine_version(home, "opensearch")


def is_unpacked(home: Path) -> bool:
    """True when ``home`` has a launcher and libraries (an assembled one also its marker)."""
    return is_jvm_distribution(home, "opensearch")


def is_assembled(home: Path) -> bool:
    """True when :func:`fetch` finished assembling ``home`` (the marker is written last)."""
    return is_unpacked(home) and (home / ASSEMBLY_MARKER).is_file()


def plugins_of(home: Path) -> tuple[str, ...]:
    """The installed plugins (``plugins/<name>/``)."""
    directory = home / "plugins"
    if not directory.is_dir():
        return ()
    return tuple(sorted(p.name for p in directory.iterdir() if p.is_dir()))


def mappers_of(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The field types a distribution with ``modules`` can map."""
    found = set(CORE_MAPPERS)
    for module in modules:
        found.update(MODULE_MAPPERS.get(module, ()))
    return tuple(sorted(found))


def inspect(home: Path) -> Distribution:
    """Version, flavor, modules, installed plugins and mappable field types of ``home``.

    A plan refuses what the distribution lacks from these: painless (``scripting``), the
    security plugin (``plugins``), a field type of the track's mapping (``mappers``).
    """
    found = read_distribution(home, "opensearch", "OpenSearch")
    home, version, modules, major = found.home, found.version, found.modules, found.major
    problems: list[str] = []
    if major < 2:
        problems.append(f"version {version} is not supported (use OpenSearch 2.x or 3.x)")
    if (home / ASSEMBLY_MARKER).is_file():
        flavor = "assembled"
    elif len(modules) <= 2:
        flavor = "integ-test-zip"
    else:
        flavor = "tarball"
    return found.described(flavor, problems, plugins_of(home), mappers_of(modules))


def has_security(distribution: Distribution) -> bool:
    """Whether the security plugin is installed (TLS and users need it)."""
    return SECURITY_PLUGIN in distribution.plugins


# --------------------------------------------------------------------------- fetching


def by_hand(version: str) -> str:
    """How to get a distribution without esdash's assembly."""
    return (
        f"To use an official tarball instead, download opensearch-{version}-linux-x64.tar.gz "
        f"from the OpenSearch downloads page, unpack it somewhere the node user can read, and "
        f'set cluster.home (`home = "/path/to/opensearch-{version}"` in the [cluster] table '
        "of your session)."
    )


def refuse_reason(version: str) -> str | None:
    """Why ``version`` cannot be assembled from Maven Central (None: it can)."""
    if not _VERSION_RE.fullmatch(version):
        return f"--version {version!r}: expected a version like {DEFAULT_VERSION}"
    if version in ASSEMBLABLE:
        return None
    return (
        f"OpenSearch {version} cannot be assembled from Maven Central: its security plugin "
        f"({SECURITY_ARTIFACT}:{version}.0) is not published there (only "
        f"{', '.join(v + '.0' for v in ASSEMBLABLE)} is), and the plugin refuses any other "
        f"core version. Versions esdash can assemble: {', '.join(ASSEMBLABLE)}. "
        f"{by_hand(version)}"
    )


def fetch(version: str, cache: Path, say: Callable[[str], None]) -> Path:
    """The home of OpenSearch ``version`` in ``cache``, assembled from Maven Central if needed.

    Idempotent: a complete assembly is returned at once.  One progress line per artifact.
    """
    reason = refuse_reason(version)
    if reason:
        raise BadInput(reason)
    home = cache / f"opensearch-{version}"
    if is_assembled(home):
        return home
    if home.exists():
        raise FetchError(
            f"{home} exists but is not a complete esdash assembly (no {ASSEMBLY_MARKER}); "
            f"remove it (rm -rf {home}) and fetch again"
        )
    hand = by_hand(version)
    mvn = find_maven(f"OpenSearch {version}", hand)
    java = resolve_java(None, MIN_JAVA_MAJOR)  # the plugin installer needs Java >= 21 too
    if (release_major(java.java_home) or 0) < MIN_JAVA_MAJOR:
        raise FetchError(
            f"assembling OpenSearch {version} runs its plugin installer, which needs Java >= "
            f"{MIN_JAVA_MAJOR}; the newest Java found is {java.java_home} ({java.source}). {FIX}"
        )
    started = time.monotonic()
    total = len(MODULES) + 3
    with workspace(cache) as tmp:
        step = _Steps(say, total)
        step(f"{DISTRIBUTION_ARTIFACT}:{version}:zip")
        coordinates = f"{DISTRIBUTION_ARTIFACT}:{version}:zip"
        top = unpack_integ_test_zip(mvn, coordinates, "opensearch", version, tmp, hand)
        lib_names = {_artifact_name(jar.name) for jar in (top / "lib").glob("*.jar")}
        for module in MODULES:
            step(f"{PLUGIN_GROUP}:{module.artifact}:{version} (module {module.name})")
            _assemble_module(mvn, module, version, top / "modules", tmp / "poms", lib_names, hand)
        step(f"{SECURITY_ARTIFACT}:{version}.0:zip")
        security_zip = maven_copy(
            mvn,
            f"{SECURITY_ARTIFACT}:{version}.0:zip",
            tmp / "download",
            f"opensearch-security-{version}.0.zip",
            hand,
        )
        step(f"{COLLECTIONS4[0]} (for the security plugin)")
        collections = maven_copy(mvn, COLLECTIONS4[0], tmp / "download", COLLECTIONS4[1], hand)
        patched = tmp / "opensearch-security-patched.zip"
        optional = patch_security_zip(security_zip, patched, [collections])
        say(f"esdash: installing the security plugin ({', '.join(optional)} made optional)")
        _install_plugin(top, patched, java.java_home)
        marker = {
            "version": version,
            "built_by": "esdash fetch opensearch",
            "modules": [m.name for m in MODULES],
            "security_plugin": f"{version}.0",
            "security_optional_parents": optional,
            "security_extra_jars": [collections.name],
            "java_home": str(java.java_home),
            "seconds": round(time.monotonic() - started, 1),
        }
        (top / ASSEMBLY_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        say(f"esdash: assembled OpenSearch {version} in {time.monotonic() - started:.0f} s")
        return install_into_cache(top, home, is_assembled)


class _Steps:
    """Numbered progress lines, one per artifact."""

    def __init__(self, say: Callable[[str], None], total: int) -> None:
        self.say = say
        self.total = total
        self.done = 0

    def __call__(self, what: str) -> None:
        self.done += 1
        self.say(f"esdash: [{self.done}/{self.total}] {what}")


def _artifact_name(jar: str) -> str:
    """``reactor-core-3.5.20.jar`` -> ``reactor-core`` (the name without its version)."""
    match = _JAR_VERSION.match(jar)
    return match.group("name") if match else jar.removesuffix(".jar")


def _module_pom(module: Module, version: str) -> str:
    """A one-dependency pom: the module's jar and its dependencies, without the core."""
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>esdash.fetch</groupId>
  <artifactId>{module.name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{PLUGIN_GROUP}</groupId>
      <artifactId>{module.artifact}</artifactId>
      <version>{version}</version>
      <exclusions>
        <exclusion><groupId>org.opensearch</groupId><artifactId>opensearch</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
"""


def descriptor(module: Module, version: str) -> str:
    """``plugin-descriptor.properties`` with the keys the official modules' descriptors have."""
    return (
        f"description=The {module.name} module (assembled by esdash from {PLUGIN_GROUP}:"
        f"{module.artifact}:{version})\n"
        f"version={version}\n"
        f"name={module.name}\n"
        f"classname={module.classname}\n"
        f"java.version={MIN_JAVA_MAJOR}\n"
        f"opensearch.version={version}\n"
        "custom.foldername=\n"
        f"extended.plugins={','.join(module.extends)}\n"
        "has.native.controller=false\n"
    )


def _assemble_module(
    mvn: str,
    module: Module,
    version: str,
    modules_dir: Path,
    poms: Path,
    lib_names: set[str],
    hand: str,
) -> None:
    """``modules/<name>/``: the jar, its dependencies not already in ``lib/``, a descriptor.

    A jar whose artifact is in ``lib/`` too would put its classes on the classpath twice,
    which OpenSearch refuses (jar hell).
    """
    pom = poms / module.name / "pom.xml"
    pom.parent.mkdir(parents=True, exist_ok=True)
    pom.write_text(_module_pom(module, version))
    target = modules_dir / module.name
    arguments = [
        "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={target}", "-DincludeScope=runtime",
    ]  # fmt: skip
    # strict checksums, and a failure in one line (a mismatch named as such)
    what = f"{PLUGIN_GROUP}:{module.artifact}:{version} with its dependencies"
    run_maven(mvn, arguments, what, hand)
    jars = list(target.glob("*.jar"))
    if not any(_artifact_name(jar.name) == module.artifact for jar in jars):
        raise FetchError(f"Maven copied no {module.artifact} jar into {target}. {hand}")
    for jar in jars:
        if _artifact_name(jar.name) in lib_names:
            jar.unlink()
    (target / "plugin-descriptor.properties").write_text(descriptor(module, version))
    if module.policy:
        (target / "plugin-security.policy").write_text(module.policy)


def patch_security_zip(source: Path, target: Path, extra_jars: list[Path]) -> list[str]:
    """Copy the security plugin zip with every required parent plugin made optional.

    Returns the parents it made optional.  ``extra_jars`` are added next to the plugin's
    own jars.  Parents such as ``rule-framework`` are used only through
    ``META-INF/services`` files, which OpenSearch skips when the parent is absent.
    """
    made_optional: list[str] = []

    def patch(text: str) -> str:
        lines = []
        for line in text.splitlines():
            if line.startswith("extended.plugins="):
                parents = []
                for entry in line.split("=", 1)[1].split(","):
                    entry = entry.strip()
                    if entry and ";optional=true" not in entry:
                        made_optional.append(entry)
                        entry += ";optional=true"
                    if entry:
                        parents.append(entry)
                line = "extended.plugins=" + ",".join(parents)
            lines.append(line)
        return "\n".join(lines) + "\n"

    found_descriptor = False
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("plugin-descriptor.properties"):
                found_descriptor = True
                data = patch(data.decode()).encode()
            zout.writestr(info, data)
        for jar in extra_jars:
            zout.write(jar, jar.name)
    if not found_descriptor:
        raise FetchError(f"{source.name} has no plugin-descriptor.properties")
    return made_optional


def _install_plugin(home: Path, plugin_zip: Path, java_home: Path) -> None:
    """``bin/opensearch-plugin install --batch file://<zip>``, with the Java OpenSearch needs."""
    env = {
        JAVA_HOME_VARIABLE: str(java_home),
        "OPENSEARCH_PATH_CONF": str(home / "config"),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    cmd = [str(home / "bin" / "opensearch-plugin"), "install", "--batch", plugin_zip.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not (home / "plugins" / SECURITY_PLUGIN).is_dir():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise FetchError(f"installing the security plugin failed (exit {proc.returncode}):\n{tail}")
    shutil.rmtree(home / "logs", ignore_errors=True)  # the tool may leave an empty logs dir
