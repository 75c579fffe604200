"""Helpers a backend uses to put its distribution into esdash's cache (``esdash fetch``).

Search engines publish distributions as Maven artifacts (the integ-test-zips, plugin zips,
module jars), so Maven (``mvn``) is the one download client esdash relies on: it honours the
site's ``~/.m2/settings.xml`` (mirrors, proxies), which HPC sites already maintain.  A
backend's :meth:`~esdash.plugin.api.Backend.fetch` downloads with :func:`maven_copy`,
unpacks with :func:`unzip_keeping_modes` and moves the result into the cache with
:func:`install_into_cache`, which makes it world-readable (the engine runs as an
unprivileged user while the cache is often filled by root) and appears atomically under its
final name, so a half-unpacked tree is never used.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from esdash.errors import EsdashError


class FetchError(EsdashError):
    """A distribution could not be obtained; the message says how to get one by hand."""


class MavenMissing(FetchError):
    """``mvn`` is not on PATH."""


def find_maven(what: str, by_hand: str) -> str:
    """The ``mvn`` executable, or a :class:`MavenMissing` saying how to install it."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing(
            f"Maven (mvn) is not on PATH, so esdash cannot download {what}. "
            f"Install Maven (Debian/Ubuntu: apt-get install maven) and retry. {by_hand}"
        )
    return mvn


def maven_copy(mvn: str, artifact: str, outdir: Path, file_name: str, by_hand: str) -> Path:
    """Download ``artifact`` (``group:artifact:version[:type]``) into ``outdir``.

    ``file_name`` is the name Maven gives the file there; ``by_hand`` is appended to every
    error (how to obtain the distribution without Maven).
    """
    cmd = [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={artifact}"]
    cmd.append(f"-DoutputDirectory={outdir}")
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise FetchError(
            f"Maven could not download {artifact} ({' '.join(cmd[:4])} ... exited with "
            f"{proc.returncode}):\n{tail}\n{by_hand}"
        )
    downloaded = outdir / file_name
    if not downloaded.is_file():
        raise FetchError(f"Maven reported success but {downloaded} is missing. {by_hand}")
    return downloaded


def unzip_keeping_modes(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into ``dest`` and restore the Unix modes (exec bits of ``bin/``)."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            target = Path(zf.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o7777
            if mode and not info.is_dir():
                target.chmod(mode)


def make_world_readable(root: Path) -> None:
    """``chmod -R a+rX``: zips ship ``config/`` as 0660, which the node user cannot copy."""
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


@contextmanager
def workspace(cache: Path) -> Iterator[Path]:
    """A scratch directory inside ``cache`` (so the final rename is atomic), removed after."""
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(cache.stat().st_mode | 0o755)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as tmp:
        yield Path(tmp)


def install_into_cache(built: Path, home: Path, complete: Callable[[Path], bool]) -> Path:
    """Move the unpacked tree ``built`` (inside :func:`workspace`) to ``home``, world-readable.

    Another fetch running at the same time may win the race; its tree is then used when
    ``complete`` accepts it.
    """
    make_world_readable(built)
    try:
        built.rename(home)
    except OSError:
        if not complete(home):
            raise
    return home
