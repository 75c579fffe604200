"""Obtain an Elasticsearch distribution into the esdash cache.

The integ-test-zip of Elasticsearch is published as a Maven artifact, so Maven (``mvn``) is the
one download client esdash relies on: it honours the site's ``~/.m2/settings.xml`` (mirrors,
proxies), which HPC sites already maintain.  The distribution is unpacked next to the others in
:func:`esdash.paths.cache_dir` and made world-readable, because Elasticsearch runs as an
unprivileged user while the cache is often filled by root.

Fetching is idempotent: a distribution that is already unpacked is returned at once.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from esdash import paths
from esdash.errors import BadInput, EsdashError

#: Maven coordinates of the distribution without the version.
ES_ARTIFACT = "org.elasticsearch.distribution.integ-test-zip:elasticsearch"

_VERSION_RE = re.compile(r"\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?")


class FetchError(EsdashError):
    """A distribution could not be obtained; the message says how to get one by hand."""


class MavenMissing(FetchError):
    """``mvn`` is not on PATH."""


def _by_hand(version: str) -> str:
    return (
        f"To use an official tarball instead, download elasticsearch-{version}-linux-x86_64"
        f".tar.gz from the Elasticsearch downloads page, unpack it (tar -xzf <file>) somewhere "
        f'the Elasticsearch user can read, and set `home = "/path/to/elasticsearch-{version}"` '
        f"in the [cluster] table of your session file (cluster.home)."
    )


def is_unpacked(home: Path) -> bool:
    """True when ``home`` looks like a complete distribution (launcher and libraries present)."""
    return (home / "bin" / "elasticsearch").is_file() and (home / "lib").is_dir()


def make_world_readable(root: Path) -> None:
    """``chmod -R a+rX``: the zip ships ``config/`` as 0660, which the ES user cannot copy."""
    for dirpath, _dirnames, filenames in os.walk(root):
        _add_read(Path(dirpath), is_dir=True)
        for name in filenames:
            _add_read(Path(dirpath) / name, is_dir=False)


def _add_read(path: Path, *, is_dir: bool) -> None:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return
    wanted = mode | 0o444
    if is_dir or mode & 0o111:
        wanted |= 0o111
    if wanted != mode:
        path.chmod(stat.S_IMODE(wanted))


def unzip_keeping_modes(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into ``dest`` and restore the Unix modes (exec bits of ``bin/``)."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            target = Path(zf.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o7777
            if mode and not info.is_dir():
                target.chmod(mode)


def _run_maven(mvn: str, version: str, outdir: Path) -> Path:
    cmd = [
        mvn,
        "-B",
        "-q",
        "dependency:copy",
        f"-Dartifact={ES_ARTIFACT}:{version}:zip",
        f"-DoutputDirectory={outdir}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise FetchError(
            f"Maven could not download Elasticsearch {version} ({' '.join(cmd[:4])} ... "
            f"exited with {proc.returncode}):\n{tail}\n{_by_hand(version)}"
        )
    archive = outdir / f"elasticsearch-{version}.zip"
    if not archive.is_file():
        raise FetchError(f"Maven reported success but {archive} is missing. {_by_hand(version)}")
    return archive


def fetch_elasticsearch(
    version: str = paths.DEFAULT_ES_VERSION,
    cache: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Return the home of Elasticsearch ``version`` in the cache, downloading it if needed."""
    if not _VERSION_RE.fullmatch(version):
        raise BadInput(f"--version {version!r}: expected a version like {paths.DEFAULT_ES_VERSION}")
    say = log or (lambda msg: print(msg, file=sys.stderr))
    cache = Path(cache) if cache is not None else paths.cache_dir()
    home = cache / f"elasticsearch-{version}"
    if is_unpacked(home):
        probe = home / "config" / "jvm.options"
        if probe.exists() and not probe.stat().st_mode & stat.S_IROTH:
            make_world_readable(home)  # unpacked as root by other means: repair once
        return home

    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing(
            f"Maven (mvn) is not on PATH, so esdash cannot download Elasticsearch {version}. "
            f"Install Maven (Debian/Ubuntu: apt-get install maven) and retry. {_by_hand(version)}"
        )
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(cache.stat().st_mode | 0o755)
    # Work inside the cache so the final rename is atomic and a half-unpacked tree never
    # appears under the real name (another fetch running at the same time just loses the race).
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as tmp:
        say(f"esdash: downloading Elasticsearch {version} with Maven")
        archive = _run_maven(mvn, version, Path(tmp) / "download")
        say(f"esdash: unpacking {archive.name}")
        unpacked = Path(tmp) / "unpacked"
        unzip_keeping_modes(archive, unpacked)
        top = unpacked / home.name
        if not is_unpacked(top):
            raise FetchError(f"{archive.name} does not contain {home.name}/bin/elasticsearch")
        make_world_readable(top)
        try:
            top.rename(home)
        except OSError:
            if not is_unpacked(home):
                raise
    return home
