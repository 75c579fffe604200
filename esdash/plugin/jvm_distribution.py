"""A JVM search engine's distribution: the layout Elasticsearch and OpenSearch share.

Both ship the launcher as ``bin/<engine>``, the server as ``lib/<engine>-<version>.jar`` and
one directory per module in ``modules/``; both publish an integ-test-zip on Maven Central
whose one top directory is ``<engine>-<version>/``.  A backend reads a home with
:func:`read_distribution` (the version and modules, or :class:`~esdash.errors.BadInput`
naming the fix) and fetches the zip with :func:`unpack_integ_test_zip`; what it makes of
them (flavors, supported versions, what it assembles besides) stays its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from esdash.errors import BadInput
from esdash.plugin.fetching import FetchError, maven_copy, unzip_keeping_modes
from esdash.plugin.values import Distribution


@dataclass(frozen=True)
class Unpacked:
    """What every distribution of a JVM engine says of itself."""

    home: Path
    version: str
    modules: tuple[str, ...]

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def described(
        self,
        flavor: str,
        problems: Sequence[str] = (),
        plugins: tuple[str, ...] = (),
        mappers: tuple[str, ...] = (),
    ) -> Distribution:
        """The :class:`~esdash.plugin.values.Distribution` as the backend sees it: ``flavor``
        (``+bundled-jdk`` added when the home ships a ``jdk/``), scripting when painless is
        among the modules, what esdash rejects (``problems``)."""
        if (self.home / "jdk").is_dir():
            flavor += "+bundled-jdk"
        return Distribution(
            home=self.home,
            version=self.version,
            flavor=flavor,
            modules=self.modules,
            scripting="lang-painless" in self.modules,
            problems=tuple(problems),
            plugins=plugins,
            mappers=mappers,
        )


def engine_version(home: Path, engine: str) -> str | None:
    """The version from ``lib/<engine>-<version>.jar`` (present in every flavor)."""
    pattern = re.compile(rf"{re.escape(engine)}-(\d+\.\d+\.\d+(?:-[A-Za-z0-9]+)?)\.jar")
    for jar in sorted((home / "lib").glob(f"{engine}-*.jar")):
        match = pattern.fullmatch(jar.name)
        if match:
            return match.group(1)
    return None


def is_jvm_distribution(home: Path, engine: str) -> bool:
    """True when ``home`` looks like a complete distribution (launcher and libraries)."""
    return (home / "bin" / engine).is_file() and (home / "lib").is_dir()


def read_distribution(home: Path, engine: str, title: str) -> Unpacked:
    """The version and modules of ``engine``'s distribution at ``home`` (``title``: its name
    in messages, ``OpenSearch``); :class:`BadInput` with the fix when it is not one."""
    home = Path(home).expanduser()
    if not (home / "bin" / engine).is_file():
        raise BadInput(
            f"{home} is not an {title} distribution (no bin/{engine}); run "
            f"`esdash fetch {engine}` or point cluster.home at an unpacked tarball"
        )
    version = engine_version(home, engine)
    if version is None:
        raise BadInput(f"{home}: cannot tell the {title} version (no lib/{engine}-<version>.jar)")
    modules_dir = home / "modules"
    if not modules_dir.is_dir():
        raise BadInput(f"{home}: no modules/ directory; unpack the distribution again")
    modules = tuple(sorted(p.name for p in modules_dir.iterdir() if p.is_dir()))
    return Unpacked(home, version, modules)


def unpack_integ_test_zip(
    mvn: str,
    coordinates: str,
    engine: str,
    version: str,
    tmp: Path,
    by_hand: str,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Download the integ-test-zip at Maven ``coordinates`` into ``tmp`` and unpack it;
    returns its top directory ``<engine>-<version>``, checked to be a distribution."""
    archive = maven_copy(mvn, coordinates, tmp / "download", f"{engine}-{version}.zip", by_hand)
    if say is not None:
        say(f"esdash: unpacking {archive.name}")
    unpacked = tmp / "unpacked"
    unzip_keeping_modes(archive, unpacked)
    top = unpacked / f"{engine}-{version}"
    if not is_jvm_distribution(top, engine):
        raise FetchError(f"{archive.name} does not contain {top.name}/bin/{engine}")
    return top
