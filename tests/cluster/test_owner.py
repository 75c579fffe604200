"""Elasticsearch never runs as root: the session must name an unprivileged user."""

from __future__ import annotations

import os

import pytest

from esdash.cluster.users import resolve_owner
from esdash.errors import BadInput

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the rule only applies to root")


@needs_root
def test_root_without_run_as_is_refused() -> None:
    with pytest.raises(BadInput, match="set cluster.run_as"):
        resolve_owner(None)


@needs_root
def test_the_refusal_names_the_session_file(tmp_path) -> None:
    session = tmp_path / "s.toml"
    with pytest.raises(BadInput, match=f"^{session}: esdash runs as root.*set cluster.run_as"):
        resolve_owner(None, session_file=session)


@needs_root
def test_unknown_and_root_users_are_refused() -> None:
    with pytest.raises(BadInput, match="no such user"):
        resolve_owner("no-such-user-esdash")
    with pytest.raises(BadInput, match="uid 0"):
        resolve_owner("root")


@needs_root
@pytest.mark.es
def test_the_unprivileged_user_resolves(es_user: str) -> None:
    owner = resolve_owner(es_user)
    assert owner.name == es_user and owner.uid != 0
