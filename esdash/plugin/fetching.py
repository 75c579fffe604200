"""Helpers a backend uses to put its distribution into esdash's cache (``esdash fetch``).

Search engines publish distributions as Maven artifacts (the integ-test-zips, plugin zips,
module jars), so Maven (``mvn``) is the one download client esdash relies on: it honours the
site's ``~/.m2/settings.xml`` (mirrors, proxies), which HPC sites already maintain, and it
verifies every download against the checksum the repository publishes (``-C``, see
:func:`run_maven`).  A
backend's :meth:`~esdash.plugin.api.Backend.fetch` downloads with :func:`maven_copy`,
unpacks with :func:`unzip_keeping_modes` and moves the result into the cache with
:func:`install_into_cache`, which makes it world-readable (the engine runs as an
unprivileged user while the cache is often filled by root) and appears atomically under its
final name, so a half-unpacked tree is never used.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import urllib.request
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from esdash.errors import EsdashError


class FetchError(EsdashError):
    """A distribution could not be obtained; the message says how to get one by hand."""


class MavenMissing(FetchError):
    """``mvn`` is not on PATH."""


class ChecksumMismatch(FetchError):
    """A downloaded file did not match the checksum its repository publishes (or it has none).

    Maven refuses the file under ``-C`` (:func:`run_maven`), so nothing was installed.
    ``missing``: the repository published no checksum at all (not a mismatch).
    """

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


#: Whether a download whose repository publishes no checksum may go ahead unverified
#: (``esdash fetch --allow-missing-checksums``); a mismatch is refused whatever this says.
_MISSING_ALLOWED: list[bool] = [False]


@contextmanager
def missing_checksums_allowed() -> Iterator[None]:
    """Inside, an artifact without a published checksum is installed unverified, with a
    warning naming it; one whose checksum does not match is still refused."""
    _MISSING_ALLOWED.append(True)
    try:
        yield
    finally:
        _MISSING_ALLOWED.pop()


class ArtifactNotFound(FetchError):
    """The repository answered that it has no such artifact: a version that does not exist.

    ``available`` lists the versions the repository's ``maven-metadata.xml`` names, newest
    first (empty when it could not be read within :data:`METADATA_TIMEOUT`).
    ``esdash fetch`` makes it bad input (exit 2) when it is the version the user asked for.
    """

    def __init__(
        self, message: str, artifact: str, version: str, repository: str, available: list[str]
    ) -> None:
        super().__init__(message)
        self.artifact = artifact
        self.version = version
        self.repository = repository
        self.available = available


#: Seconds the version list of a missing artifact may take; it is a courtesy, not a need.
METADATA_TIMEOUT = 5.0

#: Colour and cursor codes Maven writes even in batch mode (``ESC[0m``, ``ESC[1;31m``).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: Maven's ways of saying that the repository has no such file (a 404): as it asked, and
#: from the local repository's memory of an earlier 404 (for a day; Maven 3.8 and older).
_NOT_FOUND = (
    re.compile(r"Could not find artifact (?P<coords>\S+) in (?P<repo>\S+) \((?P<url>[^)\s]+)\)"),
    re.compile(
        r"(?:Failure to find (?P<coords>\S+) in (?P<url>\S+) was cached"
        r"|(?P<coords2>\S+) was not found in (?P<url2>\S+) during a previous attempt)"
        r".*?update interval of (?P<repo>\S+) has elapsed",
        re.DOTALL,
    ),
)


#: How Maven 3 says that a download failed its checksum (``-C``): the artifact, the
#: repository, and the two digests or that the repository has none.
_CHECKSUM = re.compile(
    r"Could not transfer artifact (?P<coords>\S+) from/to (?P<repo>\S+) \((?P<url>[^)\s]+)\): "
    r"Checksum validation failed, (?:expected (?P<expected>[0-9A-Fa-f]+) but is "
    r"(?P<actual>[0-9A-Fa-f]+)|no checksums available)"
)
#: What Maven says under its *warn* policy (``-c``) for a file it keeps anyway.
_CHECKSUM_WARNING = re.compile(
    r"\[WARNING\] Checksum validation failed, (?:expected (?P<expected>[0-9A-Fa-f]+) but is "
    r"(?P<actual>[0-9A-Fa-f]+)|no checksums available) from (?P<repo>\S+) for "
    r"(?P<url>\S*/(?P<coords>[^/\s]+))"
)
#: Digest length in hex digits -> algorithm.
_DIGESTS = {32: "MD5", 40: "SHA-1", 64: "SHA-256", 128: "SHA-512"}


def find_maven(what: str, by_hand: str) -> str:
    """The ``mvn`` executable, or a :class:`MavenMissing` saying how to install it."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing(
            f"Maven (mvn) is not on PATH, so esdash cannot download {what}. "
            f"Install Maven (Debian/Ubuntu: apt-get install maven) and retry. {by_hand}"
        )
    return mvn


