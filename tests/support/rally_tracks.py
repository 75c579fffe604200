"""Where the data-only copy of elastic/rally-tracks is, for tests that run the real tracks.

The copy lives beside the repository (``../shared/rally-tracks/tracks``), never inside it.
A CI run works in a fresh clone elsewhere, so the place beside the clone's ``origin`` is
looked at too; ``ESDASH_RALLY_TRACKS`` overrides both.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

from support import prereqs

_REPO = Path(__file__).resolve().parents[2]


def _origin() -> Path | None:
    """The local directory this clone was made from, if it was made from one."""
    try:
        url = subprocess.run(
            ["git", "-C", str(_REPO), "config", "--get", "remote.origin.url"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(url.removeprefix("file://"))
    return path if url and path.is_absolute() and path.is_dir() else None


def real_tracks() -> Path | None:
    """The ``tracks`` directory of the copy, or None when it is nowhere to be found."""
    if os.environ.get("ESDASH_RALLY_TRACKS"):
        return Path(os.environ["ESDASH_RALLY_TRACKS"])
    candidates = [_REPO.parent / "shared" / "rally-tracks" / "tracks"]
    origin = _origin()
    if origin is not None:
        candidates.append(origin.parent / "shared" / "rally-tracks" / "tracks")
    return next((c for c in candidates if c.is_dir()), None)


def copy_track(name: str, scratch: Path) -> Path:
    """A writable copy of one real track (its gzip-stored files unpacked), in ``scratch``.

    Skips the test, or fails it under CI, when the copy of rally-tracks is not there.
    """
    tracks = real_tracks()
    if tracks is None or not (tracks / name).is_dir():
        prereqs.unavailable(
            f"the data-only copy of elastic/rally-tracks (track {name}) is not beside the "
            f"repository; set ESDASH_RALLY_TRACKS to its tracks directory"
        )
    copy = Path(shutil.copytree(tracks / name, scratch / name, dirs_exist_ok=True))
    for packed in copy.rglob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
    return copy
