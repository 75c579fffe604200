"""The Elasticsearch backend: find and understand a distribution directory.

Supports the integ-test-zip that Maven Central publishes (no bundled JDK, only the modules
apm, transport-netty4, x-pack-core and x-pack-security; no scripting) and the official
7.17/8.x/9.x tarballs (bundled JDK, full module set).
"""

from __future__ import annotations

import re
from pathlib import Path

import esdash
from esdash.errors import BadInput
from esdash.plugin_api import Backend, Distribution, Option

#: The module set of the integ-test-zip; a distribution with only these is that flavor.
INTEG_TEST_MODULES = frozenset({"apm", "transport-netty4", "x-pack-core", "x-pack-security"})
SUPPORTED_MAJORS = (7, 8, 9)


def _version_of(home: Path) -> str | None:
    """The version from ``lib/elasticsearch-<version>.jar`` (present in every flavor)."""
    for jar in sorted((home / "lib").glob("elasticsearch-*.jar")):
        match = re.fullmatch(r"elasticsearch-(\d+\.\d+\.\d+(?:-[A-Za-z0-9]+)?)\.jar", jar.name)
        if match:
            return match.group(1)
    return None


class ElasticsearchBackend(Backend):
    name = "elasticsearch"
    description = "Elasticsearch 7.17/8.x/9.x from a tarball or the Maven integ-test-zip"
    options = (
        Option(
            "container",
            "path",
            "Apptainer/Singularity image to run each node in (data and config bind-mounted)",
        ),
        Option(
            "container_runtime",
            "str",
            "container runtime command",
            default="apptainer",
            choices=("apptainer", "singularity"),
        ),
    )

    def inspect(self, home: Path) -> Distribution:
        home = Path(home).expanduser()
        launcher = home / "bin" / "elasticsearch"
        if not launcher.is_file():
            raise BadInput(
                f"{home} is not an Elasticsearch distribution (no bin/elasticsearch); run "
                f"`esdash fetch elasticsearch` or point cluster.home at an unpacked tarball"
            )
        version = _version_of(home)
        if version is None:
            raise BadInput(
                f"{home}: cannot tell the Elasticsearch version "
                "(no lib/elasticsearch-<version>.jar)"
            )
        modules_dir = home / "modules"
        modules = tuple(sorted(p.name for p in modules_dir.iterdir() if p.is_dir()))
        problems: list[str] = []
        major = int(version.split(".")[0])
        if major not in SUPPORTED_MAJORS:
            problems.append(f"version {version} is not supported (use 7.17, 8.x or 9.x)")
        elif major == 7 and not version.startswith("7.17."):
            problems.append(f"version {version}: of the 7.x line only 7.17 is supported")
        flavor = "integ-test-zip" if set(modules) <= INTEG_TEST_MODULES else "default"
        if (home / "jdk").is_dir():
            flavor += "+bundled-jdk"
        return Distribution(
            home=home,
            version=version,
            flavor=flavor,
            modules=modules,
            scripting="lang-painless" in modules,
            problems=tuple(problems),
        )


@esdash.hookimpl
def esdash_register_backends(register) -> None:
    register(ElasticsearchBackend())