#: The options of every Maven run: batch mode (no prompts), quiet, no colours, and strict
#: checksums (see :func:`run_maven`).
MAVEN_OPTIONS = ("-B", "-q", "-C", "-Dstyle.color=never")


def maven_command(mvn: str, arguments: Sequence[str]) -> list[str]:
    """The command line of a Maven run with :data:`MAVEN_OPTIONS` and ``arguments``."""
    return [mvn, *MAVEN_OPTIONS, *arguments]


def run_maven(mvn: str, arguments: Sequence[str], what: str, by_hand: str) -> None:
    """Run Maven with ``arguments`` (a goal and its properties); a failure is one line.

    Every download is verified against the checksum its repository publishes: ``-C``
    (``--strict-checksums``) sets Maven's checksum policy to *fail* for every repository,
    so each file Maven downloads for the goal (the artifact, the POMs and plugin jars it
    needs) is compared with the ``.sha1`` (else ``.md5``) file published beside it, and a
    mismatch, or a file without any published checksum, fails the run
    (:class:`ChecksumMismatch`) before the file reaches the output directory.  Without
    ``-C`` Maven only warns and keeps the file: Maven 3.8.7 copied an artifact whose
    ``.sha1`` did not match and exited 0.  A file already in the local repository
    (``~/.m2/repository``) is not downloaded again and therefore not checked again: Maven
    trusts its local repository, which it filled under the same policy.  The checksum
    proves the file is the one the repository (Maven Central, or the site's mirror, over
    HTTPS) serves, not who published it; signatures (``.asc``) are not checked.

    ``what`` names the download in errors; ``by_hand`` is appended to every error (how to
    obtain the distribution without Maven).
    """
    proc = subprocess.run(
        maven_command(mvn, arguments), capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode == 0:
        return
    failure = maven_failure(what, proc.stdout + proc.stderr, proc.returncode, by_hand)
    if not (isinstance(failure, ChecksumMismatch) and failure.missing and _MISSING_ALLOWED[-1]):
        raise failure
    _unverified(mvn, arguments, what, by_hand)


def _unverified(mvn: str, arguments: Sequence[str], what: str, by_hand: str) -> None:
    """The same Maven run under its *warn* checksum policy (``-c``, and not quiet, so its
    warnings show): a file without a published checksum is kept, with a warning on stderr;
    a checksum Maven found and that did not match is still refused."""
    options = [o for o in MAVEN_OPTIONS if o not in ("-C", "-q")] + ["-c"]
    proc = subprocess.run(
        [mvn, *options, *arguments], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    text = strip_ansi(proc.stdout + proc.stderr)
    for found in _CHECKSUM_WARNING.finditer(text):
        if found["expected"] is not None:
            raise ChecksumMismatch(checksum_message(found, by_hand))
    if proc.returncode != 0:
        raise maven_failure(what, text, proc.returncode, by_hand)
    unverified = sorted({m["coords"] for m in _CHECKSUM_WARNING.finditer(text)}) or [what]
    print(
        f"esdash: warning: installed without checksum verification (the repository publishes "
        f"none; --allow-missing-checksums): {', '.join(unverified)}",
        file=sys.stderr,
    )


def maven_copy(mvn: str, artifact: str, outdir: Path, file_name: str, by_hand: str) -> Path:
    """Download ``artifact`` (``group:artifact:version[:type]``) into ``outdir``, verified
    against its published checksum (:func:`run_maven`).

    ``file_name`` is the name Maven gives the file there; ``by_hand`` is appended to every
    error (how to obtain the distribution without Maven).
    """
    arguments = ["dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={outdir}"]
    run_maven(mvn, arguments, artifact, by_hand)
    downloaded = outdir / file_name
    if not downloaded.is_file():
        raise FetchError(f"Maven reported success but {downloaded} is missing. {by_hand}")
    return downloaded


def maven_failure(artifact: str, output: str, code: int, by_hand: str) -> FetchError:
    """Maven's failure as one line: :class:`ArtifactNotFound` for a 404, else its first error.

    Maven prints 15 lines of advice and colour codes for a version that does not exist;
    the user needs to know that the version does not exist, and which ones do.
    """
    text = strip_ansi(output)
    checksum = _CHECKSUM.search(text)
    if checksum:
        return ChecksumMismatch(
            checksum_message(checksum, by_hand), missing=checksum["expected"] is None
        )
    found = next((m for pattern in _NOT_FOUND if (m := pattern.search(text))), None)
    if found:
        said = found.groupdict()
        url = said.get("url") or said.get("url2") or ""
        group, name, version = _coordinates(said.get("coords") or said["coords2"], artifact)
        available = available_versions(url, group, name)
        shown = f" (available: {shown_versions(available, version)})" if available else ""
        return ArtifactNotFound(
            f"no such version: {group}:{name} {version} in {found['repo']} ({url}){shown}",
            artifact,
            version,
            url,
            available,
        )
    return FetchError(
        f"Maven could not download {artifact} (exit code {code}): {first_error(text)}. {by_hand}"
    )


def checksum_message(found: re.Match[str], by_hand: str) -> str:
    """The one line for a download Maven refused because of its checksum."""
    where = f"{found['coords']} from {found['repo']} ({found['url']})"
    if found["expected"] is None:
        return (
            f"checksum missing: {where} has no published checksum (.sha1 or .md5), so the "
            f"download cannot be verified; nothing was installed. Use a repository that "
            f"publishes checksums (~/.m2/settings.xml), or accept it unverified with "
            f"`esdash fetch --allow-missing-checksums`. {by_hand}"
        )
    algorithm = _DIGESTS.get(len(found["actual"]), "checksum")
    return (
        f"checksum mismatch: {where} has {algorithm} {found['actual']}, the repository "
        f"publishes {found['expected']}: the download was corrupted or altered on its way; "
        f"nothing was installed. Retry, and if it persists check the repository or mirror "
        f"(~/.m2/settings.xml). {by_hand}"
    )


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes."""
    return _ANSI.sub("", text)


def first_error(text: str) -> str:
    """The first ``[ERROR]`` line of Maven's output, without the goal and project preamble."""
    for line in text.splitlines():
        line = line.strip().removeprefix("[ERROR]").strip()
        if line:
            line = re.sub(r"^Failed to execute goal \S+ \([^)]*\) on project [^:]+: ", "", line)
            return line
    return "no output"


def _coordinates(found: str, artifact: str) -> tuple[str, str, str]:
    """group, artifact and version of Maven's ``group:name:type[:classifier]:version``."""
    parts = found.split(":")
    if len(parts) >= 4:
        return parts[0], parts[1], parts[-1]
    group, name, version = (artifact.split(":") + ["", "", ""])[:3]
    return group, name, version


def available_versions(repository: str, group: str, name: str) -> list[str]:
    """The versions ``<repository>/<group path>/<name>/maven-metadata.xml`` lists, newest first.

    Best effort within :data:`METADATA_TIMEOUT` (the repository URL is the one Maven used,
    so a site's mirror answers); an empty list when it cannot be read.
    """
    if not repository.startswith(("https://", "http://", "file://")):
        return []
    url = f"{repository.rstrip('/')}/{group.replace('.', '/')}/{name}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=METADATA_TIMEOUT) as answer:  # noqa: S310
            root = ElementTree.fromstring(answer.read())
    except (OSError, ValueError, ElementTree.ParseError):
        return []
    versions = [v.text.strip() for v in root.iter("version") if v.text and v.text.strip()]
    return sorted(set(versions), key=_version_key, reverse=True)


def _version_key(version: str) -> tuple[tuple[int, ...], int, str]:
    """Numeric order, and a release after its own pre-releases (``9.0.0-rc1`` < ``9.0.0``)."""
    head, _, suffix = version.partition("-")
    numbers = tuple(int(p) if p.isdigit() else 0 for p in head.split("."))
    return numbers, 0 if suffix else 1, suffix


def shown_versions(available: list[str], wanted: str, most: int = 5) -> str:
    """The few versions worth showing for ``wanted``: the newest of its major line, if any.

    ``8.19.21, 8.19.4, 8.19.2, 8.19.0, 8.18.0 and 72 more`` -- the list can run to hundreds.
    """
    major = wanted.split(".")[0]
    same = [v for v in available if v.split(".")[0] == major]
    picked = (same or available)[:most]
    rest = len(available) - len(picked)
    return ", ".join(picked) + (f" and {rest} more" if rest > 0 else "")


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
