"""Elasticsearch distributions: which ones esdash supports, where they come from, what Java.

Supports the integ-test-zip that Maven Central publishes (no bundled JDK, only the modules
apm, transport-netty4, x-pack-core and x-pack-security; no scripting) and the official
7.17/8.x/9.x tarballs (bundled JDK, full module set).  ``esdash fetch elasticsearch`` gets
the integ-test-zip with Maven (see :mod:`esdash.plugin.fetching`).
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable
from pathlib import Path

from esdash.plugin_api import (
    BadInput,
    Distribution,
    engine_version,
    find_maven,
    install_into_cache,
    is_jvm_distribution,
    make_world_readable,
    read_distribution,
    unpack_integ_test_zip,
    workspace,
)

#: The version ``esdash fetch elasticsearch`` gets, and every test cluster runs.
DEFAULT_VERSION = "8.19.21"

#: Maven coordinates of the distribution without the version.
ARTIFACT = "org.elasticsearch.distribution.integ-test-zip:elasticsearch"

#: The module set of the integ-test-zip; a distribution with only these is that flavor.
INTEG_TEST_MODULES = frozenset({"apm", "transport-netty4", "x-pack-core", "x-pack-security"})
SUPPORTED_MAJORS = (7, 8, 9)

#: The field types the server of Elasticsearch 8.x maps without any module or plugin (read
#: from ``IndicesModule.getMappers`` of 8.19.21; x-pack-core and x-pack-security add only
#: metadata fields).  The integ-test-zip maps exactly these: ``scaled_float``,
#: ``match_only_text``, ``wildcard``, ``constant_keyword``, ``geo_shape`` ... come from
#: modules it does not ship.  Other flavors and majors report no list (not known here).
SERVER_MAPPERS_8 = (
    "alias", "binary", "boolean", "byte", "completion", "date", "date_nanos", "date_range",
    "dense_vector", "double", "double_range", "flattened", "float", "float_range", "geo_point",
    "half_float", "integer", "integer_range", "ip", "ip_range", "keyword", "long",
    "long_range", "nested", "object", "passthrough", "short", "sparse_vector", "text",
)  # fmt: skip

#: Minimum Java major version per Elasticsearch major version.  8.x refuses anything older
#: than 17 (its java-version-checker), 9.x needs 21.  7.17 itself still starts on Java 8, but
#: esdash asks for 11, the oldest LTS release it supports.
MIN_JAVA_MAJOR = {7: 11, 8: 17, 9: 21}

#: The variable Elasticsearch's launcher takes its Java from (it ignores JAVA_HOME).
JAVA_HOME_VARIABLE = "ES_JAVA_HOME"

_VERSION_RE = re.compile(r"\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?")


def min_java_major(version: str) -> int:
    """The oldest Java major the given Elasticsearch version runs on (newest rule if unknown)."""
    major = int(version.split(".")[0])
    return MIN_JAVA_MAJOR.get(major, MIN_JAVA_MAJOR[max(MIN_JAVA_MAJOR)])


def version_of(home: Path) -> str | None:
    """The version from ``lib/elasticsearch-<version>.jar`` (present in every flavor)."""
    return engine_version(home, "elasticsearch")


def is_unpacked(home: Path) -> bool:
    """True when ``home`` looks like a complete distribution (launcher and libraries present)."""
    return is_jvm_distribution(home, "elasticsearch")


def inspect(home: Path) -> Distribution:
    """Version, flavor and modules of the distribution at ``home``, and what esdash rejects."""
    found = read_distribution(home, "elasticsearch", "Elasticsearch")
    version, modules, major = found.version, found.modules, found.major
    problems: list[str] = []
    if major not in SUPPORTED_MAJORS:
        problems.append(f"version {version} is not supported (use 7.17, 8.x or 9.x)")
    elif major == 7 and not version.startswith("7.17."):
        problems.append(f"version {version}: of the 7.x line only 7.17 is supported")
    flavor = "integ-test-zip" if set(modules) <= INTEG_TEST_MODULES else "default"
    mappers = SERVER_MAPPERS_8 if flavor == "integ-test-zip" and major == 8 else ()
    return found.described(flavor, problems, mappers=mappers)


def by_hand(version: str) -> str:
    """How to get a distribution without Maven."""
    return (
        f"To use an official tarball instead, download elasticsearch-{version}-linux-x86_64"
        f".tar.gz from the Elasticsearch downloads page, unpack it (tar -xzf <file>) somewhere "
        f'the Elasticsearch user can read, and set `home = "/path/to/elasticsearch-{version}"` '
        f"in the [cluster] table of your session file (cluster.home)."
    )


def fetch(version: str, cache: Path, say: Callable[[str], None]) -> Path:
    """The home of Elasticsearch ``version`` in ``cache``, downloaded with Maven if needed."""
    if not _VERSION_RE.fullmatch(version):
        raise BadInput(f"--version {version!r}: expected a version like {DEFAULT_VERSION}")
    home = cache / f"elasticsearch-{version}"
    if is_unpacked(home):
        probe = home / "config" / "jvm.options"
        if probe.exists() and not probe.stat().st_mode & stat.S_IROTH:
            make_world_readable(home)  # unpacked as root by other means: repair once
        return home
    mvn = find_maven(f"Elasticsearch {version}", by_hand(version))
    with workspace(cache) as tmp:
        say(f"esdash: downloading Elasticsearch {version} with Maven")
        coordinates = f"{ARTIFACT}:{version}:zip"
        hand = by_hand(version)
        top = unpack_integ_test_zip(mvn, coordinates, "elasticsearch", version, tmp, hand, say)
        return install_into_cache(top, home, is_unpacked)
