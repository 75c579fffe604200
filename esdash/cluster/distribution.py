"""Which distribution a session's nodes run: ``cluster.home``, else the newest one cached."""

from __future__ import annotations

from pathlib import Path

from esdash.errors import BadInput
from esdash.paths import default_distribution
from esdash.session import Session


def resolve_home(session: Session) -> Path:
    """The unpacked distribution of the session's backend, or a :class:`BadInput` saying how."""
    backend = session.cluster.backend.name
    home = session.cluster.home or default_distribution(backend)
    if home is None:
        raise BadInput(
            f"{session.path}: cluster.home is not set and no distribution is in esdash's cache; "
            f"run `esdash fetch {backend}` or set cluster.home to an unpacked tarball"
        )
    return home
